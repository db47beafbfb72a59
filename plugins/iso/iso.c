/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The iso plugin: one or more directories served as an ISO 9660
 * (CD-ROM) image, made at start-up by xorriso, genisoimage or mkisofs.
 *
 * This file owns the parameters, the build and the serving.  get_ready
 * runs "PROG [-as mkisofs] -quiet PARAMS DIR..." under /bin/sh (params=
 * is shell text, as nbdkit documents) with its standard output in an
 * unlinked temporary file, which is then served read-only: requests
 * only pread it, so any number run in parallel and every connection
 * sees the same image.  The program's messages are kept out of the
 * log unless it fails, when its last line becomes the one error line.
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
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "now-ns.h"
#include "cleanup.h"
#include "quote.h"
#include "subprocess.h"
#include "vector.h"
#include "array-size.h"

/* Set by config, read-only afterwards. */
static string_vector dirs = empty_vector;
static char *params = NULL;
static char *prog = NULL;       /* NULL: the first one found on $PATH */

/* Built by get_ready, read-only afterwards. */
static int iso_fd = -1;
static int64_t iso_size = 0;

static void
iso_unload (void)
{
  string_vector_free_all (&dirs);
  free (params);
  free (prog);
  if (iso_fd >= 0)
    close (iso_fd);
}

static int
set_string (char **p, const char *value)
{
  free (*p);
  *p = strdup (value);
  if (*p == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

static int
iso_config (const char *key, const char *value)
{
  if (strcmp (key, "dir") == 0) {
    char *d = realpath (value, NULL);
    struct stat st;

    if (d == NULL || stat (d, &st) == -1) {
      nbdkit_error ("dir=%s: %m", value);
      free (d);
      return -1;
    }
    if (!S_ISDIR (st.st_mode)) {
      nbdkit_error ("dir=%s: not a directory", value);
      free (d);
      return -1;
    }
    if (string_vector_append (&dirs, d) == -1) {
      nbdkit_error ("realloc: %m");
      free (d);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "params") == 0)
    return set_string (&params, value);
  if (strcmp (key, "prog") == 0) {
    if (*value == '\0') {
      nbdkit_error ("prog=: the program name is empty");
      return -1;
    }
    return set_string (&prog, value);
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* Whether NAME would be found by the shell: a path, or on $PATH. */
static bool
have_program (const char *name)
{
  const char *path = getenv ("PATH");
  CLEANUP_FREE char *copy = NULL;
  char *dir, *save = NULL;

  if (strchr (name, '/'))
    return access (name, X_OK) == 0;
  if (path == NULL || (copy = strdup (path)) == NULL)
    return false;
  for (dir = strtok_r (copy, ":", &save); dir;
       dir = strtok_r (NULL, ":", &save)) {
    CLEANUP_FREE char *f = NULL;

    if (asprintf (&f, "%s/%s", *dir ? dir : ".", name) == -1) {
      f = NULL;
      return false;
    }
    if (access (f, X_OK) == 0)
      return true;
  }
  return false;
}

static int
iso_config_complete (void)
{
  static const char *const programs[] = { "xorriso", "genisoimage",
                                          "mkisofs" };
  size_t i;

  if (dirs.len == 0) {
    nbdkit_error ("the dir parameter is required");
    return -1;
  }
  if (prog == NULL) {
    for (i = 0; i < ARRAY_SIZE (programs); i++) {
      if (have_program (programs[i]))
        return set_string (&prog, programs[i]);
    }
    nbdkit_error ("none of xorriso, genisoimage or mkisofs is on $PATH "
                  "(install one, or name it with prog=)");
    return -1;
  }
  return 0;
}

#define iso_config_help \
  "[dir=]DIRECTORY           (required) A directory to put in the ISO\n" \
  "                          (may be given more than once).\n" \
  "params='PARAMS'           More options for the program (shell text).\n" \
  "prog=PROGRAM              xorriso, genisoimage or mkisofs."

/* The shell command.  xorriso speaks mkisofs's options only when told
 * to; genisoimage and mkisofs are mkisofs.
 */
static char *
make_command (void)
{
  const char *base = strrchr (prog, '/') ? strrchr (prog, '/') + 1 : prog;
  char *cmd = NULL;
  size_t len = 0, i;
  FILE *fp = open_memstream (&cmd, &len);

  if (fp == NULL) {
    nbdkit_error ("open_memstream: %m");
    return NULL;
  }
  shell_quote (fp, prog);
  if (strcmp (base, "xorriso") == 0)
    fputs (" -as mkisofs", fp);
  fputs (" -quiet", fp);
  if (params) {
    fputc (' ', fp);
    fputs (params, fp);
  }
  for (i = 0; i < dirs.len; i++) {
    fputc (' ', fp);
    shell_quote (fp, dirs.ptr[i]);
  }
  if (fclose (fp) == EOF) {
    nbdkit_error ("open_memstream: %m");
    free (cmd);
    return NULL;
  }
  return cmd;
}

/* Run CMD with its standard output to OUT_FD.  Returns 0, or -1
 * having reported the failure in one line (the program's last line of
 * errors, or its status).
 */
static int
run_command (const char *cmd, int out_fd)
{
  struct subprocess sp = {
    .shell_command = cmd,
    .stdin_mode = SUBPROCESS_NULL,
    .stdout_mode = SUBPROCESS_FD, .stdout_fd = out_fd,
    .stderr_mode = SUBPROCESS_PIPE, .err_keep_tail = true,
  };
  const char *line;
  int ret = -1;

  nbdkit_debug ("iso: %s", cmd);
  if (subprocess_run (&sp) != SUBPROCESS_FINISHED) {
    nbdkit_error ("%s: %m", sp.failed_call);
    goto out;
  }
  if (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0) {
    size_t n = sp.err.len;
    while (n > 0 && (sp.err.ptr[n - 1] == '\n' || sp.err.ptr[n - 1] == ' '))
      n--;
    if (n > 0)
      nbdkit_debug ("%s said: %.*s", prog, (int) n, sp.err.ptr);
    ret = 0;
    goto out;
  }
  line = subprocess_last_line (&sp);
  if (WIFEXITED (sp.status))
    nbdkit_error ("%s failed (exit status %d): %s", prog,
                  WEXITSTATUS (sp.status), *line ? line : "no message");
  else
    nbdkit_error ("%s killed by signal %d", prog, WTERMSIG (sp.status));
 out:
  subprocess_free (&sp);
  return ret;
}

static int
build_iso (void)
{
  const char *tmp = getenv ("TMPDIR");
  CLEANUP_FREE char *path = NULL;
  CLEANUP_FREE char *cmd = NULL;
  struct stat st;

  if (tmp == NULL || *tmp == '\0')
    tmp = "/var/tmp";
  if (asprintf (&path, "%s/isoXXXXXX", tmp) == -1) {
    path = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  iso_fd = mkostemp (path, O_CLOEXEC);
  if (iso_fd == -1) {
    nbdkit_error ("mkstemp: %s: %m", path);
    return -1;
  }
  /* Reachable only through iso_fd from now on. */
  unlink (path);

  cmd = make_command ();
  if (cmd == NULL || run_command (cmd, iso_fd) == -1)
    return -1;
  if (fstat (iso_fd, &st) == -1) {
    nbdkit_error ("fstat: %m");
    return -1;
  }
  if (st.st_size == 0) {
    nbdkit_error ("%s wrote no image", prog);
    return -1;
  }
  iso_size = st.st_size;
  return 0;
}

static int
iso_get_ready (void)
{
  uint64_t start = now_ns ();
  int r = build_iso ();
  uint64_t duration_ns = now_ns () - start;
  int64_t image_size = r == 0 ? iso_size : 0;
  const char *program = prog;

  /* Keep program in a register: the compiler would otherwise name the
   * global in the probe's argument, which tracers misread in a .so.
   */
  __asm__ ("" : "+r" (program));
  NBDKIT_PROBE (iso_build, program, duration_ns, image_size);
  return r;
}

static void *
iso_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
iso_get_size (void *handle)
{
  return iso_size;
}

static int
iso_can_multi_conn (void *handle)
{
  return 1;
}

static int
iso_can_cache (void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

static int
iso_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  char *p = buf;

  while (count > 0) {
    ssize_t r = pread (iso_fd, p, count, offset);

    if (r == -1) {
      nbdkit_error ("pread: %m");
      return -1;
    }
    if (r == 0) {
      nbdkit_error ("pread: the image ended early");
      errno = EIO;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "iso",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit iso plugin",
  .description       = "Directories as an ISO 9660 (CD-ROM) image",
  .unload            = iso_unload,
  .config            = iso_config,
  .config_complete   = iso_config_complete,
  .config_help       = iso_config_help,
  .magic_config_key  = "dir",
  .get_ready         = iso_get_ready,
  .open              = iso_open,
  .get_size          = iso_get_size,
  .can_multi_conn    = iso_can_multi_conn,
  .can_cache         = iso_can_cache,
  .pread             = iso_pread,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
