/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tcl plugin: serves a disk whose callbacks are procs of a Tcl
 * script, run in one embedded Tcl interpreter.
 *
 * This file owns the interpreter: it is created in load, the script
 * is evaluated when script= arrives (the first parameter, or the bare
 * path through magic_config_key), later parameters go to the script's
 * config proc, and each data callback (langhost's, common/langhost)
 * calls the proc of the same name as nbdkit 1.32's Tcl host does
 * (plugin_open, plugin_close and plugin_flush for open, close and
 * flush) through lh_host_call below.  Data crosses as Tcl byte
 * arrays; a proc that fails (error, return -code error) gives the
 * client EIO, or the errno named by a POSIX errorCode.  Around every
 * call into the script the plugin fires tcl_call_start and
 * tcl_call_done; the script fires the server's generic probe with the
 * nbdkit_probe command.
 *
 * Threads: the interpreter is created by the main thread, which
 * evaluates the script and runs config; requests then arrive in the
 * server's worker threads.  The plugin's thread model is
 * serialize_all_requests (as 1.32's), and every use of the
 * interpreter is under interp_lock as well, so no two threads are ever
 * inside Tcl at once.  A threaded Tcl ties an interpreter to its
 * thread only for the event loop (the notifier) and per-thread
 * caches, which move memory between threads safely: the plugin never
 * runs the event loop, so calling in from one thread at a time is
 * sound.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tcl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "langhost.h"
#include "now-ns.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (tcl_call_start);
NBDKIT_PROBE_SEMAPHORE (tcl_call_done);

/* -D tcl.verbose=1: log each call into the script. */
NBDKIT_DLL_PUBLIC int tcl_debug_verbose = 0;

/* Set in load and config (main thread), read-only afterwards. */
static Tcl_Interp *interp;
static char *load_error;        /* why the interpreter could not start */

/* Held around every use of interp after start-up.  Innermost lock:
 * nothing else is taken while holding it.
 */
static pthread_mutex_t interp_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- calling the script ---- */

/* Tcl keeps data for each thread that calls it, freed by
 * Tcl_FinalizeThread: a worker thread that called into Tcl runs it as
 * it exits (the key's destructor).
 */
static pthread_key_t tcl_thread_key;

static void
finalize_thread (void *unused)
{
  Tcl_FinalizeThread ();
}

static bool
proc_exists (const char *name)
{
  Tcl_CmdInfo info;
  return Tcl_GetCommandInfo (interp, name, &info) != 0;
}

/* The errno a failed proc asked for: "error MSG {} {POSIX ENOSPC ...}"
 * (the errorCode Tcl's own I/O commands set) names it; EIO otherwise.
 */
static int
error_errno (void)
{
  Tcl_Obj *opts = Tcl_GetReturnOptions (interp, TCL_ERROR);
  Tcl_Obj *key = Tcl_NewStringObj ("-errorcode", -1);
  Tcl_Obj *code = NULL, *word;
  int found = EIO;

  Tcl_IncrRefCount (opts);
  Tcl_IncrRefCount (key);
  if (Tcl_DictObjGet (NULL, opts, key, &code) != TCL_OK || code == NULL ||
      Tcl_ListObjIndex (NULL, code, 0, &word) != TCL_OK || word == NULL ||
      strcmp (Tcl_GetString (word), "POSIX") != 0 ||
      Tcl_ListObjIndex (NULL, code, 1, &word) != TCL_OK || word == NULL)
    goto out;
  const char *name = Tcl_GetString (word);
  int saved = errno;
  /* Tcl_ErrnoId names the current errno: search the small range. */
  for (int e = 1; e < 256; e++) {
    errno = e;
    if (strcmp (Tcl_ErrnoId (), name) == 0) {
      found = e;
      break;
    }
  }
  errno = saved;
 out:
  Tcl_DecrRefCount (key);
  Tcl_DecrRefCount (opts);
  return found;
}

/* One line for the log: a Tcl message may span lines. */
static void
report (const char *callback, const char *msg)
{
  char *line = strdup (msg);
  if (line)
    for (char *p = line; *p; p++)
      if (*p == '\n' || *p == '\r')
        *p = ' ';
  nbdkit_error ("%s: %s: %s", lh_script ? lh_script : "tcl", callback,
                line ? line : msg);
  free (line);
}

/* Call proc NAME with ARGS (owned by the caller, or fresh objects with
 * a zero reference count, freed here).  On success the result is in
 * *RESULT (its reference count raised: the caller drops it) if RESULT
 * is not NULL; on failure the error is reported, nbdkit_set_error is
 * set and -1 returned.  Fires tcl_call_start and tcl_call_done.  Call
 * with interp_lock held (or from the main thread at start-up).
 */
static int
call (const char *name, Tcl_Obj **args, int nargs, Tcl_Obj **result)
{
  Tcl_Obj *objv[8];
  int objc = 0, r, err = 0;
  uint64_t id = 0, cookie = 0;
  int64_t start = 0;

  if ((size_t) nargs >= ARRAY_SIZE (objv))
    abort ();
  if (pthread_getspecific (tcl_thread_key) == NULL)
    pthread_setspecific (tcl_thread_key, &tcl_thread_key);
  objv[objc++] = Tcl_NewStringObj (name, -1);
  for (int i = 0; i < nargs; i++)
    objv[objc++] = args[i];
  for (int i = 0; i < objc; i++)
    Tcl_IncrRefCount (objv[i]);

  if (tcl_debug_verbose)
    nbdkit_debug ("calling %s", name);
  /* The ids are read only while a tracer is attached. */
  if (NBDKIT_PROBE_ENABLED (tcl_call_start) ||
      NBDKIT_PROBE_ENABLED (tcl_call_done)) {
    id = nbdkit_connection_id ();
    cookie = nbdkit_request_cookie ();
  }
  NBDKIT_PROBE (tcl_call_start, id, cookie, name);
  if (NBDKIT_PROBE_ENABLED (tcl_call_done))
    start = now_ns ();

  r = Tcl_EvalObjv (interp, objc, objv, TCL_EVAL_GLOBAL);

  const char *msg = "";
  if (r != TCL_OK) {
    err = error_errno ();
    msg = Tcl_GetStringResult (interp);
  }
  if (NBDKIT_PROBE_ENABLED (tcl_call_done)) {
    int64_t ns = start ? now_ns () - start : 0;
    NBDKIT_PROBE (tcl_call_done, id, cookie, name, ns, err, msg);
  }
  if (r != TCL_OK) {
    report (name, msg);
    Tcl_ResetResult (interp);
    nbdkit_set_error (err);
  }
  else if (result) {
    *result = Tcl_GetObjResult (interp);
    Tcl_IncrRefCount (*result);
  }
  for (int i = 0; i < objc; i++)
    Tcl_DecrRefCount (objv[i]);
  return r == TCL_OK ? 0 : -1;
}

/* ---- the probe helper: nbdkit_probe NAME ?ARG1? ?ARG2? ?TEXT? ---- */

static int
probe_cmd (ClientData cd, Tcl_Interp *ip, int objc, Tcl_Obj *const objv[])
{
  Tcl_WideInt a[2] = { 0, 0 };

  if (objc < 2 || objc > 5) {
    Tcl_WrongNumArgs (ip, 1, objv, "name ?arg1? ?arg2? ?text?");
    return TCL_ERROR;
  }
  for (int i = 0; i < 2 && 2 + i < objc; i++)
    if (Tcl_GetWideIntFromObj (ip, objv[2 + i], &a[i]) != TCL_OK)
      return TCL_ERROR;
  nbdkit_probe (Tcl_GetString (objv[1]), a[0], a[1],
                objc == 5 ? Tcl_GetString (objv[4]) : "");
  return TCL_OK;
}

/* ---- nbdkit 1.34..1.40's calls, as commands like nbdkit_probe ----
 *
 *   nbdkit_disconnect ?force?        end this connection only
 *   nbdkit_parse_probability what s  a double
 *   nbdkit_parse_delay what s        the list {sec nsec}
 *
 * A bad string is a Tcl error (the server has logged why).
 */

static int
disconnect_cmd (ClientData cd, Tcl_Interp *ip, int objc,
                Tcl_Obj *const objv[])
{
  int force = 0;

  if (objc > 2) {
    Tcl_WrongNumArgs (ip, 1, objv, "?force?");
    return TCL_ERROR;
  }
  if (objc == 2 && Tcl_GetBooleanFromObj (ip, objv[1], &force) != TCL_OK)
    return TCL_ERROR;
  nbdkit_disconnect (force);
  return TCL_OK;
}

static int
parse_probability_cmd (ClientData cd, Tcl_Interp *ip, int objc,
                       Tcl_Obj *const objv[])
{
  double d;

  if (objc != 3) {
    Tcl_WrongNumArgs (ip, 1, objv, "what str");
    return TCL_ERROR;
  }
  const char *what = Tcl_GetString (objv[1]), *str = Tcl_GetString (objv[2]);
  if (nbdkit_parse_probability (what, str, &d) == -1) {
    Tcl_SetObjResult (ip, Tcl_ObjPrintf ("nbdkit_parse_probability: %s: "
                                         "cannot parse '%s'", what, str));
    return TCL_ERROR;
  }
  Tcl_SetObjResult (ip, Tcl_NewDoubleObj (d));
  return TCL_OK;
}

static int
parse_delay_cmd (ClientData cd, Tcl_Interp *ip, int objc,
                 Tcl_Obj *const objv[])
{
  unsigned sec, nsec;

  if (objc != 3) {
    Tcl_WrongNumArgs (ip, 1, objv, "what str");
    return TCL_ERROR;
  }
  const char *what = Tcl_GetString (objv[1]), *str = Tcl_GetString (objv[2]);
  if (nbdkit_parse_delay (what, str, &sec, &nsec) == -1) {
    Tcl_SetObjResult (ip, Tcl_ObjPrintf ("nbdkit_parse_delay: %s: "
                                         "cannot parse '%s'", what, str));
    return TCL_ERROR;
  }
  Tcl_Obj *r[2] = { Tcl_NewWideIntObj (sec), Tcl_NewWideIntObj (nsec) };
  Tcl_SetObjResult (ip, Tcl_NewListObj (2, r));
  return TCL_OK;
}

/* ---- start-up ---- */

static void
tcl_load (void)
{
  pthread_key_create (&tcl_thread_key, finalize_thread);
  Tcl_FindExecutable ("nbdkit");
  interp = Tcl_CreateInterp ();
  if (Tcl_Init (interp) != TCL_OK) {
    /* load cannot fail: config reports it. */
    load_error = strdup (Tcl_GetStringResult (interp));
    Tcl_DeleteInterp (interp);
    interp = NULL;
    return;
  }
  Tcl_CreateObjCommand (interp, "nbdkit_probe", probe_cmd, NULL, NULL);
  Tcl_CreateObjCommand (interp, "nbdkit_disconnect", disconnect_cmd,
                        NULL, NULL);
  Tcl_CreateObjCommand (interp, "nbdkit_parse_probability",
                        parse_probability_cmd, NULL, NULL);
  Tcl_CreateObjCommand (interp, "nbdkit_parse_delay", parse_delay_cmd,
                        NULL, NULL);
}

static void
tcl_unload (void)
{
  if (interp)
    Tcl_DeleteInterp (interp);
  interp = NULL;
  Tcl_Finalize ();
  pthread_key_delete (tcl_thread_key);
  free (load_error);
  free (lh_script);
}

static void
tcl_dump_plugin (void)
{
  printf ("tcl_version=%s\n", TCL_VERSION);
  printf ("tcl_patch_level=%s\n", TCL_PATCH_LEVEL);
  if (interp && lh_script && proc_exists ("dump_plugin")) {
    fflush (stdout);
    call ("dump_plugin", NULL, 0, NULL);
  }
}

static int
load_script (const char *path)
{
  if (!interp) {
    nbdkit_error ("cannot start the Tcl interpreter: %s",
                  load_error ? load_error : "unknown error");
    return -1;
  }
  lh_script = strdup (path);
  if (!lh_script) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  if (Tcl_EvalFile (interp, path) != TCL_OK) {
    const char *msg = Tcl_GetStringResult (interp);
    char *line = strdup (msg);
    if (line)
      for (char *p = line; *p; p++)
        if (*p == '\n')
          *p = ' ';
    nbdkit_error ("%s: could not load the Tcl script: line %d: %s",
                  path, Tcl_GetErrorLine (interp), line ? line : msg);
    free (line);
    return -1;
  }
  return 0;
}

static int
tcl_config (const char *key, const char *value)
{
  if (!lh_script) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be "
                    "script=/path/to/script.tcl, not '%s'", key);
      return -1;
    }
    return load_script (value);
  }
  if (!proc_exists ("config")) {
    nbdkit_error ("%s: unknown parameter '%s' (the script has no config "
                  "proc)", lh_script, key);
    return -1;
  }
  Tcl_Obj *args[2] = { Tcl_NewStringObj (key, -1),
                       Tcl_NewStringObj (value, -1) };
  return call ("config", args, 2, NULL);
}

static int
tcl_config_complete (void)
{
  static const char *const required[] = { "plugin_open", "get_size",
                                          "pread" };
  if (!lh_script) {
    nbdkit_error ("missing the script: nbdkit tcl /path/to/script.tcl");
    return -1;
  }
  for (size_t i = 0; i < ARRAY_SIZE (required); i++)
    if (!proc_exists (required[i])) {
      nbdkit_error ("%s: %s: the script does not define this required "
                    "proc", lh_script, required[i]);
      return -1;
    }
  if (proc_exists ("config_complete"))
    return call ("config_complete", NULL, 0, NULL);
  return 0;
}

#define tcl_config_help \
  "[script=]<FILENAME>  (required) The Tcl script to run.\n" \
  "[KEY=VALUE ...]      Passed on to the script's config proc."

/* ---- the language side of langhost's callbacks ---- */

/* The handle is the Tcl object plugin_open returned, with a reference
 * held until close.  Each call below takes interp_lock.
 */

bool
lh_host_defined (const char *name)
{
  pthread_mutex_lock (&interp_lock);
  bool r = proc_exists (name);
  pthread_mutex_unlock (&interp_lock);
  return r;
}

static Tcl_Obj *
arg_obj (const struct lh_arg *a)
{
  switch (a->type) {
  case LH_HANDLE: return (Tcl_Obj *) a->p;
  case LH_BOOL:   return Tcl_NewBooleanObj (a->u != 0);
  case LH_UINT:   return Tcl_NewWideIntObj ((Tcl_WideInt) a->u);
  case LH_BYTES:  return Tcl_NewByteArrayObj (a->p, (int) a->u);
  }
  abort ();
}

/* A result Tcl cannot read as the callback wants: its message. */
static int
unreadable (const char *name)
{
  report (name, Tcl_GetStringResult (interp));
  Tcl_ResetResult (interp);
  return -1;
}

/* Convert the result RES of a successful call; -1 if it is wrong
 * (reported, the caller sets EIO).
 */
static int
convert (struct lh_call *c, Tcl_Obj *res)
{
  Tcl_WideInt size;
  int len;

  switch (c->want) {
  case LH_NOTHING:
    return 0;
  case LH_NEW_HANDLE:
    Tcl_IncrRefCount (res);
    c->handle = res;
    return 0;
  case LH_SIZE:
    if (Tcl_GetWideIntFromObj (interp, res, &size) != TCL_OK)
      return unreadable (c->name);
    if (size < 0) {
      nbdkit_error ("%s: %s: returned a negative size (%" PRId64 ")",
                    lh_script, c->name, (int64_t) size);
      return -1;
    }
    c->size = size;
    return 0;
  case LH_TRUTH:
    if (Tcl_GetBooleanFromObj (interp, res, &c->truth) != TCL_OK)
      return unreadable (c->name);
    return 0;
  case LH_DATA: {
    const unsigned char *data = Tcl_GetByteArrayFromObj (res, &len);
    return lh_take_data (c, data, len < 0 ? 0 : (size_t) len);
  }
  }
  abort ();
}

enum lh_outcome
lh_host_call (struct lh_call *c)
{
  Tcl_Obj *args[LH_MAX_ARGS], *res = NULL;
  enum lh_outcome r = LH_DONE;

  pthread_mutex_lock (&interp_lock);
  if (c->optional && !proc_exists (c->name))
    r = LH_ABSENT;
  else {
    for (size_t i = 0; i < c->nargs; i++)
      args[i] = arg_obj (&c->args[i]);
    if (call (c->name, args, (int) c->nargs,
              c->want == LH_NOTHING ? NULL : &res) == -1)
      r = LH_FAILED;
    else if (res) {
      if (convert (c, res) == -1) {
        nbdkit_set_error (EIO);
        r = LH_FAILED;
      }
      Tcl_DecrRefCount (res);
    }
  }
  pthread_mutex_unlock (&interp_lock);
  return r;
}

void
lh_host_free_handle (void *handle)
{
  pthread_mutex_lock (&interp_lock);
  Tcl_DecrRefCount ((Tcl_Obj *) handle);
  pthread_mutex_unlock (&interp_lock);
}

/* As nbdkit 1.32's Tcl host: version 1 arguments, the callbacks it
 * has are called without looking first, and plugin_* names where a
 * Tcl command of the same name exists.
 */
const struct langhost langhost = {
  .word = "proc",
  .open = "plugin_open",
  .close = "plugin_close",
  .flush = "plugin_flush",
  .pass_flags = false,
  .look_first = false,
  .no_zero_note = "no zero proc: the server writes zeroes",
};

/* One interpreter, as 1.32's host. */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

static struct nbdkit_plugin plugin = {
  .name               = "tcl",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit Tcl plugin host",
  .load               = tcl_load,
  .unload             = tcl_unload,
  .dump_plugin        = tcl_dump_plugin,
  .config             = tcl_config,
  .config_complete    = tcl_config_complete,
  .config_help        = tcl_config_help,
  .magic_config_key   = "script",
  .can_zero           = lh_yes,
  .can_fast_zero      = lh_yes,
  .can_fua            = lh_fua_emulate,
  LANGHOST_CALLBACKS
};

NBDKIT_REGISTER_PLUGIN (plugin)
