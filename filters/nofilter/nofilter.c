/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nofilter filter: a filter with no callbacks, so the server
 * passes every call straight to the layer below.  Useful to test the
 * filter machinery itself, and as the smallest possible filter.
 */
#include <config.h>

#include <nbdkit-filter.h>

static struct nbdkit_filter filter = {
  .name = "nofilter",
  .longname = "nbdkit nofilter filter",
};

NBDKIT_REGISTER_FILTER (filter)
