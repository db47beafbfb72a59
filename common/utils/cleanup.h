/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Scope-exit helpers built on __attribute__((cleanup)).
 *
 *   CLEANUP_FREE char *s = NULL;            free (s) at scope exit
 *   CLEANUP_FREE_STRING_VECTOR string_vector v = empty_vector;
 *   LOCK_FOR_SCOPE (&mutex);                hold MUTEX until scope exit
 *   READ_LOCK_FOR_SCOPE (&rwlock); WRITE_LOCK_FOR_SCOPE (&rwlock);
 *
 * cleanup-extents.h adds CLEANUP_EXTENTS_FREE for filters.
 */
#ifndef NBDKIT_CLEANUP_H
#define NBDKIT_CLEANUP_H

#include <pthread.h>
#include <stdlib.h>

#include "vector.h"

static inline void
cleanup_free (void *ptr)
{
  free (*(void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (cleanup_free)))

static inline void
cleanup_free_string_vector (string_vector *v)
{
  string_vector_free_all (v);
}
#define CLEANUP_FREE_STRING_VECTOR \
  __attribute__ ((cleanup (cleanup_free_string_vector)))

static inline void
cleanup_unlock (pthread_mutex_t **mp)
{
  if (*mp)
    pthread_mutex_unlock (*mp);
}

static inline void
cleanup_rwunlock (pthread_rwlock_t **lp)
{
  if (*lp)
    pthread_rwlock_unlock (*lp);
}

#define CLEANUP_CAT_(a, b) a##b
#define CLEANUP_CAT(a, b) CLEANUP_CAT_ (a, b)

/* Hold MUTEX until the end of the enclosing scope. */
#define LOCK_FOR_SCOPE(mutex)                                           \
  __attribute__ ((cleanup (cleanup_unlock), unused)) pthread_mutex_t *  \
  CLEANUP_CAT (scope_lock_, __LINE__) =                                 \
    (pthread_mutex_lock (mutex), (mutex))

/* Hold RWLOCK shared, or exclusively, until the end of the scope. */
#define READ_LOCK_FOR_SCOPE(rwlock)                                     \
  __attribute__ ((cleanup (cleanup_rwunlock), unused))                  \
  pthread_rwlock_t *CLEANUP_CAT (scope_rdlock_, __LINE__) =             \
    (pthread_rwlock_rdlock (rwlock), (rwlock))
#define WRITE_LOCK_FOR_SCOPE(rwlock)                                    \
  __attribute__ ((cleanup (cleanup_rwunlock), unused))                  \
  pthread_rwlock_t *CLEANUP_CAT (scope_wrlock_, __LINE__) =             \
    (pthread_rwlock_wrlock (rwlock), (rwlock))

#endif /* NBDKIT_CLEANUP_H */
