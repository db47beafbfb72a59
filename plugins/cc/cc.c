/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cc plugin: compile a plugin's C source at start-up, load the
 * result and serve it.
 *
 * Configuration collects the source (script=, a path or "-" for
 * stdin), CC=, CFLAGS=, EXTRA_CFLAGS= and every other parameter.  At
 * config_complete the source is compiled into a private temporary
 * directory, the .so is opened, its plugin_init called, and the other
 * parameters are replayed to its config, so CC= may come anywhere on
 * the command line.  From then on every callback here forwards to the
 * compiled plugin ("the subplugin"), and where it lacks a callback,
 * answers as the server would for a plugin without it: this plugin's
 * own struct is fixed before the source is known, so every field is
 * present.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
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
#include "minmax.h"
#include "quote.h"
#include "subprocess.h"
#include "vector.h"

/* The compiler and flags this tree was built with (from the Makefile),
 * and where <nbdkit-plugin.h> is: the build tree's include directories
 * while this .so runs from the build tree, the installed one otherwise.
 */
#if !defined (CC_DEFAULT_CC) || !defined (CC_DEFAULT_CFLAGS) || \
  !defined (CC_BUILDDIR) || !defined (CC_BUILD_INCLUDES) || \
  !defined (CC_INSTALLED_INCLUDES)
#error "the Makefile defines CC_DEFAULT_CC, CC_DEFAULT_CFLAGS and others"
#endif
#define DEFAULT_CC CC_DEFAULT_CC
#define DEFAULT_CFLAGS CC_DEFAULT_CFLAGS " -fPIC -shared"

/* Set during configuration, read-only afterwards. */
static char *source;            /* the source file to compile */
static char *cc, *cflags, *extra_cflags;
static char *tmpdir;            /* the compiled .so (and stdin's source) */
static pid_t tmpdir_owner;      /* a forked child must not remove it */
static string_vector keys = empty_vector;  /* params for the subplugin */
static string_vector values = empty_vector;
static void *dl;
static struct nbdkit_plugin sub; /* a copy of the subplugin's struct */
static bool sub_loaded;

static void
remove_tmpdir (void)
{
  if (!tmpdir)
    return;
  CLEANUP_FREE char *so = NULL, *src = NULL;
  if (asprintf (&so, "%s/plugin.so", tmpdir) != -1)
    unlink (so);
  if (asprintf (&src, "%s/source.c", tmpdir) != -1)
    unlink (src);
  rmdir (tmpdir);
  free (tmpdir);
  tmpdir = NULL;
}

/* The server exits without unloading the plugin on some paths (a
 * compile error): the temporary directory must not outlive it.
 */
static void __attribute__ ((destructor))
remove_tmpdir_at_exit (void)
{
  if (getpid () == tmpdir_owner)
    remove_tmpdir ();
}

static void
cc_unload (void)
{
  if (sub_loaded && sub.unload)
    sub.unload ();
  if (dl)
    dlclose (dl);
  dl = NULL;
  sub_loaded = false;
  remove_tmpdir ();
  free (source);
  free (cc);
  free (cflags);
  free (extra_cflags);
  source = cc = cflags = extra_cflags = NULL;
  string_vector_free_all (&keys);
  string_vector_free_all (&values);
}

static void
cc_dump_plugin (void)
{
  printf ("CC=%s\n", DEFAULT_CC);
  printf ("CFLAGS=%s\n", DEFAULT_CFLAGS);
  if (sub_loaded && sub.dump_plugin) {
    fflush (stdout);
    sub.dump_plugin ();
  }
}

static int
make_tmpdir (void)
{
  if (tmpdir)
    return 0;
  const char *base = getenv ("TMPDIR");
  if (!base || *base == '\0')
    base = "/tmp";
  if (asprintf (&tmpdir, "%s/nbdkitccXXXXXX", base) == -1) {
    tmpdir = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  if (mkdtemp (tmpdir) == NULL) {
    nbdkit_error ("mkdtemp: %s: %m", tmpdir);
    free (tmpdir);
    tmpdir = NULL;
    return -1;
  }
  tmpdir_owner = getpid ();
  return 0;
}

/* script=-: save stdin as $tmpdir/source.c. */
static char *
read_stdin_source (void)
{
  if (!nbdkit_stdio_safe ()) {
    nbdkit_error ("script=-: cannot read the source from stdin when stdin "
                  "carries the protocol (-s)");
    return NULL;
  }
  if (make_tmpdir () == -1)
    return NULL;
  char *path;
  if (asprintf (&path, "%s/source.c", tmpdir) == -1) {
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
  if (ferror (stdin) || ferror (fp) || fclose (fp) == EOF) {
    nbdkit_error ("script=-: copying the source from stdin: %m");
    free (path);
    return NULL;
  }
  return path;
}

static int
set_string (char **dst, const char *key, const char *value)
{
  char *s = strdup (value);
  if (!s) {
    nbdkit_error ("%s: strdup: %m", key);
    return -1;
  }
  free (*dst);
  *dst = s;
  return 0;
}

static int
cc_config (const char *key, const char *value)
{
  if (!source) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be the source file (or -), "
                    "not '%s'", key);
      return -1;
    }
    if (strcmp (value, "-") == 0)
      source = read_stdin_source ();
    else {
      source = realpath (value, NULL);
      if (!source)
        nbdkit_error ("script=%s: %m", value);
    }
    return source ? 0 : -1;
  }
  if (strcmp (key, "CC") == 0)
    return set_string (&cc, key, value);
  if (strcmp (key, "CFLAGS") == 0)
    return set_string (&cflags, key, value);
  if (strcmp (key, "EXTRA_CFLAGS") == 0)
    return set_string (&extra_cflags, key, value);

  /* For the compiled plugin, in order.  A later bare parameter arrives
   * as script= and stands for the subplugin's magic key.
   */
  char *k = strdup (key), *v = strdup (value);
  if (!k || !v || string_vector_append (&keys, k) == -1) {
    nbdkit_error ("strdup: %m");
    free (k);
    free (v);
    return -1;
  }
  if (string_vector_append (&values, v) == -1) {
    nbdkit_error ("strdup: %m");
    free (v);
    keys.len--;
    free (k);
    return -1;
  }
  return 0;
}

static int cc_config (const char *key, const char *value);

static const char *
include_flags (void)
{
  Dl_info info;
  if (dladdr ((void *) cc_config, &info) && info.dli_fname &&
      strncmp (info.dli_fname, CC_BUILDDIR "/",
               strlen (CC_BUILDDIR "/")) == 0)
    return CC_BUILD_INCLUDES;
  return CC_INSTALLED_INCLUDES;
}

/* Run the compiler: the shell splits CC and the flags into words, as
 * they would be typed.  Its output goes to our stderr.
 */
static int
compile (const char *so)
{
  CLEANUP_FREE char *qsrc = shell_quote_dup (source);
  CLEANUP_FREE char *qso = shell_quote_dup (so);
  CLEANUP_FREE char *cmd = NULL;
  const char *compiler = cc ? cc : DEFAULT_CC;

  if (!qsrc || !qso ||
      asprintf (&cmd, "%s %s %s %s %s -o %s", compiler,
                cflags ? cflags : DEFAULT_CFLAGS, include_flags (),
                extra_cflags ? extra_cflags : "", qsrc, qso) == -1) {
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  nbdkit_debug ("cc: %s", cmd);

  /* The compiler's stdout is not the client's (with -s). */
  struct subprocess sp = {
    .shell_command = cmd,
    .stdout_mode = SUBPROCESS_FD, .stdout_fd = STDERR_FILENO,
  };
  int64_t start = now_ns ();
  if (subprocess_run (&sp) != SUBPROCESS_FINISHED) {
    nbdkit_error ("%s: %m", sp.failed_call);
    return -1;
  }
  int code = subprocess_code (sp.status);
  NBDKIT_PROBE (cc_compile, source, now_ns () - start, code);
  if (code != 0) {
    nbdkit_error ("compiling %s failed: %s exited with status %d "
                  "(its messages are above)", source, compiler, code);
    return -1;
  }
  return 0;
}

static int
load_subplugin (const char *so)
{
  dl = dlopen (so, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    nbdkit_error ("cannot open the compiled plugin: %s", dlerror ());
    return -1;
  }
  struct nbdkit_plugin *(*init) (void) = dlsym (dl, "plugin_init");
  if (!init) {
    nbdkit_error ("%s: no plugin_init: use NBDKIT_REGISTER_PLUGIN", source);
    return -1;
  }
  struct nbdkit_plugin *p = init ();
  if (!p) {
    nbdkit_error ("%s: plugin_init returned NULL", source);
    return -1;
  }
  if (p->_api_version != NBDKIT_API_VERSION) {
    nbdkit_error ("%s: the plugin must be compiled with "
                  "#define NBDKIT_API_VERSION %d (it has %d)",
                  source, NBDKIT_API_VERSION, p->_api_version);
    return -1;
  }
  memset (&sub, 0, sizeof sub);
  memcpy (&sub, p, MIN ((size_t) p->_struct_size, sizeof sub));
  if (!sub.open || !sub.get_size || !sub.pread) {
    nbdkit_error ("%s: the plugin must have open, get_size and pread",
                  source);
    return -1;
  }
  sub_loaded = true;
  if (sub.load)
    sub.load ();
  return 0;
}

static int
cc_config_complete (void)
{
  if (!source) {
    nbdkit_error ("missing the source file: nbdkit cc FILE.c (or -)");
    return -1;
  }
  if (make_tmpdir () == -1)
    return -1;
  CLEANUP_FREE char *so = NULL;
  if (asprintf (&so, "%s/plugin.so", tmpdir) == -1) {
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  if (compile (so) == -1 || load_subplugin (so) == -1)
    return -1;

  for (size_t i = 0; i < keys.len; ++i) {
    const char *key = keys.ptr[i];
    if (strcmp (key, "script") == 0) {
      if (!sub.magic_config_key) {
        nbdkit_error ("parameter '%s' must be key=value (the plugin has "
                      "no magic config key)", values.ptr[i]);
        return -1;
      }
      key = sub.magic_config_key;
    }
    if (!sub.config) {
      nbdkit_error ("unknown parameter '%s' (the plugin takes none)", key);
      return -1;
    }
    if (sub.config (key, values.ptr[i]) == -1)
      return -1;
  }
  return sub.config_complete ? sub.config_complete () : 0;
}

#define cc_config_help \
  "[script=]<FILENAME>  (required) The C source, or - for stdin.\n" \
  "CC=<CC>              The compiler (default " DEFAULT_CC ").\n" \
  "CFLAGS=<CFLAGS>      Replace the compiler flags.\n" \
  "EXTRA_CFLAGS=<FLAGS> Add to the compiler flags.\n" \
  "[other parameters are passed to the compiled plugin]"

/* ---- forwarding, with the server's defaults for absent callbacks ---- */

/* A failed call: without errno_is_preserved the subplugin's errno
 * means nothing, and the server falls back to nbdkit_set_error's or EIO.
 */
#define FAILED(r) \
  do { if ((r) == -1 && !sub.errno_is_preserved) errno = 0; } while (0)

static int
cc_thread_model (void)
{
  if (!sub_loaded)
    return NBDKIT_THREAD_MODEL_PARALLEL; /* --dump-plugin: not compiled */
  int m = sub._thread_model;
  if (sub.thread_model) {
    int r = sub.thread_model ();
    if (r == -1)
      return -1;
    m = MIN (m, r);
  }
  return m;
}

static int
cc_get_ready (void)
{
  return sub.get_ready ? sub.get_ready () : 0;
}

static int
cc_after_fork (void)
{
  return sub.after_fork ? sub.after_fork () : 0;
}

static void
cc_cleanup (void)
{
  if (sub_loaded && sub.cleanup)
    sub.cleanup ();
}

static int
cc_preconnect (int readonly)
{
  return sub.preconnect ? sub.preconnect (readonly) : 0;
}

static int
cc_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  if (sub.list_exports)
    return sub.list_exports (readonly, is_tls, exports);
  return nbdkit_use_default_export (exports);
}

static const char *
cc_default_export (int readonly, int is_tls)
{
  return sub.default_export ? sub.default_export (readonly, is_tls) : "";
}

static void *
cc_open (int readonly)
{
  return sub.open (readonly);
}

static void
cc_close (void *handle)
{
  if (sub.close)
    sub.close (handle);
}

static const char *
cc_export_description (void *handle)
{
  return sub.export_description ? sub.export_description (handle) : NULL;
}

static int64_t
cc_get_size (void *handle)
{
  int64_t r = sub.get_size (handle);
  FAILED (r);
  return r;
}

static int
cc_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
               uint32_t *maximum)
{
  return sub.block_size ? sub.block_size (handle, minimum, preferred,
                                          maximum) : 0;
}

static int
cc_can_write (void *handle)
{
  return sub.can_write ? sub.can_write (handle) : sub.pwrite != NULL;
}

static int
cc_can_flush (void *handle)
{
  return sub.can_flush ? sub.can_flush (handle) : sub.flush != NULL;
}

static int
cc_is_rotational (void *handle)
{
  return sub.is_rotational ? sub.is_rotational (handle) : 0;
}

static int
cc_can_trim (void *handle)
{
  return sub.can_trim ? sub.can_trim (handle) : sub.trim != NULL;
}

static int
cc_can_zero (void *handle)
{
  return sub.can_zero ? sub.can_zero (handle) : sub.zero != NULL;
}

static int
cc_can_fast_zero (void *handle)
{
  if (sub.can_fast_zero)
    return sub.can_fast_zero (handle);
  if (!sub.zero)
    return 1;
  int r = cc_can_zero (handle);
  return r == -1 ? -1 : !r;
}

static int
cc_can_extents (void *handle)
{
  return sub.can_extents ? sub.can_extents (handle) : sub.extents != NULL;
}

static int
cc_can_fua (void *handle)
{
  if (sub.can_fua)
    return sub.can_fua (handle);
  int r = cc_can_flush (handle);
  return r == -1 ? -1 : r ? NBDKIT_FUA_EMULATE : NBDKIT_FUA_NONE;
}

static int
cc_can_multi_conn (void *handle)
{
  return sub.can_multi_conn ? sub.can_multi_conn (handle) : 0;
}

static int
cc_can_cache (void *handle)
{
  if (sub.can_cache)
    return sub.can_cache (handle);
  return sub.cache ? NBDKIT_CACHE_NATIVE : NBDKIT_CACHE_NONE;
}

static int
cc_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  int r = sub.pread (handle, buf, count, offset, flags);
  FAILED (r);
  return r;
}

static int
cc_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  if (!sub.pwrite) {
    nbdkit_error ("the plugin has no pwrite");
    errno = EROFS;
    return -1;
  }
  int r = sub.pwrite (handle, buf, count, offset, flags);
  FAILED (r);
  return r;
}

static int
cc_flush (void *handle, uint32_t flags)
{
  if (!sub.flush) {
    nbdkit_error ("the plugin has no flush");
    errno = EINVAL;
    return -1;
  }
  int r = sub.flush (handle, flags);
  FAILED (r);
  return r;
}

static int
cc_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (!sub.trim)
    return 0;                   /* trim is advisory */
  int r = sub.trim (handle, count, offset, flags);
  FAILED (r);
  return r;
}

static int
cc_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (!sub.zero) {
    errno = ENOTSUP;            /* the server writes zeroes instead */
    return -1;
  }
  int r = sub.zero (handle, count, offset, flags);
  FAILED (r);
  return r;
}

static int
cc_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents)
{
  if (!sub.extents)
    return nbdkit_add_extent (extents, offset, count, 0);
  int r = sub.extents (handle, count, offset, flags, extents);
  FAILED (r);
  return r;
}

static int
cc_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (!sub.cache)
    return 0;
  int r = sub.cache (handle, count, offset, flags);
  FAILED (r);
  return r;
}

/* The compiled plugin's thread_model decides, through cc_thread_model. */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "cc",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit C compiler plugin",
  .unload             = cc_unload,
  .dump_plugin        = cc_dump_plugin,
  .config             = cc_config,
  .config_complete    = cc_config_complete,
  .config_help        = cc_config_help,
  .magic_config_key   = "script",
  .thread_model       = cc_thread_model,
  .get_ready          = cc_get_ready,
  .after_fork         = cc_after_fork,
  .cleanup            = cc_cleanup,
  .preconnect         = cc_preconnect,
  .list_exports       = cc_list_exports,
  .default_export     = cc_default_export,
  .open               = cc_open,
  .close              = cc_close,
  .export_description = cc_export_description,
  .get_size           = cc_get_size,
  .block_size         = cc_block_size,
  .can_write          = cc_can_write,
  .can_flush          = cc_can_flush,
  .is_rotational      = cc_is_rotational,
  .can_trim           = cc_can_trim,
  .can_zero           = cc_can_zero,
  .can_fast_zero      = cc_can_fast_zero,
  .can_extents        = cc_can_extents,
  .can_fua            = cc_can_fua,
  .can_multi_conn     = cc_can_multi_conn,
  .can_cache          = cc_can_cache,
  .pread              = cc_pread,
  .pwrite             = cc_pwrite,
  .flush              = cc_flush,
  .trim               = cc_trim,
  .zero               = cc_zero,
  .extents            = cc_extents,
  .cache              = cc_cache,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
