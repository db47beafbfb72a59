/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* One call into the script, and the GIL it needs.
 *
 * Every callback in python.c and methods.c runs as
 *   call_enter -> call_lookup -> call_script -> (check the answer)
 *   -> call_leave
 * call_enter takes the GIL and fires python_call_start; call_leave
 * fires python_call_done with the time spent, the errno and the reason
 * of a failure, hands the errno to the server and drops the GIL.
 *
 * The GIL is held only inside that bracket: a server thread waiting on
 * its socket or on another layer never holds it, and the script's own
 * blocking calls (file I/O, sockets, time.sleep) release it, so
 * requests overlap as far as the script's thread model allows.
 *
 * An exception becomes one log line "SCRIPT: CALLBACK: TYPE: MESSAGE"
 * every time, and its traceback once for each place in the script it
 * comes from (or every time with -D python.tracebacks=1), so a failing
 * disk does not fill the log with the same traceback per request.
 */
#include <config.h>

/* Python.h first: it sets feature macros the C library reads. */
#include "python.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES
#include <nbdkit-probe.h>

#include "now-ns.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (python_call_start);
NBDKIT_PROBE_SEMAPHORE (python_call_done);

static void call_forget_keys (void);

/* ---- the GIL ---- */

/* The interpreter's first thread state, made by Py_Initialize on the
 * thread that loaded the plugin; used again to finalize.
 */
static PyThreadState *main_ts;
/* This thread's Python thread state once it has called into Python. */
static __thread PyThreadState *thread_ts;
/* Its destructor releases a server thread's state when the thread
 * ends.  LIFE_LOCK orders those destructors against gil_shutdown:
 * after it, ALIVE is false and the destructors leave the (finalized)
 * interpreter alone.
 */
static pthread_key_t ts_key;
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static bool alive;

static void
thread_ts_release (void *p)
{
  PyThreadState *ts = p;

  pthread_mutex_lock (&life_lock);
  if (alive) {
    /* Not PyGILState_Release: the C library has already cleared
     * Python's own thread-specific pointer to this state (glibc clears
     * every key's value before running any destructor).
     */
    PyEval_RestoreThread (ts);
    PyThreadState_Clear (ts);
    PyThreadState_DeleteCurrent ();   /* and drops the GIL */
  }
  pthread_mutex_unlock (&life_lock);
}

void
gil_init (void)
{
  main_ts = PyThreadState_Get ();
  thread_ts = main_ts;
  if (pthread_key_create (&ts_key, thread_ts_release) != 0)
    abort ();                   /* only when out of keys at load */
  alive = true;
  PyEval_SaveThread ();
}

void
gil_take (void)
{
  if (thread_ts) {
    PyEval_RestoreThread (thread_ts);
    return;
  }
  /* The first call on this thread: PyGILState_Ensure makes the thread
   * state and registers it, so that C extensions which use the
   * PyGILState API on this thread find it.  It is kept (the count
   * stays raised) until the thread ends.
   */
  PyGILState_Ensure ();
  thread_ts = PyThreadState_Get ();
  pthread_setspecific (ts_key, thread_ts);
}

void
gil_drop (void)
{
  PyEval_SaveThread ();
}

void
gil_after_fork_child (void)
{
  PyEval_RestoreThread (main_ts);
  PyOS_AfterFork_Child ();
  PyEval_SaveThread ();
}

void
gil_shutdown (void)
{
  pthread_mutex_lock (&life_lock);
  alive = false;
  pthread_key_delete (ts_key);
  pthread_mutex_unlock (&life_lock);
  PyEval_RestoreThread (main_ts);
  call_forget_keys ();
}

/* ---- exceptions ---- */

/* "TYPE: MESSAGE" (or "TYPE") on one line, malloc'd. */
static char *
exception_summary (PyObject *type, PyObject *value)
{
  const char *tname = "exception";
  if (type && PyType_Check (type))
    tname = ((PyTypeObject *) type)->tp_name;

  const char *msg = NULL;
  PyObject *str = value ? PyObject_Str (value) : NULL;
  if (str)
    msg = PyUnicode_AsUTF8 (str);
  if (!msg)
    PyErr_Clear ();

  char *s;
  if (msg && *msg) {
    if (asprintf (&s, "%s: %s", tname, msg) == -1)
      s = NULL;
  }
  else
    s = strdup (tname);
  Py_XDECREF (str);
  if (s) {
    for (char *p = s; *p; p++)
      if (*p == '\n' || *p == '\r' || *p == '\t')
        *p = ' ';
  }
  return s;
}

/* The errno of an OSError (or a subclass), 0 for anything else. */
static int
oserror_errno (PyObject *value)
{
  if (!value || !PyErr_GivenExceptionMatches (value, PyExc_OSError))
    return 0;
  PyObject *e = PyObject_GetAttrString (value, "errno");
  int err = 0;
  if (e && PyLong_Check (e)) {
    long l = PyLong_AsLong (e);
    if (l > 0 && l < 4096)
      err = l;
  }
  Py_XDECREF (e);
  PyErr_Clear ();
  return err;
}

/* traceback.FUNC (ARGS...) joined into one string, NULL on failure. */
static PyObject *
format_traceback (const char *func, PyObject *type, PyObject *value,
                  PyObject *tb)
{
  PyObject *mod = PyImport_ImportModule ("traceback");
  if (!mod)
    return NULL;
  PyObject *lines;
  if (strcmp (func, "format_tb") == 0)
    lines = PyObject_CallMethod (mod, func, "O", tb);
  else
    lines = PyObject_CallMethod (mod, func, "OOO", type,
                                 value ? value : Py_None,
                                 tb ? tb : Py_None);
  Py_DECREF (mod);
  if (!lines)
    return NULL;
  PyObject *empty = PyUnicode_FromString ("");
  PyObject *joined = empty ? PyUnicode_Join (empty, lines) : NULL;
  Py_XDECREF (empty);
  Py_DECREF (lines);
  return joined;
}

/* The places an exception's traceback has been logged from: hashes of
 * (callback, type, stack), kept under the GIL.  Bounded: past
 * MAX_SITES new places are no longer logged.
 */
#define MAX_SITES 1024
static uint64_t sites[MAX_SITES];
static size_t nr_sites;

static uint64_t
fnv1a (uint64_t h, const char *s)
{
  for (; *s; s++) {
    h ^= (unsigned char) *s;
    h *= UINT64_C (0x100000001b3);
  }
  return h ^ 0xff;              /* separates "ab","c" from "a","bc" */
}

/* Whether this exception's traceback should be logged now. */
static bool
first_at_site (const char *callback, PyObject *type, PyObject *tb)
{
  if (python_debug_tracebacks)
    return true;

  uint64_t h = UINT64_C (0xcbf29ce484222325);
  h = fnv1a (h, callback);
  if (type && PyType_Check (type))
    h = fnv1a (h, ((PyTypeObject *) type)->tp_name);
  if (tb) {
    PyObject *stack = format_traceback ("format_tb", NULL, NULL, tb);
    const char *s = stack ? PyUnicode_AsUTF8 (stack) : NULL;
    if (s)
      h = fnv1a (h, s);
    PyErr_Clear ();
    Py_XDECREF (stack);
  }

  for (size_t i = 0; i < nr_sites; i++)
    if (sites[i] == h)
      return false;
  if (nr_sites == MAX_SITES)
    return false;
  sites[nr_sites++] = h;
  return true;
}

/* The traceback, one log line per line of it (a log line is short,
 * and syslog wants one line per message).
 */
static void
log_traceback (const char *what, PyObject *type, PyObject *value,
               PyObject *tb)
{
  PyObject *text = format_traceback ("format_exception", type, value, tb);
  const char *s = text ? PyUnicode_AsUTF8 (text) : NULL;
  while (s && *s) {
    size_t n = strcspn (s, "\n");
    nbdkit_error ("%s: %s: traceback: %.*s", py_script, what, (int) n, s);
    s += n;
    if (*s == '\n')
      s++;
  }
  PyErr_Clear ();
  Py_XDECREF (text);
}

/* Take the current exception: its summary (malloc'd), its errno (0 if
 * it is not an OSError) and, the first time at its site, the
 * traceback in the log.
 */
static char *
take_exception (const char *what, bool want_traceback, int *err)
{
  PyObject *type, *value, *tb;
  PyErr_Fetch (&type, &value, &tb);
  PyErr_NormalizeException (&type, &value, &tb);
  if (value && tb)
    PyException_SetTraceback (value, tb);

  char *summary = exception_summary (type, value);
  *err = oserror_errno (value);
  if (want_traceback && first_at_site (what, type, tb))
    log_traceback (what, type, value, tb);

  Py_XDECREF (type);
  Py_XDECREF (value);
  Py_XDECREF (tb);
  PyErr_Clear ();
  return summary;
}

void
report_exception (const char *what)
{
  int err;
  char *summary = take_exception (what, true, &err);
  nbdkit_error ("%s: %s: %s", py_script, what,
                summary ? summary : "exception");
  free (summary);
}

/* ---- calls ---- */

void
call_enter (struct call *c, const char *name)
{
  gil_take ();
  py_set_errno = 0;
  c->name = name;
  c->err = 0;
  c->text = NULL;
  c->expected_err = 0;
  c->start_ns = NBDKIT_PROBE_ENABLED (python_call_done) ? now_ns () : 0;
  if (NBDKIT_PROBE_ENABLED (python_call_start))
    NBDKIT_PROBE (python_call_start, nbdkit_connection_id (),
                  nbdkit_request_cookie (), name);
}

/* The callbacks' names as interned str, made once: looking a function
 * up is then a dict lookup with a cached hash, not a new str per call.
 * NAME is one of a few string constants, so the table is searched by
 * pointer first.  Under the GIL.
 */
static struct { const char *name; PyObject *key; } keys[64];
static size_t nr_keys;

static PyObject *
key_of (const char *name)
{
  for (size_t i = 0; i < nr_keys; i++)
    if (keys[i].name == name)
      return keys[i].key;
  PyObject *key = PyUnicode_InternFromString (name);
  if (key && nr_keys < ARRAY_SIZE (keys)) {
    keys[nr_keys].name = name;
    keys[nr_keys].key = key;  /* kept for the interpreter's life */
    nr_keys++;
  }
  else if (key) {
    Py_DECREF (key);
    return NULL;
  }
  return key;
}

static void
call_forget_keys (void)
{
  for (size_t i = 0; i < nr_keys; i++)
    Py_DECREF (keys[i].key);
  nr_keys = 0;
}

PyObject *
call_lookup (const char *name)
{
  PyObject *key = key_of (name);
  PyObject *fn = key ? PyDict_GetItemWithError (py_main_dict, key)
    : PyDict_GetItemString (py_main_dict, name);
  if (!fn) {
    PyErr_Clear ();
    return NULL;
  }
  return PyCallable_Check (fn) ? fn : NULL;
}

PyObject *
call_script_args (struct call *c, PyObject *fn, PyObject *args)
{
  if (!args) {
    call_fail_exception (c, "building the arguments");
    return NULL;
  }
  PyObject *r = PyObject_Call (fn, args, NULL);
  Py_DECREF (args);
  if (r)
    return r;

  /* The script raised. */
  int oserr;
  bool quiet = false;
  int err = py_set_errno;
  if (c->expected_err) {
    /* Peek without taking: an errno the caller expects (zero's
     * EOPNOTSUPP, asking for the pwrite fallback) is an answer, not
     * an error.
     */
    PyObject *type, *value, *tb;
    PyErr_Fetch (&type, &value, &tb);
    PyErr_NormalizeException (&type, &value, &tb);
    if (!err)
      err = oserror_errno (value);
    quiet = err == c->expected_err;
    PyErr_Restore (type, value, tb);
  }
  char *summary = take_exception (c->name, !quiet, &oserr);
  if (!err)
    err = oserr;
  if (quiet)
    nbdkit_debug ("%s: %s: %s", py_script, c->name,
                  summary ? summary : "exception");
  else
    nbdkit_error ("%s: %s: %s", py_script, c->name,
                  summary ? summary : "exception");
  c->err = err ? err : EIO;
  free (c->text);
  c->text = summary;
  return NULL;
}

PyObject *
call_script (struct call *c, PyObject *fn, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  PyObject *tuple = Py_VaBuildValue (format, args);
  va_end (args);
  return call_script_args (c, fn, tuple);
}

void
call_fail (struct call *c, int err, const char *fs, ...)
{
  char *msg;
  va_list args;
  va_start (args, fs);
  if (vasprintf (&msg, fs, args) == -1)
    msg = NULL;
  va_end (args);

  nbdkit_error ("%s: %s: %s", py_script, c->name, msg ? msg : fs);
  c->err = py_set_errno ? py_set_errno : err;
  free (c->text);
  c->text = msg;
}

void
call_fail_exception (struct call *c, const char *what)
{
  int err;
  char *summary = take_exception (c->name, false, &err);
  call_fail (c, EIO, "%s: %s", what, summary ? summary : "exception");
  free (summary);
}

int
call_leave (struct call *c, int r)
{
  if (c->err) {
    nbdkit_set_error (c->err);
    r = -1;
  }
  if (NBDKIT_PROBE_ENABLED (python_call_done)) {
    uint64_t ns = c->start_ns ? now_ns () - c->start_ns : 0;
    NBDKIT_PROBE (python_call_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), c->name, ns, c->err,
                  c->text ? c->text : "");
  }
  free (c->text);
  c->text = NULL;
  gil_drop ();
  return r;
}
