/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Plugin callbacks whose answer is fixed, for the many plugins that
 * would otherwise each write the same one-line functions: no handle
 * per connection, "yes" to a can_* question, native FUA and cache, a
 * flush, trim, zero or cache that has nothing to do.  Use them in a struct
 * nbdkit_plugin (".can_trim = answer_yes").  Include after
 * <nbdkit-plugin.h> (API version 2).
 */
#ifndef NBDKIT_PLUGINKIT_ANSWERS_H
#define NBDKIT_PLUGINKIT_ANSWERS_H

#include <stdint.h>

/* open: the plugin keeps no state per connection. */
static inline void *
answer_no_handle (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* can_write, can_trim, can_multi_conn, ...: yes. */
static inline int
answer_yes (void *handle)
{
  return 1;
}

/* can_fua: writes are stable when they return. */
static inline int
answer_fua_native (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

/* can_cache: the data is already as near as it can be. */
static inline int
answer_cache_native (void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

/* flush: nothing is held back. */
static inline int
answer_flush_done (void *handle, uint32_t flags)
{
  return 0;
}

/* trim, zero or cache with nothing to do (the disk reads as zeroes,
 * or never changes).
 */
static inline int
answer_range_done (void *handle, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  return 0;
}

#endif /* NBDKIT_PLUGINKIT_ANSWERS_H */
