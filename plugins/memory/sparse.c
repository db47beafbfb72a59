/* The memory plugin's sparse store: a radix tree of 4 KiB pages.
 *
 * The disk is cut into pages of SPARSE_PAGE_SIZE bytes, numbered from
 * 0.  Pages are found through a fixed-depth tree of nodes, each node an
 * array of 512 pointers indexed by 9 bits of the page number; the
 * lowest nodes (level 1) point at pages, higher ones at nodes.  The
 * depth is chosen once from the disk size, so a 1 GiB disk has two
 * levels and a 2^63 byte disk six.  A NULL pointer at any level means
 * "everything below reads as zeroes", which is what lets huge empty
 * disks cost one pointer, and lets extents and zeroing skip empty
 * subtrees in one step.
 *
 * Locking.  LOCK is a read-write lock over the shape of the tree:
 *
 *  - Shared holders (read, write, extents) may add nodes and pages but
 *    never remove them.  An addition is published with a
 *    compare-and-swap into a NULL slot after the new memory is filled
 *    in, and readers load slots with acquire ordering, so two writers
 *    racing to create the same page agree on one winner and nobody
 *    sees a half-built page.
 *  - Only the exclusive holder (zero) removes pages and nodes, so a
 *    shared holder may use any pointer it loaded until it unlocks.
 *
 * Page contents are copied with plain memcpy under the shared lock:
 * overlapping concurrent writes and reads give whatever mix of bytes
 * the CPU produces, as on a real disk; requests that do not overlap
 * never disturb each other.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "sparse.h"

#define PAGE_SHIFT 12
#define FANOUT_SHIFT 9
#define FANOUT (1u << FANOUT_SHIFT)
/* Six levels of 9 bits over 12 bits of page offset reach 2^66 bytes,
 * more than the largest disk (2^63 - 1 bytes).
 */
#define MAX_DEPTH 6

/* Give freed memory back to the kernel after this many bytes have been
 * released since the last time (see release_memory).
 */
#define TRIM_THRESHOLD (64ull << 20)

_Static_assert (SPARSE_PAGE_SIZE == 1u << PAGE_SHIFT, "page size");

struct node {
  void *slot[FANOUT];
};

struct sparse {
  pthread_rwlock_t lock;        /* see the top of the file */
  void *root;                   /* node at level DEPTH, or NULL */
  unsigned depth;               /* 1 .. MAX_DEPTH, fixed */
  uint64_t pages;               /* atomic: pages stored */
  uint64_t freed;               /* atomic: bytes freed since last trim */
};

/* Atomic access to the tree's pointers. */
static inline void *
load_slot (void **slot)
{
  return __atomic_load_n (slot, __ATOMIC_ACQUIRE);
}

/* Store NEW in *SLOT if it is still NULL.  Returns what *SLOT holds
 * afterwards: NEW if we won, the other thread's pointer if we lost.
 */
static inline void *
publish_slot (void **slot, void *new)
{
  void *expected = NULL;

  if (__atomic_compare_exchange_n (slot, &expected, new, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return new;
  return expected;
}

/* Shift from a byte offset to the child index of a node at LEVEL. */
static inline unsigned
child_shift (unsigned level)
{
  return PAGE_SHIFT + FANOUT_SHIFT * (level - 1);
}

static bool
is_zero (const unsigned char *p, size_t n)
{
  size_t i;

  /* Once the first 16 bytes are known to be zero, comparing the buffer
   * with itself shifted by 16 proves the rest zero by induction, and
   * memcmp is much faster than a byte loop.
   */
  for (i = 0; i < n && i < 16; ++i)
    if (p[i] != 0)
      return false;
  return n <= 16 || memcmp (p, p + 16, n - 16) == 0;
}

static bool
node_is_empty (const struct node *node)
{
  unsigned i;

  for (i = 0; i < FANOUT; ++i)
    if (node->slot[i] != NULL)
      return false;
  return true;
}

struct sparse *
sparse_create (uint64_t size)
{
  struct sparse *s;
  pthread_rwlockattr_t attr;
  uint64_t last_page;
  int err;

  if (size > INT64_MAX) {
    errno = EINVAL;
    return NULL;
  }

  s = calloc (1, sizeof *s);
  if (s == NULL)
    return NULL;

  last_page = size > 0 ? (size - 1) >> PAGE_SHIFT : 0;
  s->depth = 1;
  while (s->depth < MAX_DEPTH && (last_page >> (FANOUT_SHIFT * s->depth)) != 0)
    s->depth++;

  /* Zeroing takes the lock exclusively; prefer it over new readers so a
   * steady stream of reads cannot starve a trim forever.
   */
  pthread_rwlockattr_init (&attr);
#ifdef __GLIBC__
  pthread_rwlockattr_setkind_np (&attr,
                                 PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
  err = pthread_rwlock_init (&s->lock, &attr);
  pthread_rwlockattr_destroy (&attr);
  if (err != 0) {
    free (s);
    errno = err;
    return NULL;
  }
  return s;
}

/* Free everything under P, which sits at LEVEL (0 = a page).  Called
 * with the lock held exclusively, or when the store is being destroyed.
 */
static void
free_subtree (struct sparse *s, void *p, unsigned level)
{
  if (level == 0) {
    free (p);
    __atomic_sub_fetch (&s->pages, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch (&s->freed, SPARSE_PAGE_SIZE, __ATOMIC_RELAXED);
  }
  else {
    struct node *node = p;
    unsigned i;

    for (i = 0; i < FANOUT; ++i)
      if (node->slot[i] != NULL)
        free_subtree (s, node->slot[i], level - 1);
    free (node);
    __atomic_add_fetch (&s->freed, sizeof *node, __ATOMIC_RELAXED);
  }
}

void
sparse_destroy (struct sparse *s)
{
  if (s == NULL)
    return;
  if (s->root != NULL)
    free_subtree (s, s->root, s->depth);
  pthread_rwlock_destroy (&s->lock);
  free (s);
}

uint64_t
sparse_pages_stored (struct sparse *s)
{
  return __atomic_load_n (&s->pages, __ATOMIC_RELAXED);
}

/* Find the level 1 node covering page PAGE, or NULL if there is none.
 * With CREATE, build missing nodes on the way; then NULL means out of
 * memory.  Caller holds the lock (shared is enough).
 */
static struct node *
find_leaf (struct sparse *s, uint64_t page, bool create)
{
  void **slot = &s->root;
  unsigned level;

  for (level = s->depth; ; --level) {
    void *p = load_slot (slot);

    if (p == NULL) {
      if (!create)
        return NULL;
      p = calloc (1, sizeof (struct node));
      if (p == NULL)
        return NULL;
      void *winner = publish_slot (slot, p);
      if (winner != p) {
        free (p);
        p = winner;
      }
    }
    if (level == 1)
      return p;
    slot = &((struct node *) p)->slot[(page >> (FANOUT_SHIFT * (level - 1)))
                                      & (FANOUT - 1)];
  }
}

/* Walks over a byte range keep the level 1 node of the current page,
 * so that consecutive pages do not each walk down from the root.
 */
struct leaf_cursor {
  uint64_t key;                 /* page >> FANOUT_SHIFT of LEAF */
  bool valid;
  struct node *leaf;            /* may be NULL: no pages there */
};

static struct node *
cursor_leaf (struct sparse *s, struct leaf_cursor *c, uint64_t page,
             bool create)
{
  uint64_t key = page >> FANOUT_SHIFT;

  if (!c->valid || c->key != key || (create && c->leaf == NULL)) {
    c->leaf = find_leaf (s, page, create);
    c->key = key;
    c->valid = c->leaf != NULL || !create;
  }
  return c->leaf;
}

void
sparse_read (struct sparse *s, void *buf, uint32_t count, uint64_t offset)
{
  unsigned char *out = buf;
  struct leaf_cursor c = { .valid = false };

  pthread_rwlock_rdlock (&s->lock);
  while (count > 0) {
    uint64_t page = offset >> PAGE_SHIFT;
    size_t in_page = offset & (SPARSE_PAGE_SIZE - 1);
    size_t n = SPARSE_PAGE_SIZE - in_page;
    struct node *leaf;
    const unsigned char *data = NULL;

    if (n > count)
      n = count;
    leaf = cursor_leaf (s, &c, page, false);
    if (leaf != NULL)
      data = load_slot (&leaf->slot[page & (FANOUT - 1)]);
    if (data != NULL)
      memcpy (out, data + in_page, n);
    else
      memset (out, 0, n);

    out += n;
    offset += n;
    count -= n;
  }
  pthread_rwlock_unlock (&s->lock);
}

int
sparse_write (struct sparse *s, const void *buf, uint32_t count,
              uint64_t offset)
{
  const unsigned char *in = buf;
  struct leaf_cursor c = { .valid = false };
  int r = 0;

  pthread_rwlock_rdlock (&s->lock);
  while (count > 0) {
    uint64_t page = offset >> PAGE_SHIFT;
    size_t in_page = offset & (SPARSE_PAGE_SIZE - 1);
    size_t n = SPARSE_PAGE_SIZE - in_page;
    struct node *leaf;
    unsigned char *data = NULL;
    void **slot;

    if (n > count)
      n = count;
    leaf = cursor_leaf (s, &c, page, false);
    if (leaf != NULL)
      data = load_slot (&leaf->slot[page & (FANOUT - 1)]);

    if (data == NULL && !is_zero (in, n)) {
      unsigned char *fresh;

      leaf = cursor_leaf (s, &c, page, true);
      fresh = malloc (SPARSE_PAGE_SIZE);
      if (leaf == NULL || fresh == NULL) {
        free (fresh);
        errno = ENOMEM;
        r = -1;
        break;
      }
      memset (fresh, 0, in_page);
      memcpy (fresh + in_page, in, n);
      memset (fresh + in_page + n, 0, SPARSE_PAGE_SIZE - in_page - n);

      slot = &leaf->slot[page & (FANOUT - 1)];
      data = publish_slot (slot, fresh);
      if (data == fresh) {
        __atomic_add_fetch (&s->pages, 1, __ATOMIC_RELAXED);
        data = NULL;            /* already written */
      }
      else
        free (fresh);           /* lost the race: write into the winner */
    }
    if (data != NULL)
      memcpy (data + in_page, in, n);

    in += n;
    offset += n;
    count -= n;
  }
  pthread_rwlock_unlock (&s->lock);
  return r;
}

/* Zero [START, END) below NODE, a node at LEVEL covering bytes from
 * BASE.  Lock held exclusively.
 */
static void
zero_node (struct sparse *s, struct node *node, unsigned level,
           uint64_t base, uint64_t start, uint64_t end)
{
  unsigned shift = child_shift (level);
  uint64_t span = UINT64_C (1) << shift;
  uint64_t first = start > base ? (start - base) >> shift : 0;
  uint64_t last = (end - 1 - base) >> shift;
  uint64_t i;

  if (last > FANOUT - 1)
    last = FANOUT - 1;

  for (i = first; i <= last; ++i) {
    void *child = node->slot[i];
    uint64_t child_start = base + i * span;
    uint64_t child_end = child_start + span;

    if (child == NULL)
      continue;

    if (start <= child_start && child_end <= end) {
      free_subtree (s, child, level - 1);
      node->slot[i] = NULL;
    }
    else if (level == 1) {
      unsigned char *data = child;
      uint64_t lo = (start > child_start ? start : child_start) - child_start;
      uint64_t hi = (end < child_end ? end : child_end) - child_start;

      memset (data + lo, 0, hi - lo);
      if (is_zero (data, SPARSE_PAGE_SIZE)) {
        free_subtree (s, data, 0);
        node->slot[i] = NULL;
      }
    }
    else {
      zero_node (s, child, level - 1, child_start, start, end);
      if (node_is_empty (child)) {
        free_subtree (s, child, level - 1);
        node->slot[i] = NULL;
      }
    }
  }
}

/* free() rarely hands small blocks back to the kernel by itself, so
 * after a large amount has been freed ask the allocator to release
 * whatever whole pages it now holds unused.
 */
static void
release_memory (struct sparse *s)
{
#ifdef __GLIBC__
  if (__atomic_load_n (&s->freed, __ATOMIC_RELAXED) >= TRIM_THRESHOLD) {
    __atomic_store_n (&s->freed, 0, __ATOMIC_RELAXED);
    malloc_trim (0);
  }
#endif
}

void
sparse_zero (struct sparse *s, uint32_t count, uint64_t offset)
{
  if (count == 0)
    return;

  pthread_rwlock_wrlock (&s->lock);
  if (s->root != NULL) {
    zero_node (s, s->root, s->depth, 0, offset, offset + count);
    if (node_is_empty (s->root)) {
      free_subtree (s, s->root, s->depth);
      s->root = NULL;
    }
  }
  pthread_rwlock_unlock (&s->lock);

  release_memory (s);
}

/* State of an extents walk: the run being built, and where to send
 * finished runs.
 */
struct extents_walk {
  sparse_emit_fn emit;
  void *opaque;
  bool one;
  bool stop;                    /* emitted all that was wanted, or failed */
  int r;
  bool have_run;
  bool run_allocated;
  uint64_t run_offset;
  uint64_t run_length;
};

static void
walk_flush (struct extents_walk *w)
{
  if (w->emit (w->opaque, w->run_offset, w->run_length,
               w->run_allocated) == -1) {
    w->r = -1;
    w->stop = true;
  }
  else if (w->one)
    w->stop = true;
}

/* Add the next piece of the range, extending the current run when the
 * piece is of the same kind (pieces arrive in order with no gaps).
 */
static void
walk_add (struct extents_walk *w, uint64_t offset, uint64_t length,
          bool allocated)
{
  if (w->have_run) {
    if (w->run_allocated == allocated) {
      w->run_length += length;
      return;
    }
    walk_flush (w);
    if (w->stop)
      return;
  }
  w->have_run = true;
  w->run_allocated = allocated;
  w->run_offset = offset;
  w->run_length = length;
}

/* Describe [START, END) below NODE, a node at LEVEL covering bytes from
 * BASE.  Lock held (shared).
 */
static void
extents_node (struct node *node, unsigned level, uint64_t base,
              uint64_t start, uint64_t end, struct extents_walk *w)
{
  unsigned shift = child_shift (level);
  uint64_t span = UINT64_C (1) << shift;
  uint64_t first = start > base ? (start - base) >> shift : 0;
  uint64_t last = (end - 1 - base) >> shift;
  uint64_t i;

  if (last > FANOUT - 1)
    last = FANOUT - 1;

  for (i = first; i <= last && !w->stop; ++i) {
    void *child = load_slot (&node->slot[i]);
    uint64_t child_start = base + i * span;
    uint64_t child_end = child_start + span;
    uint64_t lo = start > child_start ? start : child_start;
    uint64_t hi = end < child_end ? end : child_end;

    if (child == NULL)
      walk_add (w, lo, hi - lo, false);
    else if (level == 1)
      walk_add (w, lo, hi - lo, true);
    else
      extents_node (child, level - 1, child_start, start, end, w);
  }
}

int
sparse_extents (struct sparse *s, uint32_t count, uint64_t offset,
                bool one, sparse_emit_fn emit, void *opaque)
{
  struct extents_walk w = { .emit = emit, .opaque = opaque, .one = one };
  void *root;

  if (count == 0)
    return 0;

  pthread_rwlock_rdlock (&s->lock);
  root = load_slot (&s->root);
  if (root == NULL)
    walk_add (&w, offset, count, false);
  else
    extents_node (root, s->depth, 0, offset, offset + count, &w);
  if (!w.stop && w.have_run)
    walk_flush (&w);
  pthread_rwlock_unlock (&s->lock);

  return w.r;
}
