/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin: serve a local file or block device.
 *
 * This file owns the plugin's configuration, its two modes
 *
 *   file=PATH  one regular file or block device is the only export;
 *   dir=DIR    each regular file or block device directly inside DIR
 *              is an export named after the file, chosen by the client
 *              (directory=DIR is the same; dir.c),
 *
 * the page cache hints (fadvise=, given to the kernel once per
 * descriptor; cache=none, whose dropping of pages evict.c decides),
 * direct=true (O_DIRECT: rw.c serves what is not aligned) and aio=,
 * and the plugin's table of callbacks, filled from the files that
 * serve requests (see handle.h).
 *
 * Each connection opens its own descriptor in open() and keeps it in a
 * struct handle, with what the requests need of the configuration;
 * requests use only pread/pwrite-style calls on it, so any number of
 * them may run in parallel.  Data reaches stable storage through
 * fdatasync, which covers the whole file whichever descriptor calls
 * it, so multi-conn is safe.
 *
 * Locks: none of the plugin's files but evict.c (one per descriptor,
 * and one per file) and uring.c (one per ring) have any; see async.c
 * for their order.
 *
 * Every callback that returns -1 has reported the reason with
 * nbdkit_error (or, for the expected "not fast" answer to a fast zero,
 * nbdkit_debug) and leaves errno set to the cause.
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
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __linux__
#include <linux/fs.h>   /* BLKGETSIZE64, BLKSSZGET, BLKZEROOUT (dump) */
#endif

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "answers.h"
#include "minmax.h"

#include "handle.h"

/* Exactly one of these is set by config (as an absolute path), and
 * neither changes once the server starts serving.
 */
static char *filename;
static char *directory;

/* cache=default|none */
static bool cache_none;

/* direct=true: O_DIRECT. */
static bool direct;

/* aio=threads|io_uring: how reads, writes and flushes are served.
 * Chosen in config_complete when not given (see there).
 */
enum aio_mode { AIO_DEFAULT, AIO_THREADS, AIO_IO_URING };
static enum aio_mode aio;

/* fadvise=normal|random|sequential */
#ifdef HAVE_POSIX_FADVISE
static int fadvise_mode = POSIX_FADV_NORMAL;
#endif

static void
file_unload (void)
{
  free (filename);
  free (directory);
}

static int
file_config (const char *key, const char *value)
{
  bool is_dir = strcmp (key, "dir") == 0 || strcmp (key, "directory") == 0;
  char *path;

  if (strcmp (key, "cache") == 0) {
    if (strcmp (value, "none") == 0)
      cache_none = true;
    else if (strcmp (value, "default") == 0)
      cache_none = false;
    else {
      nbdkit_error ("cache=%s: must be default or none", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "direct") == 0) {
    int r = nbdkit_parse_bool (value);

    if (r == -1)
      return -1;
    direct = r;
    return 0;
  }
  if (strcmp (key, "aio") == 0) {
    if (strcmp (value, "threads") == 0)
      aio = AIO_THREADS;
    else if (strcmp (value, "io_uring") == 0) {
#ifdef HAVE_LIBURING
      aio = AIO_IO_URING;
#else
      nbdkit_error ("aio=io_uring: this plugin was built without liburing");
      return -1;
#endif
    }
    else {
      nbdkit_error ("aio=%s: must be threads or io_uring", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "fadvise") == 0) {
#ifdef HAVE_POSIX_FADVISE
    if (strcmp (value, "normal") == 0)
      fadvise_mode = POSIX_FADV_NORMAL;
    else if (strcmp (value, "random") == 0)
      fadvise_mode = POSIX_FADV_RANDOM;
    else if (strcmp (value, "sequential") == 0)
      fadvise_mode = POSIX_FADV_SEQUENTIAL;
    else {
      nbdkit_error ("fadvise=%s: must be normal, random or sequential",
                    value);
      return -1;
    }
#else
    nbdkit_debug ("fadvise=%s: posix_fadvise is not available, ignored",
                  value);
#endif
    return 0;
  }
  if (!is_dir && strcmp (key, "file") != 0) {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  if (filename != NULL || directory != NULL) {
    nbdkit_error ("give exactly one file= or dir= parameter");
    return -1;
  }
  path = nbdkit_realpath (value);
  if (path == NULL)
    return -1;
  if (is_dir)
    directory = path;
  else
    filename = path;
  return 0;
}

static int
file_config_complete (void)
{
  struct stat st;

  /* The default is threads, with or without O_DIRECT: on the disk we
   * measured (bench/file-disk.sh, the figures in the man page) io_uring
   * was no faster at reading and slower at writing, each request
   * costing more wake-ups between threads than a blocking pread.
   */
  if (aio == AIO_DEFAULT)
    aio = AIO_THREADS;
#ifdef HAVE_LIBURING
  if (aio == AIO_IO_URING)
    file_async_enable ();
#endif

  if (filename == NULL && directory == NULL) {
    nbdkit_error ("you must give file=FILENAME or dir=DIRECTORY");
    return -1;
  }
  if (directory != NULL) {
    if (stat (directory, &st) == -1) {
      nbdkit_error ("%s: %m", directory);
      return -1;
    }
    if (!S_ISDIR (st.st_mode)) {
      nbdkit_error ("%s: dir= must name a directory", directory);
      return -1;
    }
  }
  else {
    if (stat (filename, &st) == -1) {
      nbdkit_error ("%s: %m", filename);
      return -1;
    }
    if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
      nbdkit_error ("%s: not a regular file or block device", filename);
      return -1;
    }
  }
  return 0;
}

#define file_config_help \
  "[file=]FILENAME           The file or block device to serve.\n" \
  "dir=DIRECTORY             Serve the files in DIRECTORY by export name.\n" \
  "cache=default|none        Keep (default) or drop pages in the page cache.\n" \
  "direct=true|false         Open the file with O_DIRECT.\n" \
  "aio=threads|io_uring      Serve reads and writes from threads or io_uring.\n" \
  "fadvise=normal|random|sequential\n" \
  "                          Hint the access pattern to the kernel."

static void
file_dump_plugin (void)
{
#ifdef BLKZEROOUT
  printf ("file_blkzeroout=yes\n");
#endif
  printf ("file_extents=seek_data\n");
#ifdef HAVE_LIBURING
  printf ("file_io_uring=yes\n");
#endif
}

/* file=: the one default export; dir=: the directory's (dir.c). */
static int
file_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  if (directory == NULL)
    return nbdkit_use_default_export (exports);
  return file_dir_list_exports (directory, exports);
}

static int64_t file_get_size (void *handle);

static bool
is_sane_alignment (uint64_t a)
{
  return a > 0 && a <= 65536 && (a & (a - 1)) == 0;
}

/* direct=true: the alignment O_DIRECT wants on H's descriptor: the
 * logical sector size of a block device, what statx says of a file,
 * else 4096, which every device and file system we know accepts.
 */
static void
find_dio_alignment (struct handle *h)
{
  h->dio_align = h->dio_mem_align = 4096;
#ifdef BLKSSZGET
  if (h->is_block) {
    int size;

    if (ioctl (h->fd, BLKSSZGET, &size) == 0 && is_sane_alignment (size))
      h->dio_align = h->dio_mem_align = size;
    return;
  }
#endif
#ifdef STATX_DIOALIGN
  struct statx stx;

  if (statx (h->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) &&
      is_sane_alignment (stx.stx_dio_offset_align)) {
    h->dio_align = stx.stx_dio_offset_align;
    h->dio_mem_align = is_sane_alignment (stx.stx_dio_mem_align)
      ? stx.stx_dio_mem_align : h->dio_align;
  }
#endif
}

/* The open of PATH failed with ERR (EACCES, EPERM or EROFS): say what
 * is wrong in terms the operator can act on.  Suggest -r only when the
 * file can in fact be read; otherwise say whose the file is and who the
 * server runs as, since -r would fail the same way.
 */
static void
explain_denied (const char *path, bool readonly, int err)
{
  struct stat st;
  int rfd;

  if (!readonly && err == EROFS) {
    nbdkit_error ("%s: cannot open for writing: the file system is "
                  "read-only (use -r to serve it read-only)", path);
    return;
  }
  if (!readonly && (rfd = open (path, O_RDONLY | O_CLOEXEC)) >= 0) {
    close (rfd);
    nbdkit_error ("%s: cannot open for writing: %s (it can be read: "
                  "use -r to serve it read-only)", path, strerror (err));
    return;
  }
  if (stat (path, &st) == -1) {
    /* Not even stat: a directory on the way cannot be searched. */
    nbdkit_error ("%s: cannot open: %s (a directory on the path is not "
                  "searchable by uid %ld)",
                  path, strerror (err), (long) geteuid ());
    return;
  }
  nbdkit_error ("%s: cannot open for %s: %s (the file is mode %04o, "
                "owned by uid %ld gid %ld; the server runs as uid %ld "
                "gid %ld)%s",
                path, readonly ? "reading" : "reading or writing",
                strerror (err), (unsigned) (st.st_mode & 07777),
                (long) st.st_uid, (long) st.st_gid,
                (long) geteuid (), (long) getegid (),
                readonly ? "" : ": -r would not help");
}

static void *
file_open (int readonly)
{
  struct handle *h;
  struct stat st;
  int err;

  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->fd = h->fd_buffered = -1;
  h->readonly = readonly;
  h->direct = direct;
  h->cache_none = cache_none;
  h->can_punch_hole = h->can_zero_range = h->can_zeroout = true;

  if (directory != NULL) {
    h->path = file_dir_export_path (directory);
    if (h->path == NULL)
      goto error;
  }
  else {
    h->path = strdup (filename);
    if (h->path == NULL) {
      nbdkit_error ("strdup: %m");
      goto error;
    }
  }

  h->fd = open (h->path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC |
                (direct ? O_DIRECT : 0));
  if (h->fd == -1) {
    err = errno;
    if (err == EACCES || err == EROFS || err == EPERM)
      explain_denied (h->path, readonly, err);
    else if (direct && err == EINVAL)
      nbdkit_error ("%s: open: %m (the file system refuses O_DIRECT: "
                    "leave out direct=true)", h->path);
    else
      nbdkit_error ("%s: open: %m", h->path);
    errno = err;
    goto error;
  }
  if (direct && !readonly) {
    h->fd_buffered = open (h->path, O_RDWR | O_CLOEXEC);
    if (h->fd_buffered == -1) {
      file_fail (h, "open (for unaligned writes)");
      goto error;
    }
  }
  if (fstat (h->fd, &st) == -1) {
    file_fail (h, "fstat");
    goto error;
  }
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
    nbdkit_error ("%s: not a regular file or block device", h->path);
    errno = EINVAL;
    goto error;
  }
  h->is_block = S_ISBLK (st.st_mode);
  if (direct)
    find_dio_alignment (h);
#ifdef HAVE_POSIX_FADVISE
  /* A hint for the whole file (length 0: to the end, however it grows).
   * Only a hint, so a refusal is not an error.
   */
  err = posix_fadvise (h->fd, 0, 0, fadvise_mode);
  if (err != 0)
    nbdkit_debug ("%s: posix_fadvise: %s (ignored)", h->path,
                  strerror (err));
#endif
  if (cache_none) {
    int64_t size = file_get_size (h);

    if (size == -1)
      goto error;
    evict_init (&h->evict, h->fd, size);
  }
#ifdef HAVE_LIBURING
  if (aio == AIO_IO_URING)
    file_async_open (h);
#endif
  nbdkit_debug ("file: opened %s (%s, %s%s, aio=%s)", h->path,
                h->is_block ? "block device" : "regular file",
                readonly ? "read-only" : "read-write",
                direct ? ", O_DIRECT" : "",
                aio == AIO_IO_URING ? "io_uring" : "threads");
  if (direct)
    nbdkit_debug ("file: O_DIRECT alignment: %" PRIu32 " bytes on the "
                  "file, %" PRIu32 " in memory", h->dio_align,
                  h->dio_mem_align);
  return h;

 error:
  err = errno;
  if (h->fd >= 0)
    close (h->fd);
  if (h->fd_buffered >= 0)
    close (h->fd_buffered);
  free (h->path);
  free (h);
  errno = err;
  return NULL;
}

static void
file_close (void *handle)
{
  struct handle *h = handle;

#ifdef HAVE_LIBURING
  uring_free (h->uring);
#endif
  if (cache_none)
    evict_fini (&h->evict);
  close (h->fd);
  if (h->fd_buffered >= 0)
    close (h->fd_buffered);
  free (h->path);
  free (h);
}

static int64_t
file_get_size (void *handle)
{
  struct handle *h = handle;
  struct stat st;

  if (fstat (h->fd, &st) == -1)
    return file_fail (h, "fstat");
#ifdef BLKGETSIZE64
  if (S_ISBLK (st.st_mode)) {
    uint64_t size;

    if (ioctl (h->fd, BLKGETSIZE64, &size) == -1)
      return file_fail (h, "ioctl BLKGETSIZE64");
    return size;
  }
#endif
  return st.st_size;
}

static int
file_can_write (void *handle)
{
  struct handle *h = handle;

  return !h->readonly;
}

static int
file_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                 uint32_t *maximum)
{
  struct handle *h = handle;

  if (!direct) {                /* nothing to say, as before */
    *minimum = *preferred = *maximum = 0;
    return 0;
  }
  /* Every request is served, but unaligned ones take the slow way. */
  *minimum = 1;
  *preferred = MAX (h->dio_align, (uint32_t) 4096);
  *maximum = 0xffffffff;
  return 0;
}



#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "file",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit file plugin",
  .description       = "Serve a local file, block device or directory",
  .unload            = file_unload,
  .config            = file_config,
  .config_complete   = file_config_complete,
  .config_help       = file_config_help,
  .magic_config_key  = "file",
  .dump_plugin       = file_dump_plugin,
  .list_exports      = file_list_exports,
  .open              = file_open,
  .close             = file_close,
  .get_size          = file_get_size,
  .can_write         = file_can_write,
  .block_size        = file_block_size,
  .can_flush         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fast_zero     = answer_yes,
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = file_pread,
  .pwrite            = file_pwrite,
  .flush             = file_flush,
  .trim              = file_trim,
  .zero              = file_zero,
  .extents           = file_extents,
  .cache             = file_cache,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
