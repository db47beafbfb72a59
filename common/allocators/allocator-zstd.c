/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* allocator=zstd: a sparse store whose pages are compressed with zstd.
 *
 * The disk is cut into pages of ZPAGE_SIZE (32 KiB: big enough to
 * compress well, small enough that a 4 KiB write does not cost much).
 * Pages are found through a radix tree like the sparse store's: nodes
 * of 512 pointers, of a depth fixed by the size, where a NULL pointer
 * means everything below reads as zeroes.  A stored page is a blob of
 * its compressed bytes; a page that would hold only zeroes is not
 * stored (unless a write left it so and allocator_keep_zero_writes was
 * asked for).
 *
 * One mutex covers the tree, the compression contexts and the scratch
 * buffers: every request decompresses and compresses under it, so
 * requests run one at a time.  That is the trade this allocator makes
 * (memory for speed), and it keeps the code short.  Writes covering a
 * page whole are compressed straight from the caller's buffer; partial
 * writes decompress the page first.  Zeroing and extents walk the tree
 * and skip empty subtrees in one step, so a trim of a whole exabyte
 * disk is quick.
 *
 * At destroy, the debug function reports how well the data compressed.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"

/* Probes in the plugin that links this (memory, data): see the PLUGIN
 * PROBES section of nbdkit-probes(1).
 */
#include <nbdkit-probe.h>

/* The connection and request the probes fire for.  Weak, because this
 * library knows nothing of the server: its unit tests link no server,
 * and a server without these extensions (nbdkit's own) has none; both
 * read as 0, as outside a request.
 */
extern uint64_t nbdkit_connection_id (void) __attribute__ ((weak));
extern uint64_t nbdkit_request_cookie (void) __attribute__ ((weak));
#define PROBE_ID (nbdkit_connection_id ? nbdkit_connection_id () : 0)
#define PROBE_COOKIE (nbdkit_request_cookie ? nbdkit_request_cookie () : 0)

#ifndef HAVE_LIBZSTD

struct allocator *
zstd_allocator_create (uint64_t size, allocator_debug_fn debug,
                       const char **why)
{
  *why = "this nbdkit was built without zstd (configure found no libzstd)";
  errno = ENOTSUP;
  return NULL;
}

#else /* HAVE_LIBZSTD */

#include <zstd.h>

#include "iszero.h"
#include "minmax.h"

#define ZPAGE_SHIFT 15
#define ZPAGE_SIZE (UINT32_C (1) << ZPAGE_SHIFT)
#define FANOUT_SHIFT 9
#define FANOUT (1u << FANOUT_SHIFT)
#define MAX_DEPTH 6             /* 15 + 6 * 9 bits reach past 2^63 */
#define LEVEL 3                 /* zstd's default compression level */

struct znode {
  void *slot[FANOUT];           /* nodes, or blobs in level 1 nodes */
};

struct blob {
  size_t len;
  unsigned char data[];
};

struct zstd_allocator {
  struct allocator a;           /* first */
  pthread_mutex_t lock;         /* protects everything below */
  void *root;                   /* node at level DEPTH, or NULL */
  unsigned depth;               /* fixed */
  ZSTD_CCtx *cctx;
  ZSTD_DCtx *dctx;
  unsigned char *page;          /* scratch: one page uncompressed */
  unsigned char *cbuf;          /* scratch: one page compressed */
  size_t cbuf_size;
  uint64_t pages;               /* pages stored */
  uint64_t compressed;          /* bytes of their blobs */
  bool keep_zero_writes;        /* set before the first write */
};

static inline struct zstd_allocator *
za_of (struct allocator *a)
{
  return (struct zstd_allocator *) a;
}

static inline unsigned
index_at (uint64_t page, unsigned level)
{
  return (page >> (FANOUT_SHIFT * (level - 1))) & (FANOUT - 1);
}

/* Bytes of disk below one slot of a node at LEVEL. */
static inline uint64_t
slot_span (unsigned level)
{
  return UINT64_C (1) << (ZPAGE_SHIFT + FANOUT_SHIFT * (level - 1));
}

/* The slot that holds page PAGE's blob, or NULL if the path to it is
 * missing and not CREATEd (or, creating, out of memory: errno).
 */
static void **
find_slot (struct zstd_allocator *za, uint64_t page, bool create)
{
  void **slot = &za->root;
  unsigned level;

  for (level = za->depth; level > 0; --level) {
    if (*slot == NULL) {
      if (!create)
        return NULL;
      *slot = calloc (1, sizeof (struct znode));
      if (*slot == NULL)
        return NULL;
    }
    slot = &((struct znode *) *slot)->slot[index_at (page, level)];
  }
  return slot;
}

static void
drop_blob (struct zstd_allocator *za, void **slot)
{
  struct blob *b = *slot;

  if (b != NULL) {
    za->pages--;
    za->compressed -= b->len;
    free (b);
    *slot = NULL;
  }
}

/* Page PAGE uncompressed into OUT (ZPAGE_SIZE bytes). */
static void
get_page (struct zstd_allocator *za, uint64_t page, unsigned char *out)
{
  void **slot = find_slot (za, page, false);
  struct blob *b = slot ? *slot : NULL;
  size_t r;

  if (b == NULL) {
    memset (out, 0, ZPAGE_SIZE);
    return;
  }
  r = ZSTD_decompressDCtx (za->dctx, out, ZPAGE_SIZE, b->data, b->len);
  /* We wrote every blob: anything else is memory corruption. */
  if (ZSTD_isError (r) || r != ZPAGE_SIZE)
    abort ();
  uint64_t off = page << ZPAGE_SHIFT, clen = b->len;
  NBDKIT_PROBE (allocator_zstd_decompress, PROBE_ID, PROBE_COOKIE, off, clen,
                (uint64_t) ZPAGE_SIZE);
}

/* Store IN (ZPAGE_SIZE bytes) as page PAGE, or drop the page if IN is
 * all zero (unless KEEP_ZERO).  -1 (errno ENOMEM) if out of memory.
 */
static int
put_page (struct zstd_allocator *za, uint64_t page, const unsigned char *in,
          bool keep_zero)
{
  void **slot;
  struct blob *b;
  size_t n;

  if (!keep_zero && is_zero (in, ZPAGE_SIZE)) {
    slot = find_slot (za, page, false);
    if (slot != NULL)
      drop_blob (za, slot);
    return 0;
  }
  slot = find_slot (za, page, true);
  if (slot == NULL) {
    errno = ENOMEM;
    return -1;
  }
  n = ZSTD_compressCCtx (za->cctx, za->cbuf, za->cbuf_size, in, ZPAGE_SIZE,
                         LEVEL);
  if (ZSTD_isError (n))
    abort ();                   /* the buffer is ZSTD_compressBound */
  b = malloc (sizeof *b + n);
  if (b == NULL) {
    errno = ENOMEM;
    return -1;
  }
  b->len = n;
  memcpy (b->data, za->cbuf, n);
  uint64_t off = page << ZPAGE_SHIFT, clen = n;
  NBDKIT_PROBE (allocator_zstd_compress, PROBE_ID, PROBE_COOKIE, off,
                (uint64_t) ZPAGE_SIZE, clen);
  drop_blob (za, slot);
  *slot = b;
  za->pages++;
  za->compressed += n;
  return 0;
}

static void
za_read (struct allocator *a, void *buf, uint32_t count, uint64_t offset)
{
  struct zstd_allocator *za = za_of (a);
  unsigned char *out = buf;

  pthread_mutex_lock (&za->lock);
  while (count > 0) {
    uint64_t page = offset >> ZPAGE_SHIFT;
    uint32_t in_page = offset & (ZPAGE_SIZE - 1);
    uint32_t n = MIN (ZPAGE_SIZE - in_page, count);

    if (n == ZPAGE_SIZE)
      get_page (za, page, out);
    else {
      get_page (za, page, za->page);
      memcpy (out, za->page + in_page, n);
    }
    out += n;
    offset += n;
    count -= n;
  }
  pthread_mutex_unlock (&za->lock);
}

/* Write COUNT bytes of IN (or zeroes if IN is NULL) at OFFSET.  With
 * keep_zero_writes, a page that was written stays stored when it holds
 * only zeroes, whether a write or zeroing part of it made it so (as in
 * nbdkit's zstd array); zeroing a whole page always drops it.
 */
static int
write_or_zero (struct zstd_allocator *za, const unsigned char *in,
               uint32_t count, uint64_t offset)
{
  const bool keep_zero = za->keep_zero_writes;
  int r = 0;

  while (count > 0) {
    uint64_t page = offset >> ZPAGE_SHIFT;
    uint32_t in_page = offset & (ZPAGE_SIZE - 1);
    uint32_t n = MIN (ZPAGE_SIZE - in_page, count);
    void **slot = in == NULL ? find_slot (za, page, false) : NULL;

    if (n == ZPAGE_SIZE && in != NULL)
      r = put_page (za, page, in, keep_zero);
    else if (in == NULL && (slot == NULL || *slot == NULL))
      ;                         /* zeroing a page not stored */
    else if (n == ZPAGE_SIZE)
      drop_blob (za, slot);
    else {
      get_page (za, page, za->page);
      if (in != NULL)
        memcpy (za->page + in_page, in, n);
      else
        memset (za->page + in_page, 0, n);
      r = put_page (za, page, za->page, keep_zero);
    }
    if (r == -1)
      break;
    if (in != NULL)
      in += n;
    offset += n;
    count -= n;
  }
  return r;
}

static int
za_write (struct allocator *a, const void *buf, uint32_t count,
          uint64_t offset)
{
  struct zstd_allocator *za = za_of (a);
  int r;

  pthread_mutex_lock (&za->lock);
  r = write_or_zero (za, buf, count, offset);
  pthread_mutex_unlock (&za->lock);
  return r;
}

/* Free the subtree in *SLOT, at LEVEL (0: a blob). */
static void
free_subtree (struct zstd_allocator *za, void **slot, unsigned level)
{
  struct znode *node = *slot;
  unsigned i;

  if (node == NULL)
    return;
  if (level == 0) {
    drop_blob (za, slot);
    return;
  }
  for (i = 0; i < FANOUT; ++i)
    free_subtree (za, &node->slot[i], level - 1);
  free (node);
  *slot = NULL;
}

/* Drop the whole pages FIRST..LAST below the node in *SLOT at LEVEL,
 * whose first page is BASE, and free nodes left empty.
 */
static void
zero_pages (struct zstd_allocator *za, void **slot, unsigned level,
            uint64_t base, uint64_t first, uint64_t last)
{
  struct znode *node = *slot;
  uint64_t per_slot = UINT64_C (1) << (FANOUT_SHIFT * (level - 1));
  unsigned i, lo, hi;
  bool empty = true;

  if (node == NULL)
    return;
  lo = first > base ? (first - base) / per_slot : 0;
  hi = MIN ((last - base) / per_slot, (uint64_t) FANOUT - 1);
  for (i = lo; i <= hi; ++i) {
    uint64_t child = base + i * per_slot;

    if (node->slot[i] == NULL)
      continue;
    if (first <= child && child + per_slot - 1 <= last)
      free_subtree (za, &node->slot[i], level - 1);
    else
      zero_pages (za, &node->slot[i], level - 1, child, first, last);
  }
  for (i = 0; i < FANOUT && empty; ++i)
    empty = node->slot[i] == NULL;
  if (empty) {
    free (node);
    *slot = NULL;
  }
}

static int
za_zero (struct allocator *a, uint32_t count, uint64_t offset)
{
  struct zstd_allocator *za = za_of (a);
  uint64_t end = offset + count;
  uint64_t first = (offset + ZPAGE_SIZE - 1) >> ZPAGE_SHIFT;
  uint64_t stop = end >> ZPAGE_SHIFT;   /* whole pages: FIRST .. STOP-1 */
  int r = 0;

  if (count == 0)
    return 0;
  pthread_mutex_lock (&za->lock);
  if (first >= stop)            /* within one or two pages, no whole one */
    r = write_or_zero (za, NULL, count, offset);
  else {
    if (offset < first << ZPAGE_SHIFT)
      r = write_or_zero (za, NULL, (first << ZPAGE_SHIFT) - offset, offset);
    if (r == 0 && end > stop << ZPAGE_SHIFT)
      r = write_or_zero (za, NULL, end - (stop << ZPAGE_SHIFT),
                         stop << ZPAGE_SHIFT);
    zero_pages (za, &za->root, za->depth, 0, first, stop - 1);
  }
  pthread_mutex_unlock (&za->lock);
  return r;
}

/* Runs of an extents walk, merged as they come. */
struct walk {
  allocator_emit_fn emit;
  void *opaque;
  bool one, stop, have;
  bool allocated;
  uint64_t offset, length;
  int r;
};

static void
walk_flush (struct walk *w)
{
  if (w->emit (w->opaque, w->offset, w->length, w->allocated) == -1) {
    w->r = -1;
    w->stop = true;
  }
  else if (w->one)
    w->stop = true;
}

static void
walk_add (struct walk *w, uint64_t offset, uint64_t length, bool allocated)
{
  if (w->have && w->allocated == allocated) {
    w->length += length;
    return;
  }
  if (w->have) {
    walk_flush (w);
    if (w->stop)
      return;
  }
  w->have = true;
  w->allocated = allocated;
  w->offset = offset;
  w->length = length;
}

/* Describe [START, END) below P, at LEVEL (0: a blob), which covers
 * bytes from BASE.
 */
static void
walk_tree (void *p, unsigned level, uint64_t base, uint64_t start,
           uint64_t end, struct walk *w)
{
  struct znode *node = p;
  uint64_t span, i, lo, hi;

  if (p == NULL || level == 0) {
    walk_add (w, start, end - start, p != NULL);
    return;
  }
  span = slot_span (level);
  lo = (start - base) / span;
  hi = MIN ((end - 1 - base) / span, (uint64_t) FANOUT - 1);
  for (i = lo; i <= hi && !w->stop; ++i) {
    uint64_t child = base + i * span;

    walk_tree (node->slot[i], level - 1, child, MAX (start, child),
               MIN (end, child + span), w);
  }
}

static int
za_extents (struct allocator *a, uint32_t count, uint64_t offset, bool one,
            allocator_emit_fn emit, void *opaque)
{
  struct zstd_allocator *za = za_of (a);
  struct walk w = { .emit = emit, .opaque = opaque, .one = one };

  if (count == 0)
    return 0;
  pthread_mutex_lock (&za->lock);
  walk_tree (za->root, za->depth, 0, offset, offset + count, &w);
  pthread_mutex_unlock (&za->lock);
  /* The last run is emitted unlocked: EMIT may take its time. */
  if (!w.stop && w.have)
    walk_flush (&w);
  return w.r;
}

static void
za_destroy (struct allocator *a)
{
  struct zstd_allocator *za = za_of (a);

  if (a->debug && za->pages > 0)
    a->debug ("allocator zstd: %" PRIu64 " pages (%" PRIu64 " bytes) "
              "stored in %" PRIu64 " compressed bytes, ratio %.1f:1",
              za->pages, za->pages * ZPAGE_SIZE, za->compressed,
              (double) za->pages * ZPAGE_SIZE / za->compressed);
  free_subtree (za, &za->root, za->depth);
  ZSTD_freeCCtx (za->cctx);
  ZSTD_freeDCtx (za->dctx);
  free (za->page);
  free (za->cbuf);
  pthread_mutex_destroy (&za->lock);
  free (za);
}

static void
za_keep_zero_writes (struct allocator *a)
{
  za_of (a)->keep_zero_writes = true;
}

static const struct allocator_ops zstd_ops = {
  .type = "zstd",
  .destroy = za_destroy,
  .read = za_read,
  .write = za_write,
  .zero = za_zero,
  .extents = za_extents,
  .keep_zero_writes = za_keep_zero_writes,
};

struct allocator *
zstd_allocator_create (uint64_t size, allocator_debug_fn debug,
                       const char **why)
{
  struct zstd_allocator *za = calloc (1, sizeof *za);
  uint64_t last_page = size > 0 ? (size - 1) >> ZPAGE_SHIFT : 0;

  if (za == NULL)
    return NULL;
  za->a.ops = &zstd_ops;
  za->depth = 1;
  while (za->depth < MAX_DEPTH &&
         (last_page >> (FANOUT_SHIFT * za->depth)) != 0)
    za->depth++;
  pthread_mutex_init (&za->lock, NULL);
  za->cctx = ZSTD_createCCtx ();
  za->dctx = ZSTD_createDCtx ();
  za->page = malloc (ZPAGE_SIZE);
  za->cbuf_size = ZSTD_compressBound (ZPAGE_SIZE);
  za->cbuf = malloc (za->cbuf_size);
  if (!za->cctx || !za->dctx || !za->page || !za->cbuf) {
    za_destroy (&za->a);
    errno = ENOMEM;
    return NULL;
  }
  return &za->a;
}

#endif /* HAVE_LIBZSTD */
