/* Scope-exit helpers built on __attribute__((cleanup)). */
#ifndef NBDKIT_CLEANUP_H
#define NBDKIT_CLEANUP_H

#include <pthread.h>
#include <stdlib.h>

static inline void
cleanup_free (void *ptr)
{
  free (*(void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (cleanup_free)))

static inline void
cleanup_unlock (pthread_mutex_t **mp)
{
  if (*mp)
    pthread_mutex_unlock (*mp);
}
#define CLEANUP_CAT_(a, b) a##b
#define CLEANUP_CAT(a, b) CLEANUP_CAT_ (a, b)
/* Hold MUTEX until the end of the enclosing scope. */
#define LOCK_FOR_SCOPE(mutex)                                           \
  __attribute__ ((cleanup (cleanup_unlock), unused)) pthread_mutex_t *  \
  CLEANUP_CAT (scope_lock_, __LINE__) =                                 \
    (pthread_mutex_lock (mutex), (mutex))

#endif /* NBDKIT_CLEANUP_H */
