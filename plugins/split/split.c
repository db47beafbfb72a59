/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The split plugin: several plain files served end to end as one disk.
 *
 * This file owns the list of file names (config, read-only afterwards)
 * and, per connection, the open files with where each starts in the
 * disk.  A request is cut into pieces at file boundaries; each piece
 * goes to its file with pread/pwrite, which need no lock, so requests
 * run in parallel.  Block status asks each file where its data and
 * holes are (lseek SEEK_DATA/SEEK_HOLE).  Every read or write piece
 * fires the probe split_file (file index, offset in the file, count).
 *
 * The files keep their sizes: writes land inside them, never past the
 * end, and there is no trim, flush or zero of our own (the server
 * writes zeroes for a zero request), as in nbdkit.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "full-rw.h"
#include "include/checked-overflow.h"
#include "include/minmax.h"
#include "vector.h"
#include "answers.h"

/* The files named on the command line, in order, as absolute paths. */
static string_vector filenames = empty_vector;

struct file {
  int fd;
  uint64_t offset;              /* where the file starts in the disk */
  uint64_t size;
};

/* One connection's open files, sorted by offset (the command line
 * order).  Read-only after open.
 */
struct handle {
  size_t nr_files;
  struct file *files;
  uint64_t size;                /* the sum of the file sizes */
  bool can_extents;             /* every file answers SEEK_DATA */
};

static void
split_unload (void)
{
  string_vector_free_all (&filenames);
}

static int
split_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0) {
    char *path = nbdkit_realpath (value);

    if (path == NULL)
      return -1;
    if (string_vector_append (&filenames, path) == -1) {
      nbdkit_error ("file: %m");
      free (path);
      return -1;
    }
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
split_config_complete (void)
{
  if (filenames.len == 0) {
    nbdkit_error ("file: at least one file must be given");
    return -1;
  }
  return 0;
}

#define split_config_help \
  "[file=]FILENAME           A file to serve (repeat: files are joined)."

static void
close_files (struct handle *h)
{
  for (size_t i = 0; i < h->nr_files; ++i)
    if (h->files[i].fd >= 0)
      close (h->files[i].fd);
  free (h->files);
  free (h);
}

/* Does FD answer SEEK_DATA?  A file system without it gives EINVAL;
 * ENXIO (no data after 0) is an answer.
 */
static bool
seek_data_works (int fd)
{
  return lseek (fd, 0, SEEK_DATA) != -1 || errno == ENXIO;
}

static void *
split_open (int readonly)
{
  const int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  struct handle *h;
  size_t i;

  h = calloc (1, sizeof *h);
  if (h == NULL ||
      (h->files = calloc (filenames.len, sizeof *h->files)) == NULL) {
    nbdkit_error ("calloc: %m");
    free (h);
    return NULL;
  }
  h->nr_files = filenames.len;
  for (i = 0; i < h->nr_files; ++i)
    h->files[i].fd = -1;

  h->can_extents = true;
  for (i = 0; i < h->nr_files; ++i) {
    struct file *f = &h->files[i];
    const char *name = filenames.ptr[i];
    struct stat st;

    f->fd = open (name, flags);
    if (f->fd == -1) {
      nbdkit_error ("open: %s: %m", name);
      goto err;
    }
    if (fstat (f->fd, &st) == -1) {
      nbdkit_error ("stat: %s: %m", name);
      goto err;
    }
    if (!S_ISREG (st.st_mode)) {
      nbdkit_error ("%s: not a regular file", name);
      goto err;
    }
    f->offset = h->size;
    f->size = st.st_size;
    if (ADD_OVERFLOW (h->size, f->size, &h->size) || h->size > INT64_MAX) {
      nbdkit_error ("%s: the files add up to more than 2^63-1 bytes", name);
      goto err;
    }
    if (!seek_data_works (f->fd))
      h->can_extents = false;
  }
  return h;

 err:
  close_files (h);
  return NULL;
}

static void
split_close (void *handle)
{
  close_files (handle);
}

static int64_t
split_get_size (void *handle)
{
  struct handle *h = handle;

  return h->size;
}

static int
split_can_extents (void *handle)
{
  struct handle *h = handle;

  return h->can_extents;
}

static int
compare_offset (const void *keyp, const void *elemp)
{
  const uint64_t offset = *(const uint64_t *) keyp;
  const struct file *f = elemp;

  if (offset < f->offset)
    return -1;
  if (offset >= f->offset + f->size)
    return 1;
  return 0;
}

/* The file holding disk byte OFFSET (< h->size): never an empty file. */
static struct file *
find_file (struct handle *h, uint64_t offset)
{
  struct file *f = bsearch (&offset, h->files, h->nr_files,
                            sizeof (struct file), compare_offset);

  assert (f != NULL);
  return f;
}

/* Call FN on each piece of [OFFSET, OFFSET+COUNT), file by file. */
enum op { OP_READ, OP_WRITE, OP_CACHE };

static int
do_pieces (struct handle *h, enum op op, void *buf, uint32_t count,
           uint64_t offset)
{
  uint8_t *p = buf;

  while (count > 0) {
    struct file *f = find_file (h, offset);
    const uint64_t foffs = offset - f->offset;
    const uint32_t n = MIN ((uint64_t) count, f->size - foffs);
    const size_t index = f - h->files;
    ssize_t r;

    NBDKIT_PROBE (split_file, nbdkit_connection_id (),
                  nbdkit_request_cookie (), index, foffs, n);
    switch (op) {
    case OP_READ:
      r = full_pread (f->fd, p, n, foffs);
      if (r >= 0 && r < n) {
        nbdkit_error ("pread: %s: file shrank under the plugin",
                      filenames.ptr[index]);
        errno = EIO;
        return -1;
      }
      break;
    case OP_WRITE:
      r = full_pwrite (f->fd, p, n, foffs);
      break;
    case OP_CACHE:
      errno = posix_fadvise (f->fd, foffs, n, POSIX_FADV_WILLNEED);
      r = errno == 0 ? 0 : -1;
      break;
    default:
      abort ();
    }
    if (r == -1) {
      nbdkit_error ("%s: %s: %m",
                    op == OP_READ ? "pread" : op == OP_WRITE ? "pwrite"
                    : "posix_fadvise",
                    filenames.ptr[index]);
      return -1;
    }
    if (p)
      p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
split_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  return do_pieces (handle, OP_READ, buf, count, offset);
}

static int
split_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  return do_pieces (handle, OP_WRITE, (void *) buf, count, offset);
}

static int
split_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return do_pieces (handle, OP_CACHE, NULL, count, offset);
}

/* Add the data and holes of file F from FOFFS to FEND (in the file). */
static int
file_extents (struct file *f, uint64_t foffs, uint64_t fend,
              struct nbdkit_extents *extents)
{
  while (foffs < fend) {
    off_t data, hole;

    data = lseek (f->fd, foffs, SEEK_DATA);
    if (data == -1 && errno != ENXIO) {
      nbdkit_error ("lseek: SEEK_DATA: %m");
      return -1;
    }
    if (data == -1 || (uint64_t) data >= fend) {
      /* No more data before FEND. */
      return nbdkit_add_extent (extents, f->offset + foffs, fend - foffs,
                                NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
    }
    if ((uint64_t) data > foffs) {
      if (nbdkit_add_extent (extents, f->offset + foffs, data - foffs,
                             NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
        return -1;
      foffs = data;
    }
    hole = lseek (f->fd, foffs, SEEK_HOLE);
    if (hole == -1) {
      nbdkit_error ("lseek: SEEK_HOLE: %m");
      return -1;
    }
    hole = MIN ((uint64_t) hole, fend);
    if ((uint64_t) hole <= foffs) {
      /* The file changed between the two calls: call the rest data. */
      hole = fend;
    }
    if (nbdkit_add_extent (extents, f->offset + foffs, hole - foffs, 0) == -1)
      return -1;
    foffs = hole;
  }
  return 0;
}

static int
split_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents)
{
  struct handle *h = handle;

  while (count > 0) {
    struct file *f = find_file (h, offset);
    const uint64_t foffs = offset - f->offset;
    const uint32_t n = MIN ((uint64_t) count, f->size - foffs);

    if (file_extents (f, foffs, foffs + n, extents) == -1)
      return -1;
    /* One file per reply is enough when the client only wants one. */
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
    offset += n;
    count -= n;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "split",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit split plugin",
  .description       = "Several files served end to end as one disk",
  .unload            = split_unload,
  .config            = split_config,
  .config_complete   = split_config_complete,
  .config_help       = split_config_help,
  .magic_config_key  = "file",
  .open              = split_open,
  .close             = split_close,
  .get_size          = split_get_size,
  .can_extents       = split_can_extents,
  .can_cache         = answer_cache_native,
  .pread             = split_pread,
  .pwrite            = split_pwrite,
  .cache             = split_cache,
  .extents           = split_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
