/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* allocator=malloc[,mlock=true]: the whole disk in one flat buffer.
 *
 * No sparseness: the buffer is SIZE bytes from the start (an anonymous
 * mapping, so untouched pages cost nothing until written, but the
 * whole size is committed, and with mlock=true locked in RAM and
 * faulted in at once).  In exchange every operation is a plain memcpy
 * or memset with no lock at all: requests that overlap get whatever
 * mix of bytes the CPU produces, as on a real disk.  Reads can be lent
 * straight from the buffer (map_read), which nothing ever frees until
 * the allocator is destroyed.
 *
 * Zeroing without mlock hands whole kernel pages back (MADV_DONTNEED
 * makes them read as zeroes), so a trimmed range stops costing memory;
 * with mlock the pages stay locked and are cleared by hand.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "allocator.h"
#include "minmax.h"
#include "rounding.h"

struct malloc_allocator {
  struct allocator a;           /* first */
  unsigned char *bytes;         /* SIZE bytes, fixed */
  size_t mapped;                /* SIZE rounded up to the kernel's pages */
  size_t sys_page;
  bool locked;
};

static inline struct malloc_allocator *
ma_of (struct allocator *a)
{
  return (struct malloc_allocator *) a;
}

static void
ma_destroy (struct allocator *a)
{
  struct malloc_allocator *ma = ma_of (a);

  if (ma->bytes != NULL)
    munmap (ma->bytes, ma->mapped);
  free (ma);
}

static void
ma_read (struct allocator *a, void *buf, uint32_t count, uint64_t offset)
{
  memcpy (buf, ma_of (a)->bytes + offset, count);
}

static int
ma_write (struct allocator *a, const void *buf, uint32_t count,
          uint64_t offset)
{
  memcpy (ma_of (a)->bytes + offset, buf, count);
  return 0;
}

static int
ma_zero (struct allocator *a, uint32_t count, uint64_t offset)
{
  struct malloc_allocator *ma = ma_of (a);
  uint64_t end = offset + count;
  uint64_t lo = ROUND_UP (offset, (uint64_t) ma->sys_page);
  uint64_t hi = ROUND_DOWN (end, (uint64_t) ma->sys_page);

  if (ma->locked || lo >= hi) {
    memset (ma->bytes + offset, 0, count);
    return 0;
  }
  memset (ma->bytes + offset, 0, lo - offset);
  memset (ma->bytes + hi, 0, end - hi);
  if (madvise (ma->bytes + lo, hi - lo, MADV_DONTNEED) == -1)
    memset (ma->bytes + lo, 0, hi - lo);
  return 0;
}

/* Every byte is backed: one data run. */
static int
ma_extents (struct allocator *a, uint32_t count, uint64_t offset, bool one,
            allocator_emit_fn emit, void *opaque)
{
  if (count == 0)
    return 0;
  return emit (opaque, offset, count, true);
}

static int
ma_map_read (struct allocator *a, uint32_t count, uint64_t offset,
             struct iovec *iov, int *niov)
{
  if (*niov < 1) {
    errno = E2BIG;
    return -1;
  }
  iov[0] = (struct iovec) { ma_of (a)->bytes + offset, count };
  *niov = 1;
  return 0;
}

static void
ma_unmap_read (struct allocator *a)
{
}

static const struct allocator_ops malloc_ops = {
  .type = "malloc",
  .destroy = ma_destroy,
  .read = ma_read,
  .write = ma_write,
  .zero = ma_zero,
  .extents = ma_extents,
  .map_read = ma_map_read,
  .unmap_read = ma_unmap_read,
};

struct allocator *
malloc_allocator_create (uint64_t size, bool mlock_it, const char **why)
{
  struct malloc_allocator *ma;
  long sys_page = sysconf (_SC_PAGESIZE);
  int err;

#ifndef HAVE_MLOCK
  if (mlock_it) {
    *why = "mlock=true is not supported on this platform";
    errno = ENOTSUP;
    return NULL;
  }
#endif
  ma = calloc (1, sizeof *ma);
  if (ma == NULL)
    return NULL;
  ma->a.ops = &malloc_ops;
  ma->sys_page = sys_page > 0 ? sys_page : 4096;
  if (size > SIZE_MAX - ma->sys_page) {
    *why = "size is larger than the address space";
    free (ma);
    errno = ENOMEM;
    return NULL;
  }
  ma->mapped = MAX (ROUND_UP ((size_t) size, ma->sys_page), ma->sys_page);
  ma->bytes = mmap (NULL, ma->mapped, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ma->bytes == MAP_FAILED) {
    err = errno;
    *why = "cannot allocate the whole disk (allocator=malloc is not sparse)";
    free (ma);
    errno = err;
    return NULL;
  }
#ifdef HAVE_MLOCK
  if (mlock_it) {
    if (mlock (ma->bytes, ma->mapped) == -1) {
      err = errno;
      *why = "mlock failed (raise the locked-memory limit, ulimit -l)";
      munmap (ma->bytes, ma->mapped);
      free (ma);
      errno = err;
      return NULL;
    }
    ma->locked = true;
  }
#endif
  return &ma->a;
}
