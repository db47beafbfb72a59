/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The sh plugin: every callback runs one external script (or any
 * executable) as "SCRIPT METHOD ARGS...".
 *
 * This file owns the configuration: the script= parameter (a path, or
 * "-" to read an inline script from stdin into $tmpdir), the script's
 * own load and magic_config_key methods, and the parameters passed on
 * to its config method.  The callbacks themselves are in methods.c and
 * the running of the script in call.c, shared with the eval plugin.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "call.h"
#include "cleanup.h"
#include "methods.h"

/* Set during configuration, read-only afterwards. */
static char *script;            /* absolute path of the script */
static char *magic_key;         /* the script's magic_config_key, or NULL */

static const char *
sh_path (const char *method)
{
  return script;
}

static const char *
sh_display_name (void)
{
  return script;
}

static void
sh_probe (const char *method, int code, int64_t ns, int err)
{
  NBDKIT_PROBE (sh_script, nbdkit_connection_id (), nbdkit_request_cookie (),
                method, code, ns, err);
}

static void
sh_load (void)
{
  script_hooks = (struct script_hooks) {
    .path = sh_path,
    .display_name = sh_display_name,
    .probe = sh_probe,
  };
  /* No way to fail here: an error shows at config. */
  if (script_tmpdir_create () == -1)
    nbdkit_debug ("sh: no $tmpdir");
}

static void
sh_unload (void)
{
  if (script)
    script_unload ();
  script_tmpdir_remove ();
  free (script);
  free (magic_key);
  script = magic_key = NULL;
}

static void
sh_dump_plugin (void)
{
  printf ("max_known_status=3\n");
  if (script)
    script_dump_plugin ();
}

/* script=-: the inline script, read from stdin into $tmpdir. */
static char *
read_inline_script (void)
{
  if (!nbdkit_stdio_safe ()) {
    nbdkit_error ("script=-: cannot read the script from stdin when stdin "
                  "carries the protocol (-s)");
    return NULL;
  }
  char *path;
  if (asprintf (&path, "%s/inline-script.sh", script_tmpdir) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  FILE *fp = fopen (path, "w");
  if (!fp) {
    nbdkit_error ("%s: %m", path);
    free (path);
    return NULL;
  }
  char buf[65536];
  size_t n;
  while ((n = fread (buf, 1, sizeof buf, stdin)) > 0)
    if (fwrite (buf, 1, n, fp) != n)
      break;
  if (ferror (stdin) || ferror (fp) || fclose (fp) == EOF ||
      chmod (path, 0700) == -1) {
    nbdkit_error ("script=-: copying the script from stdin: %m");
    free (path);
    return NULL;
  }
  return path;
}

static int
set_script (const char *value)
{
  if (!script_tmpdir) {
    nbdkit_error ("cannot create the temporary directory for $tmpdir");
    return -1;
  }
  if (strcmp (value, "-") == 0)
    script = read_inline_script ();
  else {
    script = realpath (value, NULL);
    if (!script)
      nbdkit_error ("script=%s: %m", value);
    else if (access (script, X_OK) == -1) {
      nbdkit_error ("script=%s: the script is not executable: %m", value);
      free (script);
      script = NULL;
    }
  }
  if (!script)
    return -1;

  /* The script's own load method, then its magic key if it has one. */
  if (script_call ("load", NULL, NULL, 0, NULL, 0) == SCRIPT_ERROR)
    return -1;
  byte_vector out = empty_vector;
  enum script_status s = script_call ("magic_config_key", NULL, NULL, 0,
                                      &out, 4096);
  if (s == SCRIPT_OK) {
    if (script_output_string (&out) == -1) {
      nbdkit_error ("magic_config_key: %m");
      byte_vector_reset (&out);
      return -1;
    }
    if (out.ptr[0] != '\0')
      magic_key = out.ptr;
    else
      byte_vector_reset (&out);
  }
  else
    byte_vector_reset (&out);
  return s == SCRIPT_ERROR ? -1 : 0;
}

static int
sh_config (const char *key, const char *value)
{
  if (!script) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be script=/path/to/script "
                    "(or script=-), not '%s'", key);
      return -1;
    }
    return set_script (value);
  }
  /* Later bare parameters arrive as script=: the script's magic key. */
  if (strcmp (key, "script") == 0) {
    if (!magic_key) {
      nbdkit_error ("unknown parameter 'script' (%s): the script is "
                    "already given and has no magic_config_key", value);
      return -1;
    }
    key = magic_key;
  }
  const char *args[] = { key, value, NULL };
  switch (script_call ("config", args, NULL, 0, NULL, 0)) {
  case SCRIPT_OK:
    return 0;
  case SCRIPT_MISSING:
    nbdkit_error ("unknown parameter '%s' (the script has no config "
                  "method)", key);
    return -1;
  case SCRIPT_FALSE:
    nbdkit_error ("unknown parameter '%s' (the script's config method "
                  "exited with code 3)", key);
    return -1;
  default:
    return -1;
  }
}

static int
sh_config_complete (void)
{
  if (!script) {
    nbdkit_error ("missing the script: nbdkit sh /path/to/script "
                  "(or script=-)");
    return -1;
  }
  return script_config_complete ();
}

/* Without a script (nbdkit --dump-plugin sh) the plugin itself can run
 * in parallel, as nbdkit's says; a script without a thread_model
 * method gets serialize_all_requests.
 */
static int
sh_thread_model (void)
{
  if (!script)
    return NBDKIT_THREAD_MODEL_PARALLEL;
  return script_thread_model ();
}

#define sh_config_help \
  "[script=]<FILENAME>  (required) The script, or - to read it from stdin.\n" \
  "[KEY=VALUE ...]      Passed on to the script's config method."

/* The script chooses its model with its thread_model method. */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "sh",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit shell script plugin",
  .load               = sh_load,
  .unload             = sh_unload,
  .dump_plugin        = sh_dump_plugin,
  .config             = sh_config,
  .config_complete    = sh_config_complete,
  .config_help        = sh_config_help,
  .magic_config_key   = "script",
  .thread_model       = sh_thread_model,
  SCRIPT_METHODS,
};

NBDKIT_REGISTER_PLUGIN (plugin)
