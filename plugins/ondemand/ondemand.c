/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ondemand plugin: exports created on demand in a directory.
 *
 * This file owns the parameters, the export names and the life of an
 * export file.  A client asking for export NAME gets the file
 * DIR/NAME ("" means "default"); if it does not exist, the command (by
 * default mkfs, see ../tmpdisk/disk.c) makes it first.  The command
 * writes DIR/.ondemand-XXXXXX/NAME, a private directory that the
 * listing and the export names never show, and the plugin then links
 * the finished file into place, so that no client ever sees a file
 * half made, and a failed command leaves nothing behind.
 *
 * Locking: creation is serialised by create_lock, so two clients
 * asking at once for a new name run the command only once.  While a
 * client uses an export it holds an open file description lock on it
 * (F_OFD_SETLK: unlike a process-wide fcntl lock it keeps apart two
 * clients of this one server, as well as two servers): a write lock,
 * or a read lock for a read-only connection, so that read-only
 * clients may share.  A client finding the lock taken fails, or with
 * wait=true waits for it.  With share=true every client takes the
 * read lock, writers too: the clients of this server share exports
 * (coordinating their writes is up to them), while a server without
 * share=true still cannot hand an export they use to a writer.  The data callbacks work on the handle's
 * descriptor (disk.c) and may run in parallel.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

#include "disk.h"
#include "params.h"

/* Set by config, read-only once the server serves. */
static char *dir = NULL;
static int64_t requested_size = -1;
static bool wait_for_lock = false;
static bool share = false;       /* share=true: no client excludes another */
static char *command = NULL;     /* NULL: the default mkfs command */

/* Held while an export file is looked up and, if missing, made. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const reserved[] = { "disk", NULL };

static void
ondemand_unload (void)
{
  free (dir);
  free (command);
  disk_vars_free ();
}

static int
ondemand_config (const char *key, const char *value)
{
  if (strcmp (key, "dir") == 0) {
    free (dir);
    dir = realpath (value, NULL);
    if (dir == NULL) {
      nbdkit_error ("dir=%s: %m", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "size") == 0) {
    requested_size = nbdkit_parse_size (value);
    return requested_size == -1 ? -1 : 0;
  }
  if (strcmp (key, "wait") == 0)
    return param_bool (value, &wait_for_lock);
  if (strcmp (key, "share") == 0)
    return param_bool (value, &share);
  if (strcmp (key, "command") == 0)
    return param_string (value, &command);
  /* type=, label= and anything else: a variable for the command. */
  return disk_vars_add (key, value, reserved);
}

static int
ondemand_config_complete (void)
{
  struct stat st;

  if (dir == NULL || requested_size == -1) {
    nbdkit_error ("the dir and size parameters are required");
    return -1;
  }
  if (stat (dir, &st) == -1) {
    nbdkit_error ("dir=%s: %m", dir);
    return -1;
  }
  if (!S_ISDIR (st.st_mode)) {
    nbdkit_error ("dir=%s: not a directory", dir);
    return -1;
  }
  if (disk_vars_get ("type") == NULL &&
      disk_vars_add ("type", "ext4", reserved) == -1)
    return -1;
  if (disk_vars_get ("label") == NULL &&
      disk_vars_add ("label", "", reserved) == -1)
    return -1;
  return 0;
}

#define ondemand_config_help \
  "dir=EXPORTSDIR            (required) Directory holding the exports.\n" \
  "[size=]SIZE               (required) Size of each new export.\n" \
  "wait=BOOL                 Wait for an export in use (default false).\n" \
  "share=BOOL                Clients may use one export at once (false).\n" \
  "type=FS                   Filesystem type for mkfs (default ext4).\n" \
  "label=LABEL               Filesystem label.\n" \
  "command=COMMAND           Shell command that creates $disk instead.\n" \
  "VAR=VALUE                 Shell variables for the command."

/* An export name that is safe as a file name in dir: not empty, not
 * too long, and without '.' (which also keeps out ".", ".." and the
 * plugin's own hidden directories), '/' or ':'.
 */
static bool
valid_name (const char *name)
{
  size_t len = strlen (name);

  return len > 0 && len <= NAME_MAX && strpbrk (name, "./:") == NULL;
}

/* The list starts with "", the name every client may use, and hides
 * "default", the file behind it, as nbdkit does; then the directory's
 * other entries in the order readdir gives them.  Entries that a
 * client could not open (directories, devices, dangling links) are
 * left out.
 */
static int
ondemand_list_exports (int readonly, int is_tls,
                       struct nbdkit_exports *exports)
{
  DIR *d;
  struct dirent *e;
  int r;

  d = opendir (dir);
  if (d == NULL) {
    nbdkit_error ("opendir: %s: %m", dir);
    return -1;
  }
  r = nbdkit_add_export (exports, "", NULL);
  while (r == 0 && (errno = 0, e = readdir (d)) != NULL) {
    struct stat st;

    /* stat follows a link, as open does. */
    if (!valid_name (e->d_name) || strcmp (e->d_name, "default") == 0 ||
        fstatat (dirfd (d), e->d_name, &st, 0) == -1 ||
        !S_ISREG (st.st_mode))
      continue;
    r = nbdkit_add_export (exports, e->d_name, NULL);
  }
  if (r == 0 && errno != 0) {
    nbdkit_error ("readdir: %s: %m", dir);
    r = -1;
  }
  closedir (d);
  return r;
}

static const char *
ondemand_default_export (int readonly, int is_tls)
{
  return "default";
}

/* Make dir/NAME with the command.  Called with create_lock held, when
 * dir/NAME does not exist.  Returns 0 or -1 (reported).
 */
static int
create_export (const char *name)
{
  const char *cmd = command ? command : disk_default_command;
  CLEANUP_FREE char *tmp = NULL;
  CLEANUP_FREE char *disk = NULL;
  CLEANUP_FREE char *final = NULL;
  uint64_t duration_ns;
  int status, r = -1;

  if (asprintf (&tmp, "%s/.ondemand-XXXXXX", dir) == -1) {
    tmp = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  if (mkdtemp (tmp) == NULL) {
    nbdkit_error ("mkdtemp: %s: %m", tmp);
    return -1;
  }
  if (asprintf (&disk, "%s/%s", tmp, name) == -1 ||
      asprintf (&final, "%s/%s", dir, name) == -1) {
    nbdkit_error ("asprintf: %m");
    goto out;
  }

  nbdkit_debug ("%s: creating the export", name);
  status = disk_run_command (cmd, disk, requested_size, &duration_ns);
  NBDKIT_PROBE (ondemand_create, name, duration_ns, status);
  if (status != 0) {
    if (status > 0)
      disk_command_error (name, status);
    goto out;
  }
  /* link, not rename: it fails rather than replace a file that
   * another server made meanwhile.
   */
  if (link (disk, final) == -1) {
    if (errno == EEXIST)
      r = 0;
    else if (errno == ENOENT)
      nbdkit_error ("%s: the command did not create $disk", name);
    else
      nbdkit_error ("link: %s: %m", final);
    goto out;
  }
  r = 0;
 out:
  disk_remove_dir (tmp);
  return r;
}

static void *
ondemand_open (int readonly)
{
  const char *name = nbdkit_export_name ();
  CLEANUP_FREE char *path = NULL;
  struct flock lk = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
  struct stat st;
  int fd, r;
  /* A link in dir is the administrator's (a client names files, it
   * cannot make links), so it is followed, as nbdkit does.  O_NONBLOCK
   * keeps a FIFO from hanging the open; it is refused just after.
   */
  int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK;

  if (name == NULL || *name == '\0')
    name = "default";
  if (!valid_name (name)) {
    nbdkit_error ("invalid export name '%s' rejected", name);
    errno = EINVAL;
    return NULL;
  }
  if (asprintf (&path, "%s/%s", dir, name) == -1) {
    path = NULL;
    nbdkit_error ("asprintf: %m");
    return NULL;
  }

  {
    LOCK_FOR_SCOPE (&create_lock);
    fd = open (path, flags);
    if (fd == -1 && errno == ENOENT) {
      if (create_export (name) == -1)
        return NULL;
      fd = open (path, flags);
    }
  }
  if (fd == -1) {
    nbdkit_error ("open: %s: %m", path);
    return NULL;
  }
  if (fstat (fd, &st) == -1 || !S_ISREG (st.st_mode)) {
    nbdkit_error ("%s: not a regular file", path);
    close (fd);
    errno = EINVAL;
    return NULL;
  }
  if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK) == -1) {
    nbdkit_error ("fcntl: %s: %m", path);
    close (fd);
    return NULL;
  }

  /* Whole-file lock: shared for readers (and for everyone with
   * share=true), exclusive for writers.
   */
  lk.l_type = readonly || share ? F_RDLCK : F_WRLCK;
  do
    r = fcntl (fd, wait_for_lock ? F_OFD_SETLKW : F_OFD_SETLK, &lk);
  while (r == -1 && errno == EINTR);
  if (r == -1) {
    if (errno == EAGAIN || errno == EACCES) {
      nbdkit_error ("%s: filesystem is locked by another client", name);
      errno = EBUSY;
    }
    else
      nbdkit_error ("fcntl: %s: %m", path);
    close (fd);
    return NULL;
  }

  return disk_handle_new (fd);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "ondemand",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit ondemand plugin",
  .description       = "Exports created on demand in a directory",
  .unload            = ondemand_unload,
  .config            = ondemand_config,
  .config_complete   = ondemand_config_complete,
  .config_help       = ondemand_config_help,
  .magic_config_key  = "size",
  .list_exports      = ondemand_list_exports,
  .default_export    = ondemand_default_export,
  .open              = ondemand_open,
  .close             = disk_close,
  .get_size          = disk_get_size,
  .can_flush         = disk_can_yes,
  .can_trim          = disk_can_yes,
  .can_zero          = disk_can_yes,
  .can_fast_zero     = disk_can_yes,
  .can_fua           = disk_can_fua,
  .can_extents       = disk_can_yes,
  .pread             = disk_pread,
  .pwrite            = disk_pwrite,
  .flush             = disk_flush,
  .trim              = disk_trim,
  .zero              = disk_zero,
  .extents           = disk_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
