/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The example plugin: a RAM disk that carries its own USDT probes.
 *
 * This file is meant to be copied: it includes only the installed
 * headers, so it builds on its own with
 *
 *   gcc -fPIC -shared $(pkg-config --cflags nbdkit) example.c \
 *       -o nbdkit-example-plugin.so
 *
 * It owns the plugin's one parameter
 * (the size), the disk's bytes, and a block map with one bit per 4 KiB
 * block: set when a write lands in the block, cleared when a trim or
 * zero covers the whole block.  The map answers extents queries and
 * says how many blocks hold data.  There is one disk for the whole
 * server, shared by every connection.
 *
 * The probes, all under the provider "nbdkit" (or the one named by
 * -DNBDKIT_PROBE_PROVIDER=NAME at build time), in this plugin's .so.
 * The request probes carry the connection id and the request's cookie
 * first, as the server's request_start and request_done do, so that a
 * tracer can tell which request of which client each one belongs to:
 *
 *   example_config (key, value)   each key=value, before it is parsed
 *   example_read (id, cookie, offset, count)
 *                                 each read, before the copy
 *   example_write (id, cookie, offset, count)
 *                                 each write, before the copy
 *   example_zero (id, cookie, offset, count)
 *                                 each trim or zero, before the memset
 *   example_flush (id, cookie, reads, writes, blocks_used)
 *                                 each flush: requests served so far
 *                                 and the number of blocks holding
 *                                 data.  Counting the blocks scans the
 *                                 whole map, so it only happens while
 *                                 a tracer is attached to this probe.
 *
 * It also fires the server's generic probe "user" once, at the first
 * write, with nbdkit_probe: the way for code that cannot carry USDT
 * notes of its own (it is here to be copied and tested).
 *
 * Locking: disk.lock (a read-write lock) protects disk.bytes and
 * disk.map; reads and extents take it shared, writes and zeroes take
 * it exclusive.  The two request counters are atomics and need no
 * lock.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* Every probe in this file gets a semaphore: a counter in the .so
 * that perf, bpftrace and SystemTap raise while they are attached to
 * that probe.  NBDKIT_PROBE_ENABLED (name) reads it, which is how a
 * costly argument is computed only when someone is listening.  The
 * request must come before the header, and then every probe in the
 * file needs its NBDKIT_PROBE_SEMAPHORE.
 */
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

NBDKIT_PROBE_SEMAPHORE (example_config);
NBDKIT_PROBE_SEMAPHORE (example_read);
NBDKIT_PROBE_SEMAPHORE (example_write);
NBDKIT_PROBE_SEMAPHORE (example_zero);
NBDKIT_PROBE_SEMAPHORE (example_flush);

#define BLOCK_SIZE 4096

struct disk {
  int64_t size;                 /* -1 until size= is given */
  int64_t nr_blocks;            /* blocks of BLOCK_SIZE, the last may be short */
  pthread_rwlock_t lock;        /* protects bytes and map */
  unsigned char *bytes;         /* size bytes */
  unsigned char *map;           /* one bit per block: holds data */
  atomic_uint_fast64_t reads, writes;
  atomic_bool written;          /* a write has been seen (for "user") */
};

/* Filled by config and config_complete, freed by unload. */
static struct disk disk = {
  .size = -1,
  .lock = PTHREAD_RWLOCK_INITIALIZER,
};

static void
example_unload (void)
{
  free (disk.bytes);
  free (disk.map);
}

static int
example_config (const char *key, const char *value)
{
  /* Strings are passed as pointers; the tracer copies them out. */
  NBDKIT_PROBE (example_config, key, value);

  if (strcmp (key, "size") == 0) {
    int64_t r = nbdkit_parse_size (value);

    if (r == -1)
      return -1;
    disk.size = r;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
example_config_complete (void)
{
  if (disk.size == -1) {
    nbdkit_error ("you must give the disk size, for example: "
                  "nbdkit example 1M");
    return -1;
  }
  if ((uint64_t) disk.size > SIZE_MAX) {
    nbdkit_error ("size %" PRIi64 " is too large for this machine",
                  disk.size);
    return -1;
  }
  disk.nr_blocks = DIV_ROUND_UP (disk.size, BLOCK_SIZE);
  /* calloc (0) may return NULL; ask for at least one byte. */
  disk.bytes = calloc (disk.size ? (size_t) disk.size : 1, 1);
  disk.map = calloc ((size_t) DIV_ROUND_UP (disk.nr_blocks, 8) + 1, 1);
  if (disk.bytes == NULL || disk.map == NULL) {
    nbdkit_error ("allocating a %" PRIi64 " byte disk: %m", disk.size);
    return -1;
  }
  return 0;
}

#define example_config_help \
  "[size=]SIZE               (required) Size of the RAM disk (eg. 1M)."

/* The block map.  Callers hold disk.lock: shared to read it,
 * exclusive to change it.
 */
static bool
map_get (int64_t block)
{
  return disk.map[block / 8] & (1u << (block % 8));
}

static void
map_set (int64_t first, int64_t end, bool value)
{
  int64_t b;

  for (b = first; b < end; b++) {
    if (value)
      disk.map[b / 8] |= 1u << (b % 8);
    else
      disk.map[b / 8] &= ~(1u << (b % 8));
  }
}

/* The costly argument of example_flush: a scan of the whole map. */
static uint64_t
map_count (void)
{
  uint64_t n = 0;
  int64_t i;

  for (i = 0; i < DIV_ROUND_UP (disk.nr_blocks, 8); i++)
    n += __builtin_popcount (disk.map[i]);
  return n;
}

static void *
example_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
example_get_size (void *handle)
{
  return disk.size;
}

static int
example_can_yes (void *handle)
{
  return 1;
}

static int
example_can_fua (void *handle)
{
  /* RAM has nothing to write through to. */
  return NBDKIT_FUA_NATIVE;
}

/* The server has already checked offset + count against the size. */
static int
example_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  /* Cast to 64 bits so the argument sizes in the note are the same
   * on every architecture and tools print them the same way.
   */
  NBDKIT_PROBE (example_read, nbdkit_connection_id (),
                nbdkit_request_cookie (), (uint64_t) offset,
                (uint64_t) count);

  pthread_rwlock_rdlock (&disk.lock);
  memcpy (buf, disk.bytes + offset, count);
  pthread_rwlock_unlock (&disk.lock);
  atomic_fetch_add (&disk.reads, 1);
  return 0;
}

static int
example_pwrite (void *handle, const void *buf, uint32_t count,
                uint64_t offset, uint32_t flags)
{
  NBDKIT_PROBE (example_write, nbdkit_connection_id (),
                nbdkit_request_cookie (), (uint64_t) offset,
                (uint64_t) count);
  /* The generic probe: "user" in the server, with our name on it. */
  if (!atomic_exchange (&disk.written, true))
    nbdkit_probe ("example_first_write", (int64_t) offset, count,
                  "the disk is no longer all zeroes");

  pthread_rwlock_wrlock (&disk.lock);
  memcpy (disk.bytes + offset, buf, count);
  if (count > 0)
    map_set ((int64_t) (offset / BLOCK_SIZE),
             (int64_t) ((offset + count - 1) / BLOCK_SIZE) + 1, true);
  pthread_rwlock_unlock (&disk.lock);
  atomic_fetch_add (&disk.writes, 1);
  return 0;
}

/* Trim and zero both leave zeroes; a block the range covers entirely
 * (the short last block counts when the range reaches the end) no
 * longer holds data.
 */
static int
example_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t end = offset + count;
  int64_t first = (int64_t) DIV_ROUND_UP (offset, BLOCK_SIZE);
  int64_t last = end == (uint64_t) disk.size
    ? disk.nr_blocks : (int64_t) (end / BLOCK_SIZE);

  NBDKIT_PROBE (example_zero, nbdkit_connection_id (),
                nbdkit_request_cookie (), (uint64_t) offset,
                (uint64_t) count);

  pthread_rwlock_wrlock (&disk.lock);
  memset (disk.bytes + offset, 0, count);
  if (first < last)
    map_set (first, last, false);
  pthread_rwlock_unlock (&disk.lock);
  atomic_fetch_add (&disk.writes, 1);
  return 0;
}

static int
example_flush (void *handle, uint32_t flags)
{
  /* The pattern for a costly argument: compute it only when a tracer
   * is attached to this probe.  Without probes compiled in, the test
   * is a constant 0 and the whole block disappears.
   */
  if (NBDKIT_PROBE_ENABLED (example_flush)) {
    uint64_t used;

    pthread_rwlock_rdlock (&disk.lock);
    used = map_count ();
    pthread_rwlock_unlock (&disk.lock);
    NBDKIT_PROBE (example_flush, nbdkit_connection_id (),
                  nbdkit_request_cookie (),
                  (uint64_t) atomic_load (&disk.reads),
                  (uint64_t) atomic_load (&disk.writes), used);
  }
  return 0;
}

/* One extent per run of blocks with the same state in the map. */
static int
example_extents (void *handle, uint32_t count, uint64_t offset,
                 uint32_t flags, struct nbdkit_extents *extents)
{
  uint64_t end = offset + count;
  uint64_t pos = offset;
  int r = 0;

  pthread_rwlock_rdlock (&disk.lock);
  while (pos < end && r == 0) {
    int64_t b = (int64_t) (pos / BLOCK_SIZE);
    bool data = map_get (b);
    uint64_t run_end;

    while (b < disk.nr_blocks && map_get (b) == data)
      b++;
    run_end = (uint64_t) b * BLOCK_SIZE;
    if (run_end > end)
      run_end = end;
    r = nbdkit_add_extent (extents, pos, run_end - pos,
                           data ? 0 : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
    pos = run_end;
  }
  pthread_rwlock_unlock (&disk.lock);
  return r;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "example",
  .version           = NBDKIT_VERSION_STRING, /* or your own */
  .longname          = "nbdkit example plugin",
  .description       = "A RAM disk with its own USDT probes",
  .unload            = example_unload,
  .config            = example_config,
  .config_complete   = example_config_complete,
  .config_help       = example_config_help,
  .magic_config_key  = "size",
  .open              = example_open,
  .get_size          = example_get_size,
  .can_write         = example_can_yes,
  .can_flush         = example_can_yes,
  .can_trim          = example_can_yes,
  .can_zero          = example_can_yes,
  .can_fua           = example_can_fua,
  .can_multi_conn    = example_can_yes,
  .can_extents       = example_can_yes,
  .pread             = example_pread,
  .pwrite            = example_pwrite,
  .flush             = example_flush,
  .trim              = example_zero,
  .zero              = example_zero,
  .extents           = example_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
