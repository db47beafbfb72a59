/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The partition filter: serve one partition of a disk that carries an
 * MBR (primary and logical partitions) or a GPT partition table, like
 * qemu-nbd -P.  Each connection reads the table when it is prepared
 * (the disk below may differ between exports) and keeps the
 * partition's bounds in its handle; every request is then shifted by
 * the partition's start, as the offset filter does.  The tables are
 * read by partition-mbr.c and partition-gpt.c.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-async.h>

#include "partition.h"
#include "regions.h"

/* Set by config, read-only afterwards.  0 means not given. */
static unsigned partnum = 0;

static int
partition_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                  const char *key, const char *value)
{
  if (strcmp (key, "partition") == 0) {
    int n;
    if (nbdkit_parse_int ("partition", value, &n) == -1)
      return -1;
    if (n < 1) {
      nbdkit_error ("partition=%s: partition numbers count from 1", value);
      return -1;
    }
    partnum = n;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
partition_config_complete (nbdkit_next_config_complete *next,
                           nbdkit_backend *nxdata)
{
  if (partnum == 0) {
    nbdkit_error ("the partition parameter is required (partition=N)");
    return -1;
  }
  return next (nxdata);
}

#define partition_config_help \
  "partition=<PART>    (required) The partition number (counting from 1)."

/* Per connection: the partition's bytes on the disk below, set by
 * prepare and only read afterwards.
 */
struct handle {
  uint64_t offset;
  uint64_t range;
};

static void *
partition_open (nbdkit_next_open *next, nbdkit_context *context,
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
partition_close (void *handle)
{
  free (handle);
}

/* Span number 0 stands for the partition table itself. */
static void
span_name (char *buf, size_t n, size_t number)
{
  if (number == 0)
    snprintf (buf, n, "the partition table");
  else
    snprintf (buf, n, "partition %zu", number);
}

static int
compare_start (const void *a, const void *b)
{
  const struct partition_span *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

int
partition_check_overlaps (struct partition_span *spans, size_t n,
                          const char *kind)
{
  struct regions rs;
  int r = 0;

  /* Sorted by start, the partitions laid end to end (with zero regions
   * for the gaps) must each begin at or after the end of the last.
   */
  if (n > 1)
    qsort (spans, n, sizeof *spans, compare_start);

  regions_init (&rs);
  for (size_t i = 0; i < n && r == 0; i++) {
    uint64_t end = regions_size (&rs);
    if (spans[i].start < end) {
      const struct region *prev = regions_find (&rs, spans[i].start);
      char a[32], b[32];
      span_name (a, sizeof a, spans[i].number);
      span_name (b, sizeof b, prev ? prev->index : 0);
      nbdkit_error ("%s: %s overlaps %s: refusing a corrupt partition table",
                    kind, a, b);
      r = -1;
    }
    else if (regions_append_zero (&rs, spans[i].start - end) == -1 ||
             regions_append_file (&rs, spans[i].len, spans[i].number) == -1) {
      nbdkit_error ("%s partition %u: %m", kind, spans[i].number);
      r = -1;
    }
  }
  regions_free (&rs);
  return r;
}

static int
partition_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  uint8_t lba01[2 * SECTOR_SIZE];
  int64_t size;
  int err, r;

  size = next->get_size (next);
  if (size == -1)
    return -1;
  if (size < 2 * SECTOR_SIZE) {
    nbdkit_error ("disk is too small (%" PRIi64 " bytes) "
                  "to hold a partition table", size);
    return -1;
  }
  if (next->pread (next, lba01, sizeof lba01, 0, 0, &err) == -1) {
    nbdkit_error ("reading the partition table: %s", strerror (err));
    return -1;
  }

  /* A GPT disk also carries a protective MBR: look for GPT first. */
  if (size >= GPT_MIN_DISK && memcmp (&lba01[SECTOR_SIZE], "EFI PART", 8) == 0)
    r = partition_find_gpt (next, size, partnum, lba01, &h->offset,
                            &h->range);
  else if (lba01[0x1fe] == 0x55 && lba01[0x1ff] == 0xaa)
    r = partition_find_mbr (next, size, partnum, lba01, &h->offset,
                            &h->range);
  else {
    nbdkit_error ("disk has neither an MBR nor a GPT partition table");
    r = -1;
  }
  if (r == -1)
    return -1;

  /* The readers check this; the data path relies on it. */
  if (h->offset > (uint64_t) size || h->range > (uint64_t) size - h->offset) {
    nbdkit_error ("partition %u lies outside the disk", partnum);
    return -1;
  }
  nbdkit_debug ("partition %u: offset %" PRIu64 " length %" PRIu64,
                partnum, h->offset, h->range);
  return 0;
}

static int64_t
partition_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  return h->range;
}

static int
partition_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                 uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->pread (next, buf, count, offs + h->offset, flags, err);
}

static int
partition_pwrite (nbdkit_next *next, void *handle, const void *buf,
                  uint32_t count, uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->pwrite (next, buf, count, offs + h->offset, flags, err);
}

static int
partition_trim (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->trim (next, count, offs + h->offset, flags, err);
}

static int
partition_zero (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->zero (next, count, offs + h->offset, flags, err);
}

static int
partition_cache (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->cache (next, count, offs + h->offset, flags, err);
}

static int
partition_extents (nbdkit_next *next, void *handle, uint32_t count,
                   uint64_t offs, uint32_t flags,
                   struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  struct nbdkit_extents *below;
  int r = 0;

  /* Ask below in the disk's coordinates, then shift the answer back. */
  below = nbdkit_extents_new (offs + h->offset, h->offset + h->range);
  if (below == NULL) {
    *err = errno;
    return -1;
  }
  if (next->extents (next, count, offs + h->offset, flags, below,
                     err) == -1) {
    nbdkit_extents_free (below);
    return -1;
  }
  for (size_t i = 0; i < nbdkit_extents_count (below); i++) {
    struct nbdkit_extent e = nbdkit_get_extent (below, i);
    if (nbdkit_add_extent (extents, e.offset - h->offset, e.length,
                           e.type) == -1) {
      *err = errno;
      r = -1;
      break;
    }
  }
  nbdkit_extents_free (below);
  return r;
}

/* Requests for a plugin that completes them later (nbdkit-async(3))
 * are shifted the same way and passed on.
 */
static int
partition_async_prepare (nbdkit_next *next, void *handle, int cmd,
                         uint32_t *count, uint64_t *offs, uint32_t *flags,
                         int *err)
{
  struct handle *h = handle;
  if (cmd != NBDKIT_ASYNC_CMD_FLUSH)
    *offs += h->offset;
  return NBDKIT_ASYNC_PASS;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_filter_ops
nbdkit_async_filter_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .prepare = partition_async_prepare,
};

static struct nbdkit_filter filter = {
  .name = "partition",
  .longname = "nbdkit partition filter",
  .config = partition_config,
  .config_complete = partition_config_complete,
  .config_help = partition_config_help,
  .open = partition_open,
  .close = partition_close,
  .prepare = partition_prepare,
  .get_size = partition_get_size,
  .pread = partition_pread,
  .pwrite = partition_pwrite,
  .trim = partition_trim,
  .zero = partition_zero,
  .cache = partition_cache,
  .extents = partition_extents,
};

NBDKIT_REGISTER_FILTER (filter)
