/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The lzip filter: serve the uncompressed contents of the .lz file that
 * the layer below holds, read-only.  Each connection reads the file's
 * member index once (.prepare, lzipfile.c), then answers reads from a
 * small LRU cache of whole decompressed members, decompressing a
 * missing member on demand.  The cache belongs to the connection's
 * handle; the thread model serialises the requests of one connection,
 * so nothing here needs a lock.
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
#include "lzipfile.h"

/* Set by config before any connection; read-only afterwards. */
static uint64_t max_block = 512 * 1024 * 1024;
static unsigned max_depth = 8;

/* Most recently used first; at most max_depth entries. */
DEFINE_VECTOR_TYPE (member_cache, struct lzipmember);

struct lzip_handle {
  struct lzipfile *lz;          /* NULL until .prepare */
  member_cache cache;
};

static int
lzip_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "lzip-max-block") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    max_block = r;
    return 0;
  }
  if (strcmp (key, "lzip-max-depth") == 0) {
    if (nbdkit_parse_unsigned ("lzip-max-depth", value, &max_depth) == -1)
      return -1;
    if (max_depth == 0) {
      nbdkit_error ("lzip-max-depth: must be at least 1");
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

#define lzip_config_help \
  "lzip-max-block=<SIZE> Refuse files with a larger member (default 512M).\n" \
  "lzip-max-depth=<N>    Decompressed members cached per connection " \
  "(default 8)."

static int
lzip_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
}

static void *
lzip_open (nbdkit_next_open *next, nbdkit_context *context, int readonly,
           const char *exportname, int is_tls)
{
  /* The compressed file is never written, whatever the client asked. */
  if (next (context, 1, exportname) == -1)
    return NULL;
  struct lzip_handle *h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  return h;
}

static void
lzip_close (void *handle)
{
  struct lzip_handle *h = handle;

  for (size_t i = 0; i < h->cache.len; i++)
    free (h->cache.ptr[i].data);
  member_cache_reset (&h->cache);
  lzipfile_close (h->lz);
  free (h);
}

static int
lzip_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct lzip_handle *h = handle;

  if (h->lz)
    return 0;
  h->lz = lzipfile_open (next);
  if (h->lz == NULL)
    return -1;
  if (lzipfile_max_member_size (h->lz) > max_block) {
    nbdkit_error ("lzip-max-block: the file's largest member is %" PRIu64
                  " bytes, more than lzip-max-block (%" PRIu64 " bytes): "
                  "raise lzip-max-block or recompress the file with "
                  "lzip -b SIZE or plzip --data-size=SIZE",
                  lzipfile_max_member_size (h->lz), max_block);
    lzipfile_close (h->lz);
    h->lz = NULL;
    return -1;
  }
  return 0;
}

static int64_t
lzip_get_size (nbdkit_next *next, void *handle)
{
  struct lzip_handle *h = handle;

  return lzipfile_uncompressed_size (h->lz);
}

static int
lzip_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

/* Block status of the compressed file says nothing about the
 * uncompressed one: everything is data.
 */
static int
lzip_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

/* A cache request becomes a read, which fills the member cache. */
static int
lzip_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

/* The cached member holding OFFSET, moved to the front; or, after
 * decompressing it, a new front entry (evicting the least recently
 * used one beyond max_depth).  NULL with *err set on failure.
 */
static struct lzipmember *
get_member (struct lzip_handle *h, nbdkit_next *next, uint64_t offset,
            int *err)
{
  struct lzipmember m;
  uint64_t compressed;

  for (size_t i = 0; i < h->cache.len; i++) {
    m = h->cache.ptr[i];
    if (offset >= m.start && offset - m.start < m.size) {
      NBDKIT_PROBE (lzip_cache_hit, nbdkit_connection_id (),
                    nbdkit_request_cookie (), m.number, m.size);
      member_cache_remove (&h->cache, i);
      member_cache_insert (&h->cache, m, 0); /* cannot fail: room left */
      return &h->cache.ptr[0];
    }
  }

  if (lzipfile_read_member (h->lz, next, offset, &m, &compressed,
                            err) == -1)
    return NULL;
  NBDKIT_PROBE (lzip_member_decompress, nbdkit_connection_id (),
                nbdkit_request_cookie (), m.number, compressed, m.size);
  if (h->cache.len >= max_depth) {
    free (h->cache.ptr[h->cache.len - 1].data);
    h->cache.len--;
  }
  if (member_cache_insert (&h->cache, m, 0) == -1) {
    *err = errno;
    nbdkit_error ("realloc: %m");
    free (m.data);
    return NULL;
  }
  return &h->cache.ptr[0];
}

static int
lzip_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct lzip_handle *h = handle;
  char *p = buf;

  while (count > 0) {
    struct lzipmember *m = get_member (h, next, offset, err);
    if (m == NULL)
      return -1;
    /* A member that does not hold OFFSET would copy nothing and loop
     * for ever: refuse it rather than trust the lookup.
     */
    if (offset < m->start || offset - m->start >= m->size) {
      nbdkit_error ("member %" PRIu64 " does not hold offset %" PRIu64,
                    m->number, offset);
      *err = EIO;
      return -1;
    }
    uint64_t n = MIN ((uint64_t) count, m->start + m->size - offset);
    memcpy (p, m->data + (offset - m->start), n);
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "lzip",
  .longname = "nbdkit lzip filter",
  .config = lzip_config,
  .config_help = lzip_config_help,
  .thread_model = lzip_thread_model,
  .open = lzip_open,
  .close = lzip_close,
  .prepare = lzip_prepare,
  .get_size = lzip_get_size,
  .can_write = lzip_can_write,
  .can_extents = lzip_can_extents,
  .can_cache = lzip_can_cache,
  .pread = lzip_pread,
};

NBDKIT_REGISTER_FILTER (filter)
