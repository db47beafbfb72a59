/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* example2: serve a file, read-only.  Read example1 first.
 *
 *   nbdkit example2 file=disk.img
 *
 * The step up from example1:
 *
 *   - a parameter: the config callback receives each KEY=VALUE from the
 *     command line, and config_complete checks that nothing required
 *     is missing once they have all been seen;
 *   - state that lasts for the whole run (the file's name), set during
 *     configuration and freed by unload;
 *   - a handle per connection: open opens the file and returns a small
 *     struct that every later callback for that client gets back, and
 *     close releases it;
 *   - errors: a callback that fails calls nbdkit_error with the reason
 *     and returns -1 (or NULL); the server prints the message or sends
 *     the client an error code taken from errno;
 *   - a debug flag, set with -D example2.extra=1.
 *
 * The next step, example3, makes a disk that clients can write.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* The file to serve, as an absolute path.  Set by config, read-only
 * once the server starts serving, freed by unload.
 */
static char *filename = NULL;

/* A debug flag.  "-D example2.extra=1" on the command line sets it to 1
 * before the plugin is configured: the server looks up the variable
 * named PLUGIN_debug_FLAG in the .so, so it must be exported.  Then
 * pread logs every request.
 */
NBDKIT_DLL_PUBLIC int example2_debug_extra = 0;

/* Called at exit: free what config allocated. */
static void
example2_unload (void)
{
  free (filename);
}

/* Called once per KEY=VALUE on the command line, in order.  Refuse any
 * key we do not know, so that a misspelt parameter is not silently
 * ignored.
 *
 * The server changes directory to / when it becomes a daemon, so a
 * relative name must be made absolute now.  realpath does that and
 * fails if the file does not exist.  (nbdkit_realpath does the same
 * with its own message; ours names the parameter, which helps a user
 * who passed several.)
 */
static int
example2_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0) {
    char *path;

    if (*value == '\0') {
      nbdkit_error ("file: the file name is empty");
      return -1;
    }
    path = realpath (value, NULL);
    if (path == NULL) {
      nbdkit_error ("file: %s: %m", value);
      return -1;
    }
    free (filename);            /* the last file= wins */
    filename = path;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* Called after the last config call: check that file= was given. */
static int
example2_config_complete (void)
{
  if (filename == NULL) {
    nbdkit_error ("the file=FILENAME parameter is required");
    return -1;
  }
  return 0;
}

/* Shown by "nbdkit example2 --help". */
#define example2_config_help \
  "file=<FILENAME>     (required) The file to serve."

/* What each connection keeps: its own file descriptor. */
struct handle {
  int fd;
};

/* Open the file for a new client.  Opening per connection (rather than
 * once at start-up) means a file replaced between connections is seen
 * by the next client.
 */
static void *
example2_open (int readonly)
{
  struct handle *h = malloc (sizeof *h);

  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  h->fd = open (filename, O_RDONLY | O_CLOEXEC);
  if (h->fd == -1) {
    nbdkit_error ("open: %s: %m", filename);
    free (h);
    return NULL;
  }
  return h;
}

/* The client has gone: release what open took. */
static void
example2_close (void *handle)
{
  struct handle *h = handle;

  close (h->fd);
  free (h);
}

/* The size is the file's size now.  The server asks once per
 * connection and checks every request against the answer.
 */
static int64_t
example2_get_size (void *handle)
{
  struct handle *h = handle;
  struct stat st;

  if (fstat (h->fd, &st) == -1) {
    nbdkit_error ("fstat: %s: %m", filename);
    return -1;
  }
  return st.st_size;
}

/* Read COUNT bytes at OFFSET.  pread may return fewer bytes than asked
 * (a signal, or a huge request), so loop until all are read.  Reading
 * 0 bytes means the file shrank since get_size: report that as an I/O
 * error rather than send the client stale bytes.
 */
static int
example2_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  struct handle *h = handle;
  char *p = buf;

  if (example2_debug_extra)
    nbdkit_debug ("example2: pread count=%" PRIu32 " offset=%" PRIu64,
                  count, offset);

  while (count > 0) {
    ssize_t r = pread (h->fd, p, count, offset);

    if (r == -1) {
      nbdkit_error ("pread: %s: %m", filename);
      return -1;
    }
    if (r == 0) {
      errno = EIO;
      nbdkit_error ("pread: %s: unexpected end of file", filename);
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

/* Still one request at a time: the handle is not shared between
 * clients, so this plugin could run requests in parallel, but that is
 * a later lesson.
 */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

static struct nbdkit_plugin plugin = {
  .name              = "example2",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit example2 plugin",
  .description       = "Serves a file read-only",
  .unload            = example2_unload,
  .config            = example2_config,
  .config_complete   = example2_config_complete,
  .config_help       = example2_config_help,
  .open              = example2_open,
  .close             = example2_close,
  .get_size          = example2_get_size,
  .pread             = example2_pread,
  /* The errno of a failed callback is the error the client gets. */
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
