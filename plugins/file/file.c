/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin: serve a local file or block device.
 *
 * This file owns the plugin's two modes and all of their callbacks:
 *
 *   file=PATH  one regular file or block device is the only export;
 *   dir=DIR    each regular file or block device directly inside DIR
 *              is an export named after the file, chosen by the client
 *              (directory=DIR is the same).
 *
 * and the page cache hints: fadvise= (given to the kernel once per
 * descriptor) and cache=none (each read's pages, and each write's once
 * written back, are dropped from the page cache: evict.c decides what
 * and when).  -D file.zero=1 logs how each zero request was carried
 * out.
 *
 * direct=true opens the file with O_DIRECT.  Reads and writes whose
 * offset, length and buffer are aligned as the kernel asks go to that
 * descriptor; an unaligned read goes through an aligned bounce buffer
 * (read_range), an unaligned write through a second descriptor without
 * O_DIRECT (write_range): the kernel keeps the two coherent, writing
 * back and dropping cached pages around each direct transfer.
 *
 * aio=io_uring (with liburing) exports nbdkit_async_ops: reads, writes
 * and flushes go to an io_uring per connection (uring.c) and complete
 * from its thread; uring_done turns each result into the same bytes
 * and errors as the synchronous callbacks give, which the server still
 * uses for everything else (and under filters, or -D nbdkit.async=0).
 *
 * Each connection opens its own descriptor in open() and keeps it in a
 * struct handle; requests use only pread/pwrite-style calls on it, so
 * any number of them may run in parallel.  Data reaches stable storage
 * through fdatasync, which covers the whole file whichever descriptor
 * calls it, so multi-conn is safe.
 *
 * Locks: none of this file's own.  evict.c has one per descriptor (and
 * one per file), uring.c one per ring; the completion thread calls
 * into evict.c holding none, so neither is ever taken under the other.
 *
 * Every callback that returns -1 has reported the reason with
 * nbdkit_error (or, for the expected "not fast" answer to a fast zero,
 * nbdkit_debug) and leaves errno set to the cause.
 */
#include <config.h>

#include <dirent.h>
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
#include <linux/fs.h>   /* BLKGETSIZE64, BLKDISCARD, BLKZEROOUT, BLKSSZGET */
#endif

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#ifdef HAVE_LIBURING
#include <nbdkit-async.h>
#endif

#include "cleanup.h"
#include "full-rw.h"
#include "minmax.h"
#include "rounding.h"
#include "zerocopy.h"

#include "evict.h"
#include "answers.h"
#ifdef HAVE_LIBURING
#include "uring.h"
#endif

/* -D file.zero=1: log how each zero request was done. */
NBDKIT_DLL_PUBLIC int file_debug_zero;

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

struct handle {
  int fd;
  bool readonly;
  bool is_block;
  char *path;                   /* for messages */
  /* Cleared the first time the kernel says the operation is not
   * supported on this file, so it is not tried again.  Accessed with
   * relaxed atomics since requests run in parallel.
   */
  bool can_punch_hole;
  bool can_zero_range;
  bool can_zeroout;
  struct evict evict;           /* cache=none only */
  /* direct=true only: the buffered descriptor for unaligned writes (-1
   * if read-only), and the alignment O_DIRECT needs, of offsets and
   * lengths and of buffers in memory (powers of two).
   */
  int fd_buffered;
  uint32_t dio_align, dio_mem_align;
#ifdef HAVE_LIBURING
  struct uring *uring;          /* aio=io_uring; NULL: served here */
#endif
};

/* Report a failed system call on H, keeping errno for the server. */
static int
fail (struct handle *h, const char *what)
{
  int err = errno;

  nbdkit_error ("%s: %s: %m", h->path, what);
  errno = err;
  return -1;
}

static inline bool
supported (bool *flag)
{
  return __atomic_load_n (flag, __ATOMIC_RELAXED);
}

static inline void
unsupported (bool *flag)
{
  __atomic_store_n (flag, false, __ATOMIC_RELAXED);
}

static bool
is_unsupported_errno (int err)
{
  return err == EOPNOTSUPP || err == ENOTSUP || err == ENOSYS || err == ENOTTY;
}

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

#ifdef HAVE_LIBURING
static int file_async_pread (void *, struct nbdkit_async_request *, void *,
                             uint32_t, uint64_t, uint32_t);
static int file_async_pwrite (void *, struct nbdkit_async_request *,
                              const void *, uint32_t, uint64_t, uint32_t);
static int file_async_flush (void *, struct nbdkit_async_request *,
                             uint32_t);

/* Filled in by config_complete for aio=io_uring only: with every
 * callback NULL the server calls the plugin as it always has.
 */
NBDKIT_DLL_PUBLIC struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
};
#endif

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
  if (aio == AIO_IO_URING) {
    nbdkit_async_ops.max_in_flight = URING_ENTRIES;
    nbdkit_async_ops.pread = file_async_pread;
    nbdkit_async_ops.pwrite = file_async_pwrite;
    nbdkit_async_ops.flush = file_async_flush;
  }
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

/* Should NAME, an entry of the directory open as DFD, be an export?
 * Regular files and block devices, also through a link; names that
 * start with a dot too, as nbdkit lists them ("." and ".." are
 * directories).
 */
static bool
is_servable (int dfd, const struct dirent *ent)
{
  struct stat st;

  switch (ent->d_type) {
  case DT_REG:
  case DT_BLK:
    return true;
  case DT_LNK:
  case DT_UNKNOWN:
    /* Follow symlinks: a link to a file is served like the file. */
    if (fstatat (dfd, ent->d_name, &st, 0) == -1)
      return false;
    return S_ISREG (st.st_mode) || S_ISBLK (st.st_mode);
  default:
    return false;
  }
}

/* The exports of dir=, in the order readdir gives them, as nbdkit
 * lists them, read afresh for each client that asks.
 */
static int
file_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  DIR *dir;
  struct dirent *ent;
  int r = 0;

  if (directory == NULL)
    return nbdkit_use_default_export (exports);

  dir = opendir (directory);
  if (dir == NULL) {
    nbdkit_error ("%s: %m", directory);
    return -1;
  }
  while (r == 0 && (errno = 0, ent = readdir (dir)) != NULL) {
    if (is_servable (dirfd (dir), ent))
      r = nbdkit_add_export (exports, ent->d_name, NULL);
  }
  if (r == 0 && errno != 0) {
    nbdkit_error ("%s: reading directory: %m", directory);
    r = -1;
  }
  closedir (dir);
  return r;
}

/* In dir= mode, turn the client's export name into a path.  Names are
 * plain file names in the directory: no paths, no "." or "..".
 */
static char *
export_path (void)
{
  const char *name = nbdkit_export_name ();
  char *path;

  if (name == NULL || name[0] == '\0') {
    nbdkit_error ("dir=%s: the default export \"\" is not served; "
                  "ask for a file name from the export list",
                  directory);
    errno = ENOENT;
    return NULL;
  }
  if (strchr (name, '/') != NULL
      || strcmp (name, ".") == 0 || strcmp (name, "..") == 0) {
    nbdkit_error ("export name '%s' is not a file name in %s",
                  name, directory);
    errno = ENOENT;
    return NULL;
  }
  if (asprintf (&path, "%s/%s", directory, name) == -1) {
    nbdkit_error ("asprintf: %m");
    errno = ENOMEM;
    return NULL;
  }
  return path;
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

/* Can this transfer go to the descriptor as it is? */
static inline bool
is_dio_aligned (const struct handle *h, const void *buf, uint32_t count,
                uint64_t offset)
{
  return !direct ||
    (((offset | count) & (h->dio_align - 1)) == 0 &&
     ((uintptr_t) buf & (h->dio_mem_align - 1)) == 0);
}

#ifdef HAVE_LIBURING
static int uring_done (void *opaque, enum uring_kind kind, char *buf,
                       uint32_t count, uint64_t offset, bool fua,
                       int32_t res);
#endif

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
  h->can_punch_hole = h->can_zero_range = h->can_zeroout = true;

  if (directory != NULL) {
    h->path = export_path ();
    if (h->path == NULL)
      goto error;
    /* Check the type before opening: opening a FIFO would block. */
    if (stat (h->path, &st) == -1) {
      err = errno;
      nbdkit_error ("export '%s' not found in %s: %m",
                    nbdkit_export_name (), directory);
      errno = err;
      goto error;
    }
    if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
      nbdkit_error ("export '%s' is not a regular file or block device",
                    nbdkit_export_name ());
      errno = ENOENT;
      goto error;
    }
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
      fail (h, "open (for unaligned writes)");
      goto error;
    }
  }
  if (fstat (h->fd, &st) == -1) {
    fail (h, "fstat");
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
  if (aio == AIO_IO_URING) {
    h->uring = uring_new (h->fd, uring_done, h);
    if (h->uring == NULL)
      nbdkit_debug ("%s: io_uring: %m: this connection is served by "
                    "threads", h->path);
  }
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
    return fail (h, "fstat");
#ifdef BLKGETSIZE64
  if (S_ISBLK (st.st_mode)) {
    uint64_t size;

    if (ioctl (h->fd, BLKGETSIZE64, &size) == -1)
      return fail (h, "ioctl BLKGETSIZE64");
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

/* Under O_DIRECT: read up to COUNT bytes at OFFSET into BUF (all three
 * aligned).  A read that comes back short of an aligned length has
 * met the end of the file: asking for the rest would be unaligned.
 */
static ssize_t
pread_direct (struct handle *h, char *buf, size_t count, uint64_t offset)
{
  size_t done = 0;

  while (done < count) {
    ssize_t r = pread (h->fd, buf + done, count - done, offset + done);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      break;
    done += r;
    if (done & (h->dio_align - 1))
      break;
  }
  return done;
}

/* Under O_DIRECT, a read that is not aligned: the aligned range around
 * it into an aligned buffer, then the part asked for.  Returns the
 * bytes of the request read (fewer at the end of the file), or -1.
 */
static ssize_t
pread_bounced (struct handle *h, char *buf, uint32_t count, uint64_t offset)
{
  /* OFFSET + COUNT is within the export, far from wrapping. */
  uint64_t start = ROUND_DOWN (offset, (uint64_t) h->dio_align);
  size_t len = ROUND_UP (offset + count, (uint64_t) h->dio_align) - start;
  size_t skip = offset - start;
  void *bounce;
  ssize_t r;
  int err;

  err = posix_memalign (&bounce, MAX (h->dio_align, h->dio_mem_align), len);
  if (err != 0) {
    errno = err;
    return -1;
  }
  r = pread_direct (h, bounce, len, start);
  if (r >= 0) {
    r = (size_t) r > skip ? MIN ((size_t) r - skip, (size_t) count) : 0;
    memcpy (buf, (char *) bounce + skip, r);
  }
  err = errno;
  free (bounce);
  errno = err;
  return r;
}

/* Read all of [OFFSET, OFFSET + COUNT) into BUF: 0, or -1 reported
 * with errno set (EIO if the file ends first).
 */
static int
read_range (struct handle *h, char *buf, uint32_t count, uint64_t offset)
{
  ssize_t r;

  if (!direct)
    r = full_pread (h->fd, buf, count, offset);
  else if (is_dio_aligned (h, buf, count, offset))
    r = pread_direct (h, buf, count, offset);
  else
    r = pread_bounced (h, buf, count, offset);
  if (r == -1)
    return fail (h, "pread");
  if (r < count) {
    nbdkit_error ("%s: pread: unexpected end of file at offset %" PRIu64
                  " (did the file shrink?)", h->path, offset + r);
    errno = EIO;
    return -1;
  }
  return 0;
}

static int
file_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct handle *h = handle;

  if (read_range (h, buf, count, offset) == -1)
    return -1;
  if (cache_none)
    evict_after_read (&h->evict, offset, count);
  return 0;
}

/* Reads this server sends straight from the file (common/zerocopy.h):
 * the export's bytes are the file's, at the same offsets, and the
 * descriptor lives as long as the connection.
 */
static int
file_read_fd (void *handle, uint32_t count, uint64_t offset, int *fd,
              uint64_t *fd_offset)
{
  struct handle *h = handle;

  /* sendfile would leave the pages cached: let pread drop them (or,
   * with O_DIRECT, never cache them).
   */
  if (cache_none || direct) {
    errno = ENOTSUP;
    return -1;
  }
  *fd = h->fd;
  *fd_offset = offset;
  return 0;
}

NBDKIT_DLL_PUBLIC const struct nbdkit_zerocopy_ops nbdkit_zerocopy_ops = {
  .version = NBDKIT_ZEROCOPY_VERSION,
  .read_fd = file_read_fd,
};

/* Write all of BUF to [OFFSET, OFFSET + COUNT): 0, or -1 reported. */
static int
write_range (struct handle *h, const char *buf, uint32_t count,
             uint64_t offset)
{
  size_t done = 0;

  if (!direct && full_pwrite (h->fd, buf, count, offset) == -1)
    return fail (h, "pwrite");
  while (direct && done < count) {
    /* What O_DIRECT cannot take as it is (also the rest of a short
     * write) goes through the page cache.
     */
    int fd = is_dio_aligned (h, buf + done, count - done, offset + done)
      ? h->fd : h->fd_buffered;
    ssize_t r = pwrite (fd, buf + done, count - done, offset + done);

    if (r == -1 && errno == EINTR)
      continue;
    if (r == 0)
      errno = EIO;              /* no progress, as full_pwrite says */
    if (r <= 0)
      return fail (h, "pwrite");
    done += r;
  }
  if (cache_none)
    evict_after_write (&h->evict, offset, count);
  return 0;
}

static int
sync_data (struct handle *h)
{
  if (fdatasync (h->fd) == -1)
    return fail (h, "fdatasync");
  return 0;
}

static int
file_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  struct handle *h = handle;

  if (write_range (h, buf, count, offset) == -1)
    return -1;
  if (flags & NBDKIT_FLAG_FUA)
    return sync_data (h);
  return 0;
}

static int
file_flush (void *handle, uint32_t flags)
{
  return sync_data (handle);
}

/* One fallocate call.  Returns 0 on success, 1 if this way of doing it
 * is not available here (FLAG is cleared when that is permanent), or
 * -1 on a real error, reported.
 */
static int
try_fallocate (struct handle *h, bool *flag, int mode, uint32_t count,
               uint64_t offset)
{
  if (!supported (flag))
    return 1;
  if (fallocate (h->fd, mode, offset, count) == 0)
    return 0;
  if (is_unsupported_errno (errno)) {
    unsupported (flag);
    return 1;
  }
  /* Block devices refuse ranges not aligned to their sector size. */
  if (errno == EINVAL)
    return 1;
  return fail (h, "fallocate");
}

static int
punch_hole (struct handle *h, uint32_t count, uint64_t offset)
{
  return try_fallocate (h, &h->can_punch_hole,
                        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        count, offset);
}

static int
file_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int r = 1;

#ifdef BLKDISCARD
  if (h->is_block) {
    uint64_t range[2] = { offset, count };

    if (ioctl (h->fd, BLKDISCARD, range) == 0)
      r = 0;
    else if (!is_unsupported_errno (errno) && errno != EINVAL)
      return fail (h, "ioctl BLKDISCARD");
  }
  else
#endif
    r = punch_hole (h, count, offset);

  /* Trim is advisory: a request we cannot carry out is not an error. */
  if (r == -1)
    return -1;
  if (r == 1)
    nbdkit_debug ("%s: trim not supported here, ignored", h->path);
  if (flags & NBDKIT_FLAG_FUA)
    return sync_data (h);
  return 0;
}

/* -D file.zero=1: say how a zero request was carried out. */
static void
zero_debug (struct handle *h, const char *how, uint32_t count,
            uint64_t offset)
{
  if (file_debug_zero)
    nbdkit_debug ("%s: zero %" PRIu32 " bytes at %" PRIu64 ": %s",
                  h->path, count, offset, how);
}

/* The ways of zeroing, cheapest first.  Returns 0 if one worked, 1 if
 * none applies, -1 on error.
 */
static int
zero_fast (struct handle *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  int r;

  /* A hole reads as zeroes.  (On block devices the kernel implements
   * punch hole as a zero-out that never falls back to writing.)
   */
  if (flags & NBDKIT_FLAG_MAY_TRIM) {
    r = punch_hole (h, count, offset);
    if (r == 0)
      zero_debug (h, "punched a hole (fallocate PUNCH_HOLE)", count, offset);
    if (r <= 0)
      return r;
  }

  /* On block devices the remaining methods may make the kernel write
   * the zeroes itself, which is not what a fast zero asks for.
   */
  if (h->is_block && (flags & NBDKIT_FLAG_FAST_ZERO)) {
    zero_debug (h, "block device: no fast way without trim", count, offset);
    return 1;
  }

  r = try_fallocate (h, &h->can_zero_range, FALLOC_FL_ZERO_RANGE,
                     count, offset);
  if (r == 0)
    zero_debug (h, "fallocate ZERO_RANGE", count, offset);
  if (r <= 0)
    return r;

  if (!h->is_block) {
    /* No ZERO_RANGE (tmpfs, for one): punch, then allocate the range
     * again so that it stays allocated as the client asked.
     */
    r = punch_hole (h, count, offset);
    if (r <= 0) {
      if (r == 0 && fallocate (h->fd, 0, offset, count) == -1)
        nbdkit_debug ("%s: re-allocating after punch: %m (ignored)",
                      h->path);
      if (r == 0)
        zero_debug (h, "fallocate PUNCH_HOLE, then allocated again",
                    count, offset);
      return r;
    }
  }

#ifdef BLKZEROOUT
  if (h->is_block && supported (&h->can_zeroout)) {
    uint64_t range[2] = { offset, count };

    if (ioctl (h->fd, BLKZEROOUT, range) == 0) {
      zero_debug (h, "ioctl BLKZEROOUT", count, offset);
      return 0;
    }
    if (is_unsupported_errno (errno))
      unsupported (&h->can_zeroout);
    else if (errno != EINVAL)
      return fail (h, "ioctl BLKZEROOUT");
  }
#endif
  return 1;
}

static int
file_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  /* Aligned for O_DIRECT. */
  static const char zeroes[64 * 1024] __attribute__ ((aligned (4096)));
  struct handle *h = handle;
  int r;

  r = zero_fast (h, count, offset, flags);
  if (r == -1)
    return -1;
  if (r == 1) {
    if (flags & NBDKIT_FLAG_FAST_ZERO) {
      nbdkit_debug ("%s: no fast way to zero here", h->path);
      zero_debug (h, "refused: fast zero asked, none available",
                  count, offset);
      nbdkit_set_error (ENOTSUP);
      errno = ENOTSUP;
      return -1;
    }
    zero_debug (h, "writing zeroes (no faster way here)", count, offset);
    while (count > 0) {
      uint32_t n = MIN (count, (uint32_t) sizeof zeroes);

      if (write_range (h, zeroes, n, offset) == -1)
        return -1;
      count -= n;
      offset += n;
    }
  }
  if (flags & NBDKIT_FLAG_FUA)
    return sync_data (h);
  return 0;
}

static int
file_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  struct handle *h = handle;
  const bool one = flags & NBDKIT_FLAG_REQ_ONE;
  const uint64_t end = offset + count;
  uint64_t pos = offset;

  /* Block devices have no holes that lseek could show. */
  if (h->is_block)
    return nbdkit_add_extent (extents, offset, count, 0);

  /* lseek moves the descriptor's file position, which nothing else
   * uses, so concurrent calls on one descriptor are harmless: each
   * looks only at its own return value.
   */
  while (pos < end) {
    off_t data = lseek (h->fd, pos, SEEK_DATA);
    off_t hole;
    uint64_t stop;

    if (data == -1) {
      if (errno == ENXIO)     /* no data after POS: the rest is a hole */
        return nbdkit_add_extent (extents, pos, end - pos,
                                  NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
      if (errno == EINVAL || is_unsupported_errno (errno))
        return nbdkit_add_extent (extents, pos, end - pos, 0);
      return fail (h, "lseek SEEK_DATA");
    }
    if ((uint64_t) data > pos) {
      stop = MIN ((uint64_t) data, end);
      if (nbdkit_add_extent (extents, pos, stop - pos,
                             NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
        return -1;
      pos = stop;
      if (one)
        break;
      continue;
    }

    hole = lseek (h->fd, pos, SEEK_HOLE);
    if (hole == -1) {
      if (errno != ENXIO && errno != EINVAL && !is_unsupported_errno (errno))
        return fail (h, "lseek SEEK_HOLE");
      hole = end;               /* file changed under us: call it data */
    }
    /* A racing change could put the hole at or before POS; always make
     * progress by calling at least the rest of the range data.
     */
    if ((uint64_t) hole <= pos)
      hole = end;
    stop = MIN ((uint64_t) hole, end);
    if (nbdkit_add_extent (extents, pos, stop - pos, 0) == -1)
      return -1;
    pos = stop;
    if (one)
      break;
  }
  return 0;
}

static int
file_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  int err;

  /* Only a hint: ask the kernel to start reading the range in. */
  err = posix_fadvise (h->fd, offset, count, POSIX_FADV_WILLNEED);
  if (err != 0) {
    errno = err;
    return fail (h, "posix_fadvise");
  }
  return 0;
}

#ifdef HAVE_LIBURING
/* aio=io_uring.  What the ring cannot take as it is (unaligned under
 * O_DIRECT, or a connection whose ring could not be made) is served at
 * once, on the worker, by the synchronous callback.
 */
static int
file_async_pread (void *handle, struct nbdkit_async_request *req, void *buf,
                  uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;

  if (h->uring && is_dio_aligned (h, buf, count, offset) &&
      uring_submit (h->uring, req, URING_READ, buf, count, offset,
                    false) == 0)
    return 0;
  if (file_pread (h, buf, count, offset, flags) == -1)
    return -1;
  nbdkit_async_complete (req, 0);
  return 0;
}

static int
file_async_pwrite (void *handle, struct nbdkit_async_request *req,
                   const void *buf, uint32_t count, uint64_t offset,
                   uint32_t flags)
{
  struct handle *h = handle;

  /* The ring only reads BUF, whatever liburing's prototype says. */
  if (h->uring && is_dio_aligned (h, buf, count, offset) &&
      uring_submit (h->uring, req, URING_WRITE, (void *) buf, count, offset,
                    flags & NBDKIT_FLAG_FUA) == 0)
    return 0;
  if (file_pwrite (h, buf, count, offset, flags) == -1)
    return -1;
  nbdkit_async_complete (req, 0);
  return 0;
}

static int
file_async_flush (void *handle, struct nbdkit_async_request *req,
                  uint32_t flags)
{
  struct handle *h = handle;

  if (h->uring &&
      uring_submit (h->uring, req, URING_FDATASYNC, NULL, 0, 0, false) == 0)
    return 0;
  if (file_flush (h, flags) == -1)
    return -1;
  nbdkit_async_complete (req, 0);
  return 0;
}

/* On the ring's completion thread: what the kernel's result RES means
 * for the client, as the synchronous callbacks would say it.
 */
static int
uring_done (void *opaque, enum uring_kind kind, char *buf, uint32_t count,
            uint64_t offset, bool fua, int32_t res)
{
  static const char *const what[] = {
    [URING_READ] = "pread (io_uring)",
    [URING_WRITE] = "pwrite (io_uring)",
    [URING_FDATASYNC] = "fdatasync (io_uring)",
  };
  struct handle *h = opaque;

  if (res < 0) {
    errno = -res;
    fail (h, what[kind]);
    return -res;
  }
  /* A short transfer: the rest as the synchronous path does it, so
   * that the end of the file gives the same EIO.
   */
  switch (kind) {
  case URING_READ:
    if ((uint32_t) res < count &&
        read_range (h, buf + res, count - res, offset + res) == -1)
      return errno;
    if (cache_none)
      evict_after_read (&h->evict, offset, count);
    break;
  case URING_WRITE:
    if ((uint32_t) res < count &&
        (write_range (h, buf + res, count - res, offset + res) == -1 ||
         (fua && sync_data (h) == -1)))
      return errno;
    if (cache_none && res > 0)
      evict_after_write (&h->evict, offset, res);
    break;
  case URING_FDATASYNC:
    break;
  }
  return 0;
}
#endif

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
