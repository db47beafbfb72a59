/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's connection handle, and what its files share.
 *
 * file.c owns the configuration, a connection's descriptor (struct
 * handle: open and close) and the plugin's table of callbacks, which
 * it fills from the others:
 *
 *   rw.c     reads, writes and flush, and O_DIRECT's alignment;
 *   space.c  trim, zero, extents and cache;
 *   dir.c    dir= mode: which files are exports, and their paths;
 *   async.c  aio=io_uring's entry points (with liburing only).
 *
 * They call down only: file.c into all four, async.c and space.c into
 * rw.c, none of them back into file.c.  What a request needs of the
 * configuration is copied into its handle by file_open.
 */
#ifndef NBDKIT_FILE_HANDLE_H
#define NBDKIT_FILE_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "evict.h"
#ifdef HAVE_LIBURING
#include "uring.h"
#endif

struct nbdkit_exports;
struct nbdkit_extents;

struct handle {
  int fd;
  bool readonly;
  bool is_block;
  char *path;                   /* for messages */
  /* direct=true and cache=none, as configured: set once by open. */
  bool direct;
  bool cache_none;
  /* Cleared the first time the kernel says the operation is not
   * supported on this file, so it is not tried again.  Accessed with
   * relaxed atomics since requests run in parallel.
   */
  bool can_punch_hole;
  bool can_zero_range;
  bool can_zeroout;
  struct evict evict;           /* cache=none only */
  /* direct=true only: the buffered descriptor for unaligned writes (-1
   * if read-only), and the alignment O_DIRECT needs, of offsets and
   * lengths and of buffers in memory (powers of two).
   */
  int fd_buffered;
  uint32_t dio_align, dio_mem_align;
#ifdef HAVE_LIBURING
  struct uring *uring;          /* aio=io_uring; NULL: served here */
#endif
};

/* Can this transfer go to the descriptor as it is? */
static inline bool
is_dio_aligned (const struct handle *h, const void *buf, uint32_t count,
                uint64_t offset)
{
  return !h->direct ||
    (((offset | count) & (h->dio_align - 1)) == 0 &&
     ((uintptr_t) buf & (h->dio_mem_align - 1)) == 0);
}

/* rw.c */
extern int file_fail (struct handle *h, const char *what);
extern int file_read_range (struct handle *h, char *buf, uint32_t count,
                            uint64_t offset);
extern int file_write_range (struct handle *h, const char *buf,
                             uint32_t count, uint64_t offset);
extern int file_sync_data (struct handle *h);
extern int file_pread (void *handle, void *buf, uint32_t count,
                       uint64_t offset, uint32_t flags);
extern int file_pwrite (void *handle, const void *buf, uint32_t count,
                        uint64_t offset, uint32_t flags);
extern int file_flush (void *handle, uint32_t flags);

/* space.c */
extern int file_trim (void *handle, uint32_t count, uint64_t offset,
                      uint32_t flags);
extern int file_zero (void *handle, uint32_t count, uint64_t offset,
                      uint32_t flags);
extern int file_extents (void *handle, uint32_t count, uint64_t offset,
                         uint32_t flags, struct nbdkit_extents *extents);
extern int file_cache (void *handle, uint32_t count, uint64_t offset,
                       uint32_t flags);

/* dir.c: DIRECTORY is dir='s absolute path. */
extern int file_dir_list_exports (const char *directory,
                                  struct nbdkit_exports *exports);
extern char *file_dir_export_path (const char *directory);

#ifdef HAVE_LIBURING
/* async.c */
extern void file_async_enable (void);
extern void file_async_open (struct handle *h);
#endif

#endif /* NBDKIT_FILE_HANDLE_H */
