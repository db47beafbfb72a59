/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test filter that claims whatever filter ABI the environment says:
 * ABI_FILTER_VERSION (its _version, default "1.30.0") and
 * ABI_FILTER_API (its _api_version, default 6).  It does nothing else.
 * test-filter-abi-version.sh loads it to see which claims the server
 * accepts.
 */
#include <config.h>

#include <stdlib.h>

#include <nbdkit-filter.h>

static struct nbdkit_filter filter = {
  .name = "abi",
};

NBDKIT_DLL_PUBLIC struct nbdkit_filter *filter_init (void);

struct nbdkit_filter *
filter_init (void)
{
  const char *version = getenv ("ABI_FILTER_VERSION");
  const char *api = getenv ("ABI_FILTER_API");
  filter._version = version ? version : "1.30.0";
  filter._api_version = api ? atoi (api) : 6;
  return &filter;
}
