/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the .so files of plugins and filters: finding one by
 * name, opening it (its own symbols private, its libraries global),
 * setting its -D debug flags, and at exit cleaning up and unloading
 * the whole chain.  plugins.c and filters.c read the struct inside;
 * main.c calls the rest.
 */
#include <config.h>

#include <ctype.h>
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "layer-call.h"

/* ---- finding the .so ---- */

bool
layer_valid_name (const char *name)
{
  if (!*name || strlen (name) > 64)
    return false;
  for (const char *p = name; *p; p++)
    if (!isalnum ((unsigned char) *p) && *p != '-' && *p != '_')
      return false;
  return true;
}

/* Resolve a plugin or filter name to the path of its .so.  A name with
 * a '/' or ending in .so is a path; a short name is looked up in the
 * build tree ($NBDKIT_PLUGINDIR / $NBDKIT_FILTERDIR, set by ./nbdkit)
 * or else the installed directory.
 */
char *
layer_find_so (const char *type, const char *name, bool *by_path)
{
  size_t len = strlen (name);
  char *path = NULL;

  *by_path = strchr (name, '/') ||
    (len > 3 && strcmp (name + len - 3, ".so") == 0);
  if (*by_path) {
    path = strdup (name);
    if (!path)
      nbdkit_error ("strdup: %m");
    return path;
  }
  if (!layer_valid_name (name)) {
    nbdkit_error ("%s name \"%s\" is not valid", type, name);
    return NULL;
  }

  bool is_plugin = strcmp (type, "plugin") == 0;
  const char *dir = getenv (is_plugin ? "NBDKIT_PLUGINDIR"
                                      : "NBDKIT_FILTERDIR");
  if (dir && *dir) {
    if (asprintf (&path, "%s/nbdkit-%s-%s.so", dir, name, type) == -1)
      goto oom;
    if (access (path, R_OK) == 0)
      return path;
    free (path);
    if (asprintf (&path, "%s/%s/.libs/nbdkit-%s-%s.so", dir, name, name,
                  type) == -1)
      goto oom;
    if (access (path, R_OK) == 0)
      return path;
    free (path);
  }
  if (asprintf (&path, "%s/nbdkit-%s-%s.so",
                is_plugin ? PLUGINDIR : FILTERDIR, name, type) == -1)
    goto oom;
  if (access (path, R_OK) == 0)
    return path;
  nbdkit_error ("unknown %s \"%s\" (looked for %s)", type, name, path);
  free (path);
  return NULL;

 oom:
  nbdkit_error ("asprintf: %m");
  return NULL;
}

/* ---- loading the .so ---- */

/* Adds the name of each object loaded in the process right now to the
 * string_vector ARG.
 */
static int
add_loaded (struct dl_phdr_info *info, size_t size, void *arg)
{
  string_vector *set = arg;
  if (!info->dlpi_name || !*info->dlpi_name)
    return 0;
  char *name = strdup (info->dlpi_name);
  if (!name || string_vector_append (set, name) == -1) {
    free (name);
    return 1;
  }
  return 0;
}

static bool
was_loaded (const string_vector *set, const char *name)
{
  for (size_t i = 0; i < set->len; i++)
    if (strcmp (set->ptr[i], name) == 0)
      return true;
  return false;
}

/* Open a plugin or filter.  Its own symbols stay private to it
 * (RTLD_LOCAL), so one .so's helper functions cannot shadow another's
 * or the server's.  The shared libraries it brings in with it are made
 * global, as if the server had been linked with them: an embedded
 * interpreter (python, perl, ...) loads extension modules that expect
 * the interpreter's library in the global scope and do not link it
 * themselves (Python's _ctypes needs libpython's PyTuple_Type).
 */
void *
layer_dlopen (const char *filename)
{
  CLEANUP_FREE_STRING_VECTOR string_vector before = empty_vector;
  CLEANUP_FREE_STRING_VECTOR string_vector after = empty_vector;
  dl_iterate_phdr (add_loaded, &before);
  void *dl = dlopen (filename, RTLD_NOW | RTLD_LOCAL);
  if (dl) {
    dl_iterate_phdr (add_loaded, &after);
    struct link_map *self = NULL;
    dlinfo (dl, RTLD_DI_LINKMAP, &self);
    for (size_t i = 0; i < after.len; i++) {
      const char *name = after.ptr[i];
      if (was_loaded (&before, name) ||
          (self && self->l_name && strcmp (self->l_name, name) == 0))
        continue;
      /* Already loaded: this only widens its scope, and the extra
       * reference is dropped at once (the .so still holds it).
       */
      void *dep = dlopen (name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
      if (dep)
        dlclose (dep);
    }
  }
  return dl;
}

/* ---- unloading ---- */

/* Under valgrind (./nbdkit with NBDKIT_VALGRIND set) and in
 * AddressSanitizer builds the .so files stay mapped at exit: what a
 * plugin still holds in its globals then stays reachable (unmapping
 * them would turn it into a "leak" at exit, as with Debian's prebuilt
 * plugins, which allocate in constructors), and real leaks inside a
 * plugin keep readable stacks.
 */
static bool
keep_mapped (void)
{
#if defined (__SANITIZE_ADDRESS__)
  return true;
#elif defined (__has_feature)
#if __has_feature (address_sanitizer)
  return true;
#endif
#endif
  return getenv ("NBDKIT_VALGRIND") != NULL;
}

void
layer_unload_all (struct layer *top)
{
  while (top) {
    struct layer *next = top->next;
    log_set_layer_name (top->name);
    layer_trace_start (NULL, top, "cleanup", 0, 0);
    top->ops->cleanup (top);
    layer_trace_done (NULL, top, "cleanup", 0);
    layer_trace_start (NULL, top, "unload", 0, 0);
    top->ops->unload (top);
    layer_trace_done (NULL, top, "unload", 0);
    if (top->next == NULL)
      NBDKIT_PLUGIN_UNLOAD (top->name);
    else
      NBDKIT_FILTER_UNLOAD (top->name);
    if (top->dl && !keep_mapped ())
      dlclose (top->dl);
    free (top->name);
    free (top->filename);
    free (top);
    top = next;
  }
  log_set_layer_name (NULL);
}

/* -D NAME.FLAG=N: set the int variable NAME_debug_FLAG in the .so of
 * layer NAME (dots and dashes in FLAG become underscores).
 */
int
layer_set_debug_flag (struct layer *top, const char *arg)
{
  const char *dot = strchr (arg, '.');
  const char *eq = strchr (arg, '=');
  if (!dot || !eq || eq < dot || dot == arg || eq == dot + 1) {
    nbdkit_error ("-D: expected NAME.FLAG=N, got \"%s\"", arg);
    return -1;
  }
  int value;
  if (nbdkit_parse_int ("-D", eq + 1, &value) == -1)
    return -1;

  size_t namelen = dot - arg;
  for (struct layer *l = top; l; l = l->next) {
    if (strlen (l->name) != namelen || strncmp (l->name, arg, namelen))
      continue;
    char sym[256];
    int n = snprintf (sym, sizeof sym, "%.*s_debug_%.*s", (int) namelen, arg,
                      (int) (eq - dot - 1), dot + 1);
    if (n < 0 || (size_t) n >= sizeof sym) {
      nbdkit_error ("-D: flag name too long");
      return -1;
    }
    for (char *p = sym; *p; p++)
      if (*p == '.' || *p == '-')
        *p = '_';
    /* A flag the plugin lacks is a warning, as the flag set differs
     * between versions of a plugin.
     */
    int *var = dlsym (l->dl, sym);
    if (!var)
      fprintf (stderr, "nbdkit: warning: -D: %s %s has no debug flag %s\n",
               l->type, l->name, sym);
    else
      *var = value;
    return 0;
  }
  nbdkit_error ("-D: no plugin or filter named \"%.*s\"", (int) namelen, arg);
  return -1;
}
