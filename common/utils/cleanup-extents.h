/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* CLEANUP_EXTENTS_FREE: free a struct nbdkit_extents at scope exit.
 * For filters (and the server), which see nbdkit-filter.h.
 */
#ifndef NBDKIT_CLEANUP_EXTENTS_H
#define NBDKIT_CLEANUP_EXTENTS_H

#include <nbdkit-filter.h>

static inline void
cleanup_extents_free (struct nbdkit_extents **p)
{
  if (*p)
    nbdkit_extents_free (*p);
}
#define CLEANUP_EXTENTS_FREE \
  __attribute__ ((cleanup (cleanup_extents_free)))

#endif /* NBDKIT_CLEANUP_EXTENTS_H */
