/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Arithmetic that reports overflow instead of wrapping.
 *
 * Each macro stores the result in *R and evaluates to true if the exact
 * result did not fit in *R's type (then *R holds the wrapped value and
 * must not be used).  The operands may be of any integer types.  Use it
 * on any value that came from a client or the command line:
 *
 *   uint64_t end;
 *   if (ADD_OVERFLOW (offset, count, &end) || end > size)
 *     return -1;
 */
#ifndef NBDKIT_CHECKED_OVERFLOW_H
#define NBDKIT_CHECKED_OVERFLOW_H

#define ADD_OVERFLOW(a, b, r) __builtin_add_overflow ((a), (b), (r))
#define SUB_OVERFLOW(a, b, r) __builtin_sub_overflow ((a), (b), (r))
#define MUL_OVERFLOW(a, b, r) __builtin_mul_overflow ((a), (b), (r))

#endif /* NBDKIT_CHECKED_OVERFLOW_H */
