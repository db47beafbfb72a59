/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Reading an .lz file at random.  An lzip file is a sequence of
 * members, each a 6-byte header ("LZIP", version 1, dictionary size),
 * an LZMA stream and a 20-byte trailer (CRC32 of the data, data size,
 * member size, little-endian).  The member size in the last trailer
 * says where the last member starts, whose header is checked, and so
 * on back to the start of the file: that walk gives the member index
 * without decompressing anything.  A member is then decoded on its own
 * by liblzma's lzip decoder, which checks its CRC32 and both sizes.
 * Every size the file claims is checked against the file before use,
 * so a corrupt or truncated file fails with an error, never a read
 * past the end.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lzma.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "minmax.h"
#include "vector.h"
#include "lzipfile.h"

#define HEADER_SIZE 6
#define TRAILER_SIZE 20
/* The smallest member lzip writes (an empty one) is 36 bytes; nothing
 * shorter than a header, a trailer and the LZMA end marker's 5 bytes
 * can be valid.
 */
#define MIN_MEMBER (HEADER_SIZE + 5 + TRAILER_SIZE)

/* The most we read from below in one call. */
#define CHUNK (1024 * 1024)

struct member {
  uint64_t number;              /* 1-based, in file order */
  uint64_t coffset;             /* compressed: header's offset */
  uint64_t csize;               /* compressed: header to trailer */
  uint64_t ustart;              /* uncompressed offset */
  uint64_t usize;               /* uncompressed size, may be 0 */
};
DEFINE_VECTOR_TYPE (member_list, struct member);

struct lzipfile {
  member_list members;          /* in file order */
  uint64_t size;                /* uncompressed */
  uint64_t max_member;          /* largest uncompressed member */
};

/* A little-endian 64-bit field of the trailer. */
static uint64_t
le64 (const unsigned char *p)
{
  uint64_t v;
  memcpy (&v, p, sizeof v);
  return le64toh (v);
}

static bool
is_header (const unsigned char *h)
{
  return memcmp (h, "LZIP", 4) == 0 && h[4] == 1;
}

/* Read [pos, pos+len) of the file below; the caller checked the range. */
static int
read_below (nbdkit_next *next, void *buf, size_t len, uint64_t pos,
            int *err)
{
  char *p = buf;

  while (len > 0) {
    uint32_t n = MIN (len, (size_t) CHUNK);
    if (next->pread (next, p, n, pos, 0, err) == -1) {
      errno = *err;
      nbdkit_error ("reading the compressed data at %" PRIu64 ": %m",
                    pos);
      return -1;
    }
    p += n;
    pos += n;
    len -= n;
  }
  return 0;
}

struct lzipfile *
lzipfile_open (nbdkit_next *next)
{
  unsigned char buf[TRAILER_SIZE];
  int err;
  int64_t file_size = next->get_size (next);
  if (file_size == -1)
    return NULL;

  if (file_size < HEADER_SIZE) {
    nbdkit_error ("not an lzip file (only %" PRIi64 " bytes)", file_size);
    return NULL;
  }
  if (read_below (next, buf, HEADER_SIZE, 0, &err) == -1)
    return NULL;
  if (!is_header (buf)) {
    nbdkit_error ("not an lzip file (no LZIP version 1 header)");
    return NULL;
  }

  struct lzipfile *lz = calloc (1, sizeof *lz);
  if (lz == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }

  /* Walk the members from the end, collecting them in reverse. */
  uint64_t pos = file_size;
  while (pos > 0) {
    if (pos < MIN_MEMBER) {
      nbdkit_error ("the lzip file is truncated or corrupt (%" PRIu64
                    " bytes before member %zu from the end cannot "
                    "hold a member)", pos, lz->members.len + 1);
      goto err;
    }
    if (read_below (next, buf, TRAILER_SIZE, pos - TRAILER_SIZE,
                    &err) == -1)
      goto err;
    uint64_t usize = le64 (buf + 4);
    uint64_t msize = le64 (buf + 12);
    if (msize < MIN_MEMBER || msize > pos) {
      nbdkit_error ("the lzip file is truncated or corrupt, or has "
                    "trailing data (the trailer ending at %" PRIu64
                    " gives a member size of %" PRIu64 ")", pos, msize);
      goto err;
    }
    unsigned char h[HEADER_SIZE];
    if (read_below (next, h, HEADER_SIZE, pos - msize, &err) == -1)
      goto err;
    if (!is_header (h)) {
      nbdkit_error ("the lzip file is truncated or corrupt, or has "
                    "trailing data (no member header at %" PRIu64
                    ", where the trailer ending at %" PRIu64
                    " says its member starts)", pos - msize, pos);
      goto err;
    }
    pos -= msize;
    struct member m = { .coffset = pos, .csize = msize, .usize = usize };
    if (member_list_append (&lz->members, m) == -1) {
      nbdkit_error ("realloc: %m");
      goto err;
    }
  }

  /* Into file order; number the members and place them.  An empty
   * member (lzip writes one for empty input) keeps its number but
   * covers no byte of the export.
   */
  size_t n = lz->members.len;
  for (size_t i = 0; i < n / 2; i++) {
    struct member t = lz->members.ptr[i];
    lz->members.ptr[i] = lz->members.ptr[n - 1 - i];
    lz->members.ptr[n - 1 - i] = t;
  }
  uint64_t ustart = 0;
  for (size_t i = 0; i < n; i++) {
    struct member *m = &lz->members.ptr[i];
    m->number = i + 1;
    m->ustart = ustart;
    if (ADD_OVERFLOW (ustart, m->usize, &ustart) || ustart > INT64_MAX) {
      nbdkit_error ("the lzip file claims more than 2^63 bytes "
                    "uncompressed (corrupt?)");
      goto err;
    }
    lz->max_member = MAX (lz->max_member, m->usize);
  }
  lz->size = ustart;
  nbdkit_debug ("lzip: %zu members, %" PRIu64 " bytes uncompressed, "
                "largest member %" PRIu64, n, lz->size, lz->max_member);
  return lz;

 err:
  lzipfile_close (lz);
  return NULL;
}

void
lzipfile_close (struct lzipfile *lz)
{
  if (lz) {
    member_list_reset (&lz->members);
    free (lz);
  }
}

uint64_t
lzipfile_uncompressed_size (const struct lzipfile *lz)
{
  return lz->size;
}

uint64_t
lzipfile_max_member_size (const struct lzipfile *lz)
{
  return lz->max_member;
}

/* The member holding uncompressed byte OFFSET: the first whose end is
 * past OFFSET (ends never decrease, so a binary search; empty members
 * end where they start and are passed over).  NULL past the end.
 */
static const struct member *
locate (const struct lzipfile *lz, uint64_t offset)
{
  size_t lo = 0, hi = lz->members.len;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct member *m = &lz->members.ptr[mid];
    if (m->ustart + m->usize > offset)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo < lz->members.len ? &lz->members.ptr[lo] : NULL;
}

static const char *
lzma_message (lzma_ret r)
{
  switch (r) {
  case LZMA_FORMAT_ERROR: return "not an lzip member";
  case LZMA_OPTIONS_ERROR: return "unsupported options in the member";
  case LZMA_DATA_ERROR:
    return "the member is corrupt (bad data, CRC or sizes)";
  case LZMA_BUF_ERROR: return "the member is truncated or corrupt";
  case LZMA_MEM_ERROR: return "out of memory";
  case LZMA_MEMLIMIT_ERROR: return "memory limit reached";
  default: return "internal liblzma error";
  }
}

/* Decode member M into OUT (m->usize bytes). */
static int
decode_member (nbdkit_next *next, const struct member *m, char *out,
               int *err)
{
  lzma_stream strm = LZMA_STREAM_INIT;
  char *chunk = NULL;
  int ret = -1;

  /* Without LZMA_CONCATENATED the decoder stops after one member. */
  lzma_ret r = lzma_lzip_decoder (&strm, UINT64_MAX, 0);
  if (r != LZMA_OK) {
    nbdkit_error ("lzma_lzip_decoder: %s", lzma_message (r));
    *err = ENOMEM;
    return -1;
  }
  chunk = malloc (MIN (m->csize, (uint64_t) CHUNK));
  if (chunk == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    goto out;
  }

  strm.next_out = (uint8_t *) out;
  strm.avail_out = m->usize;
  uint64_t pos = m->coffset, left = m->csize;
  for (;;) {
    lzma_action action = LZMA_RUN;

    if (strm.avail_in == 0) {
      if (left > 0) {
        size_t n = MIN (left, (uint64_t) CHUNK);
        if (read_below (next, chunk, n, pos, err) == -1)
          goto out;
        strm.next_in = (const uint8_t *) chunk;
        strm.avail_in = n;
        pos += n;
        left -= n;
      }
      else
        action = LZMA_FINISH;
    }
    r = lzma_code (&strm, action);
    if (r == LZMA_STREAM_END)
      break;
    /* LZMA_OK with no room left means the data is longer than the
     * trailer says.
     */
    if (r != LZMA_OK || action == LZMA_FINISH ||
        (strm.avail_out == 0 && strm.avail_in > 0)) {
      nbdkit_error ("member %" PRIu64 ": %s", m->number,
                    lzma_message (r == LZMA_OK ? LZMA_DATA_ERROR : r));
      *err = EIO;
      goto out;
    }
  }
  /* The decoder has checked the trailer against what it decoded; the
   * index came from the same trailer, so these agree unless the member
   * ends early.
   */
  if (strm.total_out != m->usize || strm.total_in != m->csize) {
    nbdkit_error ("member %" PRIu64 ": %s", m->number,
                  lzma_message (LZMA_DATA_ERROR));
    *err = EIO;
    goto out;
  }
  ret = 0;

 out:
  lzma_end (&strm);
  free (chunk);
  return ret;
}

int
lzipfile_read_member (struct lzipfile *lz, nbdkit_next *next,
                      uint64_t offset, struct lzipmember *member,
                      uint64_t *compressed, int *err)
{
  const struct member *m = locate (lz, offset);
  if (m == NULL) {
    nbdkit_error ("offset %" PRIu64 " is past the end", offset);
    *err = EIO;
    return -1;
  }
  /* Checked against lzip-max-block when the file was opened. */
  if (m->usize > SIZE_MAX) {
    nbdkit_error ("member %" PRIu64 ": too large", m->number);
    *err = ENOMEM;
    return -1;
  }
  char *data = malloc (m->usize);
  if (data == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (decode_member (next, m, data, err) == -1) {
    free (data);
    return -1;
  }
  member->number = m->number;
  member->start = m->ustart;
  member->size = m->usize;
  member->data = data;
  *compressed = m->csize;
  return 0;
}
