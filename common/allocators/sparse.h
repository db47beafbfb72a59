/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A sparse byte store: the page store behind allocator=sparse
 * (allocator.h), which the memory plugin also calls for its zero-copy
 * paths.
 *
 * The store holds a virtual disk of up to 2^63 bytes, keeping memory
 * only for the 4 KiB pages that hold non-zero data.  Everything not
 * stored reads as zeroes.  The store knows nothing of nbdkit: callers
 * check that every range lies inside the size given to sparse_create,
 * and errors are returned as -1 with errno set.
 *
 * All functions may be called from many threads at once.
 */
#ifndef NBDKIT_SPARSE_H
#define NBDKIT_SPARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/* Granularity of allocation, and of the extents reported. */
#define SPARSE_PAGE_SIZE 4096

struct sparse;

/* Create an empty store of SIZE bytes (at most INT64_MAX).  Returns
 * NULL with errno set on failure.
 */
extern struct sparse *sparse_create (uint64_t size);
extern void sparse_destroy (struct sparse *s);

/* Copy COUNT bytes at OFFSET into BUF.  Never fails. */
extern void sparse_read (struct sparse *s, void *buf, uint32_t count,
                         uint64_t offset);

/* From now on, store the pages that writes touch even when the bytes
 * written are zeroes (see allocator_keep_zero_writes).  Call it before
 * the first write.
 */
extern void sparse_keep_zero_writes (struct sparse *s);

/* Store COUNT bytes from BUF at OFFSET.  Zero bytes landing in a page
 * that is not stored allocate nothing, unless sparse_keep_zero_writes
 * was called.  Returns -1 (errno ENOMEM) if a page could not be
 * allocated; the pages before it have been written.
 */
/* Describe [OFFSET, OFFSET + COUNT) as at most *NIOV iovecs into the
 * store (unwritten pages point at zeroes) and keep the store's lock
 * shared, so no page can be freed or cleared, until sparse_unmap_read.
 * Returns -1 with errno E2BIG, holding nothing, if more are needed.
 * Writes may still change the bytes: a read racing a write to the same
 * range may see either, as NBD allows.
 */
extern int sparse_map_read (struct sparse *s, uint32_t count,
                            uint64_t offset, struct iovec *iov, int *niov);
extern void sparse_unmap_read (struct sparse *s);

/* For a write of COUNT bytes at OFFSET: pages of the caller's own,
 * described as at most *NIOV iovecs, to receive the payload into.
 * They are the caller's until sparse_unmap_write, and no lock is held
 * meanwhile.  Returns -1 holding nothing, with errno EEXIST if a page
 * the write covers only in part is stored already (write it with
 * sparse_write), E2BIG if more iovecs are needed, or ENOMEM.
 */
extern int sparse_map_write (struct sparse *s, uint32_t count,
                             uint64_t offset, struct iovec *iov, int *niov);

/* Give back the pages of sparse_map_write (the same COUNT, OFFSET and
 * IOV).  With STORE, their bytes become the store's, exactly as if
 * sparse_write had written them; returns -1 (errno ENOMEM) if a page
 * could not be stored (those before it are).  Without, nothing is
 * written.
 */
extern int sparse_unmap_write (struct sparse *s, uint32_t count,
                               uint64_t offset, const struct iovec *iov,
                               bool store);

extern int sparse_write (struct sparse *s, const void *buf, uint32_t count,
                         uint64_t offset);

/* Make COUNT bytes at OFFSET read as zeroes, releasing every page that
 * ends up holding only zeroes.  Serves both trim and write-zeroes.
 * Never fails.
 */
extern void sparse_zero (struct sparse *s, uint32_t count, uint64_t offset);

/* Describe the allocation of COUNT bytes at OFFSET as a sequence of
 * maximal runs, calling EMIT once per run in order.  ALLOCATED is false
 * for runs with no stored page (they read as zeroes).  With ONE, stop
 * after the first run.  If EMIT returns -1 the walk stops and -1 is
 * returned; otherwise 0.
 */
typedef int (*sparse_emit_fn) (void *opaque, uint64_t offset,
                               uint64_t length, bool allocated);
extern int sparse_extents (struct sparse *s, uint32_t count, uint64_t offset,
                           bool one, sparse_emit_fn emit, void *opaque);

/* Number of pages currently stored (for debugging and tests). */
extern uint64_t sparse_pages_stored (struct sparse *s);

#endif /* NBDKIT_SPARSE_H */
