/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tmpdisk plugin: each connection gets a fresh disk of its own.
 *
 * This file owns the parameters and the life of one connection's
 * disk: open() makes a private directory under $TMPDIR (or /var/tmp),
 * runs the command (by default mkfs, see disk.c) that creates "disk"
 * in it, opens that file and removes the directory at once, so the
 * disk lives exactly as long as the connection's descriptor.  The
 * data callbacks work on that descriptor (disk.c).  Every parameter
 * other than size= and command= becomes a shell variable for the
 * command.
 *
 * Parameters are set by config and read-only afterwards; each handle
 * is one connection's, and the data callbacks use only pread/pwrite-
 * style calls, so the plugin is fully parallel.  Connections see
 * different disks, so multi-conn is not advertised.
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
#include <nbdkit-probe.h>

#include "cleanup.h"

#include "disk.h"

/* Set by config, read-only once the server serves. */
static int64_t requested_size = -1;
static char *command = NULL;     /* NULL: the default mkfs command */

/* The variables the plugin sets for the command itself. */
static const char *const reserved[] = { "disk", NULL };

static void
tmpdisk_unload (void)
{
  free (command);
  disk_vars_free ();
}

static int
tmpdisk_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    requested_size = nbdkit_parse_size (value);
    return requested_size == -1 ? -1 : 0;
  }
  if (strcmp (key, "command") == 0) {
    free (command);
    command = strdup (value);
    if (command == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  /* type=, label= and anything else: a variable for the command. */
  return disk_vars_add (key, value, reserved);
}

static int
tmpdisk_config_complete (void)
{
  if (requested_size == -1) {
    nbdkit_error ("the size parameter is required");
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

#define tmpdisk_config_help \
  "[size=]SIZE               (required) Size of each client's disk.\n" \
  "type=FS                   Filesystem type for mkfs (default ext4).\n" \
  "label=LABEL               Filesystem label.\n" \
  "command=COMMAND           Shell command that creates $disk instead.\n" \
  "VAR=VALUE                 Shell variables for the command."

static void *
tmpdisk_open (int readonly)
{
  const char *tmp = getenv ("TMPDIR");
  const char *cmd = command ? command : disk_default_command;
  CLEANUP_FREE char *dir = NULL;
  CLEANUP_FREE char *disk = NULL;
  uint64_t duration_ns;
  int status, fd;

  if (tmp == NULL || *tmp == '\0')
    tmp = "/var/tmp";
  if (asprintf (&dir, "%s/tmpdiskXXXXXX", tmp) == -1) {
    dir = NULL;
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  if (mkdtemp (dir) == NULL) {
    nbdkit_error ("mkdtemp: %s: %m", dir);
    return NULL;
  }
  if (asprintf (&disk, "%s/disk", dir) == -1) {
    disk = NULL;
    nbdkit_error ("asprintf: %m");
    disk_remove_dir (dir);
    return NULL;
  }

  status = disk_run_command (cmd, disk, requested_size, &duration_ns);
  NBDKIT_PROBE (tmpdisk_command, cmd, duration_ns, status);
  if (status != 0) {
    if (status > 0)
      disk_command_error (NULL, status);
    disk_remove_dir (dir);
    errno = EIO;
    return NULL;
  }

  fd = open (disk, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("open: %s: %m", disk);
    disk_remove_dir (dir);
    return NULL;
  }
  /* From here the disk is reachable only through fd. */
  disk_remove_dir (dir);

  return disk_handle_new (fd);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "tmpdisk",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit temporary disk plugin",
  .description       = "A fresh temporary disk for each client",
  .unload            = tmpdisk_unload,
  .config            = tmpdisk_config,
  .config_complete   = tmpdisk_config_complete,
  .config_help       = tmpdisk_config_help,
  .magic_config_key  = "size",
  .open              = tmpdisk_open,
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
