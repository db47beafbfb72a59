/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The python plugin host: what its files share.
 *
 *   python.c   the interpreter's life, the script, configuration and
 *              the callbacks that run outside a connection
 *   methods.c  the per-connection and data callbacks
 *   call.c     one call into the script: the GIL, the probes, and
 *              turning exceptions into a log line and an errno
 *   module.c   the "nbdkit" module a script imports
 *
 * Every function here except gil_* expects the GIL held by the caller
 * (call_enter takes it, call_leave drops it).
 */
#ifndef NBDKIT_PYTHON_H
#define NBDKIT_PYTHON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

/* The script, set once by config, read-only afterwards. */
extern const char *py_script;      /* as given on the command line */
extern PyObject *py_main_dict;     /* __main__'s namespace (borrowed) */
extern int py_api_version;         /* the script's API_VERSION: 1 or 2 */

/* -D python.tracebacks=1: log the traceback of every exception, not
 * only the first at each site.
 */
extern int python_debug_tracebacks;

/* The GIL, per server thread (call.c).  Each thread keeps its Python
 * thread state for its whole life, so a callback costs a lock
 * handover, not a thread state's creation.
 */
extern void gil_init (void);        /* after Py_Initialize, GIL held */
extern void gil_take (void);
extern void gil_drop (void);
extern void gil_after_fork_child (void); /* in a forked server */
extern void gil_shutdown (void);    /* before Py_FinalizeEx; GIL held
                                       on return */

/* One call into the script (call.c). */
struct call {
  const char *name;         /* the callback's name, a static string */
  uint64_t start_ns;        /* 0 unless python_call_done is traced */
  int err;                  /* the errno the server gets; 0: success */
  char *text;               /* why it failed (exception or reason) */
  int expected_err;         /* an errno that is an answer, not an error
                               (zero's EOPNOTSUPP): logged as debug */
};

/* Take the GIL and fire python_call_start.  */
extern void call_enter (struct call *c, const char *name);
/* The script's callable NAME, or NULL if it defines none (borrowed). */
extern PyObject *call_lookup (const char *name);
/* Call FN with the arguments built from FORMAT (Py_BuildValue).  The
 * result (a new reference), or NULL when it raised: the exception has
 * then been logged, cleared and turned into c->err.
 */
extern PyObject *call_script (struct call *c, PyObject *fn,
                              const char *format, ...);
/* The same with a ready tuple of arguments (a reference is stolen). */
extern PyObject *call_script_args (struct call *c, PyObject *fn,
                                   PyObject *args);
/* The script answered but the answer is unusable: log one line
 * naming the script and the callback, fail with ERR (or the errno
 * the script set with nbdkit.set_error).
 */
extern void call_fail (struct call *c, int err, const char *fs, ...)
  __attribute__ ((format (printf, 3, 4)));
/* The current exception (from our own C-API use) as a failure. */
extern void call_fail_exception (struct call *c, const char *what);
/* Fire python_call_done, pass the errno to the server, drop the GIL.
 * Returns R, or -1 if the call failed.
 */
extern int call_leave (struct call *c, int r);

/* Report the current exception outside a callback (loading the
 * script): one line, then the traceback.
 */
extern void report_exception (const char *what);

/* The errno the script stored with nbdkit.set_error during the current
 * callback (module.c), 0 if none; call_enter resets it.
 */
extern __thread int py_set_errno;

/* The nbdkit module (module.c), registered before Py_Initialize. */
extern PyObject *py_module_init (void);

#endif /* NBDKIT_PYTHON_H */
