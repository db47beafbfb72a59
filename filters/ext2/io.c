/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ext2 filter's I/O manager: libext2fs asks for blocks of the
 * filesystem image, and this file turns each request into reads,
 * writes and flushes of the layer below.  The channel learns which
 * layer from its name ("nbdkit:" and the next pointer), the one way
 * ext2fs_open passes anything to an I/O manager.  Every request is
 * checked against the size of the image first, so a corrupt superblock
 * that points past the end gives a short read, not a request the layer
 * below would refuse.  Calls come only from ext2.c, under the filter's
 * thread model (one connection and one request at a time).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "io.h"
#include "minmax.h"

/* The most bytes passed down in one call. */
#define MAX_REQUEST (32 * 1024 * 1024)

struct channel_data {
  nbdkit_next *next;
  struct struct_io_stats stats;
};

char *
ext2_io_name (nbdkit_next *next)
{
  char *name;

  if (asprintf (&name, "nbdkit:%p", (void *) next) == -1)
    return NULL;
  return name;
}

static errcode_t
io_open (const char *name, int flags, io_channel *channel)
{
  struct channel_data *data = NULL;
  io_channel io = NULL;
  void *p;
  errcode_t err;

  if (name == NULL || sscanf (name, "nbdkit:%p", &p) != 1 || p == NULL)
    return EXT2_ET_BAD_DEVICE_NAME;

  err = ext2fs_get_memzero (sizeof *io, &io);
  if (err == 0)
    err = ext2fs_get_memzero (sizeof *data, &data);
  if (err == 0)
    err = ext2fs_get_mem (strlen (name) + 1, &io->name);
  if (err != 0) {
    if (io)
      ext2fs_free_mem (&io->name);
    ext2fs_free_mem (&io);
    ext2fs_free_mem (&data);
    return err;
  }
  strcpy (io->name, name);
  data->next = p;
  data->stats.num_fields = 2;
  io->magic = EXT2_ET_MAGIC_IO_CHANNEL;
  io->manager = ext2_nbdkit_io_manager;
  io->block_size = 1024;
  io->refcount = 1;
  io->private_data = data;
  *channel = io;
  return 0;
}

static errcode_t
io_close (io_channel io)
{
  if (--io->refcount > 0)
    return 0;
  ext2fs_free_mem (&io->private_data);
  ext2fs_free_mem (&io->name);
  ext2fs_free_mem (&io);
  return 0;
}

static errcode_t
io_set_blksize (io_channel io, int blksize)
{
  if (blksize <= 0)
    return EXT2_ET_INVALID_ARGUMENT;
  io->block_size = blksize;
  return 0;
}

/* Whether [offset, offset+len) lies inside the image. */
static errcode_t
in_image (io_channel io, uint64_t offset, uint64_t len, errcode_t short_err)
{
  struct channel_data *data = io->private_data;
  int64_t size = data->next->get_size (data->next);
  uint64_t end;

  if (size == -1)
    return EIO;
  if (ADD_OVERFLOW (offset, len, &end) || end > (uint64_t) size)
    return short_err;
  return 0;
}

/* The bytes that COUNT blocks (or -COUNT bytes) from BLOCK cover. */
static errcode_t
blocks (io_channel io, unsigned long long block, int count,
        uint64_t *offset, uint64_t *len, errcode_t short_err)
{
  if (count < 0)
    *len = - (int64_t) count;
  else if (MUL_OVERFLOW ((uint64_t) count, (uint64_t) io->block_size, len))
    return short_err;
  if (MUL_OVERFLOW ((uint64_t) block, (uint64_t) io->block_size, offset))
    return short_err;
  return in_image (io, *offset, *len, short_err);
}

static errcode_t
io_pread (io_channel io, uint64_t offset, uint64_t len, void *buf)
{
  struct channel_data *data = io->private_data;
  char *p = buf;
  int err;

  while (len > 0) {
    uint32_t n = MIN (len, (uint64_t) MAX_REQUEST);
    if (data->next->pread (data->next, p, n, offset, 0, &err) == -1)
      return err ? err : EIO;
    data->stats.bytes_read += n;
    p += n;
    offset += n;
    len -= n;
  }
  return 0;
}

static errcode_t
io_pwrite (io_channel io, uint64_t offset, uint64_t len, const void *buf)
{
  struct channel_data *data = io->private_data;
  const char *p = buf;
  int err;

  while (len > 0) {
    uint32_t n = MIN (len, (uint64_t) MAX_REQUEST);
    if (data->next->pwrite (data->next, p, n, offset, 0, &err) == -1)
      return err ? err : EIO;
    data->stats.bytes_written += n;
    p += n;
    offset += n;
    len -= n;
  }
  return 0;
}

static errcode_t
io_read_blk64 (io_channel io, unsigned long long block, int count,
               void *buf)
{
  uint64_t offset, len;
  errcode_t err = blocks (io, block, count, &offset, &len,
                          EXT2_ET_SHORT_READ);

  return err ? err : io_pread (io, offset, len, buf);
}

static errcode_t
io_read_blk (io_channel io, unsigned long block, int count, void *buf)
{
  return io_read_blk64 (io, block, count, buf);
}

static errcode_t
io_write_blk64 (io_channel io, unsigned long long block, int count,
                const void *buf)
{
  uint64_t offset, len;
  errcode_t err = blocks (io, block, count, &offset, &len,
                          EXT2_ET_SHORT_WRITE);

  return err ? err : io_pwrite (io, offset, len, buf);
}

static errcode_t
io_write_blk (io_channel io, unsigned long block, int count,
              const void *buf)
{
  return io_write_blk64 (io, block, count, buf);
}

/* Bytes at a byte offset (the superblock, written by itself). */
static errcode_t
io_write_byte (io_channel io, unsigned long offset, int count,
               const void *buf)
{
  errcode_t err;

  if (count < 0)
    return EXT2_ET_INVALID_ARGUMENT;
  err = in_image (io, offset, count, EXT2_ET_SHORT_WRITE);
  return err ? err : io_pwrite (io, offset, count, buf);
}

static errcode_t
io_flush (io_channel io)
{
  struct channel_data *data = io->private_data;
  int err, r;

  r = data->next->can_flush (data->next);
  if (r == -1)
    return EIO;
  if (r == 0)
    return 0;
  if (data->next->flush (data->next, 0, &err) == -1)
    return err ? err : EIO;
  return 0;
}

static errcode_t
io_set_option (io_channel io, const char *option, const char *arg)
{
  return EXT2_ET_INVALID_ARGUMENT;
}

static errcode_t
io_get_stats (io_channel io, io_stats *stats)
{
  struct channel_data *data = io->private_data;

  if (stats)
    *stats = &data->stats;
  return 0;
}

/* Zeroing and discarding are left to libext2fs, which falls back to
 * writing zeroes where it must.
 */
static errcode_t
io_discard (io_channel io, unsigned long long block,
            unsigned long long count)
{
  return EXT2_ET_UNIMPLEMENTED;
}

static errcode_t
io_zeroout (io_channel io, unsigned long long block,
            unsigned long long count)
{
  return EXT2_ET_UNIMPLEMENTED;
}

static struct struct_io_manager manager = {
  .magic = EXT2_ET_MAGIC_IO_MANAGER,
  .name = "nbdkit ext2 filter I/O manager",
  .open = io_open,
  .close = io_close,
  .set_blksize = io_set_blksize,
  .read_blk = io_read_blk,
  .write_blk = io_write_blk,
  .flush = io_flush,
  .write_byte = io_write_byte,
  .set_option = io_set_option,
  .get_stats = io_get_stats,
  .read_blk64 = io_read_blk64,
  .write_blk64 = io_write_blk64,
  .discard = io_discard,
  .zeroout = io_zeroout,
};

io_manager ext2_nbdkit_io_manager = &manager;
