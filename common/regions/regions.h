/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Regions: a virtual device made of pieces laid end to end, as a
 * partitioning plugin (partition table, partitions, padding), a
 * protect filter or a floppy image builds one.
 *
 *   struct regions rs;
 *   regions_init (&rs);
 *   if (regions_append_data (&rs, 512, mbr) == -1 ||
 *       regions_pad_to (&rs, 4096) == -1 ||
 *       regions_append_file (&rs, file_size, 0) == -1) ...
 *   const struct region *r = regions_find (&rs, offset);
 *   ... r->start, region_end (r), r->type ...
 *   regions_free (&rs);
 *
 * Regions are kept in order of START, with no gaps and no overlaps, and
 * never empty: each starts where the last ended, the first at 0.  The
 * device is at most INT64_MAX bytes (the size a plugin can report);
 * appending past that is refused with errno EOVERFLOW and changes
 * nothing.  Nothing here locks: build the list at start-up, then share
 * it read-only.
 */
#ifndef NBDKIT_REGIONS_H
#define NBDKIT_REGIONS_H

#include <stddef.h>
#include <stdint.h>

#include "vector.h"

enum region_type {
  REGION_FILE,                  /* bytes of file number INDEX */
  REGION_DATA,                  /* bytes at DATA, owned by the caller */
  REGION_ZERO,                  /* zero padding */
};

struct region {
  uint64_t start;               /* first byte of the region */
  uint64_t len;                 /* bytes, > 0 */
  enum region_type type;
  size_t index;                 /* REGION_FILE: which file */
  const void *data;             /* REGION_DATA: LEN bytes */
  const char *description;      /* for debug messages, may be NULL */
};

/* One past the last byte of R. */
static inline uint64_t
region_end (const struct region *r)
{
  return r->start + r->len;
}

DEFINE_VECTOR_TYPE (region_vector, struct region);

struct regions {
  region_vector v;              /* read-only for callers */
};

extern void regions_init (struct regions *rs);
extern void regions_free (struct regions *rs);

/* How many regions, and the device size (the end of the last one). */
extern size_t regions_count (const struct regions *rs);
extern uint64_t regions_size (const struct regions *rs);

/* Region I (< regions_count). */
extern const struct region *regions_get (const struct regions *rs, size_t i);

/* The region holding byte OFFSET, or NULL if OFFSET >= regions_size.
 * O(log n).
 */
extern const struct region *regions_find (const struct regions *rs,
                                          uint64_t offset);

/* Append a copy of R, whose start must be regions_size (errno EINVAL
 * otherwise).  A region of length 0 is accepted and not stored.
 * -1 with errno EINVAL, EOVERFLOW or ENOMEM, changing nothing.
 */
extern int regions_append (struct regions *rs, const struct region *r);

/* Append a region of LEN bytes at the end, of each type. */
extern int regions_append_file (struct regions *rs, uint64_t len,
                                size_t index);
extern int regions_append_data (struct regions *rs, uint64_t len,
                                const void *data);
extern int regions_append_zero (struct regions *rs, uint64_t len);

/* Append zero padding so the size is a multiple of ALIGNMENT (a power
 * of two, errno EINVAL otherwise); nothing if it already is.
 */
extern int regions_pad_to (struct regions *rs, uint64_t alignment);

#endif /* NBDKIT_REGIONS_H */
