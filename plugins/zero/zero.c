/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The zero plugin: an export of zero bytes, for corner cases in
 * clients and in the server.  It takes no parameters (it has no config
 * callback, so the server refuses any) and has no state.
 */
#include <config.h>

#include <stdint.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include "answers.h"

static int64_t
zero_get_size (void *handle)
{
  return 0;
}

/* The server never passes a request past the end, and the end is 0. */
static int
zero_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "zero",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit zero plugin",
  .description       = "An export of length zero",
  .open              = answer_no_handle,
  .get_size          = zero_get_size,
  .can_multi_conn    = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = zero_pread,
  .cache             = answer_range_done,
};

NBDKIT_REGISTER_PLUGIN (plugin)
