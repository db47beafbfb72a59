/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nfs plugin: one file on an NFS server, reached through libnfs
 * (a user-space NFS client: nothing is mounted on this machine).
 *
 * This file owns the parameters (set by config, read-only once the
 * server is ready) and, per NBD connection, one libnfs context with
 * the export mounted and the file open (struct handle).  A libnfs
 * context must not be used by two threads at once, so the thread
 * model serialises the requests of a connection; connections run in
 * parallel, each on its own context and TCP connection.
 *
 * libnfs's synchronous calls wait for ever by default, and by default
 * reconnect for ever to a server that went away: timeout= (default
 * 60 s) bounds every call and the number of reconnection attempts is
 * bounded, so a dead server gives the client an error, not a hang.
 *
 * At start-up (get_ready) the plugin mounts once and opens the file,
 * so that a wrong URI, a missing file or a refused mount stops the
 * server with one line rather than failing each client.
 *
 * Probes: nfs_connect after each mount and open (start-up with id 0,
 * then per connection), nfs_error for each failed libnfs call.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nfsc/libnfs.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "params.h"

/* -D nfs.debug=N: libnfs's own debug level. */
NBDKIT_DLL_PUBLIC int nfs_debug_debug = 0;

/* Parameters: set by config, read-only once the server is ready. */
static char *uri;
static bool readonly_param;
static uint32_t timeout_s = 60;

/* How often libnfs may try to reconnect to a server that dropped the
 * connection before a call fails.
 */
#define RECONNECT_TRIES 3

static void
nfs_unload (void)
{
  free (uri);
}

static int
nfs_config (const char *key, const char *value)
{
  if (strcmp (key, "uri") == 0)
    return param_string (value, &uri);
  if (strcmp (key, "readonly") == 0)
    return param_bool (value, &readonly_param);
  if (strcmp (key, "timeout") == 0) {
    if (nbdkit_parse_uint32_t ("timeout", value, &timeout_s) == -1)
      return -1;
    if (timeout_s == 0 || timeout_s > 3600) {
      nbdkit_error ("timeout: expected 1 to 3600 seconds, not %s", value);
      return -1;
    }
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
nfs_config_complete (void)
{
  if (uri == NULL) {
    nbdkit_error ("the uri parameter is required ([uri=]nfs://...)");
    return -1;
  }
  if (strncmp (uri, "nfs://", 6) != 0) {
    nbdkit_error ("uri: expected nfs://SERVER/EXPORT/FILE, not '%s'", uri);
    return -1;
  }
  return 0;
}

#define nfs_config_help \
  "[uri=]nfs://SERVER/EXPORT/FILE[?ARGS]  The file (required).\n" \
  "readonly=BOOL             Open the file read-only.\n" \
  "timeout=SECS              Bound on each NFS call (default 60)."

static void
nfs_dump_plugin (void)
{
  /* Each connection has its own context, driven synchronously. */
  printf ("libnfs_multithreading=no\n");
}

struct handle {
  struct nfs_context *nfs;
  struct nfsfh *fh;
  int64_t size;
  bool readonly;
  uint32_t readmax, writemax;   /* the largest READ, WRITE the server takes */
};

/* The server's limit on one READ or WRITE, as libnfs learnt it at
 * mount; libnfs does not split larger requests for NFSv4 (it fails to
 * encode them), so the plugin does.
 */
static uint32_t
io_limit (uint64_t max)
{
  if (max == 0)
    return 65536;
  return max > 8 * 1024 * 1024 ? 8 * 1024 * 1024 : max;
}

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * UINT64_C (1000000000) + ts.tv_nsec;
}

/* Reports a failed libnfs call (R is its negative errno) with
 * libnfs's message, and sets errno for the client.
 */
static void
nfs_fail (struct nfs_context *nfs, const char *function, int r)
{
  const char *msg = nfs ? nfs_get_error (nfs) : NULL;
  int err = r < 0 ? -r : EIO;

  if (msg == NULL || *msg == '\0')
    msg = strerror (err);
  nbdkit_error ("%s: %s", function, msg);
  NBDKIT_PROBE (nfs_error, nbdkit_connection_id (), nbdkit_request_cookie (),
                function, (int32_t) err, msg);
  errno = err;
}

static void
close_handle (struct handle *h)
{
  if (h->fh)
    nfs_close (h->nfs, h->fh);
  if (h->nfs)
    nfs_destroy_context (h->nfs);
  free (h);
}

#ifndef HAVE_LIBNFS_LARGE_NFS4_WRITES
#define NFS4_SAFE_WRITE 2048

/* Whether the URI's arguments ask for NFSv4 (libnfs 4 cannot say). */
static bool
uri_wants_nfs4 (void)
{
  const char *q = strchr (uri, '?');

  while (q) {
    q++;
    if (strncmp (q, "version=4", 9) == 0 && (q[9] == '\0' || q[9] == '&'))
      return true;
    q = strchr (q, '&');
  }
  return false;
}
#endif

/* Mounts the export of the URI and opens the file. */
static struct handle *
connect_file (bool readonly)
{
  struct handle *h = calloc (1, sizeof *h);
  struct nfs_url *url = NULL;
  struct nfs_stat_64 st;
  uint64_t start = now_ns ();
  const char *server = "", *path = "";
  int r;

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->readonly = readonly;
  h->nfs = nfs_init_context ();
  if (h->nfs == NULL) {
    nbdkit_error ("nfs_init_context: cannot make a libnfs context");
    goto err;
  }
  nfs_set_timeout (h->nfs, timeout_s * 1000);
  nfs_set_autoreconnect (h->nfs, RECONNECT_TRIES);
  if (nfs_debug_debug > 0)
    nfs_set_debug (h->nfs, nfs_debug_debug);

  url = nfs_parse_url_full (h->nfs, uri);
  if (url == NULL) {
    nfs_fail (h->nfs, "nfs_parse_url_full", -EINVAL);
    goto err;
  }
  if (url->server == NULL || url->path == NULL || url->file == NULL ||
      url->file[0] == '\0') {
    nbdkit_error ("uri: '%s' does not name a file on a server", uri);
    goto err;
  }
  server = url->server;
  path = url->file;
  r = nfs_mount (h->nfs, url->server, url->path);
  if (r < 0) {
    nfs_fail (h->nfs, "nfs_mount", r);
    goto err;
  }
  r = nfs_open (h->nfs, url->file, readonly ? O_RDONLY : O_RDWR, &h->fh);
  if (r < 0) {
    nfs_fail (h->nfs, "nfs_open", r);
    goto err;
  }
  r = nfs_fstat64 (h->nfs, h->fh, &st);
  if (r < 0) {
    nfs_fail (h->nfs, "nfs_fstat64", r);
    goto err;
  }
  if (st.nfs_size > INT64_MAX) {
    nbdkit_error ("%s: size %" PRIu64 " is too large", url->file,
                  st.nfs_size);
    goto err;
  }
  h->size = st.nfs_size;
  h->readmax = io_limit (nfs_get_readmax (h->nfs));
  h->writemax = io_limit (nfs_get_writemax (h->nfs));
#ifndef HAVE_LIBNFS_LARGE_NFS4_WRITES
  /* libnfs 4 encodes an NFSv4 WRITE into a 4 KiB buffer whatever its
   * size, and overruns it for more than about 3.5 KiB of data.
   */
  if (uri_wants_nfs4 () && h->writemax > NFS4_SAFE_WRITE)
    h->writemax = NFS4_SAFE_WRITE;
#endif
  nbdkit_debug ("nfs: %s on %s: %" PRIi64 " bytes, reads up to %" PRIu32
                ", writes up to %" PRIu32, url->file, url->server, h->size,
                h->readmax, h->writemax);
  NBDKIT_PROBE (nfs_connect, nbdkit_connection_id (), server, path,
                now_ns () - start, (int32_t) 0);
  nfs_destroy_url (url);
  return h;

 err:
  NBDKIT_PROBE (nfs_connect, nbdkit_connection_id (), server, path,
                now_ns () - start, (int32_t) -1);
  if (url)
    nfs_destroy_url (url);
  close_handle (h);
  return NULL;
}

/* One check at start-up, so that mistakes stop the server at once. */
static int
nfs_get_ready (void)
{
  struct handle *h = connect_file (true);

  if (h == NULL)
    return -1;
  close_handle (h);
  return 0;
}

static void *
nfs_open_handle (int readonly)
{
  return connect_file (readonly || readonly_param);
}

static void
nfs_close_handle (void *handle)
{
  close_handle (handle);
}

static int64_t
nfs_get_size (void *handle)
{
  struct handle *h = handle;

  return h->size;
}

static int
nfs_can_write (void *handle)
{
  struct handle *h = handle;

  return !h->readonly;
}

static int
nfs_can_flush (void *handle)
{
  return 1;
}

static int
nfs_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

/* libnfs 6 changed the order of the arguments (buffer first). */
#ifdef LIBNFS_API_V2
#define NFS_PREAD(nfs, fh, off, n, buf) nfs_pread (nfs, fh, buf, n, off)
#define NFS_PWRITE(nfs, fh, off, n, buf) nfs_pwrite (nfs, fh, buf, n, off)
#else
#define NFS_PREAD(nfs, fh, off, n, buf) nfs_pread (nfs, fh, off, n, buf)
#define NFS_PWRITE(nfs, fh, off, n, buf) nfs_pwrite (nfs, fh, off, n, buf)
#endif

/* NFS may return fewer bytes than asked for; a read that returns none
 * means the file has shrunk under us.
 */
static int
nfs_pread_handle (void *handle, void *buf, uint32_t count, uint64_t offset,
                  uint32_t flags)
{
  struct handle *h = handle;
  char *p = buf;

  while (count > 0) {
    uint32_t n = count < h->readmax ? count : h->readmax;
    int r = NFS_PREAD (h->nfs, h->fh, offset, n, p);

    if (r < 0) {
      nfs_fail (h->nfs, "nfs_pread", r);
      return -1;
    }
    if (r == 0) {
      nbdkit_error ("nfs_pread: unexpected end of file at %" PRIu64
                    " (the file shrank?)", offset);
      errno = EIO;
      return -1;
    }
    if ((uint32_t) r > n) {
      nbdkit_error ("nfs_pread: returned more than was asked for");
      errno = EIO;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

static int nfs_flush_handle (void *handle, uint32_t flags);

static int
nfs_pwrite_handle (void *handle, const void *buf, uint32_t count,
                   uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  const char *p = buf;

  while (count > 0) {
    uint32_t n = count < h->writemax ? count : h->writemax;
    int r = NFS_PWRITE (h->nfs, h->fh, offset, n, p);

    if (r < 0) {
      nfs_fail (h->nfs, "nfs_pwrite", r);
      return -1;
    }
    if (r == 0 || (uint32_t) r > n) {
      nbdkit_error ("nfs_pwrite: wrote %d of %" PRIu32 " bytes", r, n);
      errno = EIO;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  if (flags & NBDKIT_FLAG_FUA)
    return nfs_flush_handle (handle, 0);
  return 0;
}

static int
nfs_flush_handle (void *handle, uint32_t flags)
{
  struct handle *h = handle;
  int r = nfs_fsync (h->nfs, h->fh);

  if (r < 0) {
    nfs_fail (h->nfs, "nfs_fsync", r);
    return -1;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS

static struct nbdkit_plugin plugin = {
  .name              = "nfs",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit NFS plugin",
  .description       = "A file on an NFS server, through libnfs",
  .unload            = nfs_unload,
  .config            = nfs_config,
  .config_complete   = nfs_config_complete,
  .config_help       = nfs_config_help,
  .magic_config_key  = "uri",
  .dump_plugin       = nfs_dump_plugin,
  .get_ready         = nfs_get_ready,
  .open              = nfs_open_handle,
  .close             = nfs_close_handle,
  .get_size          = nfs_get_size,
  .can_write         = nfs_can_write,
  .can_flush         = nfs_can_flush,
  .can_fua           = nfs_can_fua,
  .pread             = nfs_pread_handle,
  .pwrite            = nfs_pwrite_handle,
  .flush             = nfs_flush_handle,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
