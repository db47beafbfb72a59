/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Alignment tests.  N must be a power of two. */
#ifndef NBDKIT_ISALIGNED_H
#define NBDKIT_ISALIGNED_H

#include <stdint.h>

/* True if the number V is a multiple of N. */
#define IS_ALIGNED(v, n) (((v) & ((__typeof__ (v)) (n) - 1)) == 0)

/* True if the pointer P is aligned to N bytes. */
#define IS_PTR_ALIGNED(p, n) IS_ALIGNED ((uintptr_t) (p), (n))

#endif /* NBDKIT_ISALIGNED_H */
