/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The full plugin: a disk that reads as zeroes and has no room left,
 * so every write, trim and zero request fails with ENOSPC.
 *
 * This file owns the size parameter and the callbacks.  There is no
 * per-request state, so every request runs in parallel.  The only
 * memory is one read-only mapping of zeroes, made at load and unmapped
 * at unload, from which the server sends large reads directly
 * (common/zerocopy.h): the kernel backs it with its shared zero page,
 * so it costs no RAM and no memset.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "zerocopy.h"
#include "answers.h"
#include "params.h"

/* Set by config, read-only once the server starts serving; -1 = unset. */
static int64_t size = -1;

/* The largest read the server maps (common/zerocopy.h). */
#define ZEROES_SIZE (1 << 20)

/* Mapped in load, never written, unmapped in unload; NULL if the
 * mapping failed, and then reads go through pread.
 */
static void *zeroes;

static void
full_load (void)
{
  zeroes = mmap (NULL, ZEROES_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (zeroes == MAP_FAILED)
    zeroes = NULL;
}

static void
full_unload (void)
{
  if (zeroes)
    munmap (zeroes, ZEROES_SIZE);
  zeroes = NULL;
}

static int
full_config (const char *key, const char *value)
{
  return param_size_only (key, value, &size);
}

static int
full_config_complete (void)
{
  if (size == -1) {
    nbdkit_error ("the size parameter is required (size=SIZE)");
    return -1;
  }
  return 0;
}

#define full_config_help \
  "[size=]SIZE               Size of the disk (required)."

static int64_t
full_get_size (void *handle)
{
  return size;
}

static int
full_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  memset (buf, 0, count);
  return 0;
}

/* Nothing fits: a thin-provisioned disk whose host has run out of
 * space.
 */
static int
full_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  errno = ENOSPC;
  return -1;
}

static int
full_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  errno = ENOSPC;
  return -1;
}

/* A fast zero is refused as unsupported, as nbdkit 1.32 does, so that a
 * client falls back to its slow path (which then fails with ENOSPC).
 */
static int
full_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  errno = (flags & NBDKIT_FLAG_FAST_ZERO) ? ENOTSUP : ENOSPC;
  return -1;
}

/* All one hole, so clients that copy skip it. */
static int
full_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  return nbdkit_add_extent (extents, offset, count,
                            NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
}

/* Large reads are sent from the zero mapping. */
static int
full_map_read (void *handle, uint32_t count, uint64_t offset,
               struct iovec *iov, int *niov)
{
  if (!zeroes || count > ZEROES_SIZE || *niov < 1) {
    errno = E2BIG;
    return -1;
  }
  iov[0].iov_base = zeroes;
  iov[0].iov_len = count;
  *niov = 1;
  return 0;
}

static void
full_unmap_read (void *handle)
{
}

NBDKIT_DLL_PUBLIC const struct nbdkit_zerocopy_ops nbdkit_zerocopy_ops = {
  .version = NBDKIT_ZEROCOPY_VERSION,
  .map_read = full_map_read,
  .unmap_read = full_unmap_read,
};

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "full",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit full plugin",
  .description       = "A disk of zeroes on which every write fails "
                       "with ENOSPC",
  .load              = full_load,
  .unload            = full_unload,
  .config            = full_config,
  .config_complete   = full_config_complete,
  .config_help       = full_config_help,
  .magic_config_key  = "size",
  .open              = answer_no_handle,
  .get_size          = full_get_size,
  .can_write         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fast_zero     = answer_yes,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = full_pread,
  .pwrite            = full_pwrite,
  .trim              = full_trim,
  .zero              = full_zero,
  .cache             = answer_range_done, /* zeroes already */
  .extents           = full_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
