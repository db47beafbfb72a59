/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The exportname filter: change the export list clients see
 * (exportname-list=), the export a client asking for "" gets
 * (default-export=), which names clients may open (exportname-strict=
 * with exportname=), and the descriptions sent with names
 * (exportdesc=, possibly from a shell script run per export).
 *
 * Configuration is set by config and read-only afterwards, so the
 * callbacks of parallel connections share it without a lock.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "subprocess.h"

enum list_mode { LIST_KEEP, LIST_ERROR, LIST_EMPTY, LIST_DEFAULT_ONLY,
                 LIST_EXPLICIT };
enum desc_mode { DESC_KEEP, DESC_NONE, DESC_FIXED, DESC_SCRIPT };

static char *default_export;            /* NULL: the plugin's */
static enum list_mode list_mode = LIST_KEEP;
static bool strict;
static string_vector names = empty_vector;      /* exportname=, in order */
static enum desc_mode desc_mode = DESC_KEEP;
static char *desc;                      /* fixed text, or the script */

/* The longest string NBD carries; longer script output is cut. */
#define MAX_DESC 4096

static void
exportname_unload (void)
{
  free (default_export);
  free (desc);
  string_vector_free_all (&names);
}

/* Replace *P by a copy of VALUE (NULL stays NULL). */
static int
set_string (char **p, const char *value)
{
  char *s = NULL;

  if (value && (s = strdup (value)) == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  free (*p);
  *p = s;
  return 0;
}

static int
exportname_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                   const char *key, const char *value)
{
  int r;

  /* Empty: the plugin's default export under the plugin's name, as
   * nbdkit's page says (nbdkit 1.32 itself calls it ""; see our page).
   */
  if (strcmp (key, "default-export") == 0 ||
      strcmp (key, "default_export") == 0)
    return set_string (&default_export, *value ? value : NULL);

  if (strcmp (key, "exportname-list") == 0 ||
      strcmp (key, "exportname_list") == 0) {
    if (strcmp (value, "keep") == 0)
      list_mode = LIST_KEEP;
    else if (strcmp (value, "error") == 0)
      list_mode = LIST_ERROR;
    else if (strcmp (value, "empty") == 0)
      list_mode = LIST_EMPTY;
    else if (strcmp (value, "defaultonly") == 0 ||
             strcmp (value, "default-only") == 0)
      list_mode = LIST_DEFAULT_ONLY;
    else if (strcmp (value, "explicit") == 0)
      list_mode = LIST_EXPLICIT;
    else {
      nbdkit_error ("%s: unknown mode '%s' (expecting keep, error, empty, "
                    "defaultonly or explicit)", key, value);
      return -1;
    }
    return 0;
  }

  if (strcmp (key, "exportname-strict") == 0 ||
      strcmp (key, "exportname_strict") == 0) {
    r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    strict = r;
    return 0;
  }

  if (strcmp (key, "exportname") == 0) {
    char *s;

    if (strlen (value) > MAX_DESC) {
      nbdkit_error ("exportname: '%.20s...' is longer than %d bytes",
                    value, MAX_DESC);
      return -1;
    }
    s = strdup (value);
    if (s == NULL || string_vector_append (&names, s) == -1) {
      nbdkit_error ("exportname: %m");
      free (s);
      return -1;
    }
    return 0;
  }

  if (strcmp (key, "exportdesc") == 0) {
    if (strcmp (value, "keep") == 0) {
      desc_mode = DESC_KEEP;
      return set_string (&desc, NULL);
    }
    if (strcmp (value, "none") == 0) {
      desc_mode = DESC_NONE;
      return set_string (&desc, NULL);
    }
    if (strncmp (value, "fixed:", 6) == 0) {
      desc_mode = DESC_FIXED;
      return set_string (&desc, value + 6);
    }
    if (strncmp (value, "script:", 7) == 0) {
      desc_mode = DESC_SCRIPT;
      return set_string (&desc, value + 7);
    }
    nbdkit_error ("exportdesc: unknown mode '%s' (expecting keep, none, "
                  "fixed:STRING or script:SCRIPT)", value);
    return -1;
  }

  return next (nxdata, key, value);
}

#define exportname_config_help \
  "default-export=<NAME>     The export a client asking for \"\" gets.\n" \
  "exportname-list=<MODE>    Exports to list: keep (default), error,\n" \
  "                          empty, defaultonly or explicit.\n" \
  "exportname-strict=<BOOL>  Only exportname= names may be opened.\n" \
  "exportname=<NAME>         An explicit export (may be repeated).\n" \
  "exportdesc=<MODE>         Descriptions: keep (default), none,\n" \
  "                          fixed:STRING or script:SCRIPT."

static bool
is_listed (const char *name)
{
  size_t i;

  for (i = 0; i < names.len; i++)
    if (strcmp (names.ptr[i], name) == 0)
      return true;
  return false;
}

/* Run the exportdesc script for export NAME: its standard output, up
 * to MAX_DESC bytes and without one final newline, interned; NULL on
 * any failure (no description is then sent).  The name reaches the
 * script as $name, through the environment, so it needs no quoting.
 */
static const char *
run_desc_script (const char *name)
{
  CLEANUP_FREE char *cmd = NULL;
  const char *desc_text;
  size_t n;

  if (asprintf (&cmd, "name=$1; export name; shift\n%s\n", desc) == -1) {
    nbdkit_debug ("exportdesc: asprintf: %m");
    return NULL;
  }
  /* Past MAX_DESC bytes the pipe is closed: a script that goes on
   * writing then fails to, so waiting for it ends.
   */
  const char *const argv[] = { "sh", "-c", cmd, "sh", name, NULL };
  struct subprocess sp = {
    .argv = argv, .file = "/bin/sh",
    .stdin_mode = SUBPROCESS_NULL,
    .stdout_mode = SUBPROCESS_PIPE, .out_max = MAX_DESC,
  };
  if (subprocess_run (&sp) == SUBPROCESS_ERROR) {
    nbdkit_debug ("exportdesc: %s: %m", sp.failed_call);
    subprocess_free (&sp);
    return NULL;
  }
  if (sp.exec_errno != 0) {
    errno = sp.exec_errno;
    nbdkit_debug ("exportdesc: /bin/sh: %m");
    subprocess_free (&sp);
    return NULL;
  }
  if (!WIFEXITED (sp.status) || WEXITSTATUS (sp.status) != 0)
    nbdkit_debug ("exportdesc: script for '%s' failed (status %d)",
                  name, sp.status);
  n = sp.out.len;
  if (n > 0 && sp.out.ptr[n - 1] == '\n')
    n--;
  desc_text = nbdkit_strndup_intern (n > 0 ? sp.out.ptr : "", n);
  subprocess_free (&sp);
  return desc_text;
}

/* The description to send for export NAME, whose plugin description
 * is PLUGIN_DESC (NULL if none).
 */
static const char *
describe (const char *name, const char *plugin_desc)
{
  switch (desc_mode) {
  case DESC_KEEP:
    return plugin_desc;
  case DESC_SCRIPT:
    return run_desc_script (name);
  default:                      /* none, fixed */
    return desc;
  }
}

static int
exportname_list_exports (nbdkit_next_list_exports *next,
                         nbdkit_backend *nxdata, int readonly, int is_tls,
                         struct nbdkit_exports *exports)
{
  struct nbdkit_exports *below;
  size_t i;
  int r = 0;

  switch (list_mode) {
  case LIST_ERROR:
    nbdkit_error ("exportname-list: listing exports is refused by policy");
    return -1;
  case LIST_EMPTY:
    return 0;
  case LIST_DEFAULT_ONLY:
    return nbdkit_use_default_export (exports);
  case LIST_EXPLICIT:
    for (i = 0; i < names.len; i++)
      if (nbdkit_add_export (exports, names.ptr[i],
                             describe (names.ptr[i], NULL)) == -1)
        return -1;
    return 0;
  case LIST_KEEP:
    break;
  }

  below = nbdkit_exports_new ();
  if (below == NULL)
    return -1;
  if (next (nxdata, readonly, below) == -1) {
    nbdkit_exports_free (below);
    return -1;
  }
  for (i = 0; r == 0 && i < nbdkit_exports_count (below); i++) {
    struct nbdkit_export e = nbdkit_get_export (below, i);
    r = nbdkit_add_export (exports, e.name, describe (e.name, e.description));
  }
  nbdkit_exports_free (below);
  return r;
}

static const char *
exportname_default_export (nbdkit_next_default_export *next,
                           nbdkit_backend *nxdata, int readonly, int is_tls)
{
  /* Strict: "" may be used only if it was listed with exportname=. */
  if (strict) {
    if (!is_listed ("")) {
      NBDKIT_PROBE (exportname_refused, "");
      nbdkit_error ("exportname-strict: the default export \"\" is not "
                    "an exportname=");
      return NULL;
    }
    return default_export ? default_export : "";
  }
  if (default_export)
    return default_export;
  return next (nxdata, readonly);
}

struct handle {
  const char *name;             /* interned: lives as long as the connection */
};

static void *
exportname_open (nbdkit_next_open *next, nbdkit_context *nxdata,
                 int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (strict && !is_listed (exportname)) {
    NBDKIT_PROBE (exportname_refused, exportname);
    nbdkit_error ("exportname-strict: export '%s' not found", exportname);
    errno = ENOENT;
    return NULL;
  }
  h = malloc (sizeof *h);
  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  h->name = nbdkit_strdup_intern (exportname);
  if (h->name == NULL || next (nxdata, readonly, exportname) == -1) {
    free (h);
    return NULL;
  }
  return h;
}

static void
exportname_close (void *handle)
{
  free (handle);
}

static const char *
exportname_export_description (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  const char *plugin_desc = NULL;

  if (desc_mode == DESC_KEEP)
    plugin_desc = next->export_description (next);
  return describe (h->name, plugin_desc);
}

static struct nbdkit_filter filter = {
  .name = "exportname",
  .longname = "nbdkit exportname filter",
  .unload = exportname_unload,
  .config = exportname_config,
  .config_help = exportname_config_help,
  .list_exports = exportname_list_exports,
  .default_export = exportname_default_export,
  .open = exportname_open,
  .close = exportname_close,
  .export_description = exportname_export_description,
};

NBDKIT_REGISTER_FILTER (filter)
