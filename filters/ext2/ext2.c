/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ext2 filter: serve one regular file inside the ext2, ext3 or
 * ext4 filesystem image that the layer below holds.  Each connection
 * opens the filesystem with libext2fs (.prepare), through the I/O
 * manager of io.c, looks the file up by its path (ext2file=PATH, or
 * the client's export name with ext2file=exportname), and reads and
 * writes the file's bytes; .finalize writes back what libext2fs holds
 * (the file's inode, block bitmaps, superblock) and closes it.
 *
 * libext2fs keeps its own caches of the filesystem and knows nothing
 * of other users, so two connections must never have the filesystem
 * open at once: the thread model serialises connections (a second
 * client waits until the first leaves), which also serialises every
 * request, so no lock is needed here.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <et/com_err.h>
#include <ext2fs/ext2fs.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "io.h"

/* Set by config before any connection; read-only afterwards.  NULL
 * path with exportname_mode: the client's export name is the path.
 */
static char *path;
static bool exportname_mode;

struct ext2_handle {
  char *name;                   /* absolute path of the file */
  char *ioname;                 /* the I/O channel's name (io.c) */
  ext2_filsys fs;               /* from .prepare to .finalize */
  ext2_file_t file;
};

static void
ext2_load (void)
{
  add_error_table (&et_ext2_error_table);
}

static void
ext2_unload (void)
{
  remove_error_table (&et_ext2_error_table);
  free (path);
}

static int
ext2_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "ext2file") == 0) {
    if (path || exportname_mode) {
      nbdkit_error ("ext2file: given more than once");
      return -1;
    }
    if (strcmp (value, "exportname") == 0) {
      exportname_mode = true;
      return 0;
    }
    if (value[0] != '/') {
      nbdkit_error ("ext2file: must be an absolute path or 'exportname', "
                    "not '%s'", value);
      return -1;
    }
    path = strdup (value);
    if (path == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

static int
ext2_config_complete (nbdkit_next_config_complete *next,
                      nbdkit_backend *nxdata)
{
  if (path == NULL && !exportname_mode) {
    nbdkit_error ("ext2file: this parameter is required "
                  "(ext2file=PATH or ext2file=exportname)");
    return -1;
  }
  return next (nxdata);
}

#define ext2_config_help \
  "ext2file=<PATH>      (required) Absolute path of the file to serve,\n" \
  "                     or 'exportname' for the client's export name."

static int
ext2_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS;
}

/* With ext2file=exportname the plugin's export names mean nothing to
 * clients (and are not theirs to learn): list none.
 */
static int
ext2_list_exports (nbdkit_next_list_exports *next, nbdkit_backend *nxdata,
                   int readonly, int is_tls, struct nbdkit_exports *exports)
{
  if (exportname_mode)
    return 0;
  return next (nxdata, readonly, exports);
}

static const char *
ext2_default_export (nbdkit_next_default_export *next,
                     nbdkit_backend *nxdata, int readonly, int is_tls)
{
  if (exportname_mode)
    return "";
  return next (nxdata, readonly);
}

static void *
ext2_open (nbdkit_next_open *next, nbdkit_context *context, int readonly,
           const char *exportname, int is_tls)
{
  struct ext2_handle *h;
  int r;

  /* With ext2file=exportname the plugin gets its default export. */
  if (next (context, readonly, exportname_mode ? "" : exportname) == -1)
    return NULL;

  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  if (!exportname_mode)
    r = (h->name = strdup (path)) ? 0 : -1;
  else if (exportname[0] == '\0') {
    nbdkit_error ("ext2file=exportname: the client must name a file; "
                  "the default export (\"\") is not allowed");
    free (h);
    return NULL;
  }
  else if (exportname[0] == '/')
    r = (h->name = strdup (exportname)) ? 0 : -1;
  else
    r = asprintf (&h->name, "/%s", exportname);
  if (r == -1) {
    nbdkit_error ("strdup: %m");
    free (h);
    return NULL;
  }
  return h;
}

static void
ext2_close (void *handle)
{
  struct ext2_handle *h = handle;

  free (h->name);
  free (h->ioname);
  free (h);
}

/* libext2fs error codes as errno values for the client. */
static int
to_errno (errcode_t err)
{
  if (err > 0 && err < 256)       /* an errno passed up from io.c */
    return err;
  switch (err) {
  case EXT2_ET_BLOCK_ALLOC_FAIL:
  case EXT2_ET_INODE_ALLOC_FAIL:
  case EXT2_ET_DIR_NO_SPACE:
    return ENOSPC;
  case EXT2_ET_RO_FILSYS:
  case EXT2_ET_FILE_RO:
    return EROFS;
  case EXT2_ET_NO_MEMORY:
    return ENOMEM;
  default:
    return EIO;
  }
}

/* Close the file and the filesystem, writing back what must be; the
 * handle owns nothing of libext2fs afterwards, even on error.
 */
static int
close_fs (struct ext2_handle *h)
{
  errcode_t err;
  int ret = 0;

  if (h->file) {
    err = ext2fs_file_close (h->file);
    h->file = NULL;
    if (err != 0) {
      nbdkit_error ("%s: closing the file: %s", h->name, error_message (err));
      ret = -1;
    }
  }
  if (h->fs) {
    err = ext2fs_close2 (h->fs, 0);
    if (err != 0) {
      nbdkit_error ("%s: closing the filesystem: %s", h->name,
                    error_message (err));
      ext2fs_free (h->fs);
      ret = -1;
    }
    h->fs = NULL;
  }
  return ret;
}

static int
ext2_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct ext2_handle *h = handle;
  struct ext2_inode inode;
  ext2_ino_t ino;
  errcode_t err;
  int flags, r;

  r = next->can_write (next);
  if (r == -1)
    return -1;
  if (r == 0)
    readonly = 1;

  free (h->ioname);
  h->ioname = ext2_io_name (next);
  if (h->ioname == NULL) {
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  flags = EXT2_FLAG_64BITS | (readonly ? 0 : EXT2_FLAG_RW);
  err = ext2fs_open (h->ioname, flags, 0, 0, ext2_nbdkit_io_manager,
                     &h->fs);
  if (err != 0) {
    nbdkit_error ("ext2fs_open: %s", error_message (err));
    h->fs = NULL;
    return -1;
  }

  if (strcmp (h->name, "/") == 0)
    ino = EXT2_ROOT_INO;
  else {
    err = ext2fs_namei (h->fs, EXT2_ROOT_INO, EXT2_ROOT_INO, &h->name[1],
                        &ino);
    if (err != 0) {
      nbdkit_error ("%s: %s", h->name, error_message (err));
      goto fail;
    }
  }
  err = ext2fs_read_inode (h->fs, ino, &inode);
  if (err != 0) {
    nbdkit_error ("%s: reading the inode: %s", h->name, error_message (err));
    goto fail;
  }
  /* Symbolic links are not followed, as by nbdkit. */
  if (!LINUX_S_ISREG (inode.i_mode)) {
    nbdkit_error ("%s: not a regular file", h->name);
    goto fail;
  }
  err = ext2fs_file_open2 (h->fs, ino, &inode,
                           readonly ? 0 : EXT2_FILE_WRITE, &h->file);
  if (err != 0) {
    nbdkit_error ("%s: opening the file: %s", h->name, error_message (err));
    goto fail;
  }
  NBDKIT_PROBE (ext2_open, h->name, (uint64_t) EXT2_I_SIZE (&inode));
  return 0;

 fail:
  close_fs (h);
  return -1;
}

static int
ext2_finalize (nbdkit_next *next, void *handle)
{
  return close_fs (handle);
}

static int64_t
ext2_get_size (nbdkit_next *next, void *handle)
{
  struct ext2_handle *h = handle;
  __u64 size;
  errcode_t err;

  err = ext2fs_file_get_lsize (h->file, &size);
  if (err != 0) {
    nbdkit_error ("%s: size: %s", h->name, error_message (err));
    return -1;
  }
  if (size > INT64_MAX) {
    nbdkit_error ("%s: size %" PRIu64 " too large", h->name,
                  (uint64_t) size);
    return -1;
  }
  return size;
}

/* The layer below holds a filesystem: its answers about flushing,
 * zeroing, trimming and block status are not about the file.
 */
static int
ext2_can_flush (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
ext2_can_fua (nbdkit_next *next, void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
ext2_can_zero (nbdkit_next *next, void *handle)
{
  return NBDKIT_ZERO_EMULATE;
}

/* Zeroes are written as data, never fast. */
static int
ext2_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
ext2_can_trim (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
ext2_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
ext2_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 0;
}

static int
ext2_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

/* Everything libext2fs holds for the file and the filesystem goes to
 * the layer below, which is then flushed.
 */
static int
flush_all (struct ext2_handle *h, int *err)
{
  errcode_t e;

  e = ext2fs_file_flush (h->file);
  if (e == 0 && (h->fs->flags & EXT2_FLAG_RW)) {
    e = ext2fs_write_bitmaps (h->fs);
    if (e == 0)
      e = ext2fs_flush (h->fs);   /* and flushes the layer below */
  }
  if (e != 0) {
    nbdkit_error ("%s: flush: %s", h->name, error_message (e));
    *err = to_errno (e);
    return -1;
  }
  return 0;
}

static int
ext2_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  return flush_all (handle, err);
}

static int
ext2_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct ext2_handle *h = handle;
  char *p = buf;
  errcode_t e;

  e = ext2fs_file_llseek (h->file, offset, EXT2_SEEK_SET, NULL);
  while (e == 0 && count > 0) {
    unsigned int got;

    e = ext2fs_file_read (h->file, p, count, &got);
    if (e == 0 && got == 0)
      e = EXT2_ET_SHORT_READ;
    if (e == 0) {
      p += got;
      count -= got;
    }
  }
  if (e != 0) {
    nbdkit_error ("%s: read: %s", h->name, error_message (e));
    *err = to_errno (e);
    return -1;
  }
  return 0;
}

static int
ext2_pwrite (nbdkit_next *next, void *handle, const void *buf,
             uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct ext2_handle *h = handle;
  const char *p = buf;
  errcode_t e;

  e = ext2fs_file_llseek (h->file, offset, EXT2_SEEK_SET, NULL);
  while (e == 0 && count > 0) {
    unsigned int written;

    e = ext2fs_file_write (h->file, p, count, &written);
    if (e == 0 && written == 0)
      e = EXT2_ET_SHORT_WRITE;
    if (e == 0) {
      p += written;
      count -= written;
    }
  }
  if (e != 0) {
    nbdkit_error ("%s: write: %s", h->name, error_message (e));
    *err = to_errno (e);
    return -1;
  }
  if (flags & NBDKIT_FLAG_FUA)
    return flush_all (h, err);
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "ext2",
  .longname = "nbdkit ext2 filter",
  .load = ext2_load,
  .unload = ext2_unload,
  .config = ext2_config,
  .config_complete = ext2_config_complete,
  .config_help = ext2_config_help,
  .thread_model = ext2_thread_model,
  .list_exports = ext2_list_exports,
  .default_export = ext2_default_export,
  .open = ext2_open,
  .close = ext2_close,
  .prepare = ext2_prepare,
  .finalize = ext2_finalize,
  .get_size = ext2_get_size,
  .can_flush = ext2_can_flush,
  .can_fua = ext2_can_fua,
  .can_zero = ext2_can_zero,
  .can_fast_zero = ext2_can_fast_zero,
  .can_trim = ext2_can_trim,
  .can_extents = ext2_can_extents,
  .can_multi_conn = ext2_can_multi_conn,
  .can_cache = ext2_can_cache,
  .flush = ext2_flush,
  .pread = ext2_pread,
  .pwrite = ext2_pwrite,
};

NBDKIT_REGISTER_FILTER (filter)
