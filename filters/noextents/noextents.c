/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The noextents filter: hide block status.  The filter answers
 * can_extents with "no", so the server never asks the layers below
 * and reports every range as allocated data; the rest passes through.
 * No state, so no locking.
 */
#include <config.h>

#include <nbdkit-filter.h>

static int
noextents_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "noextents",
  .longname = "nbdkit noextents filter",
  .can_extents = noextents_can_extents,
};

NBDKIT_REGISTER_FILTER (filter)
