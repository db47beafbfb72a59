/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's cache=none: which pages of the file to drop from
 * the page cache, and when.  rw.c and async.c call in after each read
 * and write, file.c at open and close; nothing else is shared.
 *
 * Reads.  The kernel drops only whole folios, and a folio of the page
 * cache can be as large as 2 MiB (naturally aligned), so dropping just
 * the range a request read leaves the folios that straddle its edges:
 * on a kernel with large folios that is nearly the whole file after a
 * sequential copy.  Widening each drop to 2 MiB instead throws away the
 * neighbours' pages while their requests are still in flight, and the
 * read-ahead the next request needs, so every byte is read twice.
 * Here each read drops its own range at once (enough for the small
 * folios of random reads), and a count of the bytes read in each
 * 2 MiB-aligned block of the file, shared by every connection to the
 * file, drops the whole block once that much of it has been read: by
 * then its requests are done, and the read-ahead beyond it is left
 * alone.  When the last connection to the file closes, every block that
 * was read is dropped once more: blocks still partly read, and pages
 * that a read-ahead started by a request that lagged behind brought
 * back into a block already dropped (with several connections or many
 * requests in flight, a few tens of MiB of a 1 GiB copy).
 *
 * Writes.  Pages can only be dropped once written back: a write starts
 * its writeback at once, and its pages are dropped EVICT_WINDOW writes
 * later, after waiting for that writeback (usually done by then), or
 * at close.  These drops are widened to 2 MiB: dropping a neighbour's
 * clean pages early costs only a re-read, and dirty ones never go.
 *
 * Everything here is advice to the kernel: failures are not errors.
 */
#include <config.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "minmax.h"
#include "rounding.h"

#include "evict.h"

/* The largest folio: the block of the read counts, and the alignment
 * of write drops.
 */
#define EVICT_BLOCK (UINT64_C (2) << 20)

/* The read counts of one file, shared by every descriptor open on it. */
struct evict_file {
  struct evict_file *next;
  dev_t dev;                    /* with ino: which file */
  ino_t ino;
  unsigned users;               /* descriptors using it */
  uint64_t size;                /* the file's size when it was made */
  uint64_t nblocks;
  /* Bytes read in each block since it was last dropped, changed with
   * atomic operations.  calloc'd: the kernel backs only the pages of
   * the table that reads touch.
   */
  uint32_t *bytes_read;
  bool *touched;                /* per block: read at all (set only) */
};

/* Protects the list and the users counts (open and close only). */
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct evict_file *files;

static void
drop (int fd, uint64_t offset, uint64_t count)
{
#ifdef HAVE_POSIX_FADVISE
  posix_fadvise (fd, offset, count, POSIX_FADV_DONTNEED);
#endif
}

static void
drop_widened (int fd, uint64_t offset, uint64_t count)
{
  uint64_t lo = ROUND_DOWN (offset, EVICT_BLOCK);
  uint64_t hi = ROUND_UP (offset + count, EVICT_BLOCK);

  drop (fd, lo, hi - lo);
}

void
evict_init (struct evict *e, int fd, uint64_t size)
{
  struct stat st;
  struct evict_file *f;
  dev_t dev;
  ino_t ino;

  e->fd = fd;
  e->file = NULL;
  pthread_mutex_init (&e->lock, NULL);
  for (unsigned i = 0; i < EVICT_WINDOW; ++i)
    e->writes[i].count = 0;
  e->next = 0;

  if (fstat (fd, &st) == -1) {
    nbdkit_debug ("cache=none: fstat: %m (each read drops 2 MiB blocks)");
    return;
  }
  /* Two device nodes of one disk share its page cache. */
  if (S_ISBLK (st.st_mode)) {
    dev = st.st_rdev;
    ino = 0;
  }
  else {
    dev = st.st_dev;
    ino = st.st_ino;
  }

  pthread_mutex_lock (&files_lock);
  for (f = files; f != NULL; f = f->next)
    if (f->dev == dev && f->ino == ino)
      break;
  if (f == NULL) {
    f = calloc (1, sizeof *f);
    if (f != NULL) {
      f->dev = dev;
      f->ino = ino;
      f->size = size;
      f->nblocks = DIV_ROUND_UP (size, EVICT_BLOCK);
      f->bytes_read = calloc (f->nblocks ? f->nblocks : 1, sizeof (uint32_t));
      f->touched = calloc (f->nblocks ? f->nblocks : 1, sizeof (bool));
      if (f->bytes_read == NULL || f->touched == NULL) {
        free (f->bytes_read);
        free (f->touched);
        free (f);
        f = NULL;
      }
      else {
        f->next = files;
        files = f;
      }
    }
    if (f == NULL)
      nbdkit_debug ("cache=none: out of memory for the read counts "
                    "(each read drops 2 MiB blocks)");
  }
  if (f != NULL)
    f->users++;
  pthread_mutex_unlock (&files_lock);
  e->file = f;
}

/* Wait for the writeback of R, started when it was written, and drop
 * its pages.
 */
static void
evict_written (struct evict *e, struct evict_range r)
{
  if (r.count == 0)
    return;
#ifdef SYNC_FILE_RANGE_WAIT_AFTER
  if (sync_file_range (e->fd, r.offset, r.count,
                       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                       SYNC_FILE_RANGE_WAIT_AFTER) == -1)
    nbdkit_debug ("sync_file_range: %m (ignored)");
#endif
  drop_widened (e->fd, r.offset, r.count);
}

void
evict_fini (struct evict *e)
{
  struct evict_file *f = e->file, **p;

  for (unsigned i = 0; i < EVICT_WINDOW; ++i)
    evict_written (e, e->writes[i]);
  pthread_mutex_destroy (&e->lock);
  if (f == NULL)
    return;

  pthread_mutex_lock (&files_lock);
  if (--f->users > 0)
    f = NULL;
  else {
    for (p = &files; *p != f; p = &(*p)->next)
      ;
    *p = f->next;
  }
  pthread_mutex_unlock (&files_lock);
  e->file = NULL;
  if (f == NULL)
    return;

  /* The last user: every block read, runs of them in one call. */
  for (uint64_t b = 0; b < f->nblocks; ++b) {
    uint64_t first = b;

    while (b < f->nblocks && f->touched[b])
      ++b;
    if (b > first)
      drop (e->fd, first * EVICT_BLOCK, (b - first) * EVICT_BLOCK);
  }
  free (f->bytes_read);
  free (f->touched);
  free (f);
}

void
evict_after_read (struct evict *e, uint64_t offset, uint32_t count)
{
  struct evict_file *f = e->file;
  uint64_t end = offset + count;

  /* Without counts: the 2 MiB blocks around the read, neighbours'
   * pages and read-ahead too (slower, but nothing stays cached).
   */
  if (f == NULL) {
    drop_widened (e->fd, offset, count);
    return;
  }
  drop (e->fd, offset, count);
  while (offset < end) {
    uint64_t b = offset / EVICT_BLOCK;
    uint64_t start = b * EVICT_BLOCK;
    uint32_t len = MIN (end, start + EVICT_BLOCK) - offset;
    uint32_t full, n;

    /* Past the size the counts were made for (the file grew). */
    if (b >= f->nblocks) {
      drop_widened (e->fd, offset, end - offset);
      return;
    }
    full = MIN (EVICT_BLOCK, f->size - start);
    if (!__atomic_load_n (&f->touched[b], __ATOMIC_RELAXED))
      __atomic_store_n (&f->touched[b], true, __ATOMIC_RELAXED);
    /* Only the read that makes the count reach FULL drops the block;
     * the count then starts again from what was read beyond FULL.
     */
    n = __atomic_add_fetch (&f->bytes_read[b], len, __ATOMIC_RELAXED);
    if (n >= full && n - len < full) {
      drop (e->fd, start, EVICT_BLOCK);
      __atomic_sub_fetch (&f->bytes_read[b], full, __ATOMIC_RELAXED);
    }
    offset += len;
  }
}

void
evict_after_write (struct evict *e, uint64_t offset, uint32_t count)
{
  struct evict_range old;

#ifdef SYNC_FILE_RANGE_WRITE
  if (sync_file_range (e->fd, offset, count, SYNC_FILE_RANGE_WRITE) == -1)
    nbdkit_debug ("sync_file_range: %m (ignored)");
#endif
  pthread_mutex_lock (&e->lock);
  old = e->writes[e->next];
  e->writes[e->next] = (struct evict_range) { offset, count };
  e->next = (e->next + 1) % EVICT_WINDOW;
  pthread_mutex_unlock (&e->lock);
  evict_written (e, old);
}
