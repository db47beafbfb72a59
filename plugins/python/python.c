/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The python plugin: a plugin written as a Python 3 script, run by an
 * embedded libpython ("nbdkit python disk.py key=value...").
 *
 * This file owns the interpreter's life (started at load with the
 * "nbdkit" module built in, finalized at unload), the script (script=,
 * the magic key, so it comes first: compiled, run as __main__, its
 * API_VERSION and required callbacks checked), and the callbacks that
 * run outside any connection: config, config_complete, thread_model,
 * get_ready, after_fork, cleanup, dump_plugin.  The per-connection and
 * data callbacks are in methods.c; each call into the script goes
 * through call.c.
 */
#include <config.h>

/* Python.h first: it sets feature macros the C library reads. */
#include "python.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "methods.h"
#include "array-size.h"

NBDKIT_DLL_PUBLIC int python_debug_tracebacks;

/* Set by config (script=), read-only afterwards. */
const char *py_script;
PyObject *py_main_dict;
int py_api_version = 1;

static bool py_started;         /* the interpreter is running */
static pid_t load_pid;          /* to tell a forked server in after_fork */

#define MAX_API_VERSION 2

static void
py_load (void)
{
  if (PyImport_AppendInittab ("nbdkit", py_module_init) == -1)
    return;
  /* 0: the server keeps its signal handlers; Python installs none. */
  Py_InitializeEx (0);
  if (!Py_IsInitialized ())
    return;
  py_started = true;
  load_pid = getpid ();
  gil_init ();
}

static void
py_unload (void)
{
  if (!py_started)
    return;
  gil_shutdown ();
  Py_FinalizeEx ();
  py_started = false;
  free ((char *) py_script);
  py_script = NULL;
}

/* The whole of FILE, NUL-terminated, or NULL (error reported). */
static char *
read_script (const char *path)
{
  FILE *fp = fopen (path, "r");
  if (!fp) {
    nbdkit_error ("%s: %m", path);
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *p = realloc (buf, cap);
      if (!p) {
        nbdkit_error ("realloc: %m");
        goto err;
      }
      buf = p;
    }
    size_t n = fread (buf + len, 1, cap - len - 1, fp);
    len += n;
    if (n == 0)
      break;
  }
  if (ferror (fp)) {
    nbdkit_error ("%s: read error", path);
    goto err;
  }
  fclose (fp);
  buf[len] = '\0';
  if (strlen (buf) != len) {
    nbdkit_error ("%s: the script contains a NUL byte", path);
    free (buf);
    return NULL;
  }
  return buf;

 err:
  fclose (fp);
  free (buf);
  return NULL;
}

/* sys.argv = [SCRIPT] and the script's directory first on sys.path,
 * as "python3 SCRIPT" would have them, so that the script can import
 * modules beside it.
 */
static int
set_sys (const char *path)
{
  PyObject *argv = Py_BuildValue ("[s]", path);
  if (!argv || PySys_SetObject ("argv", argv) == -1) {
    Py_XDECREF (argv);
    return -1;
  }
  Py_DECREF (argv);

  char *abs = nbdkit_realpath (path);
  if (!abs)
    return -1;
  char *slash = strrchr (abs, '/');
  if (slash == abs)
    slash[1] = '\0';
  else if (slash)
    *slash = '\0';
  PyObject *dir = PyUnicode_DecodeFSDefault (abs);
  free (abs);
  PyObject *sys_path = PySys_GetObject ("path"); /* borrowed */
  int r = -1;
  if (dir && sys_path && PyList_Check (sys_path))
    r = PyList_Insert (sys_path, 0, dir);
  Py_XDECREF (dir);
  return r;
}

static const char *required[] = { "open", "get_size", "pread" };

/* Compile and run the script as __main__, then check what it defined.
 * Called with the GIL held.
 */
static int
load_script (void)
{
  char *src = read_script (py_script);
  if (!src)
    return -1;
  PyObject *code = Py_CompileString (src, py_script, Py_file_input);
  free (src);
  if (!code) {
    report_exception ("the script does not parse");
    return -1;
  }

  PyObject *main_mod = PyImport_AddModule ("__main__"); /* borrowed */
  if (!main_mod) {
    Py_DECREF (code);
    report_exception ("cannot make the __main__ module");
    return -1;
  }
  py_main_dict = PyModule_GetDict (main_mod);
  PyObject *file = PyUnicode_DecodeFSDefault (py_script);
  if (!file || PyDict_SetItemString (py_main_dict, "__file__", file) == -1 ||
      set_sys (py_script) == -1) {
    Py_XDECREF (file);
    Py_DECREF (code);
    report_exception ("cannot set __file__, sys.argv and sys.path");
    return -1;
  }
  Py_DECREF (file);

  /* With -s the server's stdout is the client's socket: a print () in
   * the script must not write into the protocol.
   */
  if (!nbdkit_stdio_safe ()) {
    PyObject *err = PySys_GetObject ("stderr"); /* borrowed */
    if (err && PySys_SetObject ("stdout", err) == -1) {
      report_exception ("cannot send sys.stdout to stderr");
      Py_DECREF (code);
      return -1;
    }
  }

  PyObject *r = PyEval_EvalCode (code, py_main_dict, py_main_dict);
  Py_DECREF (code);
  if (!r) {
    report_exception ("the script failed while loading");
    return -1;
  }
  Py_DECREF (r);

  PyObject *v = PyDict_GetItemString (py_main_dict, "API_VERSION");
  if (v) {
    long l = PyLong_Check (v) ? PyLong_AsLong (v) : -1;
    if (l < 1 || l > MAX_API_VERSION) {
      PyErr_Clear ();
      PyObject *s = PyObject_Repr (v);
      nbdkit_error ("%s: API_VERSION = %s: this plugin supports API "
                    "versions 1 to %d", py_script,
                    s && PyUnicode_Check (s) ? PyUnicode_AsUTF8 (s) : "?",
                    MAX_API_VERSION);
      PyErr_Clear ();
      Py_XDECREF (s);
      return -1;
    }
    py_api_version = l;
  }
  nbdkit_debug ("%s: API_VERSION %d", py_script, py_api_version);

  for (size_t i = 0; i < ARRAY_SIZE (required); i++) {
    if (!call_lookup (required[i])) {
      nbdkit_error ("%s: the script does not define %s(), which a "
                    "python plugin must have (open, get_size, pread)",
                    py_script, required[i]);
      return -1;
    }
  }
  return 0;
}

/* Call the script's NAME () if it has one, ignoring its result. */
static int
void_callback (const char *name)
{
  struct call c;
  call_enter (&c, name);
  PyObject *fn = call_lookup (name);
  if (fn) {
    PyObject *r = call_script (&c, fn, "()");
    Py_XDECREF (r);
  }
  return call_leave (&c, 0);
}

static int
py_config (const char *key, const char *value)
{
  if (!py_started) {
    nbdkit_error ("the Python interpreter did not start");
    return -1;
  }

  if (strcmp (key, "script") == 0) {
    if (py_script) {
      nbdkit_error ("script= given twice (%s, then %s)", py_script, value);
      return -1;
    }
    py_script = strdup (value);
    if (!py_script) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    gil_take ();
    int r = load_script ();
    gil_drop ();
    return r;
  }

  if (!py_script) {
    nbdkit_error ("the script must come first: "
                  "nbdkit python SCRIPT.py [key=value...] (got %s=%s)",
                  key, value);
    return -1;
  }
  struct call c;
  call_enter (&c, "config");
  PyObject *fn = call_lookup ("config");
  if (!fn)
    call_fail (&c, EINVAL, "the script takes no parameters (it has no "
               "config callback), but got %s=%s", key, value);
  else {
    PyObject *r = call_script (&c, fn, "(ss)", key, value);
    Py_XDECREF (r);
  }
  return call_leave (&c, 0);
}

static int
py_config_complete (void)
{
  if (!py_script) {
    nbdkit_error ("no script: nbdkit python SCRIPT.py [key=value...]");
    return -1;
  }
  return void_callback ("config_complete");
}

static int
py_thread_model (void)
{
  int model = NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS;
  if (!py_script)               /* --dump-plugin without a script */
    return model;

  struct call c;
  call_enter (&c, "thread_model");
  PyObject *fn = call_lookup ("thread_model");
  if (fn) {
    PyObject *r = call_script (&c, fn, "()");
    if (r) {
      long l = PyLong_Check (r) ? PyLong_AsLong (r) : -1;
      PyErr_Clear ();
      if (l < NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS ||
          l > NBDKIT_THREAD_MODEL_PARALLEL)
        call_fail (&c, EINVAL, "returned a value that is not one of "
                   "nbdkit.THREAD_MODEL_*");
      else
        model = l;
      Py_DECREF (r);
    }
  }
  return call_leave (&c, model);
}

static int
py_get_ready (void)
{
  return void_callback ("get_ready");
}

static int
py_after_fork (void)
{
  /* The server forked into the background: Python's locks and thread
   * bookkeeping belong to the parent until reset.
   */
  if (py_started && getpid () != load_pid) {
    gil_after_fork_child ();
    load_pid = getpid ();
  }
  return void_callback ("after_fork");
}

static void
py_cleanup (void)
{
  if (py_script)
    void_callback ("cleanup");
}

static void
py_dump_plugin (void)
{
  /* "3.11.2 (main, ...)": the version of the library in use. */
  const char *v = py_started ? Py_GetVersion () : PY_VERSION;
  printf ("python_version=%.*s\n", (int) strcspn (v, " "), v);
  printf ("python_pep_384_abi_version=%d\n", PYTHON_ABI_VERSION);
  printf ("nbdkit_python_maximum_api_version=%d\n", MAX_API_VERSION);
  fflush (stdout);

  if (!py_script)
    return;
  struct call c;
  call_enter (&c, "dump_plugin");
  PyObject *fn = call_lookup ("dump_plugin");
  if (fn) {
    PyObject *r = call_script (&c, fn, "()");
    Py_XDECREF (r);
    /* The script's print () is buffered by Python. */
    PyObject *out = PySys_GetObject ("stdout");
    if (out) {
      r = PyObject_CallMethod (out, "flush", NULL);
      Py_XDECREF (r);
    }
    PyErr_Clear ();
  }
  call_leave (&c, 0);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "python",
  .longname = "nbdkit python plugin",
  .version = PACKAGE_VERSION,
  .description = "a plugin written in Python 3",
  .load = py_load,
  .unload = py_unload,
  .dump_plugin = py_dump_plugin,
  .config = py_config,
  .config_complete = py_config_complete,
  .config_help =
    "script=<FILENAME>     (required, first) The Python script to run.\n"
    "[other arguments may be used by the script]",
  .magic_config_key = "script",
  .thread_model = py_thread_model,
  .get_ready = py_get_ready,
  .after_fork = py_after_fork,
  .cleanup = py_cleanup,
  .preconnect = py_preconnect,
  .list_exports = py_list_exports,
  .default_export = py_default_export,
  .open = py_open,
  .close = py_close,
  .export_description = py_export_description,
  .get_size = py_get_size,
  .block_size = py_block_size,
  .is_rotational = py_is_rotational,
  .can_multi_conn = py_can_multi_conn,
  .can_write = py_can_write,
  .can_flush = py_can_flush,
  .can_trim = py_can_trim,
  .can_zero = py_can_zero,
  .can_fast_zero = py_can_fast_zero,
  .can_fua = py_can_fua,
  .can_cache = py_can_cache,
  .can_extents = py_can_extents,
  .pread = py_pread,
  .pwrite = py_pwrite,
  .flush = py_flush,
  .trim = py_trim,
  .zero = py_zero,
  .cache = py_cache,
  .extents = py_extents,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin)
