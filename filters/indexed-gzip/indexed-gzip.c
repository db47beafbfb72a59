/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The indexed-gzip filter: random access into a gzip file through a
 * seek-point index (gzindex.c), read-only.
 *
 * The first connection to get past .prepare reads the index file named
 * by gzip-index-path, or, if there is none, makes it with one pass
 * over the gzip file; the index is then shared, read-only, by every
 * connection.  Each connection has its own inflate stream: a read
 * starts inflating at the last seek point before it (restoring the bit
 * position and the 32 KiB window), or carries on from where the
 * connection's previous read stopped when that is no further back, and
 * throws away the bytes before the offset asked for.  The thread model
 * serialises one connection's requests, so the stream needs no lock.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "minmax.h"
#include "gzindex.h"

#define IN_CHUNK (64 * 1024)
#define DISCARD_CHUNK (64 * 1024)
/* The gzip member trailer: CRC32 and ISIZE. */
#define TRAILER_SIZE 8

/* Set by .config, read-only afterwards. */
static char *index_path;
static uint64_t span = 1024 * 1024;

/* The gzi.  LOCK serialises making or loading it; READY is set last
 * (release) and read with an acquire load, after which INDEX never
 * changes until .unload.
 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool ready;
static struct gzindex gzi = { .fd = -1 };

struct handle {
  z_stream z;
  bool active;                  /* the stream can carry on from pos */
  bool raw;                     /* inflating raw deflate mid-member */
  uint64_t pos;                 /* uncompressed offset of its next byte */
  uint64_t in_off;              /* next compressed byte to read below */
  unsigned trailer_left;        /* member trailer bytes still to skip */
  unsigned char *in;            /* IN_CHUNK */
  unsigned char *scratch;       /* DISCARD_CHUNK, also the window */
};

static void
igz_unload (void)
{
  gzindex_free (&gzi);
  free (index_path);
}

static int
igz_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  if (strcmp (key, "gzip-index-path") == 0) {
    free (index_path);
    index_path = nbdkit_absolute_path (value);
    return index_path == NULL ? -1 : 0;
  }
  if (strcmp (key, "gzip-index-span") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    if (r == 0) {
      nbdkit_error ("gzip-index-span: must be greater than 0");
      return -1;
    }
    span = r;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
igz_config_complete (nbdkit_next_config_complete *next,
                     nbdkit_backend *nxdata)
{
  if (index_path == NULL) {
    nbdkit_error ("the gzip-index-path parameter is required");
    return -1;
  }
  return next (nxdata);
}

#define igz_config_help \
  "gzip-index-path=<PATH> (required) The index file (made if missing).\n" \
  "gzip-index-span=<SIZE> Bytes between seek points (default 1M)."

static int
igz_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
}

static void *
igz_open (nbdkit_next_open *next, nbdkit_context *context, int readonly,
          const char *exportname, int is_tls)
{
  /* The gzip file is never written, whatever the client asked. */
  if (next (context, 1, exportname) == -1)
    return NULL;
  struct handle *h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->in = malloc (IN_CHUNK);
  h->scratch = malloc (MAX (DISCARD_CHUNK, GZINDEX_WINDOW));
  if (h->in == NULL || h->scratch == NULL ||
      inflateInit2 (&h->z, 16 + MAX_WBITS) != Z_OK) {
    nbdkit_error ("out of memory");
    free (h->in);
    free (h->scratch);
    free (h);
    return NULL;
  }
  return h;
}

static void
igz_close (void *handle)
{
  struct handle *h = handle;

  inflateEnd (&h->z);
  free (h->in);
  free (h->scratch);
  free (h);
}

/* The first connection loads or makes the gzi; later ones find it. */
static int
igz_prepare (nbdkit_next *next, void *handle, int readonly)
{
  /* Every connection asks the layer below for its size, which the
   * server needs before this connection's reads from below, and which
   * must still be the size the index was made for.
   */
  int64_t csize = next->get_size (next);
  if (csize == -1)
    return -1;
  if (__atomic_load_n (&ready, __ATOMIC_ACQUIRE)) {
    if ((uint64_t) csize != gzi.compressed_size) {
      nbdkit_error ("the gzip file is now %" PRIi64 " bytes, not the %"
                    PRIu64 " the index was made for", csize,
                    gzi.compressed_size);
      return -1;
    }
    return 0;
  }

  LOCK_FOR_SCOPE (&lock);
  if (ready)
    return 0;

  struct stat st;
  if (stat (index_path, &st) == 0) {
    if (gzindex_load (next, index_path, &gzi) == -1)
      return -1;
    nbdkit_debug ("loaded %s: %zu points, %" PRIu64 " bytes",
                  index_path, gzi.npoints, gzi.size);
    NBDKIT_PROBE (indexed_gzip_index_loaded, (uint64_t) gzi.npoints,
                  gzi.size);
  }
  else if (errno == ENOENT) {
    if (gzindex_build (next, index_path, span, &gzi) == -1)
      return -1;
    nbdkit_debug ("made %s: %zu points, %" PRIu64 " compressed bytes, %"
                  PRIu64 " uncompressed", index_path, gzi.npoints,
                  gzi.compressed_size, gzi.size);
    NBDKIT_PROBE (indexed_gzip_index_built, (uint64_t) gzi.npoints,
                  gzi.compressed_size, gzi.size);
  }
  else {
    nbdkit_error ("gzip-index-path: %s: %m", index_path);
    return -1;
  }
  __atomic_store_n (&ready, true, __ATOMIC_RELEASE);
  return 0;
}

static int64_t
igz_get_size (nbdkit_next *next, void *handle)
{
  return gzi.size;
}

static int
igz_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

/* The layer below's holes are the compressed file's, not ours. */
static int
igz_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

/* The content never changes, so every connection sees the same. */
static int
igz_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
igz_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

/* Point the connection's stream at seek point PNUM. */
static int
stream_start (struct handle *h, nbdkit_next *next, size_t pnum, int *err)
{
  const struct gzpoint *p = &gzi.points[pnum];
  bool raw = p->bits >= 0;

  h->active = false;
  /* Raw deflate mid-member; gzip mode at a member's header. */
  if (inflateReset2 (&h->z, raw ? -MAX_WBITS : 16 + MAX_WBITS) != Z_OK)
    goto zerr;
  h->z.avail_in = 0;
  h->in_off = p->in;
  h->pos = p->out;
  h->trailer_left = 0;
  h->raw = raw;
  if (raw) {
    if (p->bits > 0) {
      unsigned char byte;
      if (next->pread (next, &byte, 1, p->in - 1, 0, err) == -1)
        return -1;
      if (inflatePrime (&h->z, p->bits, byte >> (8 - p->bits)) != Z_OK)
        goto zerr;
    }
    if (gzindex_window (&gzi, p, h->scratch, err) == -1)
      return -1;
    if (inflateSetDictionary (&h->z, h->scratch, GZINDEX_WINDOW) != Z_OK)
      goto zerr;
  }
  h->active = true;
  return 0;

 zerr:
  nbdkit_error ("cannot start inflating at seek point %zu: %s", pnum,
                h->z.msg ? h->z.msg : "zlib error");
  *err = EIO;
  return -1;
}

/* Inflate the next LEN bytes of the stream into BUF. */
static int
stream_read (struct handle *h, nbdkit_next *next, unsigned char *buf,
             uint32_t len, int *err)
{
  while (len > 0) {
    if (h->z.avail_in == 0) {
      if (h->in_off >= gzi.compressed_size) {
        nbdkit_error ("the gzip data ends before offset %" PRIu64
                      " (does the index match the file?)", h->pos + len);
        *err = EIO;
        return -1;
      }
      uint32_t n = MIN ((uint64_t) IN_CHUNK,
                        gzi.compressed_size - h->in_off);
      if (next->pread (next, h->in, n, h->in_off, 0, err) == -1)
        return -1;
      h->in_off += n;
      h->z.next_in = h->in;
      h->z.avail_in = n;
    }
    if (h->trailer_left > 0) {
      /* Started mid-member in raw mode: step over the trailer, then
       * the next member begins with a gzip header.
       */
      unsigned k = MIN (h->trailer_left, h->z.avail_in);
      h->z.next_in += k;
      h->z.avail_in -= k;
      h->trailer_left -= k;
      if (h->trailer_left == 0 &&
          inflateReset2 (&h->z, 16 + MAX_WBITS) != Z_OK) {
        *err = EIO;
        nbdkit_error ("inflateReset2 failed");
        return -1;
      }
      continue;
    }
    uInt in_before = h->z.avail_in;
    h->z.next_out = buf;
    h->z.avail_out = len;
    int zr = inflate (&h->z, Z_NO_FLUSH);
    uint32_t produced = len - h->z.avail_out;
    h->pos += produced;
    buf += produced;
    len -= produced;
    if (zr == Z_STREAM_END) {
      /* The end of a member.  In gzip mode inflate has checked its
       * trailer and a reset makes it expect the next header; in raw
       * mode the trailer is still ahead, unchecked.
       */
      if (h->raw) {
        h->trailer_left = TRAILER_SIZE;
        h->raw = false;
      }
      else if (inflateReset (&h->z) != Z_OK) {
        *err = EIO;
        nbdkit_error ("inflateReset failed");
        return -1;
      }
      continue;
    }
    if (zr == Z_OK || (zr == Z_BUF_ERROR && h->z.avail_in == 0))
      continue;
    if (zr == Z_BUF_ERROR && produced == 0 && in_before == h->z.avail_in)
      zr = Z_DATA_ERROR;
    nbdkit_error ("the gzip data is corrupt at compressed byte about %"
                  PRIu64 ": %s", h->in_off - h->z.avail_in,
                  h->z.msg ? h->z.msg : zError (zr));
    *err = EIO;
    return -1;
  }
  return 0;
}

static int
igz_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
           uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  size_t pnum = gzindex_find (&gzi, offset);

  /* Carry on from the last read if no seek point lies between. */
  if (h->active && h->pos <= offset &&
      gzi.points[pnum].out <= h->pos)
    NBDKIT_PROBE (indexed_gzip_continue, nbdkit_connection_id (),
                  nbdkit_request_cookie (), h->pos, offset - h->pos);
  else {
    if (stream_start (h, next, pnum, err) == -1)
      return -1;
    NBDKIT_PROBE (indexed_gzip_seek, nbdkit_connection_id (),
                  nbdkit_request_cookie (), (uint64_t) pnum,
                  gzi.points[pnum].out, offset - h->pos);
  }

  while (h->pos < offset) {
    uint32_t n = MIN ((uint64_t) DISCARD_CHUNK, offset - h->pos);
    if (stream_read (h, next, h->scratch, n, err) == -1)
      goto fail;
  }
  if (stream_read (h, next, buf, count, err) == -1)
    goto fail;
  return 0;

 fail:
  h->active = false;
  return -1;
}

static struct nbdkit_filter filter = {
  .name = "indexed-gzip",
  .longname = "nbdkit indexed-gzip filter",
  .unload = igz_unload,
  .config = igz_config,
  .config_complete = igz_config_complete,
  .config_help = igz_config_help,
  .thread_model = igz_thread_model,
  .open = igz_open,
  .close = igz_close,
  .prepare = igz_prepare,
  .get_size = igz_get_size,
  .can_write = igz_can_write,
  .can_extents = igz_can_extents,
  .can_multi_conn = igz_can_multi_conn,
  .can_cache = igz_can_cache,
  .pread = igz_pread,
};

NBDKIT_REGISTER_FILTER (filter)
