#if 0 /* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
exec nbdkit cc "$0" "$@"
#endif
/* A disk in memory, compiled by the cc plugin in the tests
 * (tests/test-cc-plugin*.sh): writes, zeroes, trims and flushes, block
 * status from the data (a 64 KiB block of zeroes is a hole), and two
 * parameters, size= and fill= (the byte a fresh disk holds).  It uses
 * only the public plugin API, so Debian's nbdkit compiles it too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#ifndef DISK_BLOCK
#define DISK_BLOCK 65536
#endif

static uint64_t size = 1 << 20;
static int fill = 0;
static unsigned char *disk;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int
disk_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    size = r;
    return 0;
  }
  if (strcmp (key, "fill") == 0)
    return nbdkit_parse_int ("fill", value, &fill);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
disk_get_ready (void)
{
  disk = malloc (size);
  if (!disk) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  memset (disk, fill, size);
  return 0;
}

static void
disk_unload (void)
{
  free (disk);
}

static void *
disk_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
disk_get_size (void *handle)
{
  return size;
}

static int
disk_can_multi_conn (void *handle)
{
  return 1;
}

static int
disk_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  pthread_mutex_lock (&lock);
  memcpy (buf, disk + offset, count);
  pthread_mutex_unlock (&lock);
  return 0;
}

static int
disk_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  pthread_mutex_lock (&lock);
  memcpy (disk + offset, buf, count);
  pthread_mutex_unlock (&lock);
  return 0;
}

static int
disk_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  pthread_mutex_lock (&lock);
  memset (disk + offset, 0, count);
  pthread_mutex_unlock (&lock);
  return 0;
}

static int
disk_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return disk_zero (handle, count, offset, flags);
}

static int
disk_flush (void *handle, uint32_t flags)
{
  return 0;
}

static int
is_zero (const unsigned char *p, size_t n)
{
  for (size_t i = 0; i < n; ++i)
    if (p[i])
      return 0;
  return 1;
}

static int
disk_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  uint64_t b = offset / DISK_BLOCK * DISK_BLOCK;
  int r = 0;
  pthread_mutex_lock (&lock);
  for (; b < offset + count && b < size && r == 0; b += DISK_BLOCK) {
    uint64_t n = size - b < DISK_BLOCK ? size - b : DISK_BLOCK;
    r = nbdkit_add_extent (extents, b, n,
                           is_zero (disk + b, n)
                           ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO : 0);
  }
  pthread_mutex_unlock (&lock);
  return r;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "testdisk",
  .config = disk_config,
  .get_ready = disk_get_ready,
  .unload = disk_unload,
  .open = disk_open,
  .get_size = disk_get_size,
  .can_multi_conn = disk_can_multi_conn,
  .pread = disk_pread,
  .pwrite = disk_pwrite,
  .zero = disk_zero,
  .trim = disk_trim,
  .flush = disk_flush,
  .extents = disk_extents,
};

NBDKIT_REGISTER_PLUGIN (plugin)
