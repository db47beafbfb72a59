/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Is a buffer all zero bytes?
 *
 * Once the first 16 bytes are known to be zero, the buffer equals
 * itself shifted by 16 bytes if and only if the rest is zero too, and
 * memcmp does that comparison at the speed of the C library's vector
 * code instead of a byte loop.
 */
#ifndef NBDKIT_ISZERO_H
#define NBDKIT_ISZERO_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline bool
is_zero (const void *buf, size_t n)
{
  const unsigned char *p = buf;
  size_t i;

  for (i = 0; i < n && i < 16; ++i)
    if (p[i] != 0)
      return false;
  return n <= 16 || memcmp (p, p + 16, n - 16) == 0;
}

#endif /* NBDKIT_ISZERO_H */
