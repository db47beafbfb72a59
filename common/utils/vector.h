/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A typed growable array.
 *
 *   DEFINE_VECTOR_TYPE (name_list, char *);
 *   name_list names = empty_vector;
 *   if (name_list_append (&names, s) == -1) ...      (errno ENOMEM)
 *   for (size_t i = 0; i < names.len; ++i) ... names.ptr[i] ...
 *   name_list_reset (&names);
 *
 * A vector is a plain struct of three fields, PTR, LEN and CAP, that
 * the caller may read (and may write LEN to shrink it).  An empty
 * vector needs no allocation and owns nothing.  The functions that can
 * fail return -1 with errno ENOMEM and leave the vector as it was; they
 * grow the storage geometrically, so appending N elements costs O(N).
 * Nothing here locks: share a vector between threads under a lock.
 */
#ifndef NBDKIT_VECTOR_H
#define NBDKIT_VECTOR_H

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define empty_vector { .ptr = NULL, .len = 0, .cap = 0 }

/* Make room in *PTR (of *CAP elements of ELEM_SIZE bytes) for at least
 * NEED elements in all.  Shared by every vector type.
 */
static inline int
vector_reserve_ (void **ptr, size_t *cap, size_t need, size_t elem_size)
{
  size_t n, bytes;
  void *p;

  if (need <= *cap)
    return 0;
  n = *cap < 8 ? 8 : *cap;
  while (n < need) {
    if (n > SIZE_MAX / 2) {
      n = need;
      break;
    }
    n *= 2;
  }
  if (__builtin_mul_overflow (n, elem_size, &bytes)) {
    errno = ENOMEM;
    return -1;
  }
  p = realloc (*ptr, bytes);
  if (p == NULL)
    return -1;
  *ptr = p;
  *cap = n;
  return 0;
}

#define DEFINE_VECTOR_TYPE(name, type)                                  \
  typedef struct {                                                      \
    type *ptr;                  /* the elements */                      \
    size_t len;                 /* how many are used */                 \
    size_t cap;                 /* how many fit in PTR */               \
  } name;                                                               \
                                                                        \
  /* Room for N more elements without another allocation. */            \
  static inline __attribute__ ((__unused__)) int                        \
  name##_reserve (name *v, size_t n)                                    \
  {                                                                     \
    size_t need;                                                        \
    if (__builtin_add_overflow (v->len, n, &need)) {                    \
      errno = ENOMEM;                                                   \
      return -1;                                                        \
    }                                                                   \
    return vector_reserve_ ((void **) &v->ptr, &v->cap, need,           \
                            sizeof (type));                             \
  }                                                                     \
                                                                        \
  static inline __attribute__ ((__unused__)) int                        \
  name##_append (name *v, type elem)                                    \
  {                                                                     \
    if (v->len == v->cap && name##_reserve (v, 1) == -1)                \
      return -1;                                                        \
    v->ptr[v->len++] = elem;                                            \
    return 0;                                                           \
  }                                                                     \
                                                                        \
  /* Insert ELEM before index I (I == len appends). */                  \
  static inline __attribute__ ((__unused__)) int                        \
  name##_insert (name *v, type elem, size_t i)                          \
  {                                                                     \
    assert (i <= v->len);                                               \
    if (v->len == v->cap && name##_reserve (v, 1) == -1)                \
      return -1;                                                        \
    memmove (&v->ptr[i + 1], &v->ptr[i], (v->len - i) * sizeof (type)); \
    v->ptr[i] = elem;                                                   \
    v->len++;                                                           \
    return 0;                                                           \
  }                                                                     \
                                                                        \
  /* Remove the element at index I, keeping the order of the rest. */   \
  static inline __attribute__ ((__unused__)) void                       \
  name##_remove (name *v, size_t i)                                     \
  {                                                                     \
    assert (i < v->len);                                                \
    memmove (&v->ptr[i], &v->ptr[i + 1],                                \
             (v->len - i - 1) * sizeof (type));                         \
    v->len--;                                                           \
  }                                                                     \
                                                                        \
  /* Free the storage (not what elements point at): the vector is       \
   * empty afterwards and may be used again.                            \
   */                                                                   \
  static inline __attribute__ ((__unused__)) void                       \
  name##_reset (name *v)                                                \
  {                                                                     \
    free (v->ptr);                                                      \
    v->ptr = NULL;                                                      \
    v->len = v->cap = 0;                                                \
  }                                                                     \
                                                                        \
  /* Call F on each element, in order. */                               \
  static inline __attribute__ ((__unused__)) void                       \
  name##_iter (name *v, void (*f) (type elem))                          \
  {                                                                     \
    for (size_t i_ = 0; i_ < v->len; ++i_)                              \
      f (v->ptr[i_]);                                                   \
  }                                                                     \
                                                                        \
  /* Sort with a qsort comparator (it gets pointers to elements). */   \
  static inline __attribute__ ((__unused__)) void                       \
  name##_sort (name *v, int (*compare) (const void *, const void *))    \
  {                                                                     \
    if (v->len > 1)                                                     \
      qsort (v->ptr, v->len, sizeof (type), compare);                   \
  }                                                                     \
                                                                        \
  /* Binary search of a sorted vector with a bsearch comparator         \
   * (KEY, pointer to an element).                                      \
   */                                                                   \
  static inline __attribute__ ((__unused__)) type *                     \
  name##_search (const name *v, const void *key,                        \
                 int (*compare) (const void *, const void *))           \
  {                                                                     \
    if (v->len == 0)                                                    \
      return NULL;                                                      \
    return bsearch (key, v->ptr, v->len, sizeof (type), compare);       \
  }                                                                     \
  struct name##_vector_end_ /* swallow the caller's semicolon */

/* A vector of malloc'd strings, the commonest kind. */
DEFINE_VECTOR_TYPE (string_vector, char *);

/* Free every string, then the vector's storage. */
static inline void
string_vector_free_all (string_vector *v)
{
  for (size_t i = 0; i < v->len; ++i)
    free (v->ptr[i]);
  string_vector_reset (v);
}

#endif /* NBDKIT_VECTOR_H */
