/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Allocators: byte stores for plugins that keep a virtual disk in
 * memory (memory, data).  Overlays that may outgrow memory (the cow and
 * cache filters') use common/filestore instead.
 *
 * An allocator holds SIZE bytes, all reading as zeroes at first.  It is
 * picked by a string in the form the memory plugin's allocator=
 * parameter takes:
 *
 *   sparse               4 KiB pages in a radix tree; only pages holding
 *                        non-zero data (or, on request, written at all)
 *                        take memory (allocator-sparse.c)
 *   malloc[,mlock=true]  one flat buffer of SIZE bytes, optionally
 *                        locked into RAM (allocator-malloc.c)
 *   zstd                 like sparse, but 32 KiB pages each compressed
 *                        with zstd (allocator-zstd.c; only with libzstd)
 *
 * Allocators know nothing of the server: errors are returned as -1 or
 * NULL with errno set (and, from allocator_create, a reason in words),
 * and debug messages go through the function given to allocator_create.
 * Callers check that every range lies inside SIZE.  Every function may
 * be called from many threads at once.
 */
#ifndef NBDKIT_ALLOCATOR_H
#define NBDKIT_ALLOCATOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct allocator;

/* Called once per run of bytes by allocator_extents, in order: the
 * runs are maximal, and ALLOCATED is false for runs that hold no
 * memory (they read as zeroes).  Returning -1 stops the walk.
 */
typedef int (*allocator_emit_fn) (void *opaque, uint64_t offset,
                                  uint64_t length, bool allocated);

/* For debug messages (nbdkit_debug fits). */
typedef void (*allocator_debug_fn) (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

struct allocator_ops {
  const char *type;             /* "sparse", "malloc", "zstd" */
  void (*destroy) (struct allocator *a);
  void (*read) (struct allocator *a, void *buf, uint32_t count,
                uint64_t offset);
  int (*write) (struct allocator *a, const void *buf, uint32_t count,
                uint64_t offset);
  int (*zero) (struct allocator *a, uint32_t count, uint64_t offset);
  int (*extents) (struct allocator *a, uint32_t count, uint64_t offset,
                  bool one, allocator_emit_fn emit, void *opaque);
  /* Optional (NULL for allocators without pages): see
   * allocator_keep_zero_writes.
   */
  void (*keep_zero_writes) (struct allocator *a);
  /* Optional (NULL if not offered): the zero-copy loans of
   * common/zerocopy.h, with the same rules.
   */
  int (*map_read) (struct allocator *a, uint32_t count, uint64_t offset,
                   struct iovec *iov, int *niov);
  void (*unmap_read) (struct allocator *a);
  int (*map_write) (struct allocator *a, uint32_t count, uint64_t offset,
                    struct iovec *iov, int *niov);
  int (*unmap_write) (struct allocator *a, uint32_t count, uint64_t offset,
                      const struct iovec *iov, bool store);
};

/* Every allocator starts with this. */
struct allocator {
  const struct allocator_ops *ops;
  uint64_t size;
  allocator_debug_fn debug;     /* may be NULL */
};

/* Build the allocator that SPEC names, holding SIZE bytes (at most
 * INT64_MAX).  On failure returns NULL with errno set and *WHY saying
 * what was wrong with SPEC, or NULL in *WHY when it is errno's story
 * (out of memory, mlock refused).
 */
extern struct allocator *allocator_create (const char *spec, uint64_t size,
                                           allocator_debug_fn debug,
                                           const char **why);

/* What this build offers, for --dump-plugin. */
extern bool allocator_have_mlock (void);
extern bool allocator_have_zstd (void);

static inline void
allocator_destroy (struct allocator *a)
{
  if (a != NULL)
    a->ops->destroy (a);
}

/* Copy COUNT bytes at OFFSET into BUF.  Never fails. */
static inline void
allocator_read (struct allocator *a, void *buf, uint32_t count,
                uint64_t offset)
{
  a->ops->read (a, buf, count, offset);
}

/* Store COUNT bytes of BUF at OFFSET.  -1 with errno (ENOMEM) if out
 * of memory; what lies before the failure may have been written.
 */
static inline int
allocator_write (struct allocator *a, const void *buf, uint32_t count,
                 uint64_t offset)
{
  return a->ops->write (a, buf, count, offset);
}

/* From now on a write stores the pages it touches even when all it
 * writes is zeroes, so block status tells pages that were written
 * (allocated, reading as zeroes) from holes, as a disk that allocates
 * on write does; only zeroing gives such pages back.  The data plugin
 * wants this; the memory plugin keeps the default, where zeroes cost no
 * memory.  Call it before the first write; allocators without pages
 * (malloc) ignore it.
 */
static inline void
allocator_keep_zero_writes (struct allocator *a)
{
  if (a->ops->keep_zero_writes)
    a->ops->keep_zero_writes (a);
}

/* Make COUNT bytes at OFFSET read as zeroes, giving back what memory
 * the allocator can.  Serves trim and write-zeroes.
 */
static inline int
allocator_zero (struct allocator *a, uint32_t count, uint64_t offset)
{
  return a->ops->zero (a, count, offset);
}

/* Describe [OFFSET, OFFSET + COUNT) through EMIT; with ONE, stop after
 * the first run.  -1 if EMIT returned -1.
 */
static inline int
allocator_extents (struct allocator *a, uint32_t count, uint64_t offset,
                   bool one, allocator_emit_fn emit, void *opaque)
{
  return a->ops->extents (a, count, offset, one, emit, opaque);
}

/* Constructors, for allocator.c. */
extern struct allocator *sparse_allocator_create (uint64_t size,
                                                  const char **why);
extern struct allocator *malloc_allocator_create (uint64_t size, bool mlock,
                                                  const char **why);
extern struct allocator *zstd_allocator_create (uint64_t size,
                                                allocator_debug_fn debug,
                                                const char **why);

#endif /* NBDKIT_ALLOCATOR_H */
