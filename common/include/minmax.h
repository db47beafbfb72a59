/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* MIN and MAX that evaluate each argument once.
 *
 * Both arguments must have compatible types: the comparison is done in
 * the type the usual arithmetic conversions give, as with a plain "<".
 */
#ifndef NBDKIT_MINMAX_H
#define NBDKIT_MINMAX_H

#undef MIN
#undef MAX

#define MINMAX_CAT_(a, b) a##b
#define MINMAX_CAT(a, b) MINMAX_CAT_ (a, b)

#define MINMAX_PICK_(x, y, op, u)                                       \
  ({                                                                    \
    __typeof__ (x) MINMAX_CAT (minmax_x_, u) = (x);                     \
    __typeof__ (y) MINMAX_CAT (minmax_y_, u) = (y);                     \
    MINMAX_CAT (minmax_x_, u) op MINMAX_CAT (minmax_y_, u)              \
      ? MINMAX_CAT (minmax_x_, u) : MINMAX_CAT (minmax_y_, u);          \
  })

#define MIN(x, y) MINMAX_PICK_ ((x), (y), <, __COUNTER__)
#define MAX(x, y) MINMAX_PICK_ ((x), (y), >, __COUNTER__)

#endif /* NBDKIT_MINMAX_H */
