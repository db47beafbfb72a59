/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The libvirt plugin: one disk of a libvirt domain, read-only, through
 * virDomainBlockPeek (libvirtd reads the disk's source on the host, so
 * a remote libvirt URI works too).  Each NBD connection opens its own
 * libvirt connection and looks the domain up; reads are cut into
 * pieces the RPC accepts.  The export is read-only: the plugin has no
 * write callbacks.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

/* libvirt's remote protocol refuses larger peeks on some versions. */
#define PEEK_MAX (64 * 1024)

/* The command line, fixed after config_complete. */
static const char *uri;         /* NULL: libvirt's default */
static const char *domain_name;
static const char *disk_name;   /* target (vda) or source path */

struct handle {
  virConnectPtr conn;
  virDomainPtr dom;
  int64_t size;
};

static uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* libvirt prints its errors on stderr unless told otherwise; ours
 * carry them in nbdkit_error instead.
 */
static void
quiet (void *opaque, virErrorPtr err)
{
}

static void
libvirt_load (void)
{
  virSetErrorFunc (NULL, quiet);
}

static int
libvirt_config (const char *key, const char *value)
{
  if (strcmp (key, "connect") == 0)
    uri = value;
  else if (strcmp (key, "domain") == 0)
    domain_name = value;
  else if (strcmp (key, "disk") == 0)
    disk_name = value;
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

static int
libvirt_config_complete (void)
{
  if (domain_name == NULL || disk_name == NULL) {
    nbdkit_error ("domain= and disk= are required");
    return -1;
  }
  return 0;
}

static const char *
last_error (void)
{
  const char *msg = virGetLastErrorMessage ();
  return msg ? msg : "unknown libvirt error";
}

static void libvirt_close (void *handle);

static void *
libvirt_open (int readonly)
{
  struct handle *h = calloc (1, sizeof *h);
  virDomainBlockInfo info;

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  /* Not virConnectOpenReadOnly: libvirtd refuses block peeks on a
   * read-only connection ("read only access prevents ...").
   */
  h->conn = virConnectOpen (uri);
  if (h->conn == NULL) {
    nbdkit_error ("libvirt: cannot connect to %s: %s",
                  uri ? uri : "the default URI", last_error ());
    goto err;
  }
  h->dom = virDomainLookupByName (h->conn, domain_name);
  if (h->dom == NULL) {
    nbdkit_error ("libvirt: domain %s: %s", domain_name, last_error ());
    goto err;
  }
  if (virDomainGetBlockInfo (h->dom, disk_name, &info, 0) == -1) {
    nbdkit_error ("libvirt: disk %s of %s: %s", disk_name, domain_name,
                  last_error ());
    goto err;
  }
  if (info.capacity > INT64_MAX) {
    nbdkit_error ("libvirt: disk %s: capacity %llu is too large",
                  disk_name, info.capacity);
    goto err;
  }
  h->size = info.capacity;
  NBDKIT_PROBE (libvirt_disk, domain_name, disk_name, h->size);
  return h;

 err:
  libvirt_close (h);
  return NULL;
}

static void
libvirt_close (void *handle)
{
  struct handle *h = handle;

  if (h->dom)
    virDomainFree (h->dom);
  if (h->conn)
    virConnectClose (h->conn);
  free (h);
}

static int64_t
libvirt_get_size (void *handle)
{
  struct handle *h = handle;
  return h->size;
}

static int
libvirt_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  struct handle *h = handle;
  char *p = buf;
  uint64_t id = nbdkit_connection_id (), cookie = nbdkit_request_cookie ();

  /* The server has checked offset + count against the size. */
  while (count > 0) {
    size_t n = count < PEEK_MAX ? count : PEEK_MAX;
    uint64_t t0 = now_ns ();
    int r = virDomainBlockPeek (h->dom, disk_name, offset, n, p, 0);
    NBDKIT_PROBE (libvirt_peek, id, cookie, offset, (uint32_t) n,
                  now_ns () - t0, (int32_t) r);
    if (r == -1) {
      nbdkit_error ("libvirt: reading %zu bytes at %" PRIu64
                    " of disk %s: %s", n, offset, disk_name, last_error ());
      errno = EIO;
      return -1;
    }
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name              = "libvirt",
  .longname          = "nbdkit libvirt plugin",
  .version           = PACKAGE_VERSION,
  .load              = libvirt_load,
  .config            = libvirt_config,
  .config_complete   = libvirt_config_complete,
  .config_help       =
    "connect=URI        libvirt URI (default: libvirt's default)\n"
    "domain=NAME        (required) the domain\n"
    "disk=DISK          (required) its disk: target (vda) or source path",
  .open              = libvirt_open,
  .close             = libvirt_close,
  .get_size          = libvirt_get_size,
  .pread             = libvirt_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
