/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The indexed-gzip filter's seek-point index of a gzip file: made by
 * one pass over the whole file (gzindex_build, which also writes the
 * index file) or read back from an index file (gzindex_load).  Each
 * point says where inflating can start: an uncompressed offset, the
 * compressed offset, the bit position inside the byte before it, and
 * the 32 KiB of output before it (the deflate window), kept in the
 * index file and read when needed.  Read-only once made.
 */
#ifndef NBDKIT_GZINDEX_H
#define NBDKIT_GZINDEX_H

#include <stdint.h>

#include <nbdkit-filter.h>

#define GZINDEX_WINDOW 32768

struct gzpoint {
  uint64_t out;                 /* uncompressed offset */
  uint64_t in;                  /* compressed offset of the next byte */
  int32_t bits;                 /* bits of byte in-1 still to use
                                 * (0..7), or -1: a gzip member's
                                 * header starts at in */
  uint64_t window_at;           /* offset of the window in the index
                                 * file (unused when bits == -1) */
};

struct gzindex {
  int fd;                       /* the index file, open for reading */
  uint64_t compressed_size;
  uint64_t size;                /* uncompressed */
  uint64_t span;
  size_t npoints;
  struct gzpoint *points;       /* npoints, points[0] is (0, 0, -1) */
};

/* Inflate the whole gzip file below (every member; bytes after the
 * last member that do not start another are ignored), verifying it,
 * and write an index with a point about every SPAN uncompressed bytes
 * to PATH (through PATH.tmp and a rename).  *INDEX is then the index,
 * open for reading.  -1 after an error (a corrupt or truncated file,
 * or PATH cannot be written).
 */
extern int gzindex_build (nbdkit_next *next, const char *path,
                          uint64_t span, struct gzindex *index);

/* Read and check the index file PATH against the gzip file below
 * (its size and a fingerprint of its first and last bytes).  -1 after
 * an error (not an index file, corrupt, or made for another file).
 */
extern int gzindex_load (nbdkit_next *next, const char *path,
                         struct gzindex *index);

extern void gzindex_free (struct gzindex *index);

/* The last point at or before uncompressed OFFSET. */
extern size_t gzindex_find (const struct gzindex *index, uint64_t offset);

/* Read point P's window (GZINDEX_WINDOW bytes) into BUF. */
extern int gzindex_window (const struct gzindex *index,
                           const struct gzpoint *p, unsigned char *buf,
                           int *err);

#endif /* NBDKIT_GZINDEX_H */
