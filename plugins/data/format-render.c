/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The data plugin's expression language, rendering: the bytes of a
 * window of a parsed tree (format-tree.h), sent to the caller's sink.
 *
 * Offsets inside a group are relative to the group, and a group never
 * writes outside [0, its length), which is what makes clipping to the
 * window exact.  A small child that is repeated is rendered once into a
 * buffer (with a mask of the bytes it actually sets, so that its gaps
 * do not overwrite what lies beneath) and copied, so nested repeats
 * cost the bytes they produce, not the product of their counts times
 * the nodes they hold.
 *
 * Bytes are stored, zeroes too, so the pages they land in count as
 * written (allocated); but a run of two or more zeroes made by one
 * literal or by repetition ("0 0", le32:0, 0*N, (0 0)*N) is sent as
 * zeroing, which leaves a hole.  That is nbdkit's rule: its optimizer
 * turns such runs into fills, and a fill of zeroes frees pages.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "format-tree.h"
#include "iszero.h"
#include "minmax.h"
#include "rounding.h"

#define MEMO_MAX 65536          /* render repeated children this small once */
#define CHUNK (1024 * 1024)     /* largest single sink write */
#define ZERO_CHUNK (1024 * 1024 * 1024) /* largest single sink zero */


/* A + B and A * B, saturating at UINT64_MAX. */
static uint64_t
sat_add (uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t
sat_mul (uint64_t a, uint64_t b)
{
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* Does node N set every byte it spans, to zero?  (Conservative: a
 * node with offsets in it says no.)
 */
static bool
zero_full (const struct node *n)
{
  switch (n->kind) {
  case N_BYTES:
    return n->zero_run || is_zero (n->bytes, n->len);
  case N_LIST:
    for (size_t i = 0; i < n->items.len; i++)
      if (!zero_full (n->items.ptr[i]))
        return false;
    return true;
  case N_REPEAT: case N_SLICE:
    return zero_full (n->child);
  default:
    return false;
  }
}

/* How many bytes node N writes, at most.  Each node is worked out once
 * (names and $VARs share nodes, so walking paths could take forever).
 */
static uint64_t
stored (struct node *n)
{
  uint64_t r = 0;

  if (n->stored_known)
    return n->stored;
  switch (n->kind) {
  case N_BYTES:
    r = n->zero_run ? 0 : n->len;
    break;
  case N_LIST:
    for (size_t i = 0; i < n->items.len; i++)
      r = sat_add (r, stored (n->items.ptr[i]));
    break;
  case N_REPEAT:
    /* Copies of a child that is zero through and through are a hole
     * (see render_memo_repeat).
     */
    r = n->n >= 2 && zero_full (n->child) ? 0
      : sat_mul (stored (n->child), n->n);
    break;
  case N_SLICE:
    r = MIN (stored (n->child), n->len);
    break;
  case N_ABS: case N_FWD: case N_BACK: case N_ALIGN:
    break;
  }
  n->stored = r;
  n->stored_known = true;
  return r;
}

uint64_t
data_stored_bytes (struct data_tree *t, uint64_t limit)
{
  return MIN (stored (t->root), limit);
}

/* Send LEN bytes of BUF to the sink at DEST, a chunk at a time.  With
 * ZEROES_AS_HOLES, a chunk of two or more zeroes is sent as zeroing.
 */
static int
emit (struct data_sink *sink, const uint8_t *buf, uint64_t len,
      uint64_t dest, bool zeroes_as_holes)
{
  while (len > 0) {
    uint32_t n = MIN (len, (uint64_t) CHUNK);
    int r;

    if (zeroes_as_holes && n > 1 && is_zero (buf, n))
      r = sink->zero (sink->opaque, n, dest);
    else {
      r = sink->write (sink->opaque, buf, n, dest);
      sink->written_end = MAX (sink->written_end, dest + n);
    }
    if (r == -1)
      return -1;
    sink->bytes_set += n;
    buf += n;
    len -= n;
    dest += n;
  }
  return 0;
}

/* Zero LEN bytes at DEST, a large piece at a time.  A store that
 * starts all zero needs zeroing only as far as the stored pages the
 * writes so far reached (zeroing part of a page may free it, which
 * block status shows): 0*9223372036854775807 then costs nothing, not
 * 2^33 calls.  STORE_PAGE is at least every allocator's page.
 */
#define STORE_PAGE (1024 * 1024)

static int
zero_range (struct data_sink *sink, uint64_t len, uint64_t dest)
{
  if (sink->starts_zero) {
    uint64_t end = sink->written_end;
    end = end > UINT64_MAX - STORE_PAGE ? UINT64_MAX
                                        : ROUND_UP (end, STORE_PAGE);
    sink->bytes_set += len;
    if (dest >= end)
      return 0;
    len = MIN (len, end - dest);
    sink->bytes_set -= len;     /* counted below, as it is zeroed */
  }
  while (len > 0) {
    uint32_t n = MIN (len, (uint64_t) ZERO_CHUNK);

    if (sink->zero (sink->opaque, n, dest) == -1)
      return -1;
    sink->bytes_set += n;
    len -= n;
    dest += n;
  }
  return 0;
}

/* A rendered child: its bytes and which of them it sets. */
struct memo {
  uint8_t *buf;
  uint8_t *mask;
  uint64_t len;
  bool full;                    /* every byte set */
};

static int
memo_write (void *opaque, const void *buf, uint32_t count, uint64_t offset)
{
  struct memo *m = opaque;

  memcpy (m->buf + offset, buf, count);
  memset (m->mask + offset, 1, count);
  return 0;
}

static int
memo_zero (void *opaque, uint32_t count, uint64_t offset)
{
  struct memo *m = opaque;

  memset (m->buf + offset, 0, count);
  memset (m->mask + offset, 1, count);
  return 0;
}

static int render (struct node *n, uint64_t lo, uint64_t hi, uint64_t dest,
                   struct data_sink *sink);

/* Copies [lo, hi) of a repeat of M (in the repeat's coordinates). */
static int
render_memo_repeat (struct memo *m, uint64_t lo, uint64_t hi, uint64_t dest,
                    struct data_sink *sink)
{
  const uint64_t L = m->len;

  if (m->full && is_zero (m->buf, L))
    return zero_range (sink, hi - lo, dest);
  if (m->full) {
    /* One contiguous run: PAT holds the pattern from phase 0 for
     * CHUNK + L bytes, so every chunk is a window of it.
     */
    uint64_t plen = MIN (hi - lo, (uint64_t) CHUNK) + L;
    uint8_t *pat = malloc (plen);
    uint64_t k = lo % L;
    int r = 0;

    if (pat == NULL)
      return -1;
    for (uint64_t j = 0; j < plen; j += L)
      memcpy (pat + j, m->buf, MIN (L, plen - j));
    while (lo < hi && r == 0) {
      uint64_t n = MIN (hi - lo, (uint64_t) CHUNK);

      r = emit (sink, pat + k, n, dest, true);
      k = (k + n) % L;
      lo += n;
      dest += n;
    }
    free (pat);
    return r;
  }

  /* With gaps: each copy's runs of set bytes. */
  for (uint64_t i = lo / L; i * L < hi; ++i) {
    uint64_t a = MAX (lo, i * L) - i * L, b = MIN (hi, (i + 1) * L) - i * L;

    while (a < b) {
      uint64_t e;

      if (!m->mask[a]) {
        a++;
        continue;
      }
      for (e = a; e < b && m->mask[e]; ++e)
        ;
      if (emit (sink, m->buf + a, e - a, dest + (i * L + a - lo), true) == -1)
        return -1;
      a = e;
    }
  }
  return 0;
}

static int
render_repeat (struct node *n, uint64_t lo, uint64_t hi, uint64_t dest,
               struct data_sink *sink)
{
  struct node *c = n->child;
  const uint64_t L = c->len;

  if (L == 0)
    return 0;
  if (L <= MEMO_MAX && hi - lo > L) {
    struct memo m = { .len = L };
    struct data_sink msink = {
      .write = memo_write, .zero = memo_zero, .opaque = &m
    };
    int r = -1;

    m.buf = calloc (1, L);
    m.mask = calloc (1, L);
    if (m.buf && m.mask && render (c, 0, L, 0, &msink) == 0) {
      m.full = memchr (m.mask, 0, L) == NULL;
      r = render_memo_repeat (&m, lo, hi, dest, sink);
    }
    free (m.buf);
    free (m.mask);
    return r;
  }
  for (uint64_t i = lo / L; i * L < hi; ++i) {
    uint64_t a = MAX (lo, i * L), b = MIN (hi, (i + 1) * L);

    if (render (c, a - i * L, b - i * L, dest + (a - lo), sink) == -1)
      return -1;
  }
  return 0;
}

/* Write bytes [LO, HI) of N (0 <= LO < HI <= N->len) to DEST. */
static int
render (struct node *n, uint64_t lo, uint64_t hi, uint64_t dest,
        struct data_sink *sink)
{
  switch (n->kind) {
  case N_BYTES:
    /* The node decides as a whole: a zero run of a literal is a hole
     * even where only one byte of it lands in the window.
     */
    if (n->zero_run)
      return zero_range (sink, hi - lo, dest);
    return emit (sink, n->bytes + lo, hi - lo, dest, false);
  case N_REPEAT:
    return render_repeat (n, lo, hi, dest, sink);
  case N_SLICE:
    return render (n->child, lo + n->n, hi + n->n, dest, sink);
  case N_LIST: {
    uint64_t o = 0;

    for (size_t i = 0; i < n->items.len; ++i) {
      struct node *it = n->items.ptr[i];

      switch (it->kind) {
      case N_ABS: o = it->n; break;
      case N_FWD: o += it->n; break;
      case N_BACK: o -= it->n; break;
      case N_ALIGN: if (o % it->n) o += it->n - o % it->n; break;
      default:
        if (it->len > 0 && o < hi && o + it->len > lo) {
          uint64_t a = MAX (lo, o), b = MIN (hi, o + it->len);

          if (render (it, a - o, b - o, dest + (a - lo), sink) == -1)
            return -1;
        }
        o += it->len;
      }
    }
    return 0;
  }
  default:
    return 0;
  }
}

int
data_render (struct data_tree *t, uint64_t limit, struct data_sink *sink)
{
  uint64_t hi = MIN (limit, t->root->len);

  if (hi == 0)
    return 0;
  return render (t->root, 0, hi, 0, sink);
}
