/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Reading an .xz file at random: liblzma's file-info decoder walks the
 * file from its end (stream footers, indexes, stream padding, every
 * stream of a concatenated file) and gives one combined index; a block
 * is then found by uncompressed offset and decoded on its own, from
 * its header to its check.  Every size and offset the file claims is
 * checked against the size of the layer below before it is read, so a
 * corrupt or truncated file fails with an error, never a read past the
 * end.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lzma.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "minmax.h"
#include "xzfile.h"

#if LZMA_VERSION < 50040000
#error "the xz filter needs liblzma >= 5.4 (lzma_file_info_decoder)"
#endif

/* The most we read from below in one call. */
#define CHUNK (1024 * 1024)

struct xzfile {
  lzma_index *idx;              /* read-only after xzfile_open */
  uint64_t file_size;           /* of the compressed file */
  uint64_t max_block;           /* largest uncompressed block */
};

static const char *
lzma_message (lzma_ret r)
{
  switch (r) {
  case LZMA_FORMAT_ERROR: return "not an xz file";
  case LZMA_OPTIONS_ERROR: return "unsupported options in the xz file";
  case LZMA_DATA_ERROR: return "the xz file is corrupt";
  case LZMA_BUF_ERROR: return "the xz file is truncated or corrupt";
  case LZMA_MEM_ERROR: return "out of memory";
  case LZMA_MEMLIMIT_ERROR: return "memory limit reached";
  default: return "internal liblzma error";
  }
}

/* Read [pos, pos+len) of the file below; the caller checked the range. */
static int
read_below (nbdkit_next *next, void *buf, size_t len, uint64_t pos,
            int *err)
{
  char *p = buf;

  while (len > 0) {
    uint32_t n = MIN (len, (size_t) CHUNK);
    if (next->pread (next, p, n, pos, 0, err) == -1)
      return -1;
    p += n;
    pos += n;
    len -= n;
  }
  return 0;
}

struct xzfile *
xzfile_open (nbdkit_next *next)
{
  lzma_stream strm = LZMA_STREAM_INIT;
  lzma_index *idx = NULL;
  lzma_ret r;
  struct xzfile *xz = NULL;
  char *buf = NULL;
  int64_t size;
  uint64_t pos = 0;
  int err;

  size = next->get_size (next);
  if (size == -1)
    return NULL;

  r = lzma_file_info_decoder (&strm, &idx, UINT64_MAX, size);
  if (r != LZMA_OK) {
    nbdkit_error ("lzma_file_info_decoder: %s", lzma_message (r));
    return NULL;
  }
  buf = malloc (CHUNK);
  if (buf == NULL) {
    nbdkit_error ("malloc: %m");
    goto out;
  }

  /* The decoder asks for input at positions of its choosing; it stops
   * with STREAM_END or an error once it has seen the whole file.
   */
  for (;;) {
    lzma_action action = LZMA_RUN;

    if (strm.avail_in == 0) {
      if (pos < (uint64_t) size) {
        size_t n = MIN ((uint64_t) CHUNK, size - pos);
        if (read_below (next, buf, n, pos, &err) == -1)
          goto out;
        strm.next_in = (const uint8_t *) buf;
        strm.avail_in = n;
        pos += n;
      }
      else
        action = LZMA_FINISH;
    }
    r = lzma_code (&strm, action);
    if (r == LZMA_STREAM_END)
      break;
    if (r == LZMA_SEEK_NEEDED) {
      if (strm.seek_pos > (uint64_t) size) {
        nbdkit_error ("%s", lzma_message (LZMA_DATA_ERROR));
        goto out;
      }
      pos = strm.seek_pos;
      strm.avail_in = 0;
      continue;
    }
    if (r != LZMA_OK) {
      nbdkit_error ("%s", lzma_message (r));
      goto out;
    }
    if (action == LZMA_FINISH) {
      nbdkit_error ("%s", lzma_message (LZMA_BUF_ERROR));
      goto out;
    }
  }

  xz = calloc (1, sizeof *xz);
  if (xz == NULL) {
    nbdkit_error ("calloc: %m");
    goto out;
  }
  xz->idx = idx;
  idx = NULL;
  xz->file_size = size;

  lzma_index_iter iter;
  lzma_index_iter_init (&iter, xz->idx);
  while (!lzma_index_iter_next (&iter, LZMA_INDEX_ITER_NONEMPTY_BLOCK))
    xz->max_block = MAX (xz->max_block,
                         (uint64_t) iter.block.uncompressed_size);
  nbdkit_debug ("xz: %" PRIu64 " streams, %" PRIu64 " blocks, "
                "%" PRIu64 " bytes uncompressed, largest block %" PRIu64,
                (uint64_t) lzma_index_stream_count (xz->idx),
                (uint64_t) lzma_index_block_count (xz->idx),
                xzfile_uncompressed_size (xz), xz->max_block);

 out:
  lzma_end (&strm);
  if (idx)
    lzma_index_end (idx, NULL);
  free (buf);
  return xz;
}

void
xzfile_close (struct xzfile *xz)
{
  if (xz) {
    lzma_index_end (xz->idx, NULL);
    free (xz);
  }
}

uint64_t
xzfile_uncompressed_size (const struct xzfile *xz)
{
  return lzma_index_uncompressed_size (xz->idx);
}

uint64_t
xzfile_max_block_size (const struct xzfile *xz)
{
  return xz->max_block;
}

uint64_t
xzfile_block_count (const struct xzfile *xz)
{
  return lzma_index_block_count (xz->idx);
}

/* Decode the block that iter points at into out (usize bytes). */
static int
decode_block (const struct xzfile *xz, nbdkit_next *next,
              const lzma_index_iter *iter, char *out, int *err)
{
  const uint64_t coffset = iter->block.compressed_file_offset;
  const uint64_t csize = iter->block.total_size;
  const uint64_t usize = iter->block.uncompressed_size;
  uint8_t header[LZMA_BLOCK_HEADER_SIZE_MAX];
  lzma_filter filters[LZMA_FILTERS_MAX + 1];
  lzma_block block = { 0 };
  lzma_stream strm = LZMA_STREAM_INIT;
  char *chunk = NULL;
  uint64_t end, pos, left;
  lzma_ret r;
  int ret = -1;

  if (ADD_OVERFLOW (coffset, csize, &end) || end > xz->file_size ||
      csize < 1) {
    nbdkit_error ("block %" PRIu64 " lies outside the file",
                  (uint64_t) iter->block.number_in_file);
    *err = EIO;
    return -1;
  }

  /* The first byte of a block header gives the header's size. */
  if (read_below (next, header, 1, coffset, err) == -1)
    return -1;
  block.version = 1;
  block.header_size = lzma_block_header_size_decode (header[0]);
  block.check = iter->stream.flags ? iter->stream.flags->check : 0;
  block.filters = filters;
  if (header[0] == 0 || block.header_size > csize ||
      iter->stream.flags == NULL) {
    nbdkit_error ("block %" PRIu64 ": bad block header",
                  (uint64_t) iter->block.number_in_file);
    *err = EIO;
    return -1;
  }
  if (read_below (next, header + 1, block.header_size - 1, coffset + 1,
                  err) == -1)
    return -1;
  for (size_t i = 0; i <= LZMA_FILTERS_MAX; i++) {
    filters[i].id = LZMA_VLI_UNKNOWN;
    filters[i].options = NULL;
  }
  r = lzma_block_header_decode (&block, NULL, header);
  /* The index and the header must agree on both sizes. */
  if (r == LZMA_OK)
    r = lzma_block_compressed_size (&block, iter->block.unpadded_size);
  if (r == LZMA_OK && block.uncompressed_size != LZMA_VLI_UNKNOWN &&
      block.uncompressed_size != usize)
    r = LZMA_DATA_ERROR;
  block.uncompressed_size = usize;
  if (r == LZMA_OK)
    r = lzma_block_decoder (&strm, &block);
  /* The decoder holds its own copy of the filter options. */
  lzma_filters_free (filters, NULL);
  if (r != LZMA_OK) {
    nbdkit_error ("block %" PRIu64 ": %s",
                  (uint64_t) iter->block.number_in_file, lzma_message (r));
    *err = EIO;
    goto out;
  }

  chunk = malloc (MIN (csize, (uint64_t) CHUNK));
  if (chunk == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    goto out;
  }
  strm.next_out = (uint8_t *) out;
  strm.avail_out = usize;
  pos = coffset + block.header_size;
  left = csize - block.header_size;
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
    if (r != LZMA_OK || action == LZMA_FINISH) {
      nbdkit_error ("block %" PRIu64 ": %s",
                    (uint64_t) iter->block.number_in_file,
                    lzma_message (r == LZMA_OK ? LZMA_BUF_ERROR : r));
      *err = EIO;
      goto out;
    }
  }
  if (strm.total_out != usize) {
    nbdkit_error ("block %" PRIu64 ": %s",
                  (uint64_t) iter->block.number_in_file,
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
xzfile_read_block (struct xzfile *xz, nbdkit_next *next, uint64_t offset,
                   struct xzblock *blk, int *err)
{
  lzma_index_iter iter;
  uint64_t usize;
  char *data;

  lzma_index_iter_init (&iter, xz->idx);
  if (lzma_index_iter_locate (&iter, offset)) {
    nbdkit_error ("offset %" PRIu64 " is past the end", offset);
    *err = EIO;
    return -1;
  }
  usize = iter.block.uncompressed_size;
  /* Checked against xz-max-block when the file was opened. */
  if (usize == 0 || usize > xz->max_block || usize > SIZE_MAX) {
    nbdkit_error ("block %" PRIu64 ": bad size %" PRIu64,
                  (uint64_t) iter.block.number_in_file, usize);
    *err = EIO;
    return -1;
  }
  data = malloc (usize);
  if (data == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (decode_block (xz, next, &iter, data, err) == -1) {
    free (data);
    return -1;
  }
  blk->number = iter.block.number_in_file;
  blk->start = iter.block.uncompressed_file_offset;
  blk->size = usize;
  blk->data = data;
  return 0;
}
