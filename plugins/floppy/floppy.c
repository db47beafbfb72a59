/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The floppy plugin: a read-only FAT32 disk made from a directory.
 *
 *   nbdkit floppy [dir=]DIRECTORY [label=LABEL] [size=SIZE]
 *
 * This file owns the parameters and the callbacks.  get_ready lays the
 * image out once (virtual-floppy.c); after that the image is read-only
 * and shared, so requests run in parallel with no lock.  A read walks
 * the image's regions: metadata is copied from memory, padding is
 * zero, and file bytes are read from the file itself, opened for each
 * request, so the plugin holds no file descriptors between requests.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "full-rw.h"
#include "minmax.h"
#include "regions.h"
#include "virtual-floppy.h"
#include "answers.h"

/* Parameters, set by config; then the image, built by get_ready. */
static char *dir = NULL;
static char label[11] = "NBDKITFLOPY";
static int64_t size = 0;
static struct virtual_floppy floppy;

static void
floppy_load (void)
{
  vf_init (&floppy);
}

static void
floppy_unload (void)
{
  vf_free (&floppy);
  free (dir);
}

/* A volume label: up to 11 characters of those an 8.3 name may hold,
 * or spaces; lower case letters are made upper case, as DOS does.
 */
static int
parse_label (const char *value)
{
  size_t len = strlen (value);

  if (len == 0 || len > 11) {
    nbdkit_error ("label: '%s' must be 1 to 11 characters long", value);
    return -1;
  }
  memset (label, ' ', sizeof label);
  for (size_t i = 0; i < len; i++) {
    int c = (unsigned char) value[i];

    if (c >= 'a' && c <= 'z')
      c -= 'a' - 'A';
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr (" !#$%&'()-@^_`{}~", c) != NULL) || c == '\0') {
      nbdkit_error ("label: '%s': a FAT label holds only letters, digits, "
                    "spaces and !#$%%&'()-@^_`{}~", value);
      return -1;
    }
    label[i] = c;
  }
  return 0;
}

static int
floppy_config (const char *key, const char *value)
{
  if (strcmp (key, "dir") == 0) {
    struct stat st;
    char *path;

    if (*value == '\0') {
      nbdkit_error ("dir: the directory name is empty");
      return -1;
    }
    path = realpath (value, NULL);
    if (path == NULL) {
      nbdkit_error ("dir: %s: %m", value);
      return -1;
    }
    if (stat (path, &st) == -1 || !S_ISDIR (st.st_mode)) {
      nbdkit_error ("dir: %s: not a directory", value);
      free (path);
      return -1;
    }
    free (dir);
    dir = path;
    return 0;
  }
  if (strcmp (key, "label") == 0)
    return parse_label (value);
  if (strcmp (key, "size") == 0) {
    int64_t r = nbdkit_parse_size (value);

    if (r == -1)
      return -1;
    if (r == 0) {
      nbdkit_error ("size: 0 is too small for any disk");
      return -1;
    }
    size = r;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
floppy_config_complete (void)
{
  if (dir == NULL) {
    nbdkit_error ("the dir=DIRECTORY parameter is required");
    return -1;
  }
  return 0;
}

#define floppy_config_help \
  "[dir=]<DIRECTORY>   (required) The directory to put on the disk.\n" \
  "label=<LABEL>       The volume label (default NBDKITFLOPY).\n" \
  "size=<SIZE>         The disk size (default: just big enough)."

static uint64_t
elapsed_ns (const struct timespec *start)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start->tv_sec) * UINT64_C (1000000000)
    + now.tv_nsec - start->tv_nsec;
}

/* Lay out the image before the first client connects. */
static int
floppy_get_ready (void)
{
  struct timespec start;
  uint64_t files, dirs, image_size, ns;

  clock_gettime (CLOCK_MONOTONIC, &start);
  if (vf_create (&floppy, dir, label, size) == -1)
    return -1;
  files = floppy.files.len;
  dirs = floppy.dirs.len;
  image_size = regions_size (&floppy.regions);
  ns = elapsed_ns (&start);
  nbdkit_debug ("floppy: %" PRIu64 " files, %" PRIu64 " directories, "
                "%" PRIu64 " bytes, %" PRIu32 " byte clusters, "
                "%" PRIu32 " of %" PRIu32 " used",
                files, dirs, image_size, floppy.cluster_size,
                floppy.used_clusters, floppy.data_clusters);
  NBDKIT_PROBE (floppy_build, files, dirs, image_size, ns);
  return 0;
}

static int64_t
floppy_get_size (void *handle)
{
  return regions_size (&floppy.regions);
}

/* Read N bytes at OFFSET of file I. */
static int
read_file (size_t i, uint8_t *buf, uint32_t n, uint64_t offset)
{
  const char *path = floppy.files.ptr[i].host_path;
  ssize_t r;
  int fd;

  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("open: %s: %m", path);
    return -1;
  }
  r = full_pread (fd, buf, n, offset);
  if (r == -1) {
    nbdkit_error ("pread: %s: %m", path);
    close (fd);
    return -1;
  }
  close (fd);
  if ((size_t) r < n) {
    nbdkit_error ("%s: the file is shorter than when the disk was made",
                  path);
    errno = EIO;
    return -1;
  }
  return 0;
}

static int
floppy_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  uint8_t *p = buf;

  while (count > 0) {
    const struct region *r = regions_find (&floppy.regions, offset);
    uint64_t in_region;
    uint32_t n;

    if (r == NULL) {            /* the server checked; be safe anyway */
      nbdkit_error ("read beyond the end of the disk");
      errno = EIO;
      return -1;
    }
    in_region = offset - r->start;
    n = MIN ((uint64_t) count, r->len - in_region);
    switch (r->type) {
    case REGION_DATA:
      memcpy (p, (const uint8_t *) r->data + in_region, n);
      break;
    case REGION_ZERO:
      memset (p, 0, n);
      break;
    case REGION_FILE:
      if (read_file (r->index, p, n, in_region) == -1)
        return -1;
      break;
    }
    p += n;
    count -= n;
    offset += n;
  }
  return 0;
}

/* Block status: the zero regions (slack, free space, unused FAT) are
 * holes, so copying tools skip them.
 */
static int
floppy_extents (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents)
{
  uint64_t end = offset + count;

  while (offset < end) {
    const struct region *r = regions_find (&floppy.regions, offset);
    uint64_t n;

    if (r == NULL)
      break;
    n = MIN (end, region_end (r)) - offset;
    if (nbdkit_add_extent (extents, offset, n,
                           r->type == REGION_ZERO
                           ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO
                           : 0) == -1)
      return -1;
    offset += n;
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "floppy",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit floppy plugin",
  .description       = "A read-only FAT32 disk made from a directory",
  .load              = floppy_load,
  .unload            = floppy_unload,
  .config            = floppy_config,
  .config_complete   = floppy_config_complete,
  .config_help       = floppy_config_help,
  .magic_config_key  = "dir",
  .get_ready         = floppy_get_ready,
  .open              = answer_no_handle,
  .get_size          = floppy_get_size,
  .can_multi_conn    = answer_yes, /* the disk never changes */
  /* As nbdkit's: cache requests are accepted, and there is nothing to
   * fetch ahead that a read would not find as fast.
   */
  .can_cache         = answer_cache_native,
  .cache             = answer_range_done,
  .pread             = floppy_pread,
  .extents           = floppy_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
