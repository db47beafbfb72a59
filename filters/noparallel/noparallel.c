/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The noparallel filter: lower the thread model.  serialize= picks
 * one request per connection at a time (requests), one request in the
 * whole server at a time (all-requests) or one connection at a time
 * (connections).  The filter only answers .thread_model; the server
 * takes the stricter of every layer's model and does the serialising.
 */
#include <config.h>

#include <string.h>

#include <nbdkit-filter.h>

static int thread_model = NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;

static int
noparallel_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                   const char *key, const char *value)
{
  if (strcmp (key, "serialize") == 0 || strcmp (key, "serialise") == 0) {
    if (strcmp (value, "requests") == 0)
      thread_model = NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
    else if (strcmp (value, "all-requests") == 0)
      thread_model = NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS;
    else if (strcmp (value, "connections") == 0)
      thread_model = NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS;
    else {
      nbdkit_error ("%s: unknown mode '%s' (expecting requests, "
                    "all-requests or connections)", key, value);
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

#define noparallel_config_help \
  "serialize=<MODE>     requests (default), all-requests or connections."

static int
noparallel_thread_model (void)
{
  return thread_model;
}

static struct nbdkit_filter filter = {
  .name = "noparallel",
  .longname = "nbdkit noparallel filter",
  .config = noparallel_config,
  .config_help = noparallel_config_help,
  .thread_model = noparallel_thread_model,
};

NBDKIT_REGISTER_FILTER (filter)
