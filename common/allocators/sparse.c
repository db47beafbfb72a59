/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The sparse allocator's store: a radix tree of 4 KiB pages.
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
 * Small leaves.  A full level 1 node costs 4 KiB however few of its 512
 * pages exist, which for writes scattered over a large disk (one page
 * per 2 MiB) would double the memory used.  So a level 1 node starts
 * as a small leaf: an unsorted list of up to SMALL_CAP_MIN entries,
 * each a page's address with its index in the leaf in the low bits
 * (pages are 4 KiB aligned).  When one is full it is replaced by a
 * bigger one (SMALL_CAP_MAX entries) and that in turn by a full node,
 * which keeps the leaves' overhead under 2% of the pages they hold at
 * any density.  (The levels above cost at most 4 KiB per GiB of disk
 * that holds data.)  A pointer to a small leaf has its low bit set.
 *
 * Locking.  LOCK is a read-write lock over the shape of the tree:
 *
 *  - Shared holders (read, write, extents) may add nodes and pages but
 *    never remove them.  An addition is published with a
 *    compare-and-swap into a NULL slot (or empty entry) after the new
 *    memory is filled in, and readers load slots with acquire ordering,
 *    so two writers racing to create the same page agree on one winner
 *    and nobody sees a half-built page.  A small leaf's entries fill
 *    from the front, so a page is found, or claimed, at or before the
 *    first empty entry.
 *  - A full small leaf never changes again, so a shared holder may copy
 *    it into a bigger leaf and swap that into the parent's slot; the
 *    old one is retired, not freed, since others may still be reading
 *    it, and freed by the next exclusive holder.  A reader still using
 *    it misses only pages added by requests running at the same time.
 *  - Only the exclusive holder (zero) removes pages and nodes, so a
 *    shared holder may use any pointer it loaded until it unlocks.
 *
 * Pages come from the arena (arena.c), not malloc: they arrive zeroed
 * and are packed in the order they are first written, and freeing them
 * drops their memory at once.  Nodes and small leaves come from malloc.
 *
 * Page contents are copied with plain memcpy under the shared lock:
 * overlapping concurrent writes and reads give whatever mix of bytes
 * the CPU produces, as on a real disk; requests that do not overlap
 * never disturb each other.
 *
 * Mapped writes (sparse_map_write) receive a payload into pages of
 * their own and store them when the request runs.  A page the write
 * covers whole replaces the stored one, in a full level 1 node, by a
 * compare-and-swap under the shared lock, so an overwrite costs no
 * copy.  The page it replaced may still be in a reader's hands: it
 * goes on the OLD list, and only an exclusive holder moves old pages
 * to the SPARE list, from which mapped writes take pages to receive
 * into (their stale bytes are all overwritten by the payload): the
 * writer tries the lock exclusively, without waiting, once RECYCLE_AT
 * old pages have gathered, and trims and zeroes empty both lists.
 * Both are short (SPARE_MAX, OLD_MAX): the memory they keep is a few
 * MiB at most, above the pages stored.
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

#include "arena.h"
#include "iszero.h"
#include "minmax.h"
#include "sparse.h"
#include "vector.h"

#define PAGE_SHIFT 12
#define FANOUT_SHIFT 9
#define FANOUT (1u << FANOUT_SHIFT)
/* Six levels of 9 bits over 12 bits of page offset reach 2^66 bytes,
 * more than the largest disk (2^63 - 1 bytes).
 */
#define MAX_DEPTH 6

/* Ask malloc to give freed nodes back to the kernel after this many
 * bytes of them have been freed since the last time (see
 * release_memory).  A node serves up to 512 pages.
 */
#define TRIM_THRESHOLD (8ull << 20)

_Static_assert (SPARSE_PAGE_SIZE == 1u << PAGE_SHIFT, "page size");
_Static_assert (SPARSE_PAGE_SIZE == ARENA_PAGE_SIZE, "arena page size");

struct node {
  void *slot[FANOUT];
};

/* Sizes of small leaves: with malloc's 8 byte header they take 64 and
 * 512 bytes.
 */
#define SMALL_CAP_MIN 6
#define SMALL_CAP_MAX 62
#define SMALL_TAG ((uintptr_t) 1)
#define INDEX_MASK ((uintptr_t) SPARSE_PAGE_SIZE - 1)

_Static_assert (FANOUT <= SPARSE_PAGE_SIZE, "index fits below a page");

/* Pages kept for mapped writes to receive into, and pages replaced
 * but maybe still being read (2 MiB of each at most).  Once RECYCLE_AT
 * of those have gathered, a writer that finds the lock free takes it
 * exclusively for a moment to make them spare.
 */
#define SPARE_MAX 512
#define OLD_MAX 512
#define RECYCLE_AT 256

struct small_leaf {
  unsigned cap;                 /* SMALL_CAP_MIN or _MAX, fixed */
  uintptr_t entry[];            /* page | index, or 0; atomic */
};

DEFINE_VECTOR_TYPE (leaf_vector, struct small_leaf *);

struct sparse {
  pthread_rwlock_t lock;        /* see the top of the file */
  void *root;                   /* node at level DEPTH, or NULL */
  unsigned depth;               /* 1 .. MAX_DEPTH, fixed */
  struct arena *arena;          /* where pages come from */
  uint64_t pages;               /* atomic: pages stored */
  uint64_t freed;               /* atomic: node bytes freed since last trim */
  pthread_mutex_t retire_lock;  /* protects RETIRED */
  leaf_vector retired;          /* replaced small leaves, not yet freed */
  pthread_mutex_t spare_lock;   /* protects the four fields below */
  unsigned char *spare[SPARE_MAX]; /* pages not in the tree: no reader */
  size_t nr_spare;
  unsigned char *old[OLD_MAX];  /* pages replaced: readers may hold them */
  size_t nr_old;
  bool keep_zero_writes;        /* set before the first write */
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

/* Store NEW in *SLOT if it still holds OLD.  Returns true if it did. */
static inline bool
replace_slot (void **slot, void *old, void *new)
{
  return __atomic_compare_exchange_n (slot, &old, new, false,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static inline bool
is_small (const void *leaf)
{
  return ((uintptr_t) leaf & SMALL_TAG) != 0;
}

static inline struct small_leaf *
small_of (void *leaf)
{
  return (struct small_leaf *) ((uintptr_t) leaf & ~SMALL_TAG);
}

static inline size_t
small_size (unsigned cap)
{
  return sizeof (struct small_leaf) + cap * sizeof (uintptr_t);
}

/* A new empty small leaf, as a tagged pointer, or NULL. */
static void *
small_new (unsigned cap)
{
  struct small_leaf *sl = calloc (1, small_size (cap));

  if (sl == NULL)
    return NULL;
  sl->cap = cap;
  return (void *) ((uintptr_t) sl | SMALL_TAG);
}

/* Page I of LEAF (a level 1 node of either form), or NULL.  Lock held
 * (shared is enough).
 */
static unsigned char *
leaf_get (void *leaf, unsigned i)
{
  struct small_leaf *sl;
  unsigned k;

  if (!is_small (leaf))
    return load_slot (&((struct node *) leaf)->slot[i]);
  sl = small_of (leaf);
  for (k = 0; k < sl->cap; ++k) {
    uintptr_t e = __atomic_load_n (&sl->entry[k], __ATOMIC_ACQUIRE);

    if (e == 0)
      break;
    if ((e & INDEX_MASK) == i)
      return (unsigned char *) (e & ~INDEX_MASK);
  }
  return NULL;
}

/* Make FRESH page I of LEAF unless it has one already.  Returns the
 * page stored there now (FRESH if we won), or NULL if LEAF is a small
 * leaf with no room.  Lock held (shared is enough).
 */
static unsigned char *
leaf_publish (void *leaf, unsigned i, unsigned char *fresh)
{
  struct small_leaf *sl;
  unsigned k;

  if (!is_small (leaf))
    return publish_slot (&((struct node *) leaf)->slot[i], fresh);
  sl = small_of (leaf);
  for (k = 0; k < sl->cap; ++k) {
    uintptr_t e = __atomic_load_n (&sl->entry[k], __ATOMIC_ACQUIRE);

    /* On failure the CAS loads the winner's entry into E. */
    if (e == 0 &&
        __atomic_compare_exchange_n (&sl->entry[k], &e, (uintptr_t) fresh | i,
                                     false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
      return fresh;
    if ((e & INDEX_MASK) == i)
      return (unsigned char *) (e & ~INDEX_MASK);
  }
  return NULL;
}

/* LEAF, a small leaf in *SLOT, is full: replace it with a bigger leaf
 * holding the same pages.  Returns the leaf in *SLOT afterwards (ours
 * or another thread's), or NULL if out of memory.  Lock held shared.
 */
static void *
leaf_grow (struct sparse *s, void **slot, void *leaf)
{
  struct small_leaf *old = small_of (leaf);
  void *bigger;
  unsigned k;
  bool room, won = false;

  if (old->cap < SMALL_CAP_MAX) {
    bigger = small_new (SMALL_CAP_MAX);
    if (bigger != NULL)
      memcpy (small_of (bigger)->entry, old->entry,
              old->cap * sizeof old->entry[0]);
  }
  else {
    struct node *node = calloc (1, sizeof *node);

    if (node != NULL)
      for (k = 0; k < old->cap; ++k)
        node->slot[old->entry[k] & INDEX_MASK] =
          (void *) (old->entry[k] & ~INDEX_MASK);
    bigger = node;
  }
  if (bigger == NULL)
    return NULL;

  /* Swap it in with room already made to retire the old one, so that
   * nothing can fail once others can see the new leaf.
   */
  pthread_mutex_lock (&s->retire_lock);
  room = leaf_vector_reserve (&s->retired, 1) == 0;
  if (room) {
    won = replace_slot (slot, leaf, bigger);
    if (won)
      s->retired.ptr[s->retired.len++] = old;
  }
  pthread_mutex_unlock (&s->retire_lock);

  if (won)
    return bigger;
  free (is_small (bigger) ? (void *) small_of (bigger) : bigger);
  if (!room)
    return NULL;
  return load_slot (slot);      /* another thread grew it first */
}

/* Free the retired small leaves.  Lock held exclusively, so nobody is
 * reading them.
 */
static void
free_retired (struct sparse *s)
{
  size_t i;

  for (i = 0; i < s->retired.len; ++i) {
    __atomic_add_fetch (&s->freed, small_size (s->retired.ptr[i]->cap),
                        __ATOMIC_RELAXED);
    free (s->retired.ptr[i]);
  }
  s->retired.len = 0;
}

/* Shift from a byte offset to the child index of a node at LEVEL. */
static inline unsigned
child_shift (unsigned level)
{
  return PAGE_SHIFT + FANOUT_SHIFT * (level - 1);
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
  pthread_mutex_init (&s->retire_lock, NULL);
  pthread_mutex_init (&s->spare_lock, NULL);
  s->arena = arena_create ();
  if (s->arena == NULL) {
    err = errno;
    pthread_mutex_destroy (&s->spare_lock);
    pthread_mutex_destroy (&s->retire_lock);
    pthread_rwlock_destroy (&s->lock);
    free (s);
    errno = err;
    return NULL;
  }
  return s;
}

/* Free everything under P, which sits at LEVEL (0 = a page).  Called
 * with the lock held exclusively, or when the store is being destroyed.
 * Pages go back to the arena, to be released by the caller.
 */
static void
free_subtree (struct sparse *s, void *p, unsigned level)
{
  if (level == 0) {
    arena_free (s->arena, p);
    __atomic_sub_fetch (&s->pages, 1, __ATOMIC_RELAXED);
  }
  else if (is_small (p)) {
    struct small_leaf *sl = small_of (p);
    unsigned k;

    for (k = 0; k < sl->cap && sl->entry[k] != 0; ++k)
      free_subtree (s, (void *) (sl->entry[k] & ~INDEX_MASK), 0);
    __atomic_add_fetch (&s->freed, small_size (sl->cap), __ATOMIC_RELAXED);
    free (sl);
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
  free_retired (s);
  leaf_vector_reset (&s->retired);
  arena_destroy (s->arena);     /* spare and old pages too */
  pthread_mutex_destroy (&s->spare_lock);
  pthread_mutex_destroy (&s->retire_lock);
  pthread_rwlock_destroy (&s->lock);
  free (s);
}

void
sparse_keep_zero_writes (struct sparse *s)
{
  s->keep_zero_writes = true;
}

uint64_t
sparse_pages_stored (struct sparse *s)
{
  return __atomic_load_n (&s->pages, __ATOMIC_RELAXED);
}

/* Find the level 1 node (either form) covering page PAGE, or NULL if
 * there is none, and set *SLOTP to the slot that points at it.  With
 * CREATE, build missing nodes on the way (a missing leaf starts small);
 * then NULL means out of memory.  Caller holds the lock (shared is
 * enough).
 */
static void *
find_leaf (struct sparse *s, uint64_t page, bool create, void ***slotp)
{
  void **slot = &s->root;
  unsigned level;

  for (level = s->depth; ; --level) {
    void *p = load_slot (slot);

    if (p == NULL) {
      if (!create)
        return NULL;
      p = level == 1 ? small_new (SMALL_CAP_MIN)
                     : calloc (1, sizeof (struct node));
      if (p == NULL)
        return NULL;
      void *winner = publish_slot (slot, p);
      if (winner != p) {
        free (level == 1 ? (void *) small_of (p) : p);
        p = winner;
      }
    }
    if (level == 1) {
      *slotp = slot;
      return p;
    }
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
  void *leaf;                   /* may be NULL: no pages there */
  void **slot;                  /* where LEAF was found */
};

static void *
cursor_leaf (struct sparse *s, struct leaf_cursor *c, uint64_t page,
             bool create)
{
  uint64_t key = page >> FANOUT_SHIFT;

  if (!c->valid || c->key != key || (create && c->leaf == NULL)) {
    c->leaf = find_leaf (s, page, create, &c->slot);
    c->key = key;
    c->valid = c->leaf != NULL || !create;
  }
  return c->leaf;
}

/* The page stored as PAGE, or NULL: a hole. */
static unsigned char *
cursor_page (struct sparse *s, struct leaf_cursor *c, uint64_t page)
{
  void *leaf = cursor_leaf (s, c, page, false);

  return leaf != NULL ? leaf_get (leaf, page & (FANOUT - 1)) : NULL;
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
    const unsigned char *data = NULL;

    n = MIN (n, (size_t) count);
    data = cursor_page (s, &c, page);
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

/* Pages never written read as zeroes from here. */
static const unsigned char hole_bytes[SPARSE_PAGE_SIZE];

int
sparse_map_read (struct sparse *s, uint32_t count, uint64_t offset,
                 struct iovec *iov, int *niov)
{
  struct leaf_cursor c = { .valid = false };
  int n = 0, max = *niov;

  pthread_rwlock_rdlock (&s->lock);
  while (count > 0) {
    uint64_t page = offset >> PAGE_SHIFT;
    size_t in_page = offset & (SPARSE_PAGE_SIZE - 1);
    size_t len = SPARSE_PAGE_SIZE - in_page;
    const unsigned char *data = NULL;

    len = MIN (len, (size_t) count);
    data = cursor_page (s, &c, page);
    data = data ? data + in_page : hole_bytes + in_page;
    /* Pages written in order sit side by side in an arena: merge. */
    if (n > 0 && (const unsigned char *) iov[n-1].iov_base +
        iov[n-1].iov_len == data)
      iov[n-1].iov_len += len;
    else if (n == max) {
      pthread_rwlock_unlock (&s->lock);
      errno = E2BIG;
      return -1;
    }
    else
      iov[n++] = (struct iovec) { (void *) data, len };
    offset += len;
    count -= len;
  }
  *niov = n;
  return 0;                     /* the lock stays held */
}

void
sparse_unmap_read (struct sparse *s)
{
  pthread_rwlock_unlock (&s->lock);
}

/* Store FRESH, a filled-in page, as page PAGE, creating the path to
 * it.  Returns the page stored there now: FRESH, or another thread's
 * if it won the race; NULL if out of memory.  Lock held shared.
 */
static unsigned char *
store_page (struct sparse *s, struct leaf_cursor *c, uint64_t page,
            unsigned char *fresh)
{
  void *leaf = cursor_leaf (s, c, page, true);
  unsigned char *stored = NULL;

  while (leaf != NULL &&
         (stored = leaf_publish (leaf, page & (FANOUT - 1), fresh)) == NULL)
    leaf = c->leaf = leaf_grow (s, c->slot, leaf);
  if (leaf == NULL) {
    c->valid = false;
    return NULL;
  }
  return stored;
}

/* The page that holds the next LEN bytes of a mapped write, found in
 * the iovecs that describe it: *AT and *INTO are a cursor over them.
 */
static unsigned char *
mapped_at (const struct iovec *iov, int *at, size_t *into, size_t len)
{
  unsigned char *p;

  while (*into == iov[*at].iov_len) {
    ++*at;
    *into = 0;
  }
  p = (unsigned char *) iov[*at].iov_base + *into;
  *into += len;
  return p;
}

/* Lend a spare page (stale bytes), or NULL if there is none. */
static unsigned char *
take_spare (struct sparse *s)
{
  unsigned char *page = NULL;

  pthread_mutex_lock (&s->spare_lock);
  if (s->nr_spare > 0)
    page = s->spare[--s->nr_spare];
  pthread_mutex_unlock (&s->spare_lock);
  return page;
}

/* Give back a page of a mapped write that was not stored.  WHOLE: the
 * payload covered it, so it can be lent again as it is; otherwise it
 * holds part of a payload among zeroes and goes back to the arena
 * (which hands it to the kernel, to come back zeroed).  Returns true
 * if the arena got it: arena_release is due.
 */
static bool
drop_page (struct sparse *s, unsigned char *page, bool whole)
{
  bool kept = false;

  if (whole) {
    pthread_mutex_lock (&s->spare_lock);
    kept = s->nr_spare < SPARE_MAX;
    if (kept)
      s->spare[s->nr_spare++] = page;
    pthread_mutex_unlock (&s->spare_lock);
  }
  if (!kept)
    arena_free (s->arena, page);
  return !kept;
}

/* Put OURS in place of *CUR as page I of LEAF, a full node, and keep
 * *CUR on the old list.  If another writer replaces it first, *CUR
 * follows and we try again.  False, changing nothing, if the old list
 * is full (then copy).  Lock held shared, so the slot is never NULL.
 */
static bool
replace_page (struct sparse *s, void *leaf, unsigned i,
              unsigned char **cur, unsigned char *ours)
{
  void **slot = &((struct node *) leaf)->slot[i];
  bool done = false;

  pthread_mutex_lock (&s->spare_lock);
  if (s->nr_old < OLD_MAX) {
    while (!replace_slot (slot, *cur, ours))
      *cur = load_slot (slot);
    s->old[s->nr_old++] = *cur;
    done = true;
  }
  pthread_mutex_unlock (&s->spare_lock);
  return done;
}

/* Move the old pages to the spare list, or with KEEP false give them
 * and the spare ones back to the arena.  Lock held exclusively, so no
 * reader still holds an old page.  Returns true if arena_release is
 * due.
 */
static bool
recycle_old (struct sparse *s, bool keep)
{
  bool freed = false;

  pthread_mutex_lock (&s->spare_lock);
  while (s->nr_old > 0) {
    unsigned char *page = s->old[--s->nr_old];

    if (keep && s->nr_spare < SPARE_MAX)
      s->spare[s->nr_spare++] = page;
    else {
      arena_free (s->arena, page);
      freed = true;
    }
  }
  while (!keep && s->nr_spare > 0) {
    arena_free (s->arena, s->spare[--s->nr_spare]);
    freed = true;
  }
  pthread_mutex_unlock (&s->spare_lock);
  return freed;
}

/* Store the pages of a mapped write whose payload has all arrived,
 * as sparse_write would have: a page of zeroes where none is stored
 * is dropped, a page the write covers whole replaces the stored one
 * (in a full node), and any other stored page gets the bytes copied
 * in.  Pages not stored are given back.  With STORE false, or once a
 * page could not be stored (-1, ENOMEM), they are all just given back.
 */
static int
finish_write (struct sparse *s, uint32_t count, uint64_t offset,
              const struct iovec *iov, bool store)
{
  struct leaf_cursor c = { .valid = false };
  int at = 0, r = 0;
  size_t into = 0;
  bool freed = false, recycle;

  if (store)
    pthread_rwlock_rdlock (&s->lock);
  while (count > 0) {
    uint64_t page = offset >> PAGE_SHIFT;
    size_t in_page = offset & (SPARSE_PAGE_SIZE - 1);
    size_t n = SPARSE_PAGE_SIZE - in_page;
    unsigned char *ours, *cur = NULL;

    n = MIN (n, (size_t) count);
    bool whole = n == SPARSE_PAGE_SIZE;
    ours = mapped_at (iov, &at, &into, n) - in_page;
    if (store && r == 0) {
      cur = cursor_page (s, &c, page);
      if (cur == NULL &&
          (s->keep_zero_writes || !is_zero (ours + in_page, n))) {
        cur = store_page (s, &c, page, ours);
        if (cur == NULL) {
          errno = ENOMEM;
          r = -1;
        }
        else if (cur == ours)
          __atomic_add_fetch (&s->pages, 1, __ATOMIC_RELAXED);
      }
      else if (cur != NULL && whole && !is_small (c.leaf) &&
               replace_page (s, c.leaf, page & (FANOUT - 1), &cur, ours))
        cur = ours;
      if (cur != NULL && cur != ours)
        memcpy (cur + in_page, ours + in_page, n);
    }
    if (cur != ours)
      freed |= drop_page (s, ours, whole);
    offset += n;
    count -= n;
  }
  if (store)
    pthread_rwlock_unlock (&s->lock);

  pthread_mutex_lock (&s->spare_lock);
  recycle = s->nr_old >= RECYCLE_AT;
  pthread_mutex_unlock (&s->spare_lock);
  /* Only if no reader holds the lock: a write never waits for one (nor
   * makes new readers queue behind it).  Failing that, old pages
   * gather up to OLD_MAX and writes copy meanwhile.
   */
  if (recycle && pthread_rwlock_trywrlock (&s->lock) == 0) {
    freed |= recycle_old (s, true);
    pthread_rwlock_unlock (&s->lock);
  }
  if (freed)
    arena_release (s->arena);
  return r;
}

int
sparse_map_write (struct sparse *s, uint32_t count, uint64_t offset,
                  struct iovec *iov, int *niov)
{
  struct leaf_cursor c = { .valid = false };
  uint32_t left;
  uint64_t pos;
  int n = 0, max = *niov, err;
  const uint64_t mask = SPARSE_PAGE_SIZE - 1;

  /* A page the write covers only in part gets a new zeroed page, so it
   * must be a hole: where one is stored, sparse_write merges the bytes
   * into it better.  (Another writer may store it before finish_write:
   * that copes.)
   */
  if (count > 0) {
    uint64_t end = offset + count;
    bool stored = false;

    pthread_rwlock_rdlock (&s->lock);
    if (offset & mask)
      stored = cursor_page (s, &c, offset >> PAGE_SHIFT) != NULL;
    if (!stored && (end & mask))
      stored = cursor_page (s, &c, (end - 1) >> PAGE_SHIFT) != NULL;
    pthread_rwlock_unlock (&s->lock);
    if (stored) {
      errno = EEXIST;
      return -1;
    }
  }

  /* Pages private to the caller until finish_write: a spare one where
   * the payload covers the page whole, else a new zeroed one.
   */
  for (left = count, pos = offset; left > 0; ) {
    size_t in_page = pos & mask;
    size_t len = SPARSE_PAGE_SIZE - in_page;
    unsigned char *fresh = NULL;

    len = MIN (len, (size_t) left);
    if (len == SPARSE_PAGE_SIZE)
      fresh = take_spare (s);
    if (fresh == NULL)
      fresh = arena_alloc (s->arena);
    if (fresh == NULL) {
      err = ENOMEM;
      goto fail;
    }
    if (n > 0 && (unsigned char *) iov[n-1].iov_base +
        iov[n-1].iov_len == fresh + in_page)
      iov[n-1].iov_len += len;
    else if (n == max) {
      if (drop_page (s, fresh, len == SPARSE_PAGE_SIZE))
        arena_release (s->arena);
      err = E2BIG;
      goto fail;
    }
    else
      iov[n++] = (struct iovec) { fresh + in_page, len };
    pos += len;
    left -= len;
  }
  *niov = n;
  return 0;

 fail:
  finish_write (s, pos - offset, offset, iov, false);
  errno = err;
  return -1;
}

int
sparse_unmap_write (struct sparse *s, uint32_t count, uint64_t offset,
                    const struct iovec *iov, bool store)
{
  return finish_write (s, count, offset, iov, store);
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
    unsigned char *data = NULL;

    n = MIN (n, (size_t) count);
    data = cursor_page (s, &c, page);
    if (data == NULL && (s->keep_zero_writes || !is_zero (in, n))) {
      /* The arena's pages are zero already: just the data. */
      unsigned char *fresh = arena_alloc (s->arena);

      if (fresh != NULL) {
        memcpy (fresh + in_page, in, n);
        data = store_page (s, &c, page, fresh);
      }
      if (data == NULL) {
        if (fresh != NULL) {
          arena_free (s->arena, fresh);
          arena_release (s->arena);
        }
        errno = ENOMEM;
        r = -1;
        break;
      }
      if (data == fresh) {
        __atomic_add_fetch (&s->pages, 1, __ATOMIC_RELAXED);
        data = NULL;            /* already written */
      }
      else {
        /* Lost the race: write into the winner. */
        arena_free (s->arena, fresh);
        arena_release (s->arena);
      }
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

/* Zero the part of [START, END) that falls in PAGE, which holds the
 * bytes from PAGE_START.  Returns true if the page now holds only
 * zeroes and has been freed.  Lock held exclusively.
 */
static bool
zero_page (struct sparse *s, unsigned char *page, uint64_t page_start,
           uint64_t start, uint64_t end)
{
  uint64_t page_end = page_start + SPARSE_PAGE_SIZE;
  uint64_t lo, hi;

  if (end <= page_start || page_end <= start)
    return false;
  if (start <= page_start && page_end <= end) {
    free_subtree (s, page, 0);
    return true;
  }
  lo = MAX (start, page_start) - page_start;
  hi = MIN (end, page_end) - page_start;
  memset (page + lo, 0, hi - lo);
  if (is_zero (page, SPARSE_PAGE_SIZE)) {
    free_subtree (s, page, 0);
    return true;
  }
  return false;
}

/* Zero [START, END) in the level 1 node in *SLOT, which covers bytes
 * from BASE, freeing it (and clearing *SLOT) if it ends up empty.  Lock
 * held exclusively.
 */
static void
zero_leaf (struct sparse *s, void **slot, uint64_t base,
           uint64_t start, uint64_t end)
{
  void *leaf = *slot;

  if (is_small (leaf)) {
    struct small_leaf *sl = small_of (leaf);
    unsigned k, kept = 0;

    /* Keep the entries left at the front, as the entries' rule says. */
    for (k = 0; k < sl->cap && sl->entry[k] != 0; ++k) {
      uintptr_t e = sl->entry[k];
      uint64_t page_start = base + (e & INDEX_MASK) * SPARSE_PAGE_SIZE;

      if (!zero_page (s, (unsigned char *) (e & ~INDEX_MASK), page_start,
                      start, end))
        sl->entry[kept++] = e;
    }
    for (k = kept; k < sl->cap; ++k)
      sl->entry[k] = 0;
    if (kept == 0) {
      free_subtree (s, leaf, 1);
      *slot = NULL;
    }
  }
  else {
    struct node *node = leaf;
    uint64_t first = start > base ? (start - base) >> PAGE_SHIFT : 0;
    uint64_t last = (end - 1 - base) >> PAGE_SHIFT;
    uint64_t i;

    last = MIN (last, (uint64_t) FANOUT - 1);
    for (i = first; i <= last; ++i)
      if (node->slot[i] != NULL &&
          zero_page (s, node->slot[i], base + i * SPARSE_PAGE_SIZE,
                     start, end))
        node->slot[i] = NULL;
    if (node_is_empty (node)) {
      free_subtree (s, node, 1);
      *slot = NULL;
    }
  }
}

/* Zero [START, END) below NODE, a node at LEVEL (2 or more) covering
 * bytes from BASE.  Lock held exclusively.
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

  last = MIN (last, (uint64_t) FANOUT - 1);

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
    else if (level == 2)
      zero_leaf (s, &node->slot[i], child_start, start, end);
    else {
      zero_node (s, child, level - 1, child_start, start, end);
      if (node_is_empty (child)) {
        free_subtree (s, child, level - 1);
        node->slot[i] = NULL;
      }
    }
  }
}

/* Hand the pages freed by a zero back to the kernel.  For nodes,
 * free() rarely gives small blocks back by itself, so after a large
 * amount has been freed ask malloc to release whatever whole pages it
 * now holds unused.
 */
static void
release_memory (struct sparse *s)
{
  arena_release (s->arena);
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
  free_retired (s);
  recycle_old (s, false);       /* release_memory releases them */
  if (s->root == NULL)
    ;
  else if (s->depth == 1)
    zero_leaf (s, &s->root, 0, offset, offset + count);
  else {
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

/* Describe [START, END) in LEAF, a level 1 node of either form
 * covering bytes from BASE.  Lock held (shared).
 */
static void
extents_leaf (void *leaf, uint64_t base, uint64_t start, uint64_t end,
              struct extents_walk *w)
{
  uint64_t first = start > base ? (start - base) >> PAGE_SHIFT : 0;
  uint64_t last = (end - 1 - base) >> PAGE_SHIFT;
  uint64_t present[FANOUT / 64] = { 0 };
  uint64_t i;

  last = MIN (last, (uint64_t) FANOUT - 1);

  /* Which pages exist, as a bitmap. */
  if (is_small (leaf)) {
    struct small_leaf *sl = small_of (leaf);
    unsigned k;

    for (k = 0; k < sl->cap; ++k) {
      uintptr_t e = __atomic_load_n (&sl->entry[k], __ATOMIC_ACQUIRE);

      if (e == 0)
        break;
      i = e & INDEX_MASK;
      present[i / 64] |= UINT64_C (1) << (i % 64);
    }
  }
  else {
    struct node *node = leaf;

    for (i = first; i <= last; ++i)
      if (load_slot (&node->slot[i]) != NULL)
        present[i / 64] |= UINT64_C (1) << (i % 64);
  }

  for (i = first; i <= last && !w->stop; ++i) {
    uint64_t page_start = base + i * SPARSE_PAGE_SIZE;
    uint64_t page_end = page_start + SPARSE_PAGE_SIZE;
    uint64_t lo = MAX (start, page_start);
    uint64_t hi = MIN (end, page_end);

    walk_add (w, lo, hi - lo, (present[i / 64] >> (i % 64)) & 1);
  }
}

/* Describe [START, END) below NODE, a node at LEVEL (2 or more)
 * covering bytes from BASE.  Lock held (shared).
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

  last = MIN (last, (uint64_t) FANOUT - 1);

  for (i = first; i <= last && !w->stop; ++i) {
    void *child = load_slot (&node->slot[i]);
    uint64_t child_start = base + i * span;
    uint64_t child_end = child_start + span;
    uint64_t lo = MAX (start, child_start);
    uint64_t hi = MIN (end, child_end);

    if (child == NULL)
      walk_add (w, lo, hi - lo, false);
    else if (level == 2)
      extents_leaf (child, child_start, start, end, w);
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
  else if (s->depth == 1)
    extents_leaf (root, 0, offset, offset + count, &w);
  else
    extents_node (root, s->depth, 0, offset, offset + count, &w);
  if (!w.stop && w.have_run)
    walk_flush (&w);
  pthread_rwlock_unlock (&s->lock);

  return w.r;
}
