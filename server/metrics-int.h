/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: what metrics.c (the counters) and metrics-http.c (the
 * endpoint) share, and no other file sees.
 */
#ifndef NBDKIT_METRICS_INT_H
#define NBDKIT_METRICS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define M_NCMD 8                /* read ... cache, other */
#define M_NERR 9                /* EPERM ... ESHUTDOWN, other */
#define M_NBUCKETS 26           /* 2^-20 s ... 2^4 s, +Inf */

/* One command's counts.  A live connection's are written with relaxed
 * atomics by its workers; totals are plain, under metrics_lock.
 */
struct cmd_counts {
  uint64_t requests;
  uint64_t bytes;
  uint64_t sum_ns;
  uint64_t buckets[M_NBUCKETS];         /* not cumulative */
  uint64_t errors[M_NERR];
};
struct counts {
  struct cmd_counts cmd[M_NCMD];
};

/* --metrics was given: connections get records from now on. */
extern void metrics_enable (void);

/* The page, OpenMetrics (OM) or the Prometheus text format, malloc'd,
 * or NULL if out of memory.
 */
extern char *metrics_text (bool om, size_t *len);

#endif /* NBDKIT_METRICS_INT_H */
