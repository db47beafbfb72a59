/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The guestfs plugin: one device (/dev/sda1, /dev/VG/LV, ...) or one
 * file inside disk images, served through a libguestfs appliance.
 * The command line names the disks (disk=, or the disks of a libvirt
 * domain=), optional mounts, and the export.  Each NBD connection
 * launches its own appliance in open (so -r adds the drives
 * read-only) and shuts it down in close; reads and writes become
 * guestfs_pread_device/pwrite_device (or pread/pwrite for a file) in
 * pieces the appliance's protocol accepts.  A libguestfs handle is
 * used by one thread at a time, hence SERIALIZE_REQUESTS.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <guestfs.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "now-ns.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS

/* The appliance refuses messages over 4 MiB; 1 MiB pieces stay well
 * below that whatever the protocol's overhead.
 */
#define PIECE_MAX (1024 * 1024)

/* The command line, fixed after config_complete.  The arrays hold
 * pointers into argv, so they only grow during config.
 */
struct disk {
  const char *path;
  const char *format;           /* the format= given before it, or NULL */
};
static struct disk *disks;
static size_t nr_disks;
static const char *format;      /* applies to the disk= options after it */
static const char *domain;
static const char *connect_uri;
static const char **mounts;     /* "inspect", "DEV" or "DEV:MOUNTPOINT" */
static size_t nr_mounts;
static const char *export;
static bool is_device;          /* export starts with /dev/ */
static bool trace, debug;

struct handle {
  guestfs_h *g;
  int64_t size;
};

/* libguestfs's message for the call that just failed. */
static const char *
last_error (guestfs_h *g)
{
  const char *msg = guestfs_last_error (g);
  return msg ? msg : "unknown libguestfs error";
}

static void
gp_unload (void)
{
  free (disks);
  free (mounts);
}

static int
append (void **array, size_t *nr, size_t elem, const void *value)
{
  void *p = realloc (*array, (*nr + 1) * elem);

  if (p == NULL) {
    nbdkit_error ("realloc: %m");
    return -1;
  }
  memcpy ((char *) p + *nr * elem, value, elem);
  *array = p;
  (*nr)++;
  return 0;
}

static int
gp_config (const char *key, const char *value)
{
  int r;

  if (strcmp (key, "disk") == 0) {
    struct disk d = { .path = value, .format = format };
    return append ((void **) &disks, &nr_disks, sizeof d, &d);
  }
  else if (strcmp (key, "format") == 0)
    format = *value ? value : NULL;
  else if (strcmp (key, "domain") == 0)
    domain = value;
  else if (strcmp (key, "connect") == 0)
    connect_uri = value;
  else if (strcmp (key, "mount") == 0)
    return append ((void **) &mounts, &nr_mounts, sizeof value, &value);
  else if (strcmp (key, "export") == 0)
    export = value;
  else if (strcmp (key, "trace") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    trace = r;
  }
  else if (strcmp (key, "debug") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    debug = r;
  }
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

static int
gp_config_complete (void)
{
  size_t i;

  if (export == NULL) {
    nbdkit_error ("export= is required");
    return -1;
  }
  if (export[0] != '/') {
    nbdkit_error ("export=%s: a device or file inside the appliance "
                  "starts with /", export);
    return -1;
  }
  is_device = strncmp (export, "/dev/", 5) == 0;
  if (nr_disks == 0 && domain == NULL) {
    nbdkit_error ("disk= or domain= is required");
    return -1;
  }
  /* Fail at start-up, not one appliance launch later in each open. */
  for (i = 0; i < nr_disks; ++i) {
    if (access (disks[i].path, R_OK) == -1) {
      nbdkit_error ("disk=%s: %m", disks[i].path);
      return -1;
    }
  }
  return 0;
}

/* Mount what mount= asked for.  "inspect" mounts the one operating
 * system found the way it mounts its own filesystems: shorter mount
 * points first, so / is there before /boot.
 */
static int
compare_mountpoints (const void *a, const void *b)
{
  /* Pairs of (mountpoint, device) strings. */
  const char *const *x = a, *const *y = b;
  size_t lx = strlen (x[0]), ly = strlen (y[0]);
  return lx < ly ? -1 : lx > ly ? 1 : strcmp (x[0], y[0]);
}

static void
free_strings (char **s)
{
  size_t i;

  if (s == NULL)
    return;
  for (i = 0; s[i]; ++i)
    free (s[i]);
  free (s);
}

static int
do_mount (guestfs_h *g, int readonly, const char *dev, const char *mp)
{
  int r = readonly ? guestfs_mount_ro (g, dev, mp)
                   : guestfs_mount (g, dev, mp);
  if (r == -1)
    nbdkit_error ("guestfs: mount %s on %s: %s", dev, mp,
                  last_error (g));
  return r;
}

static int
mount_inspect (guestfs_h *g, int readonly)
{
  char **roots = guestfs_inspect_os (g), **mps = NULL;
  size_t n;
  int r = -1;

  if (roots == NULL) {
    nbdkit_error ("guestfs: inspection: %s", last_error (g));
    return -1;
  }
  if (roots[0] == NULL || roots[1] != NULL) {
    nbdkit_error ("guestfs: mount=inspect needs exactly one operating "
                  "system in the disks, found %s",
                  roots[0] == NULL ? "none" : "several");
    goto out;
  }
  mps = guestfs_inspect_get_mountpoints (g, roots[0]);
  if (mps == NULL) {
    nbdkit_error ("guestfs: inspection: %s", last_error (g));
    goto out;
  }
  for (n = 0; mps[n]; ++n)
    ;
  qsort (mps, n / 2, 2 * sizeof *mps, compare_mountpoints);
  for (size_t i = 0; i + 1 < n; i += 2)
    if (do_mount (g, readonly, mps[i + 1], mps[i]) == -1)
      goto out;
  r = 0;
 out:
  free_strings (roots);
  free_strings (mps);
  return r;
}

static int
do_mounts (guestfs_h *g, int readonly)
{
  size_t i;

  for (i = 0; i < nr_mounts; ++i) {
    const char *colon;

    if (strcmp (mounts[i], "inspect") == 0) {
      if (mount_inspect (g, readonly) == -1)
        return -1;
    }
    else if ((colon = strchr (mounts[i], ':')) != NULL) {
      char *dev = strndup (mounts[i], colon - mounts[i]);
      int r;

      if (dev == NULL) {
        nbdkit_error ("strndup: %m");
        return -1;
      }
      r = do_mount (g, readonly, dev, colon + 1);
      free (dev);
      if (r == -1)
        return -1;
    }
    else if (do_mount (g, readonly, mounts[i], "/") == -1)
      return -1;
  }
  return 0;
}

static int
add_drives (guestfs_h *g, int readonly)
{
  size_t i;

  for (i = 0; i < nr_disks; ++i) {
    int r = disks[i].format
      ? guestfs_add_drive_opts (g, disks[i].path,
                                GUESTFS_ADD_DRIVE_OPTS_READONLY, readonly,
                                GUESTFS_ADD_DRIVE_OPTS_FORMAT,
                                disks[i].format, -1)
      : guestfs_add_drive_opts (g, disks[i].path,
                                GUESTFS_ADD_DRIVE_OPTS_READONLY, readonly,
                                -1);
    if (r == -1) {
      nbdkit_error ("guestfs: disk=%s: %s", disks[i].path,
                    last_error (g));
      return -1;
    }
  }
  if (domain) {
    int r = connect_uri
      ? guestfs_add_domain (g, domain,
                            GUESTFS_ADD_DOMAIN_READONLY, readonly,
                            GUESTFS_ADD_DOMAIN_LIBVIRTURI, connect_uri,
                            -1)
      : guestfs_add_domain (g, domain,
                            GUESTFS_ADD_DOMAIN_READONLY, readonly, -1);
    if (r == -1) {
      nbdkit_error ("guestfs: domain=%s: %s", domain,
                    last_error (g));
      return -1;
    }
  }
  return 0;
}

static void gp_close (void *handle);

static void *
gp_open (int readonly)
{
  struct handle *h = calloc (1, sizeof *h);
  uint64_t id = nbdkit_connection_id (), t0;
  int r;

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  /* guestfs_create reads LIBGUESTFS_* from the environment (the
   * backend, force_tcg where KVM is missing).
   */
  h->g = guestfs_create ();
  if (h->g == NULL) {
    nbdkit_error ("guestfs_create: %m");
    free (h);
    return NULL;
  }
  /* Errors reach the log through nbdkit_error, not libguestfs's own
   * printing on stderr.
   */
  guestfs_set_error_handler (h->g, NULL, NULL);
  guestfs_set_trace (h->g, trace);
  guestfs_set_verbose (h->g, debug);

  if (add_drives (h->g, readonly) == -1)
    goto err;
  t0 = now_ns ();
  r = guestfs_launch (h->g);
  NBDKIT_PROBE (guestfs_launch, id, (int32_t) readonly, now_ns () - t0,
                (int32_t) r);
  if (r == -1) {
    nbdkit_error ("guestfs: launching the appliance: %s",
                  last_error (h->g));
    goto err;
  }
  if (do_mounts (h->g, readonly) == -1)
    goto err;
  h->size = is_device ? guestfs_blockdev_getsize64 (h->g, export)
                      : guestfs_filesize (h->g, export);
  if (h->size == -1) {
    nbdkit_error ("guestfs: export=%s: %s", export,
                  last_error (h->g));
    goto err;
  }
  NBDKIT_PROBE (guestfs_export, id, export, h->size);
  return h;

 err:
  gp_close (h);
  return NULL;
}

static void
gp_close (void *handle)
{
  struct handle *h = handle;

  /* shutdown waits for qemu to write back what it caches; close alone
   * would kill it.
   */
  if (guestfs_shutdown (h->g) == -1)
    nbdkit_error ("guestfs: shutting the appliance down: %s",
                  last_error (h->g));
  guestfs_close (h->g);
  free (h);
}

static int64_t
gp_get_size (void *handle)
{
  struct handle *h = handle;
  return h->size;
}

static int
gp_pread (void *handle, void *buf, uint32_t count,
                      uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  char *p = buf;
  uint64_t id = nbdkit_connection_id (), cookie = nbdkit_request_cookie ();

  /* The server has checked offset + count against the size. */
  while (count > 0) {
    int n = count < PIECE_MAX ? count : PIECE_MAX;
    size_t got = 0;
    uint64_t t0 = now_ns ();
    char *data = is_device
      ? guestfs_pread_device (h->g, export, n, offset, &got)
      : guestfs_pread (h->g, export, n, offset, &got);

    NBDKIT_PROBE (guestfs_read, id, cookie, offset, (uint32_t) n,
                  now_ns () - t0, data ? (int64_t) got : -1);
    if (data == NULL) {
      nbdkit_error ("guestfs: reading %d bytes at %" PRIu64 " of %s: %s",
                    n, offset, export, last_error (h->g));
      errno = EIO;
      return -1;
    }
    /* A short read before the size we saw means the export shrank;
     * more than asked would overrun buf.
     */
    if (got == 0 || got > (size_t) n) {
      nbdkit_error ("guestfs: reading %d bytes at %" PRIu64 " of %s: "
                    "got %zu", n, offset, export, got);
      free (data);
      errno = EIO;
      return -1;
    }
    memcpy (p, data, got);
    free (data);
    p += got;
    offset += got;
    count -= got;
  }
  return 0;
}

static int
gp_pwrite (void *handle, const void *buf, uint32_t count,
                       uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  const char *p = buf;
  uint64_t id = nbdkit_connection_id (), cookie = nbdkit_request_cookie ();

  while (count > 0) {
    size_t n = count < PIECE_MAX ? count : PIECE_MAX;
    uint64_t t0 = now_ns ();
    int r = is_device
      ? guestfs_pwrite_device (h->g, export, p, n, offset)
      : guestfs_pwrite (h->g, export, p, n, offset);

    NBDKIT_PROBE (guestfs_write, id, cookie, offset, (uint32_t) n,
                  now_ns () - t0, (int64_t) r);
    if (r <= 0 || (size_t) r > n) {
      nbdkit_error ("guestfs: writing %zu bytes at %" PRIu64 " of %s: %s",
                    n, offset, export,
                    r == -1 ? last_error (h->g) : "short write");
      errno = EIO;
      return -1;
    }
    p += r;
    offset += r;
    count -= r;
  }
  /* FUA: the server emulates it with flush, below. */
  return 0;
}

static int
gp_flush (void *handle, uint32_t flags)
{
  struct handle *h = handle;

  if (guestfs_sync (h->g) == -1) {
    nbdkit_error ("guestfs: sync: %s", last_error (h->g));
    errno = EIO;
    return -1;
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name              = "guestfs",
  .longname          = "nbdkit libguestfs plugin",
  .version           = PACKAGE_VERSION,
  .unload            = gp_unload,
  .config            = gp_config,
  .config_complete   = gp_config_complete,
  .config_help       =
    "disk=DISK          a disk image to add (repeatable)\n"
    "format=FORMAT      the format of the disk= options after it\n"
    "domain=DOMAIN      add the disks of this libvirt domain\n"
    "connect=URI        libvirt URI for domain=\n"
    "mount=inspect|DEV[:MOUNTPOINT]  mount before exporting (repeatable)\n"
    "export=DEVICE|FILE (required) what to serve, e.g. /dev/sda1\n"
    "trace=on           trace libguestfs calls (with -v)\n"
    "debug=on           libguestfs and appliance debugging (with -v)",
  .open              = gp_open,
  .close             = gp_close,
  .get_size          = gp_get_size,
  .pread             = gp_pread,
  .pwrite            = gp_pwrite,
  .flush             = gp_flush,
};

NBDKIT_REGISTER_PLUGIN (plugin)
