/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The vddk plugin: a VMware disk (a local VMDK file, or a disk of a VM
 * on ESXi or vCenter) served through VMware's VDDK library,
 * libvixDiskLib, as virt-v2v uses it.
 *
 * This file owns the parameters (set by config, checked in
 * config_complete, read-only afterwards), the library (dlopened from
 * libdir= in config_complete, so nothing links against it and a
 * missing or too old library stops the server with one line; its
 * InitEx runs in after_fork because it starts threads), and, per NBD
 * connection, one VDDK connection and disk handle (struct handle).
 *
 * VDDK handles must not be used by two threads at once, so the thread
 * model serialises the requests of a connection; connections run in
 * parallel.  VMware documents Open and Close as not thread-safe, so
 * they run under open_lock.  The library addresses the disk in 512
 * byte sectors: the plugin advertises that as its minimum block size
 * and refuses misaligned requests with EINVAL.
 *
 * Block status comes from VixDiskLib_QueryAllocatedBlocks where the
 * library has it (VDDK 6.7 and later) and where it works for the disk
 * (can_extents tries it once); its answer is checked before use.
 *
 * Probes (plugins/vddk/probes.d): vddk_library when the library is
 * loaded or fails to load, vddk_open per connection, vddk_error for
 * every failed library call, vddk_query_blocks per extents request.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "params.h"
#include "vixdisklib.h"

#define SECTOR VIXDISKLIB_SECTOR_SIZE

/* The library's file names, newest first; each VDDK release series
 * bumps the number.
 */
static const char *const sonames[] = {
  "libvixDiskLib.so.9", "libvixDiskLib.so.8", "libvixDiskLib.so.7",
  "libvixDiskLib.so.6",
};

/* Parameters: set by config, read-only once config_complete is done. */
static char *file;
static char *libdir;            /* NULL: VDDK_LIBDIR, then the loader */
static char *config_file;
static char *cookie;
static char *password;
static char *server;
static char *snapshot;
static char *thumbprint;
static char *transports;
static char *user;
static char *vm;
static uint16_t port;
static uint16_t nfchostport;
static bool single_link;
static bool unbuffered;
static uint32_t compression;    /* a VIXDISKLIB_FLAG_OPEN_COMPRESSION_* */
static bool is_remote;

/* The library: loaded in config_complete, initialised in after_fork,
 * then read-only until unload.
 */
static void *dl;
static char *dl_path;
static bool initialised;
static struct {
#define VIX_FN(required, ret, name, params) ret (*name) params;
  VIX_FUNCTIONS
#undef VIX_FN
} vix;

/* Open and Close of any connection, one at a time. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static void
vddk_unload (void)
{
  if (initialised)
    vix.VixDiskLib_Exit ();
  if (dl)
    dlclose (dl);
  free (dl_path);
  free (file);
  free (libdir);
  free (config_file);
  free (cookie);
  free (password);
  free (server);
  free (snapshot);
  free (thumbprint);
  free (transports);
  free (user);
  free (vm);
}

static int
vddk_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0)
    return param_string (value, &file);
  if (strcmp (key, "libdir") == 0)
    return param_string (value, &libdir);
  if (strcmp (key, "config") == 0)
    return param_string (value, &config_file);
  if (strcmp (key, "cookie") == 0)
    return param_string (value, &cookie);
  if (strcmp (key, "server") == 0)
    return param_string (value, &server);
  if (strcmp (key, "snapshot") == 0)
    return param_string (value, &snapshot);
  if (strcmp (key, "thumbprint") == 0)
    return param_string (value, &thumbprint);
  if (strcmp (key, "transports") == 0)
    return param_string (value, &transports);
  if (strcmp (key, "user") == 0)
    return param_string (value, &user);
  if (strcmp (key, "vm") == 0)
    return param_string (value, &vm);
  if (strcmp (key, "password") == 0) {
    free (password);
    password = NULL;
    return nbdkit_read_password (value, &password);
  }
  if (strcmp (key, "port") == 0)
    return nbdkit_parse_uint16_t ("port", value, &port);
  if (strcmp (key, "nfchostport") == 0)
    return nbdkit_parse_uint16_t ("nfchostport", value, &nfchostport);
  if (strcmp (key, "single-link") == 0)
    return param_bool (value, &single_link);
  if (strcmp (key, "unbuffered") == 0)
    return param_bool (value, &unbuffered);
  if (strcmp (key, "compression") == 0) {
    if (strcmp (value, "none") == 0)
      compression = 0;
    else if (strcmp (value, "zlib") == 0)
      compression = VIXDISKLIB_FLAG_OPEN_COMPRESSION_ZLIB;
    else if (strcmp (value, "fastlz") == 0)
      compression = VIXDISKLIB_FLAG_OPEN_COMPRESSION_FASTLZ;
    else if (strcmp (value, "skipz") == 0)
      compression = VIXDISKLIB_FLAG_OPEN_COMPRESSION_SKIPZ;
    else {
      nbdkit_error ("compression: expected none, zlib, fastlz or skipz, "
                    "not '%s'", value);
      return -1;
    }
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* Looks every entry point up in DL; -1 (reported) if a required one
 * is missing.
 */
static int
find_functions (const char *path)
{
#define VIX_FN(required, ret, name, params)                             \
  vix.name = dlsym (dl, #name);                                         \
  if (required && vix.name == NULL) {                                   \
    if (strcmp (#name, "VixDiskLib_Wait") == 0)                         \
      nbdkit_error ("%s is too old: it lacks VixDiskLib_Wait, so it "   \
                    "is older than VDDK 6.5, the oldest this plugin "   \
                    "supports", path);                                  \
    else                                                                \
      nbdkit_error ("%s is not a usable VDDK library: it lacks %s",     \
                    path, #name);                                       \
    return -1;                                                          \
  }
  VIX_FUNCTIONS
#undef VIX_FN
  return 0;
}

/* Opens the first library found: under LIBDIR/lib64 when libdir= is
 * given, else under the default directory and then wherever the
 * dynamic loader looks (LD_LIBRARY_PATH).  A file that exists but
 * does not load is reported rather than skipped: it is almost
 * certainly the one the user meant.
 */
static int
load_library (void)
{
  const char *dir = libdir ? libdir : VDDK_LIBDIR;
  size_t i;

  for (i = 0; i < sizeof sonames / sizeof sonames[0] && !dl; ++i) {
    char *path;

    if (asprintf (&path, "%s/lib64/%s", dir, sonames[i]) == -1) {
      nbdkit_error ("asprintf: %m");
      return -1;
    }
    dl = dlopen (path, RTLD_NOW);
    if (dl)
      dl_path = path;
    else if (access (path, F_OK) == 0) {
      nbdkit_error ("cannot load the VDDK library %s: %s", path, dlerror ());
      NBDKIT_PROBE (vddk_library, path, (int32_t) 0, (int32_t) -1);
      free (path);
      return -1;
    }
    else
      free (path);
  }
  for (i = 0; i < sizeof sonames / sizeof sonames[0] && !dl && !libdir; ++i) {
    dl = dlopen (sonames[i], RTLD_NOW);
    if (dl && (dl_path = strdup (sonames[i])) == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
  }
  if (!dl) {
    nbdkit_error ("no VDDK library found: looked for %s/lib64/%s (and "
                  "versions 8 to 6)%s; set libdir= to the directory where "
                  "VDDK was unpacked", dir, sonames[0],
                  libdir ? "" : " and in the loader's path");
    NBDKIT_PROBE (vddk_library, dir, (int32_t) 0, (int32_t) -1);
    return -1;
  }
  if (find_functions (dl_path) == -1) {
    NBDKIT_PROBE (vddk_library, dl_path, (int32_t) 0, (int32_t) -1);
    return -1;
  }
  nbdkit_debug ("vddk: loaded %s", dl_path);
  NBDKIT_PROBE (vddk_library, dl_path,
                (int32_t) (vix.VixDiskLib_QueryAllocatedBlocks != NULL),
                (int32_t) 0);
  return 0;
}

static int
vddk_config_complete (void)
{
  char *abs;

  if (file == NULL) {
    nbdkit_error ("the file parameter is required ([file=]FILE)");
    return -1;
  }
  /* Any remote detail means a remote disk, and VDDK then needs the
   * server, the VM and credentials (it crashes on some NULLs rather
   * than saying what is missing).
   */
  is_remote = server || vm || user || password || cookie || thumbprint ||
    port || nfchostport;
  if (is_remote) {
    const char *missing =
      !server ? "server" : !vm ? "vm" :
      !cookie && !user ? "user (or cookie)" :
      !cookie && !password ? "password (or cookie)" : NULL;
    if (missing) {
      nbdkit_error ("a remote disk needs the %s parameter", missing);
      return -1;
    }
  }
  else if (file[0] != '/') {
    /* A local file: VDDK wants an absolute path, and the server may
     * change directory before the first connection.
     */
    abs = nbdkit_absolute_path (file);
    if (abs == NULL)
      return -1;
    free (file);
    file = abs;
  }
  return load_library ();
}

#define vddk_config_help \
  "[file=]FILE               The disk: a local VMDK or \"[datastore] path\".\n" \
  "libdir=DIR                Where VDDK was unpacked (its lib64 is used).\n" \
  "server=HOST               ESXi or vCenter server (remote disks).\n" \
  "vm=moref=ID               The VM that owns the disk (remote disks).\n" \
  "user=USER                 User name (remote disks).\n" \
  "password=PASSWORD|-|+FILE|-FD  Password (remote disks).\n" \
  "cookie=COOKIE             A session cookie instead of user/password.\n" \
  "thumbprint=SHA1           The server's certificate thumbprint.\n" \
  "snapshot=MOREF            Read from this snapshot.\n" \
  "transports=MODE:MODE...   Transport modes to try, in order.\n" \
  "config=FILE               VDDK configuration file.\n" \
  "port=PORT                 Server port (VDDK's default: 443).\n" \
  "nfchostport=PORT          NFC port of the ESXi host.\n" \
  "single-link=BOOL          Open only the top link of a chain.\n" \
  "unbuffered=BOOL           Bypass the host's cache.\n" \
  "compression=none|zlib|fastlz|skipz  Compression for nbd(ssl)."

static void
vddk_dump_plugin (void)
{
  printf ("vddk_default_libdir=%s\n", VDDK_LIBDIR);
  printf ("vddk_has_nfchostport=1\n");
}

/* VDDK's log lines end in a newline, which nbdkit's log adds again. */
static void
vddk_log_line (bool error, const char *fmt, va_list args)
{
  char *msg;
  size_t len;

  if (vasprintf (&msg, fmt, args) == -1)
    return;
  len = strlen (msg);
  if (len > 0 && msg[len - 1] == '\n')
    msg[len - 1] = '\0';
  if (error)
    nbdkit_error ("VDDK: %s", msg);
  else
    nbdkit_debug ("VDDK: %s", msg);
  free (msg);
}

static void
vddk_log (const char *fmt, va_list args)
{
  vddk_log_line (false, fmt, args);
}

static void
vddk_panic (const char *fmt, va_list args)
{
  vddk_log_line (true, fmt, args);
}

/* Reports a failed library call with the library's text for ERR and
 * sets errno to the nearest match of its code.
 */
static void
vix_error (const char *function, VixError err)
{
  char *text = vix.VixDiskLib_GetErrorText (err, NULL);
  const char *msg = text ? text : "(the library gave no text)";

  nbdkit_error ("%s: %s", function, msg);
  NBDKIT_PROBE (vddk_error, nbdkit_connection_id (),
                nbdkit_request_cookie (), function, (uint64_t) err, msg);
  if (text)
    vix.VixDiskLib_FreeErrorText (text);
  switch (VIX_ERROR_CODE (err)) {
  case VIX_E_OUT_OF_MEMORY: errno = ENOMEM; break;
  case VIX_E_INVALID_ARG:   errno = EINVAL; break;
  case VIX_E_NOT_SUPPORTED: errno = ENOTSUP; break;
  case VIX_E_DISK_FULL:     errno = ENOSPC; break;
  default:                  errno = EIO;
  }
}

static int
vddk_after_fork (void)
{
  VixError err = vix.VixDiskLib_InitEx (6, 5, vddk_log, vddk_log,
                                        vddk_panic, libdir, config_file);

  if (err != VIX_OK) {
    vix_error ("VixDiskLib_InitEx", err);
    return -1;
  }
  initialised = true;
  return 0;
}

struct handle {
  VixDiskLibConnectParams *params;
  VixDiskLibConnection connection;
  VixDiskLibHandle disk;
  bool readonly;
  int64_t size;                 /* from GetInfo at open */
};

/* The library's own allocator where it has one (VDDK 6.7+), as
 * VMware asks; the strings in it stay ours and are not freed with it.
 */
static VixDiskLibConnectParams *
alloc_params (void)
{
  VixDiskLibConnectParams *p = vix.VixDiskLib_AllocateConnectParams
    ? vix.VixDiskLib_AllocateConnectParams ()
    : calloc (1, sizeof *p);

  if (p == NULL)
    nbdkit_error ("cannot allocate VDDK connection parameters");
  return p;
}

static void
free_params (VixDiskLibConnectParams *p)
{
  if (p && vix.VixDiskLib_AllocateConnectParams)
    vix.VixDiskLib_FreeConnectParams (p);
  else
    free (p);
}

static int64_t disk_size (struct handle *h);

static void *
vddk_open (int readonly)
{
  struct handle *h = calloc (1, sizeof *h);
  uint32_t flags = 0;
  VixError err;
  const char *mode;

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->readonly = readonly;
  h->params = alloc_params ();
  if (h->params == NULL)
    goto err_free;
  if (is_remote) {
    h->params->vmxSpec = vm;
    h->params->serverName = server;
    h->params->thumbPrint = thumbprint;
    if (cookie) {
      h->params->credType = VIXDISKLIB_CRED_SESSIONID;
      h->params->creds.sessionId.cookie = cookie;
      h->params->creds.sessionId.userName = user;
    }
    else {
      h->params->credType = VIXDISKLIB_CRED_UID;
      h->params->creds.uid.userName = user;
      h->params->creds.uid.password = password;
    }
    h->params->port = port;
    h->params->nfcHostPort = nfchostport;
  }

  if (readonly)
    flags |= VIXDISKLIB_FLAG_OPEN_READ_ONLY;
  if (single_link)
    flags |= VIXDISKLIB_FLAG_OPEN_SINGLE_LINK;
  if (unbuffered)
    flags |= VIXDISKLIB_FLAG_OPEN_UNBUFFERED;
  flags |= compression;

  pthread_mutex_lock (&open_lock);
  err = vix.VixDiskLib_ConnectEx (h->params, readonly ? 1 : 0, snapshot,
                                  transports, &h->connection);
  if (err != VIX_OK) {
    pthread_mutex_unlock (&open_lock);
    vix_error ("VixDiskLib_ConnectEx", err);
    goto err_params;
  }
  err = vix.VixDiskLib_Open (h->connection, file, flags, &h->disk);
  if (err != VIX_OK) {
    vix.VixDiskLib_Disconnect (h->connection);
    pthread_mutex_unlock (&open_lock);
    vix_error ("VixDiskLib_Open", err);
    goto err_params;
  }
  pthread_mutex_unlock (&open_lock);

  h->size = disk_size (h);
  if (h->size == -1) {
    pthread_mutex_lock (&open_lock);
    vix.VixDiskLib_Close (h->disk);
    vix.VixDiskLib_Disconnect (h->connection);
    pthread_mutex_unlock (&open_lock);
    goto err_params;
  }

  mode = vix.VixDiskLib_GetTransportMode
    ? vix.VixDiskLib_GetTransportMode (h->disk) : NULL;
  if (mode == NULL)
    mode = "";
  nbdkit_debug ("vddk: %s open, transport mode \"%s\"", file, mode);
  NBDKIT_PROBE (vddk_open, nbdkit_connection_id (), file, mode, (int32_t) 0);
  return h;

 err_params:
  free_params (h->params);
 err_free:
  free (h);
  NBDKIT_PROBE (vddk_open, nbdkit_connection_id (), file, "", (int32_t) -1);
  return NULL;
}

static void
vddk_close (void *handle)
{
  struct handle *h = handle;

  pthread_mutex_lock (&open_lock);
  vix.VixDiskLib_Close (h->disk);
  vix.VixDiskLib_Disconnect (h->connection);
  pthread_mutex_unlock (&open_lock);
  free_params (h->params);
  free (h);
}

/* The disk's size in bytes, asked once per connection (over the
 * network for a remote disk).
 */
static int64_t
disk_size (struct handle *h)
{
  VixDiskLibInfo *info = NULL;
  VixError err = vix.VixDiskLib_GetInfo (h->disk, &info);
  uint64_t sectors;

  if (err != VIX_OK) {
    vix_error ("VixDiskLib_GetInfo", err);
    return -1;
  }
  if (info == NULL) {
    nbdkit_error ("VixDiskLib_GetInfo returned no information");
    return -1;
  }
  sectors = info->capacity;
  nbdkit_debug ("vddk: capacity %" PRIu64 " sectors, %d link(s), "
                "parent \"%s\"", sectors, info->numLinks,
                info->parentFileNameHint ? info->parentFileNameHint : "");
  vix.VixDiskLib_FreeInfo (info);
  if (sectors > INT64_MAX / SECTOR) {
    nbdkit_error ("VixDiskLib_GetInfo: capacity %" PRIu64 " sectors is "
                  "larger than an NBD disk can be", sectors);
    errno = EIO;
    return -1;
  }
  return sectors * SECTOR;
}

static int64_t
vddk_get_size (void *handle)
{
  struct handle *h = handle;

  return h->size;
}

/* VDDK reads and writes whole sectors only. */
static int
vddk_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                 uint32_t *maximum)
{
  *minimum = SECTOR;
  *preferred = 64 * 1024;
  *maximum = 0xffffffff - (SECTOR - 1);
  return 0;
}

static int
check_aligned (const char *what, uint32_t count, uint64_t offset)
{
  if (count % SECTOR == 0 && offset % SECTOR == 0)
    return 0;
  nbdkit_error ("%s: offset %" PRIu64 " and count %" PRIu32 " must be "
                "multiples of %d (VDDK works in sectors; the blocksize "
                "filter can adapt other requests)", what, offset, count,
                SECTOR);
  errno = EINVAL;
  return -1;
}

static int
vddk_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct handle *h = handle;
  VixError err;

  if (check_aligned ("read", count, offset) == -1)
    return -1;
  err = vix.VixDiskLib_Read (h->disk, offset / SECTOR, count / SECTOR, buf);
  if (err != VIX_OK) {
    vix_error ("VixDiskLib_Read", err);
    return -1;
  }
  return 0;
}

static int vddk_flush (void *handle, uint32_t flags);

static int
vddk_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  struct handle *h = handle;
  VixError err;

  if (check_aligned ("write", count, offset) == -1)
    return -1;
  err = vix.VixDiskLib_Write (h->disk, offset / SECTOR, count / SECTOR, buf);
  if (err != VIX_OK) {
    vix_error ("VixDiskLib_Write", err);
    return -1;
  }
  if (flags & NBDKIT_FLAG_FUA)
    return vddk_flush (handle, 0);
  return 0;
}

static int
vddk_flush (void *handle, uint32_t flags)
{
  struct handle *h = handle;
  VixError err = vix.VixDiskLib_Flush (h->disk);

  if (err != VIX_OK) {
    vix_error ("VixDiskLib_Flush", err);
    return -1;
  }
  return 0;
}

static int
vddk_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

/* Bytes per QueryAllocatedBlocks chunk: the smallest the library
 * allows, for the finest map.
 */
#define CHUNK_BYTES ((uint64_t) VIXDISKLIB_MIN_CHUNK_SIZE * SECTOR)

/* Asks the library which chunks of [START, START + LEN) bytes (whole
 * chunks) hold data, and adds them as data and the gaps as holes.
 * The list is checked (in range, in order, not overlapping) because a
 * wrong map loses data in every copy made from it.
 */
static int
query_blocks (struct handle *h, uint64_t start, uint64_t len,
              struct nbdkit_extents *extents)
{
  VixDiskLibBlockList *list = NULL;
  uint64_t start_sector = start / SECTOR, nr_sectors = len / SECTOR;
  uint64_t pos = start_sector, end = start_sector + nr_sectors;
  VixError err;
  uint32_t i;
  int r = -1;

  err = vix.VixDiskLib_QueryAllocatedBlocks (h->disk, start_sector,
                                             nr_sectors,
                                             VIXDISKLIB_MIN_CHUNK_SIZE, &list);
  if (err != VIX_OK) {
    vix_error ("VixDiskLib_QueryAllocatedBlocks", err);
    NBDKIT_PROBE (vddk_query_blocks, nbdkit_connection_id (),
                  nbdkit_request_cookie (), start_sector, nr_sectors,
                  (uint32_t) 0, (int32_t) errno);
    return -1;
  }
  if (list == NULL) {
    nbdkit_error ("VixDiskLib_QueryAllocatedBlocks returned no list");
    goto out;
  }
  for (i = 0; i < list->numBlocks; ++i) {
    const VixDiskLibBlock *b = &list->blocks[i];

    if (b->offset < pos || b->length == 0 || b->offset > end ||
        b->length > end - b->offset) {
      nbdkit_error ("VixDiskLib_QueryAllocatedBlocks: block %" PRIu32
                    " (sectors %" PRIu64 "+%" PRIu64 ") is outside "
                    "%" PRIu64 "-%" PRIu64 " or out of order", i, b->offset,
                    b->length, pos, end);
      goto out;
    }
    if (b->offset > pos &&
        nbdkit_add_extent (extents, pos * SECTOR, (b->offset - pos) * SECTOR,
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
      goto out;
    if (nbdkit_add_extent (extents, b->offset * SECTOR, b->length * SECTOR,
                           0) == -1)
      goto out;
    pos = b->offset + b->length;
  }
  if (pos < end &&
      nbdkit_add_extent (extents, pos * SECTOR, (end - pos) * SECTOR,
                         NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
    goto out;
  r = 0;

 out:
  NBDKIT_PROBE (vddk_query_blocks, nbdkit_connection_id (),
                nbdkit_request_cookie (), start_sector, nr_sectors,
                list ? list->numBlocks : (uint32_t) 0,
                (int32_t) (r == 0 ? 0 : EIO));
  if (list)
    vix.VixDiskLib_FreeBlockList (list);
  if (r == -1)
    errno = EIO;
  return r;
}

static int
vddk_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  struct handle *h = handle;
  int64_t size = h->size;
  uint64_t start, end, whole_end;

  /* The query covers whole chunks around the request (the server
   * trims what lies outside it); a tail shorter than a chunk at the
   * end of the disk cannot be asked about and is reported as data.
   */
  start = offset / CHUNK_BYTES * CHUNK_BYTES;
  whole_end = (uint64_t) size / CHUNK_BYTES * CHUNK_BYTES;
  end = (offset + count + CHUNK_BYTES - 1) / CHUNK_BYTES * CHUNK_BYTES;
  if (end > whole_end)
    end = whole_end;
  if (start < end && query_blocks (h, start, end - start, extents) == -1)
    return -1;
  if (end < offset + count &&
      nbdkit_add_extent (extents, end, (uint64_t) size - end, 0) == -1)
    return -1;
  return 0;
}

/* Only where the library has the call and it works on this disk:
 * VDDK refuses it for some disks (local files among them in some
 * versions), and then the server reports everything as data.
 */
static int
vddk_can_extents (void *handle)
{
  struct handle *h = handle;
  VixDiskLibBlockList *list = NULL;
  VixError err;

  if (!vix.VixDiskLib_QueryAllocatedBlocks || !vix.VixDiskLib_FreeBlockList)
    return 0;
  if ((uint64_t) h->size < CHUNK_BYTES)
    return 0;
  err = vix.VixDiskLib_QueryAllocatedBlocks (h->disk, 0,
                                             VIXDISKLIB_MIN_CHUNK_SIZE,
                                             VIXDISKLIB_MIN_CHUNK_SIZE, &list);
  if (list)
    vix.VixDiskLib_FreeBlockList (list);
  if (err != VIX_OK) {
    nbdkit_debug ("vddk: QueryAllocatedBlocks does not work on this disk "
                  "(error %" PRIu64 "): no block status", err);
    return 0;
  }
  return 1;
}

static int
vddk_can_write (void *handle)
{
  struct handle *h = handle;

  return !h->readonly;
}

static int
vddk_can_flush (void *handle)
{
  return 1;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS

static struct nbdkit_plugin plugin = {
  .name              = "vddk",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit VMware VDDK plugin",
  .description       = "VMware disks through VMware's VDDK library",
  .unload            = vddk_unload,
  .config            = vddk_config,
  .config_complete   = vddk_config_complete,
  .config_help       = vddk_config_help,
  .magic_config_key  = "file",
  .dump_plugin       = vddk_dump_plugin,
  .after_fork        = vddk_after_fork,
  .open              = vddk_open,
  .close             = vddk_close,
  .get_size          = vddk_get_size,
  .block_size        = vddk_block_size,
  .can_write         = vddk_can_write,
  .can_flush         = vddk_can_flush,
  .can_fua           = vddk_can_fua,
  .can_extents       = vddk_can_extents,
  .pread             = vddk_pread,
  .pwrite            = vddk_pwrite,
  .flush             = vddk_flush,
  .extents           = vddk_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
