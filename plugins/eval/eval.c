/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The eval plugin: the sh plugin's methods, each given as a fragment of
 * shell script on the command line (pread='...').
 *
 * This file owns the configuration: each METHOD=SCRIPT parameter is
 * saved as $tmpdir/METHOD and run with /bin/sh as
 * "/bin/sh $tmpdir/METHOD METHOD ARGS...", so that $1 is the method as
 * in an sh plugin script; missing=SCRIPT stands in for every method not
 * given; any other parameter goes to the config method.  The callbacks
 * and the running of scripts are the sh plugin's (plugins/sh/libscript).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "array-size.h"
#include "call.h"
#include "methods.h"

/* Every method a parameter can define, and "missing". */
static const char *const method_names[] = {
  "after_fork", "block_size", "cache", "can_cache", "can_extents",
  "can_fast_zero", "can_flush", "can_fua", "can_multi_conn", "can_trim",
  "can_write", "can_zero", "close", "config", "config_complete",
  "default_export", "dump_plugin", "export_description", "extents",
  "flush", "get_ready", "get_size", "is_rotational", "list_exports",
  "open", "pread", "preconnect", "pwrite", "thread_model", "trim",
  "unload", "zero", "missing",
};

/* Set during configuration, read-only afterwards. */
static char *paths[ARRAY_SIZE (method_names)]; /* $tmpdir/METHOD if given */

static int
method_index (const char *method)
{
  for (size_t i = 0; i < ARRAY_SIZE (method_names); ++i)
    if (strcmp (method_names[i], method) == 0)
      return i;
  return -1;
}

static bool
eval_defined (const char *method)
{
  int i = method_index (method);
  return i >= 0 && paths[i] != NULL;
}

static const char *
eval_path (const char *method)
{
  int i = method_index (method);
  if (i >= 0 && paths[i])
    return paths[i];
  /* Not given: the missing script, or without one "exit 2". */
  return paths[method_index ("missing")];
}

static void
eval_probe (const char *method, int code, int64_t ns, int err)
{
  NBDKIT_PROBE (eval_script, nbdkit_connection_id (),
                nbdkit_request_cookie (), method, code, ns, err);
}

static void
eval_load (void)
{
  script_hooks = (struct script_hooks) {
    .path = eval_path,
    .defined = eval_defined,
    .use_sh = true,
    .probe = eval_probe,
  };
  if (script_tmpdir_create () == -1)
    nbdkit_debug ("eval: no $tmpdir");
}

static void
eval_unload (void)
{
  script_unload ();
  script_tmpdir_remove ();
  for (size_t i = 0; i < ARRAY_SIZE (paths); ++i) {
    free (paths[i]);
    paths[i] = NULL;
  }
}

static void
eval_dump_plugin (void)
{
  printf ("max_known_status=3\n");
  script_dump_plugin ();
}

/* Save SCRIPT as $tmpdir/NAME. */
static char *
save_script (const char *name, const char *script)
{
  char *path;
  if (asprintf (&path, "%s/%s", script_tmpdir, name) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  FILE *fp = fopen (path, "w");
  if (!fp) {
    nbdkit_error ("%s=: %s: %m", name, path);
    free (path);
    return NULL;
  }
  if (fprintf (fp, "%s\n", script) < 0 || fclose (fp) == EOF) {
    nbdkit_error ("%s=: writing %s: %m", name, path);
    free (path);
    return NULL;
  }
  return path;
}

static int
eval_config (const char *key, const char *value)
{
  int i = method_index (key);

  if (i >= 0) {
    if (!script_tmpdir) {
      nbdkit_error ("%s: cannot create the temporary directory for $tmpdir",
                    key);
      return -1;
    }
    char *path = save_script (key, value);
    if (!path)
      return -1;
    free (paths[i]);            /* given twice: the last one counts */
    paths[i] = path;
    return 0;
  }

  /* Any other key is for the config script. */
  const char *args[] = { key, value, NULL };
  switch (script_call ("config", args, NULL, 0, NULL, 0)) {
  case SCRIPT_OK:
    return 0;
  case SCRIPT_MISSING:
    nbdkit_error ("unknown parameter '%s' (neither a method nor handled "
                  "by config=)", key);
    return -1;
  case SCRIPT_FALSE:
    nbdkit_error ("unknown parameter '%s' (config= exited with code 3)",
                  key);
    return -1;
  default:
    return -1;
  }
}

#define eval_config_help \
  "get_size=' SCRIPT '   Shell script fragment for the get_size method.\n" \
  "pread=' SCRIPT '      Shell script fragment for the pread method.\n" \
  "[METHOD=' SCRIPT ']   ... likewise for every method.\n" \
  "missing=' SCRIPT '    Run for every method not given (default: exit 2)."

/* The scripts choose their model with thread_model=. */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "eval",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit eval plugin",
  .load               = eval_load,
  .unload             = eval_unload,
  .dump_plugin        = eval_dump_plugin,
  .config             = eval_config,
  .config_complete    = script_config_complete,
  .config_help        = eval_config_help,
  .thread_model       = script_thread_model,
  SCRIPT_METHODS,
};

NBDKIT_REGISTER_PLUGIN (plugin)
