/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The memory plugin: a RAM disk of any size up to 2^63 - 1 bytes.
 *
 * This file owns the plugin's parameters and its nbdkit callbacks; the
 * bytes themselves live in an allocator (common/allocators), picked by
 * allocator=: the sparse store by default, which takes memory only for
 * pages holding non-zero data, or one flat buffer (malloc), or
 * compressed pages (zstd).  There is one allocator for the whole
 * server, shared by every connection, so all clients see the same disk
 * and multi-conn is safe.  The allocators do their own locking and the
 * plugin runs with the fully parallel thread model.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "allocator.h"
#include "zerocopy.h"
#include "answers.h"
#include "params.h"

/* Set by config, read-only once the server starts serving. */
static int64_t size = -1;
static char *allocator_spec;    /* NULL: sparse */
static struct allocator *store;

static void
memory_unload (void)
{
  allocator_destroy (store);
  free (allocator_spec);
}

static int
memory_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0)
    return param_size (value, &size);
  if (strcmp (key, "allocator") == 0)
    return param_string (value, &allocator_spec);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
memory_config_complete (void)
{
  if (size == -1) {
    nbdkit_error ("you must give the disk size, for example: "
                  "nbdkit memory 1G");
    return -1;
  }
  const char *spec = allocator_spec ? allocator_spec : "sparse";
  const char *why;

  store = allocator_create (spec, size, nbdkit_debug, &why);
  if (store == NULL) {
    if (why)
      nbdkit_error ("allocator=%s: %s", spec, why);
    else
      nbdkit_error ("allocator=%s: %m", spec);
    return -1;
  }
  return 0;
}

#define memory_config_help \
  "[size=]SIZE               (required) Size of the RAM disk (eg. 1G).\n" \
  "allocator=sparse|malloc[,mlock=true]|zstd\n" \
  "                          How the disk is kept in memory (default sparse)."

static void
memory_dump_plugin (void)
{
  printf ("memory_page_size=%d\n", 4096);
  printf ("mlock=%s\n", allocator_have_mlock () ? "yes" : "no");
  printf ("zstd=%s\n", allocator_have_zstd () ? "yes" : "no");
}

static int64_t
memory_get_size (void *handle)
{
  return size;
}

static int
memory_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  allocator_read (store, buf, count, offset);
  return 0;
}

/* Reads straight from the store (common/zerocopy.h), where the
 * allocator can lend them (sparse, malloc).  Otherwise E2BIG, the
 * answer that sends the server to pread.
 */
static int
memory_map_read (void *handle, uint32_t count, uint64_t offset,
                 struct iovec *iov, int *niov)
{
  if (store->ops->map_read == NULL) {
    errno = E2BIG;
    return -1;
  }
  return store->ops->map_read (store, count, offset, iov, niov);
}

static void
memory_unmap_read (void *handle)
{
  store->ops->unmap_read (store);
}

/* Writes whose payload is received straight into pages of the
 * store's own, which then fill holes or replace stored pages (sparse
 * only; any failure sends the server to pwrite).
 */
static int
memory_map_write (void *handle, uint32_t count, uint64_t offset,
                  struct iovec *iov, int *niov)
{
  if (store->ops->map_write == NULL) {
    errno = ENOTSUP;
    return -1;
  }
  return store->ops->map_write (store, count, offset, iov, niov);
}

/* A write the store could not take (errno ENOMEM): say so, keep errno. */
static int
write_failed (uint32_t count, uint64_t offset)
{
  int err = errno;

  nbdkit_error ("pwrite: out of memory storing %" PRIu32
                " bytes at offset %" PRIu64, count, offset);
  errno = err;
  return -1;
}

static int
memory_unmap_write (void *handle, uint32_t count, uint64_t offset,
                    const struct iovec *iov, int keep)
{
  if (store->ops->unmap_write (store, count, offset, iov, keep) == -1)
    return write_failed (count, offset);
  return 0;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_zerocopy_ops nbdkit_zerocopy_ops = {
  .version = NBDKIT_ZEROCOPY_VERSION,
  .map_read = memory_map_read,
  .unmap_read = memory_unmap_read,
  .map_write = memory_map_write,
  .unmap_write = memory_unmap_write,
};

static int
memory_pwrite (void *handle, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags)
{
  if (allocator_write (store, buf, count, offset) == -1)
    return write_failed (count, offset);
  return 0;
}

/* Trim and zero are the same operation here: both free pages, and
 * both leave the range reading as zeroes, which trim is allowed to do.
 */
static int
memory_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return allocator_zero (store, count, offset);
}

static int
memory_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return allocator_zero (store, count, offset);
}

static int
add_extent (void *opaque, uint64_t offset, uint64_t length, bool allocated)
{
  struct nbdkit_extents *extents = opaque;

  return nbdkit_add_extent (extents, offset, length,
                            allocated ? 0
                            : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
}

static int
memory_extents (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents)
{
  return allocator_extents (store, count, offset,
                         (flags & NBDKIT_FLAG_REQ_ONE) != 0,
                         add_extent, extents);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "memory",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit memory plugin",
  .description       = "A RAM disk shared by all clients",
  .unload            = memory_unload,
  .config            = memory_config,
  .config_complete   = memory_config_complete,
  .config_help       = memory_config_help,
  .magic_config_key  = "size",
  .dump_plugin       = memory_dump_plugin,
  .open              = answer_no_handle,
  .get_size          = memory_get_size,
  /* Every capability is native and cheap. */
  .can_write         = answer_yes,
  .can_flush         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fast_zero     = answer_yes,
  /* Data is "on stable storage" as soon as it is in memory. */
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = memory_pread,
  .pwrite            = memory_pwrite,
  .flush             = answer_flush_done,
  .trim              = memory_trim,
  .zero              = memory_zero,
  .cache             = answer_range_done,
  .extents           = memory_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
