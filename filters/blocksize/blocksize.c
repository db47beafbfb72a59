/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The blocksize filter: whatever the client sends, the layer below
 * sees only requests aligned to minblock, reads and writes of at most
 * maxdata bytes, and trims, zeroes, cache and extents requests of at
 * most maxlen bytes.  A request is cut into aligned pieces; an
 * unaligned head or tail is read whole (reads) or read, patched and
 * written back (writes and zeroes: read-modify-write), and dropped
 * (trims).  The export's size is rounded down to minblock.
 *
 * Locking: a read-modify-write of a block must not interleave with
 * another write to that block, or one of them is lost.  One rwlock,
 * shared by every connection (they may all write to the same disk),
 * orders them: a read-modify-write cycle holds it exclusively, the
 * aligned pieces of writes, zeroes and trims hold it shared.  Reads
 * take no lock.  The per-connection limits are set in prepare and
 * only read afterwards.
 *
 * A request that needs no cutting passes on to a plugin that completes
 * it later (nbdkit-async(3)): an aligned read within maxdata, a flush,
 * and with minblock=1 (where no read-modify-write ever happens, so the
 * lock has nothing to order) a write within maxdata or a trim or zero
 * within maxlen.  With a larger minblock, writes keep the synchronous
 * path and its lock.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-async.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "isaligned.h"
#include "ispowerof2.h"
#include "minmax.h"
#include "rounding.h"

#define MINBLOCK_LIMIT (64 * 1024)       /* largest minblock= */
#define DEFAULT_MAXDATA (64 * 1024 * 1024)

/* Parameters, 0 when not given; read-only after config_complete. */
static uint32_t minblock_param, maxdata_param, maxlen_param;

static pthread_rwlock_t rmw_lock = PTHREAD_RWLOCK_INITIALIZER;

static int
parse_limit (const char *key, const char *value, uint32_t *r)
{
  int64_t v = nbdkit_parse_size (value);

  if (v == -1)
    return -1;
  if (v == 0) {
    nbdkit_error ("%s=%s: must not be zero", key, value);
    return -1;
  }
  if (v > UINT32_MAX) {
    nbdkit_error ("%s=%s: must be less than 4G", key, value);
    return -1;
  }
  *r = v;
  return 0;
}

static int
blocksize_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                  const char *key, const char *value)
{
  if (strcmp (key, "minblock") == 0) {
    if (parse_limit (key, value, &minblock_param) == -1)
      return -1;
    if (!is_power_of_2 (minblock_param)) {
      nbdkit_error ("minblock=%s: must be a power of 2", value);
      return -1;
    }
    if (minblock_param > MINBLOCK_LIMIT) {
      nbdkit_error ("minblock=%s: must not exceed %d", value, MINBLOCK_LIMIT);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "maxdata") == 0)
    return parse_limit (key, value, &maxdata_param);
  if (strcmp (key, "maxlen") == 0)
    return parse_limit (key, value, &maxlen_param);
  return next (nxdata, key, value);
}

static int
blocksize_config_complete (nbdkit_next_config_complete *next,
                           nbdkit_backend *nxdata)
{
  uint32_t mb = minblock_param ? minblock_param : 1;

  if (!IS_ALIGNED (maxdata_param, mb)) {
    nbdkit_error ("maxdata=%" PRIu32 ": must be a multiple of minblock (%"
                  PRIu32 ")", maxdata_param, mb);
    return -1;
  }
  if (!IS_ALIGNED (maxlen_param, mb)) {
    nbdkit_error ("maxlen=%" PRIu32 ": must be a multiple of minblock (%"
                  PRIu32 ")", maxlen_param, mb);
    return -1;
  }
  return next (nxdata);
}

#define blocksize_config_help \
  "minblock=<SIZE>     Alignment and smallest request passed down.\n" \
  "maxdata=<SIZE>      Largest read or write passed down.\n" \
  "maxlen=<SIZE>       Largest trim, zero, cache or extents passed down."

/* The limits of one connection: the parameters combined with what the
 * layer below advertises.
 */
struct handle {
  uint32_t minblock;            /* power of 2, <= MINBLOCK_LIMIT */
  uint32_t maxdata;             /* multiple of minblock */
  uint32_t maxlen;              /* multiple of minblock */
};

static void *
blocksize_open (nbdkit_next_open *next, nbdkit_context *context,
                int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (next (context, readonly, exportname) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  return h;
}

static void
blocksize_close (void *handle)
{
  free (handle);
}

static int
blocksize_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  uint32_t minimum, preferred, maximum;

  if (next->block_size (next, &minimum, &preferred, &maximum) == -1)
    return -1;

  h->minblock = MAX (minblock_param ? minblock_param : 1, minimum);
  if (!is_power_of_2 (h->minblock) || h->minblock > MINBLOCK_LIMIT) {
    nbdkit_error ("the plugin's minimum block size %" PRIu32
                  " cannot be used", minimum);
    return -1;
  }

  h->maxdata = maxdata_param ? maxdata_param : DEFAULT_MAXDATA;
  if (maximum)
    h->maxdata = MIN (h->maxdata, maximum);
  h->maxdata = ROUND_DOWN (h->maxdata, h->minblock);

  h->maxlen = maxlen_param ? maxlen_param : UINT32_MAX;
  h->maxlen = ROUND_DOWN (h->maxlen, h->minblock);

  if (h->maxdata == 0 || h->maxlen == 0) {
    nbdkit_error ("the plugin's maximum block size %" PRIu32
                  " is smaller than minblock %" PRIu32,
                  maximum, h->minblock);
    return -1;
  }
  nbdkit_debug ("blocksize: minblock %" PRIu32 " maxdata %" PRIu32
                " maxlen %" PRIu32, h->minblock, h->maxdata, h->maxlen);
  return 0;
}

static int64_t
blocksize_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  int64_t size = next->get_size (next);

  return size == -1 ? -1 : ROUND_DOWN (size, (int64_t) h->minblock);
}

/* The filter takes any request: it advertises no minimum and no
 * maximum, and prefers whole blocks.
 */
static int
blocksize_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                      uint32_t *preferred, uint32_t *maximum)
{
  struct handle *h = handle;

  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;
  *minimum = 1;
  *preferred = MAX (MAX (*preferred, (uint32_t) 4096), h->minblock);
  *maximum = UINT32_MAX;
  return 0;
}

/* A request is cut into pieces: an unaligned head, chunks of whole
 * blocks, an unaligned tail.  Once it is over (or failed), say so if
 * there was more than one.
 */
static void
report_split (uint64_t offset, uint32_t count, unsigned pieces)
{
  if (pieces > 1)
    NBDKIT_PROBE (blocksize_split, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset, count, pieces);
}

static int
blocksize_pread (nbdkit_next *next, void *handle, void *b, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  const uint64_t offset0 = offset;
  const uint32_t count0 = count;
  CLEANUP_FREE uint8_t *block = NULL;
  uint8_t *buf = b;
  unsigned pieces = 0;
  int r = -1;

  /* Head: the block holding offset, read whole. */
  if (!IS_ALIGNED (offset, h->minblock)) {
    uint64_t start = ROUND_DOWN (offset, (uint64_t) h->minblock);
    uint32_t skip = offset - start;
    uint32_t n = MIN (h->minblock - skip, count);

    block = malloc (h->minblock);
    if (block == NULL) {
      *err = errno;
      goto out;
    }
    pieces++;
    if (next->pread (next, block, h->minblock, start, flags, err) == -1)
      goto out;
    memcpy (buf, block + skip, n);
    buf += n;
    offset += n;
    count -= n;
  }

  /* Body: whole blocks, at most maxdata at a time. */
  while (count >= h->minblock) {
    uint32_t n = MIN (ROUND_DOWN (count, h->minblock), h->maxdata);

    pieces++;
    if (next->pread (next, buf, n, offset, flags, err) == -1)
      goto out;
    buf += n;
    offset += n;
    count -= n;
  }

  /* Tail: the block holding the last bytes, read whole. */
  if (count) {
    if (block == NULL && (block = malloc (h->minblock)) == NULL) {
      *err = errno;
      goto out;
    }
    pieces++;
    if (next->pread (next, block, h->minblock, offset, flags, err) == -1)
      goto out;
    memcpy (buf, block, count);
  }
  r = 0;
 out:
  report_split (offset0, count0, pieces);
  return r;
}

/* Read-modify-write the block at START (aligned): replace its bytes
 * [skip, skip+n) by DATA, or by zeroes if DATA is NULL.  BLOCK is a
 * buffer of minblock bytes.
 */
static int
rmw_block (nbdkit_next *next, struct handle *h, uint8_t *block,
           uint64_t start, uint32_t skip, uint32_t n, const uint8_t *data,
           uint32_t flags, int *err)
{
  int r;

  NBDKIT_PROBE (blocksize_rmw, nbdkit_connection_id (),
                nbdkit_request_cookie (), start + skip, n);
  WRITE_LOCK_FOR_SCOPE (&rmw_lock);
  r = next->pread (next, block, h->minblock, start, 0, err);
  if (r == 0) {
    if (data)
      memcpy (block + skip, data, n);
    else
      memset (block + skip, 0, n);
    r = next->pwrite (next, block, h->minblock, start,
                      flags & NBDKIT_FLAG_FUA, err);
  }
  return r;
}

/* Writes and zeroes share the head, body, tail walk.  DATA is NULL
 * for a zero request.
 */
static int
write_or_zero (nbdkit_next *next, struct handle *h, const uint8_t *data,
               uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  const uint64_t offset0 = offset;
  const uint32_t count0 = count;
  CLEANUP_FREE uint8_t *block = NULL;
  unsigned pieces = 0;
  int r = -1;

  if (!IS_ALIGNED (offset, h->minblock) ||
      !IS_ALIGNED (count, h->minblock)) {
    /* A fast zero must not fall back to writing. */
    if (data == NULL && (flags & NBDKIT_FLAG_FAST_ZERO)) {
      *err = ENOTSUP;
      return -1;
    }
    block = malloc (h->minblock);
    if (block == NULL) {
      *err = errno;
      return -1;
    }
  }

  if (!IS_ALIGNED (offset, h->minblock)) {
    uint64_t start = ROUND_DOWN (offset, (uint64_t) h->minblock);
    uint32_t skip = offset - start;
    uint32_t n = MIN (h->minblock - skip, count);

    pieces++;
    if (rmw_block (next, h, block, start, skip, n, data, flags, err) == -1)
      goto out;
    if (data)
      data += n;
    offset += n;
    count -= n;
  }

  if (count >= h->minblock) {
    READ_LOCK_FOR_SCOPE (&rmw_lock);
    while (count >= h->minblock) {
      uint32_t limit = data ? h->maxdata : h->maxlen;
      uint32_t n = MIN (ROUND_DOWN (count, h->minblock), limit);

      pieces++;
      if (data) {
        if (next->pwrite (next, data, n, offset, flags, err) == -1)
          goto out;
        data += n;
      }
      else if (next->zero (next, n, offset, flags, err) == -1)
        goto out;
      offset += n;
      count -= n;
    }
  }

  if (count) {
    pieces++;
    if (rmw_block (next, h, block, offset, 0, count, data, flags, err) == -1)
      goto out;
  }
  r = 0;
 out:
  report_split (offset0, count0, pieces);
  return r;
}

static int
blocksize_pwrite (nbdkit_next *next, void *handle, const void *buf,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  return write_or_zero (next, handle, buf, count, offset, flags, err);
}

static int
blocksize_zero (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  return write_or_zero (next, handle, NULL, count, offset, flags, err);
}

/* Trim only the whole blocks inside the request: trimming is advisory,
 * and the partial blocks at either end keep their data.
 */
static int
blocksize_trim (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint64_t start = ROUND_UP (offset, (uint64_t) h->minblock);
  uint64_t end = ROUND_DOWN (offset + count, (uint64_t) h->minblock);
  unsigned pieces = 0;
  int r = 0;

  if (start < end) {
    READ_LOCK_FOR_SCOPE (&rmw_lock);
    while (start < end) {
      uint32_t n = MIN (end - start, (uint64_t) h->maxlen);

      pieces++;
      if (next->trim (next, n, start, flags, err) == -1) {
        r = -1;
        break;
      }
      start += n;
    }
  }
  report_split (offset, count, pieces);
  return r;
}

/* Cache the whole blocks covering the request, maxdata at a time (the
 * layer below may serve a cache request by reading).
 */
static int
blocksize_cache (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint64_t start = ROUND_DOWN (offset, (uint64_t) h->minblock);
  uint64_t end = ROUND_UP (offset + count, (uint64_t) h->minblock);
  unsigned pieces = 0;
  int r = 0;

  while (start < end) {
    uint32_t n = MIN (end - start, (uint64_t) h->maxdata);

    pieces++;
    if (next->cache (next, n, start, flags, err) == -1) {
      r = -1;
      break;
    }
    start += n;
  }
  report_split (offset, count, pieces);
  return r;
}

/* Ask about the whole blocks covering the request, at most maxlen
 * bytes, and answer in whole blocks: a block that the layer below
 * describes in pieces gets the type all of them share (data if any
 * piece is data).  The list drops what lies before offset, so an
 * unaligned request gets its first block from offset on; the answer
 * may stop short or, where the layer below says more, run past the
 * request.
 */
static int
blocksize_extents (nbdkit_next *next, void *handle, uint32_t count,
                   uint64_t offset, uint32_t flags,
                   struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  uint64_t start = ROUND_DOWN (offset, (uint64_t) h->minblock);
  uint64_t end = ROUND_UP (offset + count, (uint64_t) h->minblock);

  if (h->minblock == 1)
    return next->extents (next, count, offset, flags, extents, err);
  /* end is within the size, which is rounded down to minblock. */
  return nbdkit_extents_aligned (next, MIN (end - start, (uint64_t) h->maxlen),
                                 start, flags, h->minblock, extents, err);
}

static int
blocksize_async_prepare (nbdkit_next *next, void *handle, int cmd,
                         uint32_t *count, uint64_t *offset, uint32_t *flags,
                         int *err)
{
  struct handle *h = handle;
  switch (cmd) {
  case NBDKIT_ASYNC_CMD_FLUSH:
    return NBDKIT_ASYNC_PASS;
  case NBDKIT_ASYNC_CMD_PREAD:
    return IS_ALIGNED (*offset | *count, h->minblock) &&
      *count <= h->maxdata ? NBDKIT_ASYNC_PASS : NBDKIT_ASYNC_SYNC;
  case NBDKIT_ASYNC_CMD_PWRITE:
    return h->minblock == 1 && *count <= h->maxdata
      ? NBDKIT_ASYNC_PASS : NBDKIT_ASYNC_SYNC;
  default:
    return h->minblock == 1 && *count <= h->maxlen
      ? NBDKIT_ASYNC_PASS : NBDKIT_ASYNC_SYNC;
  }
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_filter_ops
nbdkit_async_filter_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .prepare = blocksize_async_prepare,
};

static struct nbdkit_filter filter = {
  .name = "blocksize",
  .longname = "nbdkit blocksize filter",
  .config = blocksize_config,
  .config_complete = blocksize_config_complete,
  .config_help = blocksize_config_help,
  .open = blocksize_open,
  .close = blocksize_close,
  .prepare = blocksize_prepare,
  .get_size = blocksize_get_size,
  .block_size = blocksize_block_size,
  .pread = blocksize_pread,
  .pwrite = blocksize_pwrite,
  .zero = blocksize_zero,
  .trim = blocksize_trim,
  .cache = blocksize_cache,
  .extents = blocksize_extents,
};

NBDKIT_REGISTER_FILTER (filter)
