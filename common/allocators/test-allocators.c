/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of the allocators: each one, driven by the same random
 * writes, zeroes and reads, must hold the same bytes as a plain buffer,
 * and its extents must cover every range exactly, with no data hidden
 * in a hole.  Also allocator_create's parsing of its string, the
 * sparse store's zero-copy loans, and stores that keep written zeroes.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "iszero.h"
#include "minmax.h"
#include "array-size.h"

#define DISK (4 << 20)          /* small enough to mirror in a buffer */
#define ROUNDS 3000

static unsigned char *mirror;
static unsigned char *buf;

static uint64_t rng = 88172645463325252ull;

static uint64_t
next_random (void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

struct check {
  uint64_t next;                /* where the next run must start */
  const unsigned char *mirror;
};

static int
check_run (void *opaque, uint64_t offset, uint64_t length, bool allocated)
{
  struct check *c = opaque;

  assert (offset == c->next);
  assert (length > 0);
  if (!allocated)
    assert (is_zero (c->mirror + offset, length));
  c->next = offset + length;
  return 0;
}

static int
count_runs (void *opaque, uint64_t offset, uint64_t length, bool allocated)
{
  ++*(int *) opaque;
  return 0;
}

static void
check_extents (struct allocator *a, uint32_t count, uint64_t offset)
{
  struct check c = { .next = offset, .mirror = mirror };

  assert (allocator_extents (a, count, offset, false, check_run, &c) == 0);
  assert (c.next == offset + count);
}

static void
exercise (const char *spec)
{
  const char *why;
  struct allocator *a = allocator_create (spec, DISK, NULL, &why);
  int i, runs;

  if (a == NULL) {
    fprintf (stderr, "%s: %s: %s\n", spec, why ? why : "", strerror (errno));
    exit (1);
  }
  memset (mirror, 0, DISK);

  for (i = 0; i < ROUNDS; ++i) {
    uint64_t r = next_random ();
    uint32_t count = 1 + next_random () % (r & 1 ? 200000 : 9000);
    uint64_t offset = next_random () % (DISK - count + 1);

    switch (r % 5) {
    case 0: case 1:             /* write: random bytes, or some zero */
      for (uint32_t j = 0; j < count; ++j)
        buf[j] = (r >> 8) & 1 ? (unsigned char) next_random () : 0;
      if ((r >> 9) & 1)         /* compressible */
        memset (buf, 'x', count / 2);
      assert (allocator_write (a, buf, count, offset) == 0);
      memcpy (mirror + offset, buf, count);
      break;
    case 2:
      assert (allocator_zero (a, count, offset) == 0);
      memset (mirror + offset, 0, count);
      break;
    case 3:
      allocator_read (a, buf, count, offset);
      assert (memcmp (buf, mirror + offset, count) == 0);
      break;
    case 4:
      check_extents (a, count, offset);
      break;
    }
  }

  /* The whole disk at the end, in one read and one extents walk. */
  for (i = 0; i < DISK; i += 1 << 20) {
    allocator_read (a, buf, 1 << 20, i);
    assert (memcmp (buf, mirror + i, 1 << 20) == 0);
  }
  check_extents (a, DISK, 0);
  runs = 0;
  assert (allocator_extents (a, DISK, 0, true, count_runs, &runs) == 0);
  assert (runs == 1);

  /* Zeroing everything leaves one hole (except malloc: all data). */
  assert (allocator_zero (a, DISK, 0) == 0);
  memset (mirror, 0, DISK);
  allocator_read (a, buf, DISK / 4, DISK / 2);
  assert (is_zero (buf, DISK / 4));
  runs = 0;
  assert (allocator_extents (a, DISK, 0, false, count_runs, &runs) == 0);
  assert (runs == 1);
  allocator_destroy (a);
  printf ("test-allocators: %s ok\n", spec);
}

/* Huge virtual sizes cost nothing until written (not malloc). */
static void
huge (const char *spec)
{
  const char *why;
  uint64_t size = INT64_MAX;
  struct allocator *a = allocator_create (spec, size, NULL, &why);
  int runs = 0;

  assert (a != NULL);
  memset (buf, 0x55, 5000);
  assert (allocator_write (a, buf, 5000, size - 5000) == 0);
  memset (buf, 0, 5000);
  allocator_read (a, buf, 5000, size - 5000);
  assert (buf[0] == 0x55 && buf[4999] == 0x55);
  assert (allocator_extents (a, UINT32_MAX, size - UINT32_MAX, false,
                             count_runs, &runs) == 0);
  assert (runs == 2);           /* hole, then data */
  /* A trim of nearly everything is quick: empty subtrees are skipped. */
  for (uint64_t off = 0; off < size - UINT32_MAX; off += UINT64_C (1) << 60)
    assert (allocator_zero (a, UINT32_MAX, off) == 0);
  assert (allocator_zero (a, UINT32_MAX, size - UINT32_MAX) == 0);
  runs = 0;
  assert (allocator_extents (a, UINT32_MAX, size - UINT32_MAX, false,
                             count_runs, &runs) == 0);
  assert (runs == 1);
  allocator_destroy (a);
}

static void
bad_specs (void)
{
  static const char *const bad[] = {
    "", "nosuch", "sparse,mlock=true", "malloc,mlock=maybe",
    "malloc,nosuch=1", "zstd,x",
  };
  const char *why;

  for (size_t i = 0; i < ARRAY_SIZE (bad); ++i) {
    why = NULL;
    errno = 0;
    assert (allocator_create (bad[i], 4096, NULL, &why) == NULL);
    assert (why != NULL && errno == EINVAL);
  }
  assert (allocator_create ("sparse", UINT64_MAX, NULL, &why) == NULL);
  assert (why != NULL);
  if (!allocator_have_zstd ()) {
    assert (allocator_create ("zstd", 4096, NULL, &why) == NULL);
    assert (why != NULL && errno == ENOTSUP);
  }
}

/* Sparse lends reads in place, holes from a page of zeroes. */
static void
zero_copy (void)
{
  const char *why;
  struct allocator *a = allocator_create ("sparse", DISK, NULL, &why);
  struct iovec iov[64];
  int niov = 64, i;
  size_t total = 0;

  assert (a && a->ops->map_read && a->ops->unmap_read);
  memset (buf, 7, 8192);
  assert (allocator_write (a, buf, 8192, 4096) == 0);
  assert (a->ops->map_read (a, 65536, 0, iov, &niov) == 0);
  for (i = 0; i < niov; ++i) {
    const unsigned char *p = iov[i].iov_base;

    for (size_t j = 0; j < iov[i].iov_len; ++j)
      assert (p[j] == (total + j >= 4096 && total + j < 12288 ? 7 : 0));
    total += iov[i].iov_len;
  }
  assert (total == 65536);
  a->ops->unmap_read (a);
  /* Too few iovecs: E2BIG, holding nothing. */
  niov = 1;
  assert (a->ops->map_read (a, 65536, 0, iov, &niov) == -1 && errno == E2BIG);
  assert (allocator_zero (a, DISK, 0) == 0);  /* would hang if locked */
  allocator_destroy (a);
}

static int
note_allocated (void *opaque, uint64_t offset, uint64_t length,
                bool allocated)
{
  *(bool *) opaque = allocated;
  return 0;
}

/* Is the byte at OFFSET in a page that holds memory? */
static bool
allocated_at (struct allocator *a, uint64_t offset)
{
  bool r = false;

  assert (allocator_extents (a, 1, offset, true, note_allocated, &r) == 0);
  return r;
}

/* allocator_keep_zero_writes: written zeroes keep their page, zeroing
 * gives it back; without it, written zeroes take nothing.
 */
static void
keep_zero_writes (const char *spec)
{
  const char *why;
  struct allocator *a = allocator_create (spec, DISK, NULL, &why);
  struct allocator *b = allocator_create (spec, DISK, NULL, &why);
  static const unsigned char zeroes[100];

  assert (a && b);
  allocator_keep_zero_writes (a);
  assert (allocator_write (a, zeroes, 1, 32768) == 0);
  assert (allocator_write (a, zeroes, 100, 3 * 32768 - 50) == 0);
  assert (allocator_write (b, zeroes, 100, 32768) == 0);
  assert (!allocated_at (a, 0));
  assert (allocated_at (a, 32768));
  assert (allocated_at (a, 3 * 32768 - 50) && allocated_at (a, 3 * 32768));
  assert (!allocated_at (b, 32768));
  assert (allocator_zero (a, 32768, 32768) == 0);
  assert (allocator_zero (a, 65536, 65536) == 0);
  for (uint64_t o = 0; o < 4 * 32768; o += 4096)
    assert (!allocated_at (a, o));
  allocator_destroy (a);
  allocator_destroy (b);
}

int
main (void)
{
  mirror = malloc (DISK);
  buf = malloc (DISK);
  assert (mirror && buf);

  bad_specs ();
  exercise ("sparse");
  exercise ("malloc");
  if (allocator_have_zstd ())
    exercise ("zstd");
  huge ("sparse");
  if (allocator_have_zstd ())
    huge ("zstd");
  zero_copy ();
  keep_zero_writes ("sparse");
  if (allocator_have_zstd ())
    keep_zero_writes ("zstd");

  free (mirror);
  free (buf);
  return 0;
}
