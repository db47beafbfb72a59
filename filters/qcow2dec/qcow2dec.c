/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The qcow2dec filter: serve the guest's view of a qcow2 image that the
 * layer below holds, read-only.
 *
 * Each connection reads and checks the image's header and its L1
 * table in .prepare (qcow2.h describes the format's fields).  A read
 * then walks the guest clusters it covers: the L1 entry names an L2
 * table (kept in a small per-connection cache), the L2 entry says what
 * the cluster is (unallocated, zero, stored as is, or compressed) and
 * where it is in the image.  Every offset and length taken from the
 * image is checked against the image's size before it is used, so a
 * corrupt image fails the request (EIO) or the connection with a clear
 * error; it never makes the filter read or write out of bounds.
 * Images that need more than this filter knows (a backing file,
 * encryption, an external data file, extended L2 entries, feature bits
 * it does not know) are refused when the connection starts.
 * Snapshots are ignored: the active L1 table is what is served.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>
#ifdef HAVE_LIBZSTD
#include <zstd.h>
#endif

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "minmax.h"
#include "qcow2.h"

/* The L2 cache of one connection holds at most this many bytes of
 * tables (and at least one table, however large the clusters are).
 */
#define L2_CACHE_BYTES (4 * 1024 * 1024)
#define L2_CACHE_MAX_SLOTS 32

/* An extents request looks at no more clusters than this, so that a
 * huge request over tiny clusters stays short; the client asks again
 * for the rest.
 */
#define EXTENTS_MAX_CLUSTERS 65536

struct l2_slot {
  uint64_t offset;              /* of the table in the image; 0 = empty */
  uint64_t last_use;            /* the use counter when last hit */
  uint64_t *table;              /* cluster_size / 8 big-endian entries */
};

/* One connection's decoded image.  Everything but the cache is set by
 * .prepare and read-only afterwards; LOCK protects the cache (slots and
 * use counter), as requests of one connection run in parallel.  It is
 * held while a missing L2 table is read, so the table is read once
 * even when several requests want it; data reads happen outside it.
 */
struct handle {
  struct qcow2_image img;
  uint64_t *l1;                 /* img.l1_entries, host byte order */

  pthread_mutex_t lock;
  uint64_t use_counter;
  size_t nr_slots;
  struct l2_slot slots[L2_CACHE_MAX_SLOTS];
};

static void *
qcow2dec_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  /* The image is only ever read. */
  if (next (context, 1, exportname) == -1)
    return NULL;
  struct handle *h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  pthread_mutex_init (&h->lock, NULL);
  return h;
}

static void
qcow2dec_close (void *handle)
{
  struct handle *h = handle;
  for (size_t i = 0; i < L2_CACHE_MAX_SLOTS; i++)
    free (h->slots[i].table);
  free (h->l1);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

/* Read LEN bytes at OFFSET of the image, for metadata: an error names
 * WHAT was being read.
 */
static int
read_image (nbdkit_next *next, void *buf, uint32_t len, uint64_t offset,
            const char *what, int *err)
{
  if (next->pread (next, buf, len, offset, 0, err) == -1) {
    errno = *err;
    nbdkit_error ("reading the %s at %" PRIu64 " of the image: %m",
                  what, offset);
    return -1;
  }
  return 0;
}

static int
qcow2dec_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  int err;

  int64_t file_size = next->get_size (next);
  if (file_size == -1)
    return -1;

  unsigned char header[QCOW2_HEADER_READ] = { 0 };
  uint32_t n = MIN ((uint64_t) file_size, sizeof header);
  if (n > 0 && read_image (next, header, n, 0, "header", &err) == -1)
    return -1;
  if (qcow2_parse_header (header, n, file_size, &h->img) == -1)
    return -1;

  if (h->img.backing_file_offset != 0) {
    /* Name the backing file in the error: it is what the user needs
     * to know to flatten the image.  Its name was bounds-checked by
     * qcow2_parse_header.
     */
    char name[QCOW2_MAX_BACKING_NAME + 1] = { 0 };
    if (read_image (next, name, h->img.backing_file_size,
                    h->img.backing_file_offset, "backing file name",
                    &err) == -1)
      return -1;
    nbdkit_error ("the qcow2 image has a backing file (\"%s\"), which "
                  "this filter does not follow; flatten it first "
                  "(qemu-img convert -O qcow2 IMAGE FLAT)", name);
    return -1;
  }

  /* The active L1 table, only the entries the virtual size needs. */
  size_t l1_bytes = h->img.l1_entries * 8;
  if (l1_bytes > 0) {
    h->l1 = malloc (l1_bytes);
    if (h->l1 == NULL) {
      nbdkit_error ("malloc: %m");
      return -1;
    }
    if (read_image (next, h->l1, l1_bytes, h->img.l1_table_offset,
                    "L1 table", &err) == -1)
      return -1;
    for (uint64_t i = 0; i < h->img.l1_entries; i++)
      h->l1[i] = be64toh (h->l1[i]);
  }

  /* As many cached L2 tables as fit the budget, at least one. */
  h->nr_slots = MAX (1, MIN (L2_CACHE_MAX_SLOTS,
                             L2_CACHE_BYTES >> h->img.cluster_bits));
  nbdkit_debug ("qcow2 version %u, cluster size %" PRIu64 ", virtual "
                "size %" PRIu64 ", %" PRIu64 " L1 entries, %s, "
                "%zu cached L2 tables",
                h->img.version, h->img.cluster_size, h->img.size,
                h->img.l1_entries,
                h->img.compression == QCOW2_COMPRESSION_ZSTD
                ? "zstd" : "deflate", h->nr_slots);
  return 0;
}

static int64_t
qcow2dec_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  return h->img.size;
}

static int
qcow2dec_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
qcow2dec_can_extents (nbdkit_next *next, void *handle)
{
  return 1;
}

/* Every connection decodes the same unchanging image. */
static int
qcow2dec_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
qcow2dec_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

/* Copy the L2 entry INDEX of the table at L2_OFFSET into *ENTRY (host
 * byte order), reading the table into the cache if it is not there.
 */
static int
l2_entry (nbdkit_next *next, struct handle *h, uint64_t l2_offset,
          uint64_t index, uint64_t *entry, int *err)
{
  LOCK_FOR_SCOPE (&h->lock);
  struct l2_slot *victim = &h->slots[0];
  h->use_counter++;
  for (size_t i = 0; i < h->nr_slots; i++) {
    struct l2_slot *s = &h->slots[i];
    if (s->offset == l2_offset) {
      NBDKIT_PROBE (qcow2dec_l2_cache, nbdkit_connection_id (),
                    nbdkit_request_cookie (), l2_offset, 1);
      s->last_use = h->use_counter;
      *entry = be64toh (s->table[index]);
      return 0;
    }
    if (s->last_use < victim->last_use)
      victim = s;
  }

  NBDKIT_PROBE (qcow2dec_l2_cache, nbdkit_connection_id (),
                nbdkit_request_cookie (), l2_offset, 0);
  if (victim->table == NULL) {
    victim->table = malloc (h->img.cluster_size);
    if (victim->table == NULL) {
      *err = errno;
      nbdkit_error ("malloc: %m");
      return -1;
    }
  }
  victim->offset = 0;         /* empty until the read succeeded */
  if (read_image (next, victim->table, h->img.cluster_size, l2_offset,
                  "L2 table", err) == -1)
    return -1;
  victim->offset = l2_offset;
  victim->last_use = h->use_counter;
  *entry = be64toh (victim->table[index]);
  return 0;
}

/* Find what guest offset GUEST (any byte in its cluster) is. */
static int
lookup (nbdkit_next *next, struct handle *h, uint64_t guest,
        struct qcow2_cluster *c, int *err)
{
  const struct qcow2_image *img = &h->img;
  uint64_t l1_index = guest >> (img->cluster_bits + img->l2_bits);
  uint64_t l2_index = (guest >> img->cluster_bits) &
    ((UINT64_C (1) << img->l2_bits) - 1);
  uint64_t l2_offset = 0, entry = 0;

  /* The virtual size was checked against the L1 table's size. */
  if (l1_index >= img->l1_entries) {
    *err = EIO;
    nbdkit_error ("guest offset %" PRIu64 " is past the L1 table", guest);
    return -1;
  }
  if (qcow2_l1_entry (img, h->l1[l1_index], &l2_offset) == -1) {
    *err = EIO;
    return -1;
  }
  if (l2_offset != 0 &&
      l2_entry (next, h, l2_offset, l2_index, &entry, err) == -1)
    return -1;
  if (qcow2_l2_entry (img, entry, c) == -1) {
    *err = EIO;
    return -1;
  }
  NBDKIT_PROBE (qcow2dec_lookup, nbdkit_connection_id (),
                nbdkit_request_cookie (), guest & ~(img->cluster_size - 1),
                (int32_t) c->kind, c->host_offset);
  return 0;
}

/* Inflate one compressed cluster: IN (LEN bytes) must give exactly
 * OUT_LEN bytes.
 */
static int
decompress (const struct qcow2_image *img, const void *in, size_t len,
            void *out, size_t out_len, uint64_t host, int *err)
{
  if (img->compression == QCOW2_COMPRESSION_DEFLATE) {
    z_stream strm = { 0 };
    /* Raw deflate, no zlib or gzip header, 4 KiB window. */
    if (inflateInit2 (&strm, -12) != Z_OK) {
      *err = ENOMEM;
      nbdkit_error ("inflateInit2 failed");
      return -1;
    }
    strm.next_in = (unsigned char *) in;
    strm.avail_in = len;
    strm.next_out = out;
    strm.avail_out = out_len;
    int r = inflate (&strm, Z_FINISH);
    bool full = strm.avail_out == 0;
    inflateEnd (&strm);
    /* The compressed data is padded to whole sectors, so the stream
     * may end before the input (Z_STREAM_END) or the output may fill
     * first (Z_BUF_ERROR): both are fine if the cluster is full.
     */
    if ((r == Z_STREAM_END || r == Z_BUF_ERROR || r == Z_OK) && full)
      return 0;
    *err = EIO;
    nbdkit_error ("the compressed cluster at %" PRIu64 " of the image "
                  "does not inflate to a whole cluster (zlib: %s)",
                  host, r == Z_STREAM_END ? "stream too short" : zError (r));
    return -1;
  }

#ifdef HAVE_LIBZSTD
  ZSTD_DCtx *dctx = ZSTD_createDCtx ();
  if (dctx == NULL) {
    *err = ENOMEM;
    nbdkit_error ("ZSTD_createDCtx failed");
    return -1;
  }
  ZSTD_inBuffer zin = { .src = in, .size = len, .pos = 0 };
  ZSTD_outBuffer zout = { .dst = out, .size = out_len, .pos = 0 };
  const char *why = "stream too short";
  /* Each call makes progress or stops: bounded by the input size. */
  while (zout.pos < zout.size) {
    size_t in_before = zin.pos, out_before = zout.pos;
    size_t r = ZSTD_decompressStream (dctx, &zout, &zin);
    if (ZSTD_isError (r)) {
      why = ZSTD_getErrorName (r);
      break;
    }
    if (zin.pos == in_before && zout.pos == out_before)
      break;
  }
  ZSTD_freeDCtx (dctx);
  if (zout.pos == zout.size)
    return 0;
  *err = EIO;
  nbdkit_error ("the compressed cluster at %" PRIu64 " of the image "
                "does not decompress to a whole cluster (zstd: %s)",
                host, why);
  return -1;
#else
  /* qcow2_parse_header refused zstd images in this build. */
  abort ();
#endif
}

/* Read COUNT bytes at WITHIN of the compressed cluster C into BUF. */
static int
read_compressed (nbdkit_next *next, struct handle *h,
                 const struct qcow2_cluster *c, void *buf, uint32_t count,
                 uint32_t within, int *err)
{
  const struct qcow2_image *img = &h->img;
  CLEANUP_FREE unsigned char *in = malloc (c->compressed_len);
  CLEANUP_FREE unsigned char *out = malloc (img->cluster_size);
  if (in == NULL || out == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (read_image (next, in, c->compressed_len, c->host_offset,
                  "compressed cluster", err) == -1)
    return -1;
  if (decompress (img, in, c->compressed_len, out, img->cluster_size,
                  c->host_offset, err) == -1)
    return -1;
  memcpy (buf, out + within, count);
  return 0;
}

static int
qcow2dec_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  const struct qcow2_image *img = &h->img;
  unsigned char *p = buf;

  /* The server checked offset + count against the virtual size. */
  while (count > 0) {
    uint32_t within = offset & (img->cluster_size - 1);
    uint32_t n = MIN ((uint64_t) count, img->cluster_size - within);
    struct qcow2_cluster c;
    if (lookup (next, h, offset, &c, err) == -1)
      return -1;

    switch (c.kind) {
    case QCOW2_UNALLOCATED:
    case QCOW2_ZERO:
      memset (p, 0, n);
      break;
    case QCOW2_NORMAL:
      /* qcow2_l2_entry checked that the whole cluster is in the
       * image.
       */
      if (next->pread (next, p, n, c.host_offset + within, 0, err) == -1)
        return -1;
      break;
    case QCOW2_COMPRESSED:
      if (read_compressed (next, h, &c, p, n, within, err) == -1)
        return -1;
      break;
    }
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

/* Unallocated and zero clusters are holes that read as zeros; stored
 * and compressed clusters are data.
 */
static int
qcow2dec_extents (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags,
                  struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  const struct qcow2_image *img = &h->img;
  uint64_t end = offset + count;
  uint64_t pos = offset & ~(img->cluster_size - 1);

  for (unsigned i = 0; i < EXTENTS_MAX_CLUSTERS && pos < end; i++) {
    struct qcow2_cluster c;
    if (lookup (next, h, pos, &c, err) == -1)
      return -1;
    uint32_t type = 0;
    if (c.kind == QCOW2_UNALLOCATED || c.kind == QCOW2_ZERO)
      type = NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO;
    /* The last cluster may extend past the virtual size. */
    uint64_t len = MIN (img->cluster_size, img->size - pos);
    if (nbdkit_add_extent (extents, pos, len, type) == -1) {
      *err = errno;
      return -1;
    }
    pos += len;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "qcow2dec",
  .longname = "nbdkit qcow2 decoder filter",
  .open = qcow2dec_open,
  .close = qcow2dec_close,
  .prepare = qcow2dec_prepare,
  .get_size = qcow2dec_get_size,
  .can_write = qcow2dec_can_write,
  .can_extents = qcow2dec_can_extents,
  .can_multi_conn = qcow2dec_can_multi_conn,
  .can_cache = qcow2dec_can_cache,
  .pread = qcow2dec_pread,
  .extents = qcow2dec_extents,
};

NBDKIT_REGISTER_FILTER (filter)
