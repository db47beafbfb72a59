/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test plugin for the worker pool, whose reads behave by offset:
 *
 *   below 32 MiB     sleep 20 ms, or wait=MS (waiting: off the CPU)
 *   32 to 48 MiB     return at once (fast)
 *   48 MiB and up    spin on the CPU for 2 ms (busy)
 *
 * It records the most reads it ever had in progress at once.
 * test-worker-pool.sh uses it to see the server give waiting requests
 * more workers, and not busy or fast ones; the count comes out as a
 * debug message when a connection closes (visible with -v).
 */
#include <config.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

#define FAST_FROM (32 * 1024 * 1024)
#define BUSY_FROM (48 * 1024 * 1024)

static _Atomic int in_flight, max_in_flight;
static long wait_ms = 20;

static int
slow_config (const char *key, const char *value)
{
  if (strcmp (key, "wait") == 0) {
    char *end;
    wait_ms = strtol (value, &end, 10);
    if (*value == '\0' || *end != '\0' || wait_ms < 0 || wait_ms > 60000) {
      nbdkit_error ("wait: not a number of milliseconds: %s", value);
      return -1;
    }
    return 0;
  }
  nbdkit_error ("unknown parameter: %s", key);
  return -1;
}

/* This thread's CPU time. */
static uint64_t
cpu_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * UINT64_C (1000000000) + ts.tv_nsec;
}

static void *
slow_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
slow_close (void *handle)
{
  nbdkit_debug ("slow: most reads in flight at once: %d",
                atomic_load (&max_in_flight));
}

static int64_t
slow_get_size (void *handle)
{
  return 64 * 1024 * 1024;
}

static int
slow_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  int now = ++in_flight, seen = max_in_flight;
  while (now > seen &&
         !atomic_compare_exchange_weak (&max_in_flight, &seen, now))
    ;
  if (offset < FAST_FROM) {
    struct timespec ts = { .tv_sec = wait_ms / 1000,
                           .tv_nsec = wait_ms % 1000 * 1000 * 1000 };
    nanosleep (&ts, NULL);
  }
  else if (offset >= BUSY_FROM) {
    uint64_t end = cpu_ns () + 2 * 1000 * 1000;
    while (cpu_ns () < end)
      ;
  }
  memset (buf, 0, count);
  in_flight--;
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "slow",
  .config = slow_config,
  .open = slow_open,
  .close = slow_close,
  .get_size = slow_get_size,
  .pread = slow_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
