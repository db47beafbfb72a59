/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The partitioning plugin: files that each hold one partition, served as
 * one disk with a virtual MBR or GPT partition table in front.
 *
 * This file owns the parameters (each file= takes the alignment, MBR
 * type and GPT type in force where it appears), opens the files at
 * config time, and serves requests through the region list that
 * partition-table.c builds in get_ready: reads and writes of a file's
 * region go to the file with pread/pwrite (no lock: requests run in
 * parallel); the table regions read as the table and accept only
 * writes of the bytes already there; padding reads as zeroes and
 * accepts only zeroes.  Anything else fails with EIO.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "full-rw.h"
#include "include/checked-overflow.h"
#include "include/ispowerof2.h"
#include "include/iszero.h"
#include "include/minmax.h"
#include "partitioning.h"
#include "answers.h"

#define DEFAULT_MBR_ID 0x83
/* 0FC63DAF-8483-4772-8E79-3D69D8477DE4, a Linux file system. */
#define DEFAULT_TYPE_GUID "0FC63DAF-8483-4772-8E79-3D69D8477DE4"

file_vector files = empty_vector;
enum parttype parttype = PARTTYPE_UNSET;

/* The settings for the files named after them. */
static uint64_t alignment = MAX_ALIGNMENT;
static uint8_t mbr_id = DEFAULT_MBR_ID;
static uint8_t type_guid[16];

static void
partitioning_load (void)
{
  pt_parse_guid (DEFAULT_TYPE_GUID, type_guid);
}

static void
partitioning_unload (void)
{
  pt_free_layout ();
  for (size_t i = 0; i < files.len; ++i) {
    if (files.ptr[i].fd >= 0)
      close (files.ptr[i].fd);
    free (files.ptr[i].filename);
  }
  file_vector_reset (&files);
}

/* A random unique partition GUID, in RFC 4122 version 4 form. */
static int
random_guid (uint8_t guid[16])
{
  if (getrandom (guid, 16, 0) != 16) {
    nbdkit_error ("getrandom: %m");
    return -1;
  }
  guid[7] = (guid[7] & 0x0f) | 0x40;    /* on-disk byte 7: version */
  guid[8] = (guid[8] & 0x3f) | 0x80;    /* variant */
  return 0;
}

static int
add_file (const char *filename)
{
  struct file f = { .fd = -1, .alignment = alignment, .mbr_id = mbr_id };
  struct stat st;

  memcpy (f.type_guid, type_guid, 16);
  if (random_guid (f.guid) == -1)
    return -1;

  f.fd = open (filename, O_RDWR | O_CLOEXEC);
  if (f.fd == -1 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    f.fd = open (filename, O_RDONLY | O_CLOEXEC);
    f.readonly = true;
  }
  if (f.fd == -1) {
    nbdkit_error ("file: %s: %m", filename);
    return -1;
  }
  if (fstat (f.fd, &st) == -1) {
    nbdkit_error ("file: stat: %s: %m", filename);
    goto err;
  }
  if (S_ISBLK (st.st_mode)) {
    off_t end = lseek (f.fd, 0, SEEK_END);

    if (end == -1) {
      nbdkit_error ("file: %s: lseek: %m", filename);
      goto err;
    }
    f.size = end;
  }
  else if (S_ISREG (st.st_mode))
    f.size = st.st_size;
  else {
    nbdkit_error ("file: %s: not a regular file or block device", filename);
    goto err;
  }
  if (f.size == 0) {
    nbdkit_error ("file: %s: zero length partitions are not allowed",
                  filename);
    goto err;
  }
  f.filename = strdup (filename);
  if (f.filename == NULL || file_vector_append (&files, f) == -1) {
    nbdkit_error ("file: %m");
    free (f.filename);
    goto err;
  }
  return 0;

 err:
  close (f.fd);
  return -1;
}

static int
partitioning_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0)
    return add_file (value);

  if (strcmp (key, "partition-type") == 0) {
    if (strcasecmp (value, "mbr") == 0 || strcasecmp (value, "dos") == 0)
      parttype = PARTTYPE_MBR;
    else if (strcasecmp (value, "gpt") == 0)
      parttype = PARTTYPE_GPT;
    else {
      nbdkit_error ("partition-type: expected mbr or gpt, not '%s'", value);
      return -1;
    }
    return 0;
  }

  if (strcmp (key, "alignment") == 0) {
    int64_t r = nbdkit_parse_size (value);

    if (r == -1)
      return -1;
    if (r < SECTOR_SIZE || r > MAX_ALIGNMENT || !is_power_of_2 (r)) {
      nbdkit_error ("alignment: %" PRIi64 " must be a power of 2 from %d "
                    "(a sector) to %d", r, SECTOR_SIZE, MAX_ALIGNMENT);
      return -1;
    }
    alignment = r;
    return 0;
  }

  if (strcmp (key, "mbr-id") == 0) {
    if (strcasecmp (value, "default") == 0) {
      mbr_id = DEFAULT_MBR_ID;
      return 0;
    }
    return nbdkit_parse_uint8_t ("mbr-id", value, &mbr_id);
  }

  if (strcmp (key, "type-guid") == 0) {
    if (strcasecmp (value, "default") == 0)
      value = DEFAULT_TYPE_GUID;
    if (pt_parse_guid (value, type_guid) == -1) {
      nbdkit_error ("type-guid: not a GUID: '%s'", value);
      return -1;
    }
    return 0;
  }

  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
partitioning_config_complete (void)
{
  uint64_t total = 0;

  if (files.len == 0) {
    nbdkit_error ("file: at least one file must be given");
    return -1;
  }
  for (size_t i = 0; i < files.len; ++i) {
    if (ADD_OVERFLOW (total, files.ptr[i].size, &total)) {
      nbdkit_error ("file: the files add up to more than 2^64 bytes");
      return -1;
    }
  }

  if (parttype == PARTTYPE_UNSET)
    parttype = files.len > 4 || total > MAX_MBR_DISK_SIZE
      ? PARTTYPE_GPT : PARTTYPE_MBR;
  if (parttype == PARTTYPE_MBR && total > MAX_MBR_DISK_SIZE) {
    nbdkit_error ("partition-type: an MBR disk holds at most %" PRIu64
                  " bytes of partitions, the files add up to %" PRIu64
                  ": try partition-type=gpt",
                  (uint64_t) MAX_MBR_DISK_SIZE, total);
    return -1;
  }
  return 0;
}

#define partitioning_config_help \
  "[file=]FILENAME           A file holding one partition (repeat).\n" \
  "partition-type=mbr|gpt    The partition table (default: by size).\n" \
  "alignment=N               Alignment of the following partitions (1M).\n" \
  "mbr-id=0xN|default        MBR type of the following partitions.\n" \
  "type-guid=GUID|default    GPT type of the following partitions."

static int
partitioning_get_ready (void)
{
  if (pt_create_layout () == -1)
    return -1;
  if (regions_size (&layout) > INT64_MAX) {
    nbdkit_error ("file: the disk would be larger than 2^63-1 bytes");
    return -1;
  }
  return 0;
}

static int64_t
partitioning_get_size (void *handle)
{
  return regions_size (&layout);
}

static int
partitioning_can_write (void *handle)
{
  for (size_t i = 0; i < files.len; ++i)
    if (files.ptr[i].readonly)
      return 0;
  return 1;
}

enum op { OP_READ, OP_WRITE };

/* Serve [OFFSET, OFFSET+COUNT) region by region. */
static int
do_regions (enum op op, uint8_t *buf, uint32_t count, uint64_t offset)
{
  while (count > 0) {
    const struct region *r = regions_find (&layout, offset);
    uint64_t roffs;
    uint32_t n;

    if (r == NULL) {
      nbdkit_error ("partitioning: offset %" PRIu64 " is past the end",
                    offset);
      errno = EIO;
      return -1;
    }
    roffs = offset - r->start;
    n = MIN ((uint64_t) count, r->len - roffs);

    switch (r->type) {
    case REGION_FILE: {
      const struct file *f = &files.ptr[r->index];
      ssize_t got;

      if (op == OP_READ) {
        got = full_pread (f->fd, buf, n, roffs);
        if (got >= 0 && got < n) {
          nbdkit_error ("pread: %s: the file shrank", f->filename);
          errno = EIO;
          return -1;
        }
      }
      else
        got = full_pwrite (f->fd, buf, n, roffs);
      if (got == -1) {
        nbdkit_error ("%s: %s: %m", op == OP_READ ? "pread" : "pwrite",
                      f->filename);
        return -1;
      }
      break;
    }
    case REGION_DATA:
      if (op == OP_READ)
        memcpy (buf, (const uint8_t *) r->data + roffs, n);
      else if (memcmp (buf, (const uint8_t *) r->data + roffs, n) != 0) {
        nbdkit_error ("partitioning: the partition table at offset %"
                      PRIu64 " cannot be changed", offset);
        errno = EIO;
        return -1;
      }
      break;
    case REGION_ZERO:
      if (op == OP_READ)
        memset (buf, 0, n);
      else if (!is_zero (buf, n)) {
        nbdkit_error ("partitioning: only zeroes may be written to the "
                      "padding at offset %" PRIu64, offset);
        errno = EIO;
        return -1;
      }
      break;
    default:
      abort ();
    }
    buf += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
partitioning_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
  return do_regions (OP_READ, buf, count, offset);
}

static int
partitioning_pwrite (void *handle, const void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags)
{
  return do_regions (OP_WRITE, (uint8_t *) buf, count, offset);
}

static int
partitioning_flush (void *handle, uint32_t flags)
{
  for (size_t i = 0; i < files.len; ++i) {
    if (!files.ptr[i].readonly && fdatasync (files.ptr[i].fd) == -1) {
      nbdkit_error ("fdatasync: %s: %m", files.ptr[i].filename);
      return -1;
    }
  }
  return 0;
}

static int
partitioning_cache (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "partitioning",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit partitioning plugin",
  .description       = "Partitions in files served as one partitioned disk",
  .load              = partitioning_load,
  .unload            = partitioning_unload,
  .config            = partitioning_config,
  .config_complete   = partitioning_config_complete,
  .config_help       = partitioning_config_help,
  .magic_config_key  = "file",
  .get_ready         = partitioning_get_ready,
  .open              = answer_no_handle,
  .get_size          = partitioning_get_size,
  .can_write         = partitioning_can_write,
  .can_flush         = answer_yes,
  .can_multi_conn    = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = partitioning_pread,
  .pwrite            = partitioning_pwrite,
  .flush             = partitioning_flush,
  .cache             = partitioning_cache,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
