/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The sparse store's page allocator: 4 KiB data pages carved from
 * large anonymous mappings.
 *
 * Pages are handed out densely, in allocation order, whatever disk
 * offsets they end up holding, so resident memory follows the bytes
 * written and not their spread over the disk.  Every page handed out
 * reads as zeroes.  Freed pages go back to the kernel (their resident
 * memory is dropped at once) and their addresses are reused first.
 *
 * All functions may be called from many threads at once.
 */
#ifndef NBDKIT_ARENA_H
#define NBDKIT_ARENA_H

#define ARENA_PAGE_SIZE 4096

struct arena;

/* Returns NULL with errno set on failure. */
extern struct arena *arena_create (void);

/* Unmaps every page, allocated or not. */
extern void arena_destroy (struct arena *a);

/* A page of ARENA_PAGE_SIZE bytes, aligned to ARENA_PAGE_SIZE and all
 * zero, or NULL (errno ENOMEM).
 */
extern void *arena_alloc (struct arena *a);

/* Give PAGE back.  Its memory is returned to the kernel by the next
 * arena_release; until then the page is not reused.
 */
extern void arena_free (struct arena *a, void *page);

/* Return the memory of every page freed since the last call to the
 * kernel, in as few system calls as the pages' addresses allow, and
 * make the pages available to arena_alloc again.
 */
extern void arena_release (struct arena *a);

#endif /* NBDKIT_ARENA_H */
