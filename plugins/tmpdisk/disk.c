/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Disk files made by a shell command, and the I/O that serves them:
 * shared by the tmpdisk and ondemand plugins (see disk.h).
 *
 * The variables are filled by the plugin's config callback, before
 * any thread serves clients, and only read afterwards, so they need
 * no lock.  Running a command forks a /bin/sh child and waits for it
 * in the calling thread; several may run at once.
 */
#include <config.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "now-ns.h"
#include "cleanup.h"
#include "minmax.h"
#include "quote.h"
#include "subprocess.h"
#include "vector.h"

#include "disk.h"

/* Make an empty file of $size bytes and put a filesystem of $type on
 * it, labelled $label if that is not empty.  Each mkfs has its own
 * flag to overwrite without asking and its own label flag.
 */
const char disk_default_command[] =
  "label_flag=-L\n"
  "case \"$type\" in\n"
  "  ext[234]) force=-F ;;\n"
  "  vfat|fat|msdos) force=-I label_flag=-n ;;\n"
  "  ntfs) force='-F -Q' ;;\n"
  "  xfs|btrfs) force=-f ;;\n"
  "  *) force= ;;\n"
  "esac\n"
  "truncate -s \"$size\" \"$disk\" || exit\n"
  "if [ -n \"$label\" ]; then\n"
  "  exec mkfs -t \"$type\" $force $label_flag \"$label\" \"$disk\"\n"
  "else\n"
  "  exec mkfs -t \"$type\" $force \"$disk\"\n"
  "fi\n";

struct var {
  char *key;
  char *value;
};
DEFINE_VECTOR_TYPE (var_list, struct var);

/* Set by config only (see above). */
static var_list vars = empty_vector;

static bool
is_shell_name (const char *s)
{
  if (!isalpha ((unsigned char) *s) && *s != '_')
    return false;
  for (s++; *s; s++)
    if (!isalnum ((unsigned char) *s) && *s != '_')
      return false;
  return true;
}

int
disk_vars_add (const char *key, const char *value,
               const char *const *reserved)
{
  struct var v;
  size_t i;

  if (!is_shell_name (key)) {
    nbdkit_error ("unknown parameter '%s' (a variable for the command "
                  "must be a shell variable name)", key);
    return -1;
  }
  for (i = 0; reserved[i] != NULL; i++) {
    if (strcmp (key, reserved[i]) == 0) {
      nbdkit_error ("parameter '%s' cannot be set: the plugin sets it "
                    "for the command", key);
      return -1;
    }
  }

  v.value = strdup (value);
  if (v.value == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  for (i = 0; i < vars.len; i++) {
    if (strcmp (vars.ptr[i].key, key) == 0) {
      free (vars.ptr[i].value);
      vars.ptr[i].value = v.value;
      return 0;
    }
  }
  v.key = strdup (key);
  if (v.key == NULL || var_list_append (&vars, v) == -1) {
    nbdkit_error ("strdup: %m");
    free (v.key);
    free (v.value);
    return -1;
  }
  return 0;
}

const char *
disk_vars_get (const char *key)
{
  size_t i;

  for (i = 0; i < vars.len; i++)
    if (strcmp (vars.ptr[i].key, key) == 0)
      return vars.ptr[i].value;
  return NULL;
}

void
disk_vars_free (void)
{
  size_t i;

  for (i = 0; i < vars.len; i++) {
    free (vars.ptr[i].key);
    free (vars.ptr[i].value);
  }
  var_list_reset (&vars);
}

int
disk_run_command (const char *command, const char *disk, int64_t size,
                  uint64_t *duration_ns)
{
  CLEANUP_FREE char *script = NULL;
  size_t script_len = 0;
  FILE *fp;
  size_t i;
  /* stdout may be the client's socket (-s): only stderr is kept. */
  struct subprocess sp = {
    .stdin_mode = SUBPROCESS_NULL, .stdout_mode = SUBPROCESS_NULL,
  };
  enum subprocess_outcome r;
  uint64_t start = now_ns ();

  *duration_ns = 0;

  /* The variables, then the two the plugin owns, then the command. */
  fp = open_memstream (&script, &script_len);
  if (fp == NULL) {
    nbdkit_error ("open_memstream: %m");
    return -1;
  }
  for (i = 0; i < vars.len; i++) {
    fprintf (fp, "%s=", vars.ptr[i].key);
    shell_quote (fp, vars.ptr[i].value);
    fputc ('\n', fp);
  }
  fputs ("disk=", fp);
  shell_quote (fp, disk);
  fprintf (fp, "\nsize=%" PRIi64 "\n", size);
  fputs (command, fp);
  fputc ('\n', fp);
  if (fclose (fp) == EOF) {
    nbdkit_error ("writing the command's script: %m");
    return -1;
  }

  sp.shell_command = script;
  r = subprocess_run (&sp);
  *duration_ns = now_ns () - start;
  if (r != SUBPROCESS_FINISHED) {
    nbdkit_error ("%s: %m", sp.failed_call);
    return -1;
  }
  return subprocess_code (sp.status);
}

void
disk_command_error (const char *what, int status)
{
  const char *sep = what ? ": " : "";

  if (what == NULL)
    what = "";
  if (status > 128)
    nbdkit_error ("%s%scommand killed by signal %d", what, sep, status - 128);
  else
    nbdkit_error ("%s%scommand exited with code %d", what, sep, status);
}

/* Remove DIR and whatever the command left in it (not recursively: a
 * command that makes subdirectories leaves them, with a debug line).
 */
void
disk_remove_dir (const char *dir)
{
  DIR *d = opendir (dir);
  struct dirent *e;

  if (d != NULL) {
    while ((e = readdir (d)) != NULL) {
      if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0)
        unlinkat (dirfd (d), e->d_name, 0);
    }
    closedir (d);
  }
  if (rmdir (dir) == -1)
    nbdkit_debug ("rmdir: %s: %m", dir);
}

static int64_t
disk_get_size_fd (int fd)
{
  struct stat st;

  if (fstat (fd, &st) == -1) {
    nbdkit_error ("fstat: %m");
    return -1;
  }
  return st.st_size;
}

static int
disk_pread_fd (int fd, void *buf, uint32_t count, uint64_t offset)
{
  char *p = buf;

  while (count > 0) {
    ssize_t r = pread (fd, p, count, offset);

    if (r == -1) {
      nbdkit_error ("pread: %m");
      return -1;
    }
    if (r == 0) {
      /* The file shrank under us (the command's own disk can). */
      nbdkit_error ("pread: unexpected end of file");
      errno = EIO;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

static int
disk_flush_fd (int fd)
{
  if (fdatasync (fd) == -1) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }
  return 0;
}

static int
disk_pwrite_fd (int fd, const void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  const char *p = buf;

  while (count > 0) {
    ssize_t r = pwrite (fd, p, count, offset);

    if (r == -1) {
      nbdkit_error ("pwrite: %m");
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  if (flags & NBDKIT_FLAG_FUA)
    return disk_flush_fd (fd);
  return 0;
}

static bool
is_unsupported (int err)
{
  return err == EOPNOTSUPP || err == ENOTSUP || err == ENOSYS;
}

static int
disk_trim_fd (int fd, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                 offset, count) == -1) {
    /* Trim is advisory: where holes cannot be made, do nothing. */
    if (!is_unsupported (errno)) {
      nbdkit_error ("fallocate: %m");
      return -1;
    }
  }
  if (flags & NBDKIT_FLAG_FUA)
    return disk_flush_fd (fd);
  return 0;
}

/* Punch a hole if the client allows one, else zero the range in place.
 * Where the filesystem can do neither, fail with ENOTSUP: the server
 * then writes zeroes itself (unless the client asked for a fast zero).
 */
static int
disk_zero_fd (int fd, uint32_t count, uint64_t offset, uint32_t flags)
{
  int r = -1;

  if (flags & NBDKIT_FLAG_MAY_TRIM) {
    r = fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   offset, count);
    if (r == -1 && !is_unsupported (errno)) {
      nbdkit_error ("fallocate: %m");
      return -1;
    }
  }
  if (r == -1) {
    r = fallocate (fd, FALLOC_FL_ZERO_RANGE, offset, count);
    if (r == -1) {
      if (!is_unsupported (errno)) {
        nbdkit_error ("fallocate: %m");
        return -1;
      }
      nbdkit_debug ("no fast way to zero here");
      nbdkit_set_error (ENOTSUP);
      errno = ENOTSUP;
      return -1;
    }
  }
  if (flags & NBDKIT_FLAG_FUA)
    return disk_flush_fd (fd);
  return 0;
}

/* Holes and data from lseek.  lseek moves the descriptor's position,
 * which nothing else uses, so concurrent calls only look at their own
 * return values.
 */
static int
disk_extents_fd (int fd, uint32_t count, uint64_t offset, uint32_t flags,
                 struct nbdkit_extents *extents)
{
  const bool one = flags & NBDKIT_FLAG_REQ_ONE;
  const uint64_t end = offset + count;
  uint64_t pos = offset;

  while (pos < end) {
    off_t data = lseek (fd, pos, SEEK_DATA);
    off_t hole;
    uint64_t stop;

    if (data == -1) {
      if (errno == ENXIO)       /* no data after pos */
        return nbdkit_add_extent (extents, pos, end - pos,
                                  NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
      if (errno == EINVAL || is_unsupported (errno))
        return nbdkit_add_extent (extents, pos, end - pos, 0);
      nbdkit_error ("lseek: %m");
      return -1;
    }
    if ((uint64_t) data > pos) {
      stop = MIN ((uint64_t) data, end);
      if (nbdkit_add_extent (extents, pos, stop - pos,
                             NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
        return -1;
    }
    else {
      hole = lseek (fd, pos, SEEK_HOLE);
      /* A hole at or before pos means the file changed: call it data. */
      if (hole == -1 || (uint64_t) hole <= pos)
        hole = end;
      stop = MIN ((uint64_t) hole, end);
      if (nbdkit_add_extent (extents, pos, stop - pos, 0) == -1)
        return -1;
    }
    pos = stop;
    if (one)
      break;
  }
  return 0;
}

/* ---- the per-connection callbacks of tmpdisk and ondemand ---- */

/* Both serve one disk file per connection, through its descriptor:
 * the handle is that descriptor.
 */
struct disk_handle {
  int fd;
};

void *
disk_handle_new (int fd)
{
  struct disk_handle *h = malloc (sizeof *h);
  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    close (fd);
    return NULL;
  }
  h->fd = fd;
  return h;
}

static int
fd_of (void *handle)
{
  return ((struct disk_handle *) handle)->fd;
}

/* Closing the descriptor also drops ondemand's lock on the disk. */
void
disk_close (void *handle)
{
  close (fd_of (handle));
  free (handle);
}

int64_t
disk_get_size (void *handle)
{
  return disk_get_size_fd (fd_of (handle));
}

int
disk_can_yes (void *handle)
{
  return 1;
}

int
disk_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

int
disk_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  return disk_pread_fd (fd_of (handle), buf, count, offset);
}

int
disk_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  return disk_pwrite_fd (fd_of (handle), buf, count, offset, flags);
}

int
disk_flush (void *handle, uint32_t flags)
{
  return disk_flush_fd (fd_of (handle));
}

int
disk_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return disk_trim_fd (fd_of (handle), count, offset, flags);
}

int
disk_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return disk_zero_fd (fd_of (handle), count, offset, flags);
}

int
disk_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  return disk_extents_fd (fd_of (handle), count, offset, flags, extents);
}
