/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of vector.h and cleanup.h. */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "vector.h"

DEFINE_VECTOR_TYPE (int_vector, int);
struct big { char b[1 << 20]; };
DEFINE_VECTOR_TYPE (big_vector, struct big);

static int
compare_ints (const void *a, const void *b)
{
  int x = *(const int *) a, y = *(const int *) b;

  return x < y ? -1 : x > y;
}

static int sum;

static void
add (int v)
{
  sum += v;
}

static void
test_int_vector (void)
{
  int_vector v = empty_vector;
  const int key = 500;
  int *found;
  int i;

  assert (v.len == 0 && v.ptr == NULL);
  for (i = 999; i >= 0; --i)
    assert (int_vector_append (&v, i) == 0);
  assert (v.len == 1000 && v.cap >= 1000);
  assert (v.ptr[0] == 999 && v.ptr[999] == 0);

  int_vector_sort (&v, compare_ints);
  for (i = 0; i < 1000; ++i)
    assert (v.ptr[i] == i);
  found = int_vector_search (&v, &key, compare_ints);
  assert (found != NULL && found == &v.ptr[500]);

  int_vector_remove (&v, 0);
  assert (v.len == 999 && v.ptr[0] == 1);
  assert (int_vector_insert (&v, -1, 0) == 0);
  assert (int_vector_insert (&v, 1000, v.len) == 0);
  assert (v.ptr[0] == -1 && v.ptr[1] == 1 && v.ptr[v.len - 1] == 1000);
  int_vector_remove (&v, v.len - 1);

  sum = 0;
  int_vector_iter (&v, add);
  assert (sum == 999 * 1000 / 2 - 1);

  /* Reserve gives room without changing the length. */
  assert (int_vector_reserve (&v, 5000) == 0);
  assert (v.cap >= v.len + 5000 && v.len == 1000);

  int_vector_reset (&v);
  assert (v.len == 0 && v.cap == 0 && v.ptr == NULL);
  assert (int_vector_append (&v, 7) == 0 && v.ptr[0] == 7);
  int_vector_reset (&v);
}

static void
test_overflow (void)
{
  big_vector v = empty_vector;

  /* A size whose bytes do not fit in size_t fails cleanly. */
  errno = 0;
  assert (big_vector_reserve (&v, SIZE_MAX / 2) == -1);
  assert (errno == ENOMEM);
  assert (v.ptr == NULL && v.cap == 0);
}

static void
test_strings (void)
{
  CLEANUP_FREE_STRING_VECTOR string_vector v = empty_vector;
  CLEANUP_FREE char *s = strdup ("freed at scope exit");

  assert (s != NULL);
  assert (string_vector_append (&v, strdup ("a")) == 0);
  assert (string_vector_append (&v, strdup ("b")) == 0);
  assert (v.len == 2 && strcmp (v.ptr[1], "b") == 0);
  /* Both are freed when the function returns: run under valgrind or
   * ASan to see that nothing leaks.
   */
}

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;

static void
locked_scope (void)
{
  LOCK_FOR_SCOPE (&mutex);
  assert (pthread_mutex_trylock (&mutex) != 0);
}

static void
rw_scopes (void)
{
  {
    READ_LOCK_FOR_SCOPE (&rwlock);
    assert (pthread_rwlock_trywrlock (&rwlock) != 0);
  }
  {
    WRITE_LOCK_FOR_SCOPE (&rwlock);
    assert (pthread_rwlock_tryrdlock (&rwlock) != 0);
  }
}

static void
test_locks (void)
{
  locked_scope ();
  /* Unlocked again at the end of the scope. */
  assert (pthread_mutex_trylock (&mutex) == 0);
  pthread_mutex_unlock (&mutex);
  rw_scopes ();
  assert (pthread_rwlock_trywrlock (&rwlock) == 0);
  pthread_rwlock_unlock (&rwlock);
}

int
main (void)
{
  test_int_vector ();
  test_overflow ();
  test_strings ();
  test_locks ();
  printf ("test-vector: ok\n");
  return 0;
}
