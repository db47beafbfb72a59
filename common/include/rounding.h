/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Rounding to multiples.
 *
 * ROUND_UP and ROUND_DOWN need N to be a power of two (they use masks,
 * so they are cheap and work on any unsigned type); DIV_ROUND_UP works
 * for any N > 0.  Each evaluates its arguments once, and they nest.
 * ROUND_UP of a value within N - 1 of the type's maximum wraps: check
 * with checked-overflow.h first where a value comes from outside.
 */
#ifndef NBDKIT_ROUNDING_H
#define NBDKIT_ROUNDING_H

#define ROUNDING_CAT_(a, b) a##b
#define ROUNDING_CAT(a, b) ROUNDING_CAT_ (a, b)

/* I and N as locals named with suffix U, then EXPR over them. */
#define ROUNDING_DO_(i, n, u, expr)                                     \
  ({                                                                    \
    __typeof__ (i) ROUNDING_CAT (round_i_, u) = (i);                    \
    __typeof__ (ROUNDING_CAT (round_i_, u)) ROUNDING_CAT (round_n_, u)  \
      = (n);                                                            \
    expr (ROUNDING_CAT (round_i_, u), ROUNDING_CAT (round_n_, u));      \
  })

#define ROUND_UP_EXPR_(i, n) (((i) + (n) - 1) & ~((n) - 1))
#define ROUND_DOWN_EXPR_(i, n) ((i) & ~((n) - 1))
#define DIV_ROUND_UP_EXPR_(i, n) ((i) / (n) + ((i) % (n) != 0))

#define ROUND_UP(i, n) ROUNDING_DO_ ((i), (n), __COUNTER__, ROUND_UP_EXPR_)
#define ROUND_DOWN(i, n)                                                \
  ROUNDING_DO_ ((i), (n), __COUNTER__, ROUND_DOWN_EXPR_)
/* Division rounding up, without the overflow of (i + n - 1) / n. */
#define DIV_ROUND_UP(i, n)                                              \
  ROUNDING_DO_ ((i), (n), __COUNTER__, DIV_ROUND_UP_EXPR_)

#endif /* NBDKIT_ROUNDING_H */
