/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The number of elements of an array (not a pointer: passing a pointer
 * is a compile-time error, since its type and its address's differ).
 */
#ifndef NBDKIT_ARRAY_SIZE_H
#define NBDKIT_ARRAY_SIZE_H

#define ARRAY_SIZE_IS_ARRAY_(a)                                         \
  (!__builtin_types_compatible_p (__typeof__ (a), __typeof__ (&(a)[0])))

#define ARRAY_SIZE(a)                                                   \
  (sizeof (a) / sizeof ((a)[0])                                         \
   + 0 * sizeof (struct { _Static_assert (ARRAY_SIZE_IS_ARRAY_ (a),     \
                                          "ARRAY_SIZE of a pointer");   \
                          int array_size_dummy_; }))

#endif /* NBDKIT_ARRAY_SIZE_H */
