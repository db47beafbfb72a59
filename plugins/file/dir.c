/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's dir= mode: the exports are the regular files and
 * block devices directly inside one directory, named by their file
 * names.  file.c hands in the directory (an absolute path, fixed once
 * configured); the directory itself is read afresh for each export
 * list and looked up for each connection, so files may come and go
 * while the server runs.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "handle.h"

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
int
file_dir_list_exports (const char *directory, struct nbdkit_exports *exports)
{
  DIR *dir;
  struct dirent *ent;
  int r = 0;

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
export_path (const char *directory)
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

/* The path of the export the client asked for in DIRECTORY, checked
 * to be a regular file or block device: NULL, reported, with errno
 * set if there is no such export.
 */
char *
file_dir_export_path (const char *directory)
{
  char *path = export_path (directory);
  struct stat st;
  int err;

  if (path == NULL)
    return NULL;
  /* Check the type before opening: opening a FIFO would block. */
  if (stat (path, &st) == -1) {
    err = errno;
    nbdkit_error ("export '%s' not found in %s: %m",
                  nbdkit_export_name (), directory);
    goto error;
  }
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
    nbdkit_error ("export '%s' is not a regular file or block device",
                  nbdkit_export_name ());
    err = ENOENT;
    goto error;
  }
  return path;

 error:
  free (path);
  errno = err;
  return NULL;
}
