/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Making, saving and reading the seek-point index of a gzip file.
 *
 * Making it is one pass of zlib's inflate over the whole file with
 * Z_BLOCK, which stops at each deflate block boundary: there, once
 * SPAN bytes have come out since the last point, a point is recorded
 * with the 32 KiB of output before it, which is all that inflating
 * from that spot needs.  The output goes to a circular 32 KiB buffer
 * and nowhere else, so the pass holds no more than that in memory.
 *
 * The index file (little-endian throughout):
 *   header, HEADER_SIZE bytes:
 *     0  "NBDKIGZ1"
 *     8  compressed size      16 uncompressed size
 *     24 span                 32 number of points
 *     40 fingerprint: CRC32 of the gzip file's first and last
 *        FINGERPRINT_LEN bytes (u32)
 *     44 CRC32 of all the point records (u32)
 *     48 CRC32 of bytes 0..47 (u32), then zeroes to HEADER_SIZE
 *   then one RECORD_SIZE record per point:
 *     0 uncompressed offset (u64)   8 compressed offset (u64)
 *     16 bits (i32)   20 zero (u32)   24 the window (GZINDEX_WINDOW)
 * Every field is checked when the file is read back, so a damaged,
 * truncated or foreign index file is refused, not trusted.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "full-rw.h"
#include "minmax.h"
#include "vector.h"
#include "gzindex.h"

#define MAGIC "NBDKIGZ1"
#define HEADER_SIZE 64
#define RECORD_HEAD 24
#define RECORD_SIZE (RECORD_HEAD + GZINDEX_WINDOW)
#define FINGERPRINT_LEN 65536
#define IN_CHUNK (256 * 1024)

DEFINE_VECTOR_TYPE (point_list, struct gzpoint);

/* The index file's fields are little-endian. */
static void
put64 (unsigned char *p, uint64_t v)
{
  v = htole64 (v);
  memcpy (p, &v, sizeof v);
}

static void
put32 (unsigned char *p, uint32_t v)
{
  v = htole32 (v);
  memcpy (p, &v, sizeof v);
}

static uint64_t
get64 (const unsigned char *p)
{
  uint64_t v;
  memcpy (&v, p, sizeof v);
  return le64toh (v);
}

static uint32_t
get32 (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, sizeof v);
  return le32toh (v);
}

static int
read_below (nbdkit_next *next, void *buf, uint32_t len, uint64_t pos)
{
  int err;
  if (next->pread (next, buf, len, pos, 0, &err) == -1) {
    errno = err;
    nbdkit_error ("reading the compressed data at %" PRIu64 ": %m", pos);
    return -1;
  }
  return 0;
}

/* CRC32 of the first and the last FINGERPRINT_LEN bytes below: cheap
 * to compute, and any usual change to the file (another file, or the
 * same name recompressed) changes it or the size.
 */
static int
fingerprint (nbdkit_next *next, uint64_t size, uint32_t *fp)
{
  CLEANUP_FREE unsigned char *buf = malloc (FINGERPRINT_LEN);
  if (buf == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  uint32_t n = MIN (size, (uint64_t) FINGERPRINT_LEN);
  uLong crc = crc32 (0, Z_NULL, 0);
  if (read_below (next, buf, n, 0) == -1)
    return -1;
  crc = crc32 (crc, buf, n);
  if (read_below (next, buf, n, size - n) == -1)
    return -1;
  crc = crc32 (crc, buf, n);
  *fp = crc;
  return 0;
}

static void
make_header (unsigned char *h, const struct gzindex *index, uint32_t fp,
             uint32_t points_crc)
{
  memset (h, 0, HEADER_SIZE);
  memcpy (h, MAGIC, 8);
  put64 (h + 8, index->compressed_size);
  put64 (h + 16, index->size);
  put64 (h + 24, index->span);
  put64 (h + 32, index->npoints);
  put32 (h + 40, fp);
  put32 (h + 44, points_crc);
  put32 (h + 48, crc32 (crc32 (0, Z_NULL, 0), h, 48));
}

/* The compressed input of the first pass: a buffer over the layer
 * below, refilled on demand, keeping unconsumed bytes.
 */
struct input {
  nbdkit_next *next;
  uint64_t size, offset;
  unsigned char *buf;
};

/* Keep the AVAIL bytes at *PTR, read more after them.  Returns the
 * bytes now in the buffer, or -1.
 */
static int64_t
refill (struct input *in, const unsigned char *ptr, uInt avail)
{
  memmove (in->buf, ptr, avail);
  uint32_t n = MIN ((uint64_t) IN_CHUNK - avail, in->size - in->offset);
  if (n > 0 && read_below (in->next, in->buf + avail, n, in->offset) == -1)
    return -1;
  in->offset += n;
  return avail + n;
}

int
gzindex_build (nbdkit_next *next, const char *path, uint64_t span,
               struct gzindex *index)
{
  int64_t r = next->get_size (next);
  if (r == -1)
    return -1;
  struct input in = { .next = next, .size = r };
  uint32_t fp;
  if (in.size == 0) {
    nbdkit_error ("the compressed data ends before the end of the gzip "
                  "stream (empty file)");
    return -1;
  }
  if (fingerprint (next, in.size, &fp) == -1)
    return -1;

  CLEANUP_FREE char *tmp = NULL;
  if (asprintf (&tmp, "%s.tmp", path) == -1) {
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  CLEANUP_FREE unsigned char *inbuf = malloc (IN_CHUNK);
  CLEANUP_FREE unsigned char *window = malloc (GZINDEX_WINDOW);
  CLEANUP_FREE unsigned char *record = malloc (RECORD_SIZE);
  if (inbuf == NULL || window == NULL || record == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  in.buf = inbuf;

  int fd = open (tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1) {
    nbdkit_error ("gzip-index-path: cannot create %s: %m", tmp);
    return -1;
  }

  point_list points = empty_vector;
  z_stream z = { 0 };
  bool zopen = false;
  uLong points_crc = crc32 (0, Z_NULL, 0);
  int ret = -1;

  /* 16 + MAX_WBITS: gzip headers and trailers, checked. */
  if (inflateInit2 (&z, 16 + MAX_WBITS) != Z_OK) {
    nbdkit_error ("inflateInit2: %s", z.msg ? z.msg : "out of memory");
    goto out;
  }
  zopen = true;

  uint64_t totin = 0, totout = 0, last = 0;
  bool in_member = true;
  unsigned stuck = 0;
  /* Record i goes at HEADER_SIZE + i * RECORD_SIZE. */
  memset (window, 0, GZINDEX_WINDOW);
  z.next_in = in.buf;
  z.avail_in = 0;
  z.next_out = window;
  z.avail_out = GZINDEX_WINDOW;

  for (;;) {
    bool add_point = points.len == 0;
    int zr = Z_OK;

    if (!add_point) {
      if (!in_member) {
        /* Between members: another one, or the end. */
        if (z.avail_in < 2) {
          int64_t n = refill (&in, z.next_in, z.avail_in);
          if (n == -1)
            goto out;
          z.next_in = in.buf;
          z.avail_in = n;
        }
        if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) {
          nbdkit_debug ("ignoring %" PRIu64 " bytes after the last "
                        "gzip member", in.size - totin);
          break;
        }
        if (inflateReset (&z) != Z_OK) {
          nbdkit_error ("inflateReset failed");
          goto out;
        }
        in_member = true;
      }
      if (z.avail_in == 0) {
        int64_t n = refill (&in, z.next_in, 0);
        if (n == -1)
          goto out;
        z.next_in = in.buf;
        z.avail_in = n;
        if (n == 0) {
          nbdkit_error ("the compressed data ends before the end of the "
                        "gzip stream (truncated file?)");
          goto out;
        }
      }
      if (z.avail_out == 0) {
        z.next_out = window;
        z.avail_out = GZINDEX_WINDOW;
      }
      uInt in_before = z.avail_in, out_before = z.avail_out;
      zr = inflate (&z, Z_BLOCK);
      totin += in_before - z.avail_in;
      if (ADD_OVERFLOW (totout, (uint64_t) (out_before - z.avail_out),
                        &totout) || totout > INT64_MAX) {
        nbdkit_error ("the uncompressed data is too large");
        goto out;
      }
      if (zr == Z_NEED_DICT || zr == Z_DATA_ERROR || zr == Z_MEM_ERROR ||
          zr == Z_STREAM_ERROR) {
        nbdkit_error ("the compressed data is not valid gzip (at "
                      "compressed byte %" PRIu64 "): %s", totin,
                      z.msg ? z.msg : zError (zr));
        goto out;
      }
      if (zr == Z_STREAM_END) {
        in_member = false;
        continue;
      }
      /* inflate with input and room for output always moves; a few
       * calls in a row that do not would loop for ever.
       */
      if (in_before == z.avail_in && out_before == z.avail_out) {
        if (++stuck > 3) {
          nbdkit_error ("inflate made no progress at compressed byte %"
                        PRIu64, totin);
          goto out;
        }
      }
      else
        stuck = 0;
      /* At a block boundary that is not the end of the member, and a
       * span after the last point: a new point.
       */
      add_point = (z.data_type & 128) && !(z.data_type & 64) &&
        totout - last >= span;
    }
    if (!add_point)
      continue;

    struct gzpoint p = {
      .out = totout, .in = totin,
      .bits = points.len == 0 ? -1 : (z.data_type & 7),
      .window_at = HEADER_SIZE + (uint64_t) points.len * RECORD_SIZE
                   + RECORD_HEAD,
    };
    /* The window: the circular buffer unrolled, oldest byte first. */
    size_t left = z.avail_out;
    memset (record, 0, RECORD_HEAD);
    put64 (record, p.out);
    put64 (record + 8, p.in);
    put32 (record + 16, (uint32_t) p.bits);
    memcpy (record + RECORD_HEAD, window + GZINDEX_WINDOW - left, left);
    memcpy (record + RECORD_HEAD + left, window, GZINDEX_WINDOW - left);
    if (full_pwrite (fd, record, RECORD_SIZE,
                     p.window_at - RECORD_HEAD) == -1) {
      nbdkit_error ("gzip-index-path: writing %s: %m", tmp);
      goto out;
    }
    points_crc = crc32 (points_crc, record, RECORD_SIZE);
    if (point_list_append (&points, p) == -1) {
      nbdkit_error ("realloc: %m");
      goto out;
    }
    last = totout;
  }

  index->fd = fd;
  index->compressed_size = in.size;
  index->size = totout;
  index->span = span;
  index->npoints = points.len;
  unsigned char header[HEADER_SIZE];
  make_header (header, index, fp, points_crc);
  if (full_pwrite (fd, header, HEADER_SIZE, 0) == -1 ||
      fsync (fd) == -1) {
    nbdkit_error ("gzip-index-path: writing %s: %m", tmp);
    goto out;
  }
  if (rename (tmp, path) == -1) {
    nbdkit_error ("gzip-index-path: rename %s to %s: %m", tmp, path);
    goto out;
  }
  index->points = points.ptr;
  points = (point_list) empty_vector;
  ret = 0;

 out:
  if (zopen)
    inflateEnd (&z);
  point_list_reset (&points);
  if (ret == -1) {
    close (fd);
    unlink (tmp);
    index->fd = -1;
  }
  return ret;
}

int
gzindex_load (nbdkit_next *next, const char *path, struct gzindex *index)
{
  int64_t r = next->get_size (next);
  if (r == -1)
    return -1;
  uint64_t csize = r;

  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("gzip-index-path: %s: %m", path);
    return -1;
  }
  point_list points = empty_vector;
  CLEANUP_FREE unsigned char *record = malloc (RECORD_SIZE);
  unsigned char h[HEADER_SIZE];
  struct stat st;
  int ret = -1;
  uint64_t npoints, total;
  uint32_t fp;

  if (record == NULL) {
    nbdkit_error ("malloc: %m");
    goto out;
  }
  if (fstat (fd, &st) == -1) {
    nbdkit_error ("gzip-index-path: fstat: %s: %m", path);
    goto out;
  }
  ssize_t n = full_pread (fd, h, HEADER_SIZE, 0);
  if (n == -1) {
    nbdkit_error ("gzip-index-path: reading %s: %m", path);
    goto out;
  }
  if (n < HEADER_SIZE || memcmp (h, MAGIC, 8) != 0) {
    nbdkit_error ("gzip-index-path: %s is not an index file of this "
                  "filter (delete it to make a new one)", path);
    goto out;
  }
  if (get32 (h + 48) != crc32 (crc32 (0, Z_NULL, 0), h, 48)) {
    nbdkit_error ("gzip-index-path: %s: the header is corrupt (delete "
                  "the file to make a new index)", path);
    goto out;
  }
  npoints = get64 (h + 32);
  if (MUL_OVERFLOW (npoints, (uint64_t) RECORD_SIZE, &total) ||
      ADD_OVERFLOW (total, (uint64_t) HEADER_SIZE, &total) ||
      total != (uint64_t) st.st_size || npoints == 0 ||
      npoints > SIZE_MAX / sizeof (struct gzpoint)) {
    nbdkit_error ("gzip-index-path: %s is truncated or corrupt (%" PRIu64
                  " points, %jd bytes; delete it to make a new index)",
                  path, npoints, (intmax_t) st.st_size);
    goto out;
  }
  if (fingerprint (next, csize, &fp) == -1)
    goto out;
  if (get64 (h + 8) != csize || get32 (h + 40) != fp) {
    nbdkit_error ("gzip-index-path: %s was made for another gzip file, "
                  "or the file has changed since (delete the index to "
                  "make a new one)", path);
    goto out;
  }
  index->compressed_size = csize;
  index->size = get64 (h + 16);
  index->span = get64 (h + 24);
  if (index->size > INT64_MAX || index->span == 0) {
    nbdkit_error ("gzip-index-path: %s: bad sizes in the header", path);
    goto out;
  }

  uLong crc = crc32 (0, Z_NULL, 0);
  for (uint64_t i = 0; i < npoints; i++) {
    uint64_t at = HEADER_SIZE + i * RECORD_SIZE;
    if (full_pread (fd, record, RECORD_SIZE, at) != RECORD_SIZE) {
      nbdkit_error ("gzip-index-path: reading %s: %m", path);
      goto out;
    }
    crc = crc32 (crc, record, RECORD_SIZE);
    struct gzpoint p = {
      .out = get64 (record), .in = get64 (record + 8),
      .bits = (int32_t) get32 (record + 16),
      .window_at = at + RECORD_HEAD,
    };
    const struct gzpoint *prev = i > 0 ? &points.ptr[i - 1] : NULL;
    bool ok = prev == NULL
      ? p.out == 0 && p.in == 0 && p.bits == -1
      : p.bits >= 0 && p.bits <= 7 && p.out > prev->out &&
        p.in >= prev->in && p.in <= csize && p.out <= index->size &&
        (p.bits == 0 || p.in >= 1);
    if (!ok) {
      nbdkit_error ("gzip-index-path: %s: point %" PRIu64 " is corrupt "
                    "(delete the file to make a new index)", path, i);
      goto out;
    }
    if (point_list_append (&points, p) == -1) {
      nbdkit_error ("realloc: %m");
      goto out;
    }
  }
  if (crc != get32 (h + 44)) {
    nbdkit_error ("gzip-index-path: %s: the points are corrupt (delete "
                  "the file to make a new index)", path);
    goto out;
  }

  index->fd = fd;
  index->npoints = points.len;
  index->points = points.ptr;
  points = (point_list) empty_vector;
  ret = 0;
 out:
  point_list_reset (&points);
  if (ret == -1)
    close (fd);
  return ret;
}

void
gzindex_free (struct gzindex *index)
{
  if (index->fd >= 0)
    close (index->fd);
  free (index->points);
  index->points = NULL;
  index->fd = -1;
}

size_t
gzindex_find (const struct gzindex *index, uint64_t offset)
{
  size_t lo = 0, hi = index->npoints;

  /* The first point past OFFSET; points[0].out is 0. */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (index->points[mid].out > offset)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo - 1;
}

int
gzindex_window (const struct gzindex *index, const struct gzpoint *p,
                unsigned char *buf, int *err)
{
  ssize_t n = full_pread (index->fd, buf, GZINDEX_WINDOW, p->window_at);
  if (n != GZINDEX_WINDOW) {
    *err = n == -1 ? errno : EIO;
    nbdkit_error ("reading the index file: %s",
                  n == -1 ? strerror (errno) : "it is shorter than before");
    return -1;
  }
  return 0;
}
