/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file store of filestore.h: one descriptor of an unnamed temporary
 * file, and where safe a shared mapping of it.  Neither needs a lock
 * of its own: pread, pwrite and copies through the mapping may run from
 * many threads at once.
 *
 * When the mapping is used.  A store in a mapped file must never touch
 * a page whose disk space the file system might fail to find: a write
 * fault that cannot allocate raises SIGBUS, and bytes past the end of
 * the file do too.  So the file is first sized (sparse) to the store's
 * size, writes that may allocate always use pwrite, and only
 * overwrites of bytes written and held since go through the mapping.
 * That holds on file systems that overwrite in place: ext2/3/4, XFS and
 * tmpfs, the ones where the mapping is made.  Elsewhere (btrfs copies
 * on every write, so an overwrite allocates too), on a file system
 * whose largest file is smaller than the store, or where the address
 * space is short, everything goes through pread and pwrite.  One risk
 * is taken knowingly: a disk that fails to read the file back raises
 * SIGBUS through the mapping where pread would return EIO, a price
 * paid only on a failing disk, for a saving on every request.
 *
 * Pages are mapped writable as soon as pwrite has written them
 * (MADV_POPULATE_WRITE).  Otherwise a read through the mapping would
 * map them read-only, and the first overwrite of each would then take a
 * write-protect fault into the file system (ext4_page_mkwrite), several
 * times the cost of the copy itself: measured on ext4 with 4 KiB
 * random reads then writes, 26% more server CPU per write than the
 * in-memory store this replaced, against 9% with the pages mapped
 * early.  A page written back to disk is write-protected again, so a
 * block overwritten now and then pays that fault once per write-back,
 * not once per write.
 *
 * Without a mapping, bytes past the end of the file read as zeroes
 * here, so the file need not be sized at all.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "filestore.h"
#include "full-rw.h"

/* Linux 5.14; older headers lack it, older kernels refuse it. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct filestore {
  int fd;
  uint8_t *map;                 /* the whole store, or NULL */
  uint64_t map_size;
  uint64_t page_mask;           /* page size - 1 */
  bool no_populate;             /* set (atomically) once populating failed */
  bool no_punch;                /* set (atomically) once punching failed */
};

const char *
filestore_dir (void)
{
  const char *dir = getenv ("TMPDIR");
  if (dir == NULL || *dir == '\0')
    dir = "/var/tmp";
  return dir;
}

/* A file with no name in DIR, or -1 with errno set. */
static int
open_unnamed (const char *dir)
{
#ifdef O_TMPFILE
  int fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0)
    return fd;
  /* Only a file system without O_TMPFILE is worth a second try; a
   * missing or forbidden directory fails the same way below.
   */
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return -1;
#endif
  char *template;
  if (asprintf (&template, "%s/nbdkit-overlay-XXXXXX", dir) == -1)
    return -1;
  int fd2 = mkostemp (template, O_CLOEXEC);
  if (fd2 >= 0 && unlink (template) == -1) {
    int e = errno;
    close (fd2);
    errno = e;
    fd2 = -1;
  }
  free (template);
  return fd2;
}

int
filestore_unnamed_fd (void)
{
  return open_unnamed (filestore_dir ());
}

struct filestore *
filestore_create (void)
{
  struct filestore *s = calloc (1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->fd = open_unnamed (filestore_dir ());
  if (s->fd == -1) {
    int e = errno;
    free (s);
    errno = e;
    return NULL;
  }
  return s;
}

/* File systems that overwrite a written block in place, so a write
 * fault on it never needs new space (see the top of the file).
 */
static bool
overwrites_in_place (int fd)
{
  struct statfs fs;
  if (fstatfs (fd, &fs) == -1)
    return false;
  switch ((unsigned long) fs.f_type) {
  case EXT4_SUPER_MAGIC:        /* also ext2 and ext3 */
  case XFS_SUPER_MAGIC:
  case TMPFS_MAGIC:
    return true;
  default:
    return false;
  }
}

void
filestore_set_size (struct filestore *s, uint64_t size)
{
  if (size == 0 || size > INT64_MAX || size > SIZE_MAX ||
      !overwrites_in_place (s->fd) || ftruncate (s->fd, size) == -1)
    return;
  void *p = mmap (NULL, size, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_NORESERVE, s->fd, 0);
  if (p == MAP_FAILED)
    return;
  s->map = p;
  s->map_size = size;
  s->page_mask = sysconf (_SC_PAGESIZE) - 1;
}

void
filestore_destroy (struct filestore *s)
{
  if (s == NULL)
    return;
  if (s->map)
    munmap (s->map, s->map_size);
  close (s->fd);
  free (s);
}

int
filestore_read (struct filestore *s, void *buf, uint32_t count,
                uint64_t offset)
{
  if (s->map) {
    memcpy (buf, s->map + offset, count);
    return 0;
  }
  ssize_t r = full_pread (s->fd, buf, count, offset);
  if (r == -1)
    return -1;
  /* Past the end of what was ever written. */
  if ((size_t) r < count)
    memset ((char *) buf + r, 0, count - r);
  return 0;
}

/* Map the pages of [OFFSET, OFFSET + COUNT), just written, writable. */
static void
populate (struct filestore *s, uint32_t count, uint64_t offset)
{
  /* madvise wants a page-aligned start. */
  uint64_t start = offset & ~s->page_mask;
  if (__atomic_load_n (&s->no_populate, __ATOMIC_RELAXED))
    return;
  if (madvise (s->map + start, count + (offset - start),
               MADV_POPULATE_WRITE) == -1 && errno == EINVAL)
    /* A kernel without it: pages are mapped at the first fault. */
    __atomic_store_n (&s->no_populate, true, __ATOMIC_RELAXED);
}

int
filestore_write (struct filestore *s, const void *buf, uint32_t count,
                 uint64_t offset)
{
  if (full_pwrite (s->fd, buf, count, offset) == -1)
    return -1;
  if (s->map && count > 0)
    populate (s, count, offset);
  return 0;
}

int
filestore_overwrite (struct filestore *s, const void *buf, uint32_t count,
                     uint64_t offset)
{
  if (s->map) {
    memcpy (s->map + offset, buf, count);
    return 0;
  }
  return filestore_write (s, buf, count, offset);
}

void
filestore_discard (struct filestore *s, uint32_t count, uint64_t offset)
{
#ifdef FALLOC_FL_PUNCH_HOLE
  if (count == 0 || __atomic_load_n (&s->no_punch, __ATOMIC_RELAXED))
    return;
  if (fallocate (s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                 offset, count) == -1 &&
      (errno == EOPNOTSUPP || errno == ENOSYS))
    /* The file system cannot: the space stays used until the file is
     * closed, which costs disk, never correctness.
     */
    __atomic_store_n (&s->no_punch, true, __ATOMIC_RELAXED);
#endif
}

bool
filestore_mapped (struct filestore *s)
{
  return s->map != NULL;
}

uint64_t
filestore_allocated (struct filestore *s)
{
  struct stat st;
  if (fstat (s->fd, &st) == -1)
    return 0;
  return (uint64_t) st.st_blocks * 512;
}
