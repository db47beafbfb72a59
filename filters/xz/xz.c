/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The xz filter: serve the uncompressed contents of the .xz file that
 * the layer below holds, read-only.  Each connection reads the file's
 * index once (.prepare, xzfile.c), then answers reads from a small LRU
 * cache of whole decompressed blocks, decompressing a missing block on
 * demand.  The cache belongs to the connection's handle; the thread
 * model serialises the requests of one connection, so nothing here
 * needs a lock.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "minmax.h"
#include "vector.h"
#include "xzfile.h"

/* Set by config before any connection; read-only afterwards. */
static uint64_t max_block = 512 * 1024 * 1024;
static unsigned max_depth = 8;

/* Most recently used first; at most max_depth entries. */
DEFINE_VECTOR_TYPE (block_list, struct xzblock);

struct xz_handle {
  struct xzfile *xz;            /* NULL until .prepare */
  block_list cache;
};

static int
xz_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
           const char *key, const char *value)
{
  if (strcmp (key, "xz-max-block") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    max_block = r;
    return 0;
  }
  if (strcmp (key, "xz-max-depth") == 0) {
    if (nbdkit_parse_unsigned ("xz-max-depth", value, &max_depth) == -1)
      return -1;
    if (max_depth == 0) {
      nbdkit_error ("xz-max-depth: must be at least 1");
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

#define xz_config_help \
  "xz-max-block=<SIZE>  Refuse files with a larger block (default 512M).\n" \
  "xz-max-depth=<N>     Decompressed blocks cached per connection " \
  "(default 8)."

static int
xz_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
}

static void *
xz_open (nbdkit_next_open *next, nbdkit_context *context, int readonly,
         const char *exportname, int is_tls)
{
  struct xz_handle *h;

  /* The compressed file is never written, whatever the client asked. */
  if (next (context, 1, exportname) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  return h;
}

static void
xz_close (void *handle)
{
  struct xz_handle *h = handle;

  for (size_t i = 0; i < h->cache.len; i++)
    free (h->cache.ptr[i].data);
  block_list_reset (&h->cache);
  xzfile_close (h->xz);
  free (h);
}

static int
xz_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct xz_handle *h = handle;

  if (h->xz)
    return 0;
  h->xz = xzfile_open (next);
  if (h->xz == NULL)
    return -1;
  if (xzfile_max_block_size (h->xz) > max_block) {
    nbdkit_error ("xz-max-block: the file's largest block is %" PRIu64
                  " bytes, more than xz-max-block (%" PRIu64 " bytes): "
                  "raise xz-max-block or recompress the file with "
                  "xz --block-size=SIZE",
                  xzfile_max_block_size (h->xz), max_block);
    xzfile_close (h->xz);
    h->xz = NULL;
    return -1;
  }
  return 0;
}

static int64_t
xz_get_size (nbdkit_next *next, void *handle)
{
  struct xz_handle *h = handle;

  return xzfile_uncompressed_size (h->xz);
}

static int
xz_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

/* Block status of the compressed file says nothing about the
 * uncompressed one: everything is data.
 */
static int
xz_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

/* A cache request becomes a read, which fills the block cache. */
static int
xz_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

/* The cached block holding OFFSET, moved to the front; or, after
 * decompressing it, a new front entry (evicting the least recently
 * used one beyond max_depth).  NULL with *err set on failure.
 */
static struct xzblock *
get_block (struct xz_handle *h, nbdkit_next *next, uint64_t offset,
           int *err)
{
  struct xzblock blk;

  for (size_t i = 0; i < h->cache.len; i++) {
    blk = h->cache.ptr[i];
    if (offset >= blk.start && offset - blk.start < blk.size) {
      NBDKIT_PROBE (xz_cache_hit, nbdkit_connection_id (),
                    nbdkit_request_cookie (), blk.number, blk.size);
      block_list_remove (&h->cache, i);
      block_list_insert (&h->cache, blk, 0); /* cannot fail: room left */
      return &h->cache.ptr[0];
    }
  }

  if (xzfile_read_block (h->xz, next, offset, &blk, err) == -1)
    return NULL;
  NBDKIT_PROBE (xz_block_decompress, nbdkit_connection_id (),
                nbdkit_request_cookie (), blk.number, blk.size);
  if (h->cache.len >= max_depth) {
    free (h->cache.ptr[h->cache.len - 1].data);
    h->cache.len--;
  }
  if (block_list_insert (&h->cache, blk, 0) == -1) {
    *err = errno;
    nbdkit_error ("realloc: %m");
    free (blk.data);
    return NULL;
  }
  return &h->cache.ptr[0];
}

static int
xz_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
          uint64_t offset, uint32_t flags, int *err)
{
  struct xz_handle *h = handle;
  char *p = buf;

  while (count > 0) {
    struct xzblock *blk = get_block (h, next, offset, err);
    uint64_t n;

    if (blk == NULL)
      return -1;
    n = MIN ((uint64_t) count, blk->start + blk->size - offset);
    memcpy (p, blk->data + (offset - blk->start), n);
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "xz",
  .longname = "nbdkit xz filter",
  .config = xz_config,
  .config_help = xz_config_help,
  .thread_model = xz_thread_model,
  .open = xz_open,
  .close = xz_close,
  .prepare = xz_prepare,
  .get_size = xz_get_size,
  .can_write = xz_can_write,
  .can_extents = xz_can_extents,
  .can_cache = xz_can_cache,
  .pread = xz_pread,
};

NBDKIT_REGISTER_FILTER (filter)
