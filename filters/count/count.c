/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The count filter: add up the bytes of every read, write, zero and
 * trim that succeeded, over all connections, and report the four
 * totals when the server exits (in the debug log and a probe).  The
 * totals are atomics, added to by any worker thread; nothing else is
 * shared.
 */
#include <config.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

enum { C_READ, C_WRITE, C_ZERO, C_TRIM, C_COUNT };

static _Atomic uint64_t totals[C_COUNT];

/* Only a request that succeeded moved any bytes. */
static int
add (int which, int r, uint32_t count)
{
  if (r == 0)
    atomic_fetch_add_explicit (&totals[which], count, memory_order_relaxed);
  return r;
}

static void
count_unload (void)
{
  uint64_t read = atomic_load (&totals[C_READ]);
  uint64_t written = atomic_load (&totals[C_WRITE]);
  uint64_t zeroed = atomic_load (&totals[C_ZERO]);
  uint64_t trimmed = atomic_load (&totals[C_TRIM]);

  nbdkit_debug ("count bytes: read %" PRIu64 ", written %" PRIu64
                ", zeroed %" PRIu64 ", trimmed %" PRIu64,
                read, written, zeroed, trimmed);
  NBDKIT_PROBE (count_totals, read, written, zeroed, trimmed);
}

static int
count_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  return add (C_READ, next->pread (next, buf, count, offset, flags, err),
              count);
}

static int
count_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  return add (C_WRITE, next->pwrite (next, buf, count, offset, flags, err),
              count);
}

static int
count_zero (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  return add (C_ZERO, next->zero (next, count, offset, flags, err), count);
}

static int
count_trim (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  return add (C_TRIM, next->trim (next, count, offset, flags, err), count);
}

static struct nbdkit_filter filter = {
  .name = "count",
  .longname = "nbdkit count filter",
  .unload = count_unload,
  .pread = count_pread,
  .pwrite = count_pwrite,
  .zero = count_zero,
  .trim = count_trim,
};

NBDKIT_REGISTER_FILTER (filter)
