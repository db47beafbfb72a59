/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A stand-in for VMware's libvixDiskLib, for testing the vddk plugin
 * where the real library cannot be had.  It exports the entry points
 * of ../vixdisklib.h with the same signatures and serves a "disk"
 * that is a local raw file; it is not VDDK and reads no VMDK.
 *
 * Built three times (tests/plugins/vddk.mk) to stand for three library
 * ages: STUB_VERSION 80 has every entry point, 65 lacks those newer
 * than VDDK 6.5 (QueryAllocatedBlocks, FreeBlockList,
 * Allocate/FreeConnectParams), 60 also lacks VixDiskLib_Wait.
 *
 * What a test controls, through the environment of the server:
 *   VIXSTUB_LOG=FILE        append one line per call that matters
 *                           (InitEx, ConnectEx, Open, Exit) with the
 *                           arguments the plugin passed
 *   VIXSTUB_DATASTORE=DIR   "[store] rel/path" opens DIR/rel/path
 *   VIXSTUB_PASSWORD=PW     a remote ConnectEx needs this password (or
 *                           a cookie)
 *   VIXSTUB_BAD_SECTOR=N    reads and writes touching sector N fail
 *   VIXSTUB_FULL_SECTOR=N   writes touching sector N fail: disk full
 *   VIXSTUB_BAD_BLOCKS=1    QueryAllocatedBlocks answers a block past
 *                           the range it was asked about
 * Allocation is found with SEEK_DATA/SEEK_HOLE on the file, one chunk
 * at a time, as VDDK reports it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../vixdisklib.h"

#ifndef STUB_VERSION
#define STUB_VERSION 80
#endif

#define VIX_FN(required, ret, name, params) ret name params;
VIX_FUNCTIONS
#undef VIX_FN

/* Error numbers of our own, outside VMware's range, with our texts. */
#define STUB_E_NOT_INITIALISED 90001
#define STUB_E_LOGIN 90002
#define STUB_E_BAD_SECTOR 90003

static bool initialised;
static VixDiskLibGenericLogFunc *log_fn;

struct stub_connection {
  bool remote;
};

struct stub_disk {
  int fd;
  uint64_t sectors;
  bool remote;
};

static void
stub_log (const char *fmt, ...)
{
  const char *path = getenv ("VIXSTUB_LOG");
  FILE *fp;
  va_list args;

  if (!path || (fp = fopen (path, "a")) == NULL)
    return;
  va_start (args, fmt);
  vfprintf (fp, fmt, args);
  va_end (args);
  fputc ('\n', fp);
  fclose (fp);
}

static void
stub_debug (const char *fmt, ...)
{
  va_list args;

  if (!log_fn)
    return;
  va_start (args, fmt);
  log_fn (fmt, args);
  va_end (args);
}

static const char *
str (const char *s)
{
  return s ? s : "(null)";
}

VixError
VixDiskLib_InitEx (uint32_t major, uint32_t minor,
                   VixDiskLibGenericLogFunc *log,
                   VixDiskLibGenericLogFunc *warn,
                   VixDiskLibGenericLogFunc *panic, const char *libdir,
                   const char *config)
{
  stub_log ("InitEx %" PRIu32 ".%" PRIu32 " libdir=%s config=%s",
            major, minor, str (libdir), str (config));
  if (config && access (config, R_OK) == -1)
    return VIX_E_FILE_NOT_FOUND;
  log_fn = log;
  initialised = true;
  stub_debug ("stand-in library %d initialised\n", STUB_VERSION);
  return VIX_OK;
}

void
VixDiskLib_Exit (void)
{
  stub_log ("Exit");
  initialised = false;
}

char *
VixDiskLib_GetErrorText (VixError err, const char *locale)
{
  const char *text;
  char *r;

  switch (err) {
  case VIX_E_FAIL: text = "Unknown error"; break;
  case VIX_E_OUT_OF_MEMORY: text = "Out of memory"; break;
  case VIX_E_INVALID_ARG: text = "One of the parameters was invalid"; break;
  case VIX_E_FILE_NOT_FOUND: text = "The file was not found"; break;
  case VIX_E_DISK_FULL: text = "The disk is full"; break;
  case STUB_E_NOT_INITIALISED: text = "stub: InitEx was not called"; break;
  case STUB_E_LOGIN: text = "stub: wrong user name or password"; break;
  case STUB_E_BAD_SECTOR: text = "stub: injected I/O error"; break;
  default: text = "stub: unknown error number"; break;
  }
  if (asprintf (&r, "%s (stub error %" PRIu64 ")", text, err) == -1)
    return NULL;
  return r;
}

void
VixDiskLib_FreeErrorText (char *text)
{
  free (text);
}

VixError
VixDiskLib_ConnectEx (const VixDiskLibConnectParams *p, char read_only,
                      const char *snapshot, const char *transports,
                      VixDiskLibConnection *connection)
{
  struct stub_connection *c;
  const char *want = getenv ("VIXSTUB_PASSWORD");

  if (!initialised)
    return STUB_E_NOT_INITIALISED;
  if (p == NULL || connection == NULL)
    return VIX_E_INVALID_ARG;
  if (p->serverName) {
    if (p->credType == VIXDISKLIB_CRED_UID)
      stub_log ("ConnectEx server=%s vm=%s thumbprint=%s port=%" PRIu32
                " nfchostport=%" PRIu32 " uid user=%s password=%s"
                " readonly=%d snapshot=%s transports=%s",
                p->serverName, str (p->vmxSpec), str (p->thumbPrint),
                p->port, p->nfcHostPort, str (p->creds.uid.userName),
                str (p->creds.uid.password), read_only, str (snapshot),
                str (transports));
    else
      stub_log ("ConnectEx server=%s vm=%s cookie=%s user=%s readonly=%d",
                p->serverName, str (p->vmxSpec),
                str (p->creds.sessionId.cookie),
                str (p->creds.sessionId.userName), read_only);
    if (p->credType == VIXDISKLIB_CRED_UID && want &&
        (!p->creds.uid.password ||
         strcmp (p->creds.uid.password, want) != 0))
      return STUB_E_LOGIN;
  }
  else
    stub_log ("ConnectEx local readonly=%d snapshot=%s transports=%s",
              read_only, str (snapshot), str (transports));
  c = calloc (1, sizeof *c);
  if (c == NULL)
    return VIX_E_OUT_OF_MEMORY;
  c->remote = p->serverName != NULL;
  *connection = c;
  return VIX_OK;
}

VixError
VixDiskLib_Disconnect (VixDiskLibConnection connection)
{
  free (connection);
  return VIX_OK;
}

VixError
VixDiskLib_Open (const VixDiskLibConnection connection, const char *path,
                 uint32_t flags, VixDiskLibHandle *handle)
{
  const struct stub_connection *c = connection;
  const char *store = getenv ("VIXSTUB_DATASTORE");
  struct stub_disk *d;
  char *real = NULL;
  struct stat st;
  int fd;

  stub_log ("Open %s flags=0x%" PRIx32, path, flags);
  if (!initialised)
    return STUB_E_NOT_INITIALISED;
  if (c == NULL || path == NULL || handle == NULL)
    return VIX_E_INVALID_ARG;
  /* "[datastore1] dir/disk.vmdk" names a file in a datastore. */
  if (path[0] == '[') {
    const char *rel = strstr (path, "] ");
    if (!rel || !store || asprintf (&real, "%s/%s", store, rel + 2) == -1)
      return VIX_E_FILE_NOT_FOUND;
    path = real;
  }
  fd = open (path, (flags & VIXDISKLIB_FLAG_OPEN_READ_ONLY) ? O_RDONLY
             : O_RDWR);
  free (real);
  if (fd == -1)
    return errno == ENOENT ? VIX_E_FILE_NOT_FOUND : VIX_E_FAIL;
  if (fstat (fd, &st) == -1 || (d = calloc (1, sizeof *d)) == NULL) {
    close (fd);
    return VIX_E_FAIL;
  }
  d->fd = fd;
  d->sectors = st.st_size / VIXDISKLIB_SECTOR_SIZE;
  d->remote = c->remote;
  *handle = d;
  return VIX_OK;
}

VixError
VixDiskLib_Close (VixDiskLibHandle handle)
{
  struct stub_disk *d = handle;

  if (d) {
    close (d->fd);
    free (d);
  }
  return VIX_OK;
}

VixError
VixDiskLib_GetInfo (VixDiskLibHandle handle, VixDiskLibInfo **info)
{
  const struct stub_disk *d = handle;
  VixDiskLibInfo *i = calloc (1, sizeof *i);

  if (i == NULL)
    return VIX_E_OUT_OF_MEMORY;
  i->capacity = d->sectors;
  i->numLinks = 1;
  *info = i;
  return VIX_OK;
}

void
VixDiskLib_FreeInfo (VixDiskLibInfo *info)
{
  free (info);
}

const char *
VixDiskLib_GetTransportMode (VixDiskLibHandle handle)
{
  const struct stub_disk *d = handle;

  return d->remote ? "nbdssl" : "file";
}

/* 0, or the error for sectors [START, START + N) of D. */
static VixError
check_range (const struct stub_disk *d, uint64_t start, uint64_t n,
             bool writing)
{
  const char *bad = getenv ("VIXSTUB_BAD_SECTOR");
  const char *full = getenv ("VIXSTUB_FULL_SECTOR");

  if (start > d->sectors || n > d->sectors - start)
    return VIX_E_INVALID_ARG;
  if (bad && strtoull (bad, NULL, 10) >= start &&
      strtoull (bad, NULL, 10) < start + n)
    return STUB_E_BAD_SECTOR;
  if (writing && full && strtoull (full, NULL, 10) >= start &&
      strtoull (full, NULL, 10) < start + n)
    return VIX_E_DISK_FULL;
  return VIX_OK;
}

VixError
VixDiskLib_Read (VixDiskLibHandle handle, uint64_t start, uint64_t n,
                 unsigned char *buf)
{
  const struct stub_disk *d = handle;
  VixError err = check_range (d, start, n, false);

  if (err != VIX_OK)
    return err;
  if (pread (d->fd, buf, n * VIXDISKLIB_SECTOR_SIZE,
             start * VIXDISKLIB_SECTOR_SIZE) !=
      (ssize_t) (n * VIXDISKLIB_SECTOR_SIZE))
    return VIX_E_FAIL;
  return VIX_OK;
}

VixError
VixDiskLib_Write (VixDiskLibHandle handle, uint64_t start, uint64_t n,
                  const unsigned char *buf)
{
  const struct stub_disk *d = handle;
  VixError err = check_range (d, start, n, true);

  if (err != VIX_OK)
    return err;
  if (pwrite (d->fd, buf, n * VIXDISKLIB_SECTOR_SIZE,
              start * VIXDISKLIB_SECTOR_SIZE) !=
      (ssize_t) (n * VIXDISKLIB_SECTOR_SIZE))
    return VIX_E_FAIL;
  return VIX_OK;
}

VixError
VixDiskLib_Flush (VixDiskLibHandle handle)
{
  const struct stub_disk *d = handle;

  stub_log ("Flush");
  return fsync (d->fd) == 0 ? VIX_OK : VIX_E_FAIL;
}

#if STUB_VERSION >= 65
VixError
VixDiskLib_Wait (VixDiskLibHandle handle)
{
  return VIX_OK;
}
#endif

#if STUB_VERSION >= 67
VixDiskLibConnectParams *
VixDiskLib_AllocateConnectParams (void)
{
  return calloc (1, sizeof (VixDiskLibConnectParams));
}

/* The strings belong to the caller. */
void
VixDiskLib_FreeConnectParams (VixDiskLibConnectParams *params)
{
  free (params);
}

VixError
VixDiskLib_QueryAllocatedBlocks (VixDiskLibHandle handle, uint64_t start,
                                 uint64_t n, uint64_t chunk,
                                 VixDiskLibBlockList **list)
{
  const struct stub_disk *d = handle;
  const off_t chunk_bytes = chunk * VIXDISKLIB_SECTOR_SIZE;
  VixDiskLibBlockList *l;
  uint64_t c, nr_chunks;

  /* VMware's rules: whole chunks of at least the minimum size, a
   * bounded number of them, inside the disk.
   */
  if (chunk < VIXDISKLIB_MIN_CHUNK_SIZE || start % chunk || n % chunk ||
      n / chunk > VIXDISKLIB_MAX_CHUNK_NUMBER || start > d->sectors ||
      n > d->sectors - start)
    return VIX_E_INVALID_ARG;
  nr_chunks = n / chunk;
  /* At most one block per chunk, plus the one BAD_BLOCKS adds. */
  l = calloc (1, sizeof *l + (nr_chunks + 1) * sizeof l->blocks[0]);
  if (l == NULL)
    return VIX_E_OUT_OF_MEMORY;
  for (c = 0; c < nr_chunks; ++c) {
    off_t from = (start + c * chunk) * VIXDISKLIB_SECTOR_SIZE;
    off_t data = lseek (d->fd, from, SEEK_DATA);

    if (data == -1 && errno != ENXIO) {
      free (l);
      return VIX_E_FAIL;
    }
    if (data == -1 || data >= from + chunk_bytes)
      continue;
    /* Adjacent allocated chunks make one block. */
    if (l->numBlocks > 0 &&
        l->blocks[l->numBlocks - 1].offset +
        l->blocks[l->numBlocks - 1].length == start + c * chunk)
      l->blocks[l->numBlocks - 1].length += chunk;
    else {
      l->blocks[l->numBlocks].offset = start + c * chunk;
      l->blocks[l->numBlocks].length = chunk;
      l->numBlocks++;
    }
  }
  if (getenv ("VIXSTUB_BAD_BLOCKS")) {
    l->blocks[l->numBlocks].offset = start + n;
    l->blocks[l->numBlocks].length = chunk;
    l->numBlocks++;
  }
  *list = l;
  return VIX_OK;
}

VixError
VixDiskLib_FreeBlockList (VixDiskLibBlockList *list)
{
  free (list);
  return VIX_OK;
}
#endif
