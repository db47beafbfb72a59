/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The linuxdisk plugin: a directory served as a partitioned disk
 * holding an ext2, ext3 or ext4 filesystem with its files.
 *
 * This file owns the parameters and the virtual disk.  At start-up
 * (get_ready) filesystem.c builds the filesystem into an unlinked
 * temporary file and gpt.c the partition table, and the disk is laid
 * out as regions:
 *
 *   protective MBR, GPT header and array    (memory)
 *   zeroes up to 1 MiB
 *   the filesystem                          (the temporary file)
 *   backup GPT array and header             (memory)
 *
 * After that everything is read-only: requests only read the regions
 * and pread the file, so any number run in parallel, and every
 * connection sees the same disk.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "now-ns.h"
#include "minmax.h"
#include "regions.h"

#include "linuxdisk.h"

/* Set by config, read-only afterwards. */
static char *dir = NULL;
static char *label = NULL;
static const char *type = "ext2";
static struct size_request size_req = { 0, false };

/* Built by get_ready, read-only afterwards. */
static struct regions disk;
static int fs_fd = -1;
static uint8_t primary[GPT_PRIMARY_SECTORS * SECTOR_SIZE];
static uint8_t secondary[GPT_SECONDARY_SECTORS * SECTOR_SIZE];

static void
linuxdisk_load (void)
{
  regions_init (&disk);
}

static void
linuxdisk_unload (void)
{
  free (dir);
  free (label);
  regions_free (&disk);
  if (fs_fd >= 0)
    close (fs_fd);
}

static int
linuxdisk_config (const char *key, const char *value)
{
  if (strcmp (key, "dir") == 0) {
    free (dir);
    dir = realpath (value, NULL);
    if (dir == NULL) {
      nbdkit_error ("dir=%s: %m", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "label") == 0) {
    free (label);
    label = strdup (value);
    if (label == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "type") == 0) {
    if (strcmp (value, "ext2") == 0)
      type = "ext2";
    else if (strcmp (value, "ext3") == 0)
      type = "ext3";
    else if (strcmp (value, "ext4") == 0)
      type = "ext4";
    else {
      nbdkit_error ("type=%s: must be ext2, ext3 or ext4", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "size") == 0) {
    bool add = value[0] == '+';
    int64_t r = nbdkit_parse_size (add ? value + 1 : value);

    if (r == -1)
      return -1;
    if (r == 0 && !add) {
      nbdkit_error ("size=%s: the filesystem cannot be empty", value);
      return -1;
    }
    size_req.size = r;
    size_req.add = add;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
linuxdisk_config_complete (void)
{
  if (dir == NULL) {
    nbdkit_error ("the dir parameter is required");
    return -1;
  }
  return 0;
}

#define linuxdisk_config_help \
  "[dir=]DIRECTORY           (required) The files to put on the disk.\n" \
  "label=LABEL               The filesystem label.\n" \
  "type=ext2|ext3|ext4       The filesystem type (default ext2).\n" \
  "size=[+]SIZE              The filesystem size, or +free space."

static int
build_disk (void)
{
  uint64_t fs_size, fs_sectors, total_sectors;

  fs_fd = build_filesystem (dir, type, label, size_req, &fs_size);
  if (fs_fd == -1)
    return -1;
  fs_sectors = fs_size / SECTOR_SIZE;
  total_sectors = PARTITION_START_SECTOR + fs_sectors +
    GPT_SECONDARY_SECTORS;
  if (build_gpt (primary, secondary, total_sectors, fs_sectors) == -1)
    return -1;
  if (regions_append_data (&disk, sizeof primary, primary) == -1 ||
      regions_append_zero (&disk, PARTITION_START_SECTOR * SECTOR_SIZE -
                           sizeof primary) == -1 ||
      regions_append_file (&disk, fs_size, 0) == -1 ||
      regions_append_data (&disk, sizeof secondary, secondary) == -1) {
    nbdkit_error ("size=%" PRIu64 ": the disk is too large: %m", fs_size);
    return -1;
  }
  return 0;
}

static int
linuxdisk_get_ready (void)
{
  uint64_t start = now_ns ();
  int r = build_disk ();
  uint64_t duration_ns = now_ns () - start;
  uint64_t image_size = r == 0 ? regions_size (&disk) : 0;
  const char *d = dir;

  /* Keep d in a register: the compiler would otherwise name the
   * global in the probe's argument, which tracers misread in a .so.
   */
  __asm__ ("" : "+r" (d));
  NBDKIT_PROBE (linuxdisk_build, d, image_size, duration_ns);
  if (r == 0)
    nbdkit_debug ("linuxdisk: built a disk of %" PRIu64 " bytes in %"
                  PRIu64 " ms", image_size, duration_ns / 1000000);
  return r;
}

static void *
linuxdisk_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
linuxdisk_get_size (void *handle)
{
  return regions_size (&disk);
}

static int
linuxdisk_can_multi_conn (void *handle)
{
  return 1;
}

static int
linuxdisk_can_cache (void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

static int
linuxdisk_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags)
{
  char *p = buf;

  while (count > 0) {
    const struct region *r = regions_find (&disk, offset);
    uint64_t in = offset - r->start;
    uint32_t n = MIN ((uint64_t) count, r->len - in);
    ssize_t got;

    switch (r->type) {
    case REGION_DATA:
      memcpy (p, (const char *) r->data + in, n);
      break;
    case REGION_ZERO:
      memset (p, 0, n);
      break;
    case REGION_FILE:
      got = pread (fs_fd, p, n, in);
      if (got == -1) {
        nbdkit_error ("pread: %m");
        return -1;
      }
      if (got == 0) {
        nbdkit_error ("pread: the filesystem image ended early");
        errno = EIO;
        return -1;
      }
      n = got;
      break;
    }
    p += n;
    count -= n;
    offset += n;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "linuxdisk",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit linuxdisk plugin",
  .description       = "A directory as a disk with an ext2/3/4 filesystem",
  .load              = linuxdisk_load,
  .unload            = linuxdisk_unload,
  .config            = linuxdisk_config,
  .config_complete   = linuxdisk_config_complete,
  .config_help       = linuxdisk_config_help,
  .magic_config_key  = "dir",
  .get_ready         = linuxdisk_get_ready,
  .open              = linuxdisk_open,
  .get_size          = linuxdisk_get_size,
  .can_multi_conn    = linuxdisk_can_multi_conn,
  .can_cache         = linuxdisk_can_cache,
  .pread             = linuxdisk_pread,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
