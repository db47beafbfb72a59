/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* now_ns (): the monotonic clock in nanoseconds, for durations. */
#ifndef NBDKIT_NOW_NS_H
#define NBDKIT_NOW_NS_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif /* NBDKIT_NOW_NS_H */
