/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* example3: a scratch disk for each client, writable.  Read example2
 * first.
 *
 *   nbdkit example3 size=1G
 *
 * Each connection gets a disk of its own, SIZE bytes, all zero to
 * start with.  The client may write to it; when the client disconnects
 * the disk is thrown away.  Two clients never see each other's writes.
 *
 * The step up from example2:
 *
 *   - writing: with a pwrite callback the server offers a writable
 *     disk; with flush, it passes on the client's flush requests;
 *   - the handle now owns a resource that must be cleaned up: a
 *     temporary file, created by open and gone when close closes it;
 *   - a parameter with a default, parsed with nbdkit_parse_size so that
 *     "1G" or "512K" work as users expect;
 *   - a thread model that lets requests run in parallel, and why that
 *     is safe here.
 *
 * The next step, example4, shares one disk between all clients.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* The size of each client's disk, 100M unless size= says otherwise. */
static int64_t size = 100 * 1024 * 1024;

static int
example3_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    /* nbdkit_parse_size understands suffixes (K, M, G, ...) and reports
     * a bad value itself; all we do is pass on the failure.
     */
    int64_t r = nbdkit_parse_size (value);

    if (r == -1)
      return -1;
    size = r;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

#define example3_config_help \
  "size=<SIZE>         Size of each client's disk (default 100M)."

/* Each client's disk is a temporary file, so a big disk costs disk
 * space, not memory, and only as much as the client writes: the file
 * is sparse.
 */
struct handle {
  int fd;
};

/* Make the client's disk: a new file of SIZE bytes in $TMPDIR (or
 * /var/tmp, which is meant for large files), removed from the
 * directory at once.  The open descriptor keeps the file alive; when
 * close closes it, the kernel frees the space, even if the server
 * crashes first.
 */
static void *
example3_open (int readonly)
{
  const char *dir = getenv ("TMPDIR");
  struct handle *h;
  char *template;

  if (dir == NULL || *dir == '\0')
    dir = "/var/tmp";
  if (asprintf (&template, "%s/example3XXXXXX", dir) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }

  h = malloc (sizeof *h);
  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    free (template);
    return NULL;
  }
  h->fd = mkostemp (template, O_CLOEXEC);
  if (h->fd == -1) {
    nbdkit_error ("mkostemp: %s: %m", template);
    goto err;
  }
  unlink (template);
  if (ftruncate (h->fd, size) == -1) {
    nbdkit_error ("ftruncate: %s: %m", template);
    close (h->fd);
    goto err;
  }
  free (template);
  return h;

 err:
  free (template);
  free (h);
  return NULL;
}

static void
example3_close (void *handle)
{
  struct handle *h = handle;

  close (h->fd);
  free (h);
}

static int64_t
example3_get_size (void *handle)
{
  return size;
}

/* Reads and writes loop because pread and pwrite may do part of the
 * work; the server has already checked OFFSET + COUNT <= size, and
 * the file is exactly that long, so reading 0 bytes cannot happen
 * unless something else truncated it.
 */
static int
example3_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  struct handle *h = handle;
  char *p = buf;

  while (count > 0) {
    ssize_t r = pread (h->fd, p, count, offset);

    if (r == -1) {
      nbdkit_error ("pread: %m");
      return -1;
    }
    if (r == 0) {
      errno = EIO;
      nbdkit_error ("pread: unexpected end of file");
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

/* Having a pwrite callback is what makes the disk writable.  FLAGS
 * could ask for Force Unit Access, but we never said we support it
 * (no can_fua callback), so the server handles FUA for us by calling
 * flush after the write.
 */
static int
example3_pwrite (void *handle, const void *buf, uint32_t count,
                 uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  const char *p = buf;

  while (count > 0) {
    ssize_t r = pwrite (h->fd, p, count, offset);

    if (r == -1) {
      nbdkit_error ("pwrite: %m");
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

/* The client asks that its writes be on stable storage.  The disk is
 * thrown away at disconnect, so this matters little, but a real plugin
 * would do exactly this.
 */
static int
example3_flush (void *handle, uint32_t flags)
{
  struct handle *h = handle;

  if (fdatasync (h->fd) == -1) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }
  return 0;
}

/* Requests may run in parallel, even several from one client at once.
 * That is safe because the only shared state, SIZE, is never written
 * after configuration, and pread/pwrite at explicit offsets on one
 * descriptor do not disturb each other.  Two overlapping writes in
 * flight at once may land in either order, which is what a disk does
 * too.  A plugin that kept a file position (lseek then read) could not
 * do this.
 */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "example3",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit example3 plugin",
  .description       = "A temporary writable disk for each client",
  .config            = example3_config,
  .config_help       = example3_config_help,
  .open              = example3_open,
  .close             = example3_close,
  .get_size          = example3_get_size,
  .pread             = example3_pread,
  .pwrite            = example3_pwrite,
  .flush             = example3_flush,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
