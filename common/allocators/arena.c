/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The sparse store's page allocator (see arena.h).
 *
 * Why not malloc: a first write to a page used to cost a malloc of 4
 * KiB, which in a thread's malloc arena grows the heap with an mprotect
 * every few pages, then a page fault and the kernel's clearing of the
 * page, then the copy.  Here memory comes from mappings of CHUNK_SIZE
 * bytes, and the pages about to be handed out are faulted in
 * POPULATE_SIZE bytes at a time by one madvise (MADV_POPULATE_WRITE),
 * which saves the trap of each fault.  Anonymous memory arrives zeroed,
 * so a page needs no clearing of its own.
 *
 * Transparent huge pages (MADV_HUGEPAGE) were tried and are not used:
 * on the machine measured (a VM) they cut the faults 70-fold but more
 * than tripled the server's CPU time for a 1 GiB copy, nearly all of it
 * in the kernel clearing each fresh 2 MiB page (bench/HISTORY.md,
 * "Memory plugin: first writes").  They would also let khugepaged fill
 * back in ranges that trim had handed back.
 *
 * Pages come from, in order of preference:
 *
 *  - the free list: pages freed earlier, already handed back to the
 *    kernel (MADV_DONTNEED, so they read as zeroes and cost no resident
 *    memory until written again), kept as runs of adjacent pages sorted
 *    by address.  Taking pages from the top of the highest run fills
 *    freed address ranges densely rather than touching many of them;
 *  - the bump region: the untouched rest of the newest chunk;
 *  - a new chunk.
 *
 * Chunks are touched only as pages are handed out, so resident memory
 * is the pages in use plus at most POPULATE_SIZE bytes faulted in ahead
 * of the bump pointer.  They are not MAP_NORESERVE: they will be filled,
 * so they may as well be charged as committed memory, which under
 * strict overcommit accounting turns running out into a clean ENOMEM.
 * Chunks are never unmapped before arena_destroy: a freed page's
 * resident memory goes, its address space stays for reuse.
 *
 * Freeing is in two steps so that zeroing a large range makes a few
 * large madvise calls, not one per page: arena_free only notes the page
 * (pending), arena_release sorts the pending pages, merges adjacent
 * ones into runs and returns each run to the kernel.
 *
 * Locking: LOCK protects every field below it; it is held for a few
 * instructions per call, never across a system call other than the
 * mmap of a new chunk (once per CHUNK_SIZE bytes allocated).  Faulting
 * in and handing back happen outside it.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "arena.h"
#include "rounding.h"
#include "vector.h"

/* One mapping.  Large enough that mapping is rare, small enough that
 * the address space reserved ahead of use is negligible.
 */
#define CHUNK_SIZE (64ul << 20)

/* Bump pages are faulted in this many bytes at a time, in windows
 * aligned to it (chunks are aligned to it too).
 */
#define POPULATE_SIZE (256ul << 10)

DEFINE_VECTOR_TYPE (chunk_vector, void *);
DEFINE_VECTOR_TYPE (addr_vector, uintptr_t);

/* A run of free pages: [START, START + PAGES * ARENA_PAGE_SIZE). */
struct run {
  uintptr_t start;
  size_t pages;
};

struct arena {
  size_t sys_page;              /* the kernel's page size; read-only */
  pthread_mutex_t lock;         /* protects the fields below */
  char *next, *end;             /* bump region of the newest chunk */
  chunk_vector chunks;          /* every mapping, for arena_destroy */
  struct run *free;             /* sorted by start, none adjacent */
  size_t nr_free;
  addr_vector pending;          /* freed, not yet released */
};

struct arena *
arena_create (void)
{
  struct arena *a = calloc (1, sizeof *a);
  long sys_page = sysconf (_SC_PAGESIZE);
  int err;

  if (a == NULL)
    return NULL;
  a->sys_page = sys_page > 0 ? sys_page : ARENA_PAGE_SIZE;
  err = pthread_mutex_init (&a->lock, NULL);
  if (err != 0) {
    free (a);
    errno = err;
    return NULL;
  }
  return a;
}

void
arena_destroy (struct arena *a)
{
  size_t i;

  if (a == NULL)
    return;
  for (i = 0; i < a->chunks.len; ++i)
    munmap (a->chunks.ptr[i], CHUNK_SIZE);
  chunk_vector_reset (&a->chunks);
  free (a->free);
  addr_vector_reset (&a->pending);
  pthread_mutex_destroy (&a->lock);
  free (a);
}

/* Map a new chunk and make it the bump region.  Lock held. */
static int
new_chunk (struct arena *a)
{
  char *map, *chunk;
  size_t head;

  if (chunk_vector_reserve (&a->chunks, 1) == -1)
    return -1;

  /* Map one alignment unit more than needed and cut off the ends, so
   * the chunk starts on a populate window boundary.
   */
  map = mmap (NULL, CHUNK_SIZE + POPULATE_SIZE, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return -1;
  chunk = (char *) ROUND_UP ((uintptr_t) map, POPULATE_SIZE);
  head = chunk - map;
  if (head > 0)
    munmap (map, head);
  munmap (chunk + CHUNK_SIZE, POPULATE_SIZE - head);

  a->chunks.ptr[a->chunks.len++] = chunk;
  a->next = chunk;
  a->end = chunk + CHUNK_SIZE;
  return 0;
}

void *
arena_alloc (struct arena *a)
{
  void *page = NULL;
  bool populate = false;

  pthread_mutex_lock (&a->lock);
  if (a->nr_free > 0) {
    struct run *r = &a->free[a->nr_free - 1];

    r->pages--;
    page = (void *) (r->start + r->pages * ARENA_PAGE_SIZE);
    if (r->pages == 0)
      a->nr_free--;
  }
  else if (a->next < a->end || new_chunk (a) == 0) {
    page = a->next;
    a->next += ARENA_PAGE_SIZE;
    populate = (uintptr_t) page % POPULATE_SIZE == 0;
  }
  pthread_mutex_unlock (&a->lock);

#ifdef MADV_POPULATE_WRITE
  /* Fault in the pages that the next allocations will hand out in one
   * system call rather than one fault each.  Only a speed-up: older
   * kernels refuse it (EINVAL) and the pages fault one by one.
   */
  if (populate)
    madvise (page, POPULATE_SIZE, MADV_POPULATE_WRITE);
#else
  (void) populate;
#endif

  if (page == NULL)
    errno = ENOMEM;
  return page;
}

/* Make [START, START + LEN) read as zeroes and drop its resident
 * memory.  madvise works in the kernel's pages: when those are larger
 * than ours, the parts of the range in a kernel page that is only
 * partly ours are cleared by hand instead.
 */
static void
give_back (struct arena *a, uintptr_t start, size_t len)
{
  uintptr_t end = start + len;
  uintptr_t lo = ROUND_UP (start, a->sys_page);
  uintptr_t hi = ROUND_DOWN (end, a->sys_page);

  if (lo >= hi) {
    memset ((void *) start, 0, len);
    return;
  }
  memset ((void *) start, 0, lo - start);
  memset ((void *) hi, 0, end - hi);
  if (madvise ((void *) lo, hi - lo, MADV_DONTNEED) == -1)
    memset ((void *) lo, 0, hi - lo);   /* cannot happen; stay correct */
}

void
arena_free (struct arena *a, void *page)
{
  int r;

  pthread_mutex_lock (&a->lock);
  r = addr_vector_append (&a->pending, (uintptr_t) page);
  pthread_mutex_unlock (&a->lock);

  /* No room to note it: drop its memory now and never reuse the
   * address, which costs address space only.
   */
  if (r == -1)
    give_back (a, (uintptr_t) page, ARENA_PAGE_SIZE);
}

static int
compare_addr (const void *x, const void *y)
{
  uintptr_t a = *(const uintptr_t *) x, b = *(const uintptr_t *) y;

  return a < b ? -1 : a > b;
}

/* Append run R to OUT (N runs so far), merging it into the last one if
 * they touch.  Returns the new count.
 */
static size_t
append_run (struct run *out, size_t n, struct run r)
{
  if (n > 0 &&
      out[n - 1].start + out[n - 1].pages * ARENA_PAGE_SIZE == r.start) {
    out[n - 1].pages += r.pages;
    return n;
  }
  out[n] = r;
  return n + 1;
}

void
arena_release (struct arena *a)
{
  addr_vector taken;
  uintptr_t *pages;
  struct run *runs, *merged;
  size_t n, nr_runs, i, j, k;

  /* Take the pending pages; new frees start a fresh list. */
  pthread_mutex_lock (&a->lock);
  taken = a->pending;
  a->pending = (addr_vector) empty_vector;
  pthread_mutex_unlock (&a->lock);
  pages = taken.ptr;
  n = taken.len;
  if (n == 0) {
    addr_vector_reset (&taken);
    return;
  }

  /* Sort into runs of adjacent pages, and hand each run back to the
   * kernel without holding the lock.
   */
  qsort (pages, n, sizeof *pages, compare_addr);
  for (i = 1, nr_runs = 1; i < n; ++i)
    if (pages[i] != pages[i - 1] + ARENA_PAGE_SIZE)
      nr_runs++;
  runs = malloc (nr_runs * sizeof *runs);
  for (i = 0, k = 0; i < n; i = j) {
    struct run r = { .start = pages[i], .pages = 1 };

    for (j = i + 1;
         j < n && pages[j] == r.start + r.pages * ARENA_PAGE_SIZE; ++j)
      r.pages++;
    give_back (a, r.start, r.pages * ARENA_PAGE_SIZE);
    if (runs != NULL)
      runs[k++] = r;
  }
  addr_vector_reset (&taken);
  /* Out of memory: the pages are back with the kernel, and only their
   * address space is lost.
   */
  if (runs == NULL)
    return;

  /* Merge them into the free list. */
  pthread_mutex_lock (&a->lock);
  merged = malloc ((a->nr_free + nr_runs) * sizeof *merged);
  if (merged != NULL) {
    for (i = j = k = 0; i < a->nr_free || j < nr_runs; ) {
      if (j == nr_runs ||
          (i < a->nr_free && a->free[i].start < runs[j].start))
        k = append_run (merged, k, a->free[i++]);
      else
        k = append_run (merged, k, runs[j++]);
    }
    free (a->free);
    a->free = merged;
    a->nr_free = k;
  }
  pthread_mutex_unlock (&a->lock);
  free (runs);
}
