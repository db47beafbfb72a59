/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The pseudo-random generator of the random and sparse-random plugins.
 *
 * Both plugins must give, for a given seed, the very bytes that nbdkit
 * 1.32 gives, so the generator is the one nbdkit uses: xoshiro256**
 * (Blackman and Vigna), its 256 bits of state filled from a 64 bit seed
 * by four steps of splitmix64.  Neither is fit for cryptography.
 * Header-only: each plugin includes it with
 * -I$(top_srcdir)/plugins/sparse-random.
 */
#ifndef NBDKIT_PLUGIN_PRNG_H
#define NBDKIT_PLUGIN_PRNG_H

#include <stdint.h>

struct prng {
  uint64_t s[4];
};

/* One splitmix64 step: advance *X and return a well mixed value. */
static inline uint64_t
prng_splitmix64 (uint64_t *x)
{
  uint64_t z = (*x += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static inline void
prng_seed (struct prng *p, uint64_t seed)
{
  for (int i = 0; i < 4; ++i)
    p->s[i] = prng_splitmix64 (&seed);
}

static inline uint64_t
prng_rotl (uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

/* The next 64 bit value of xoshiro256**. */
static inline uint64_t
prng_next (struct prng *p)
{
  uint64_t *s = p->s;
  const uint64_t result = prng_rotl (s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;

  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = prng_rotl (s[3], 45);
  return result;
}

#endif /* NBDKIT_PLUGIN_PRNG_H */
