/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The example filter: passes everything through unchanged and times
 * the reads and writes of the layers below it, with USDT probes of its
 * own.
 *
 * This file is meant to be copied: it includes only the installed
 * headers, so it builds on its own with
 *
 *   gcc -fPIC -shared $(pkg-config --cflags nbdkit) example.c \
 *       -o nbdkit-example-filter.so
 *
 * The probes, under the provider "nbdkit" (or the one named by
 * -DNBDKIT_PROBE_PROVIDER=NAME at build time), in this filter's .so.
 * The connection id and the request's cookie come first, as in the
 * server's own probes, so a tracer can join them to request_start:
 *
 *   example_filter_open (id, export, readonly)
 *       each open that the layers below accepted
 *   example_filter_read_done (id, cookie, offset, count, ns, error)
 *   example_filter_write_done (id, cookie, offset, count, ns, error)
 *       each read or write, once the layers below have answered: the
 *       time they took in ns and the errno they gave (0 for success).
 *       The clock is read only while a tracer is attached to the
 *       probe; a request that was already under way when the tracer
 *       attached is not reported.
 *
 * The filter keeps no state: any number of requests and connections
 * may run at once.
 */
#include <stdint.h>
#include <time.h>

#include <nbdkit-filter.h>

/* One semaphore per probe, so the clock is read only when traced:
 * the request comes before the header, then every probe in the file
 * needs its NBDKIT_PROBE_SEMAPHORE.
 */
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

NBDKIT_PROBE_SEMAPHORE (example_filter_open);
NBDKIT_PROBE_SEMAPHORE (example_filter_read_done);
NBDKIT_PROBE_SEMAPHORE (example_filter_write_done);

static uint64_t
clock_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

static void *
example_filter_open (nbdkit_next_open *next, nbdkit_context *context,
                     int readonly, const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  NBDKIT_PROBE (example_filter_open, nbdkit_connection_id (), exportname,
                (int64_t) readonly);
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int
example_filter_pread (nbdkit_next *next, void *handle, void *buf,
                      uint32_t count, uint64_t offset, uint32_t flags,
                      int *err)
{
  /* 0: nobody traced the probe when the request came in. */
  uint64_t start = NBDKIT_PROBE_ENABLED (example_filter_read_done)
    ? clock_ns () : 0;
  int r = next->pread (next, buf, count, offset, flags, err);

  if (start && NBDKIT_PROBE_ENABLED (example_filter_read_done))
    NBDKIT_PROBE (example_filter_read_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset, (uint64_t) count,
                  clock_ns () - start, (int64_t) (r == -1 ? *err : 0));
  return r;
}

static int
example_filter_pwrite (nbdkit_next *next, void *handle, const void *buf,
                       uint32_t count, uint64_t offset, uint32_t flags,
                       int *err)
{
  uint64_t start = NBDKIT_PROBE_ENABLED (example_filter_write_done)
    ? clock_ns () : 0;
  int r = next->pwrite (next, buf, count, offset, flags, err);

  if (start && NBDKIT_PROBE_ENABLED (example_filter_write_done))
    NBDKIT_PROBE (example_filter_write_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset, (uint64_t) count,
                  clock_ns () - start, (int64_t) (r == -1 ? *err : 0));
  return r;
}

static struct nbdkit_filter filter = {
  .name        = "example",
  .longname    = "nbdkit example filter",
  .description = "Times the reads and writes below it, with its own probes",
  .open        = example_filter_open,
  .pread       = example_filter_pread,
  .pwrite      = example_filter_pwrite,
};

NBDKIT_REGISTER_FILTER (filter)
