/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Power-of-two tests and logarithms for unsigned integers. */
#ifndef NBDKIT_ISPOWEROF2_H
#define NBDKIT_ISPOWEROF2_H

#include <stdbool.h>
#include <stdint.h>

/* True if V is 1, 2, 4, 8 ...  (zero is not a power of two). */
static inline bool
is_power_of_2 (uint64_t v)
{
  return v != 0 && (v & (v - 1)) == 0;
}

/* log2 of V, which must be a power of two. */
static inline unsigned
log_2_bits (uint64_t v)
{
  return (unsigned) __builtin_ctzll (v);
}

/* The smallest power of two >= V, or 0 if there is none in 64 bits
 * (V is 0 or above 2^63).
 */
static inline uint64_t
next_power_of_2 (uint64_t v)
{
  if (v <= 1)
    return v;
  if (v > UINT64_C (1) << 63)
    return 0;
  return UINT64_C (1) << (64 - __builtin_clzll (v - 1));
}

#endif /* NBDKIT_ISPOWEROF2_H */
