/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tcl plugin: serves a disk whose callbacks are procs of a Tcl
 * script, run in one embedded Tcl interpreter.
 *
 * This file owns the interpreter: it is created in load, the script
 * is evaluated when script= arrives (the first parameter, or the bare
 * path through magic_config_key), later parameters go to the script's
 * config proc, and each plugin callback calls the proc of the same
 * name as nbdkit 1.32's Tcl host does (plugin_open, plugin_close and
 * plugin_flush for open, close and flush).  Data crosses as Tcl byte
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

#include "now-ns.h"

NBDKIT_PROBE_SEMAPHORE (tcl_call_start);
NBDKIT_PROBE_SEMAPHORE (tcl_call_done);

/* -D tcl.verbose=1: log each call into the script. */
NBDKIT_DLL_PUBLIC int tcl_debug_verbose = 0;

/* Set in load and config (main thread), read-only afterwards. */
static Tcl_Interp *interp;
static char *load_error;        /* why the interpreter could not start */
static char *script;            /* the script's path, once evaluated */

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
  nbdkit_error ("%s: %s: %s", script ? script : "tcl", callback,
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

  if ((size_t) nargs >= sizeof objv / sizeof objv[0])
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

/* Call NAME and read its result as a boolean; DEFLT if NAME does not
 * exist.
 */
static int
call_bool (const char *name, Tcl_Obj *handle, int deflt)
{
  Tcl_Obj *res;
  int b;

  if (!proc_exists (name))
    return deflt;
  if (call (name, &handle, 1, &res) == -1)
    return -1;
  if (Tcl_GetBooleanFromObj (interp, res, &b) != TCL_OK) {
    report (name, Tcl_GetStringResult (interp));
    Tcl_ResetResult (interp);
    nbdkit_set_error (EIO);
    b = -1;
  }
  Tcl_DecrRefCount (res);
  return b;
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
  free (script);
}

static void
tcl_dump_plugin (void)
{
  printf ("tcl_version=%s\n", TCL_VERSION);
  printf ("tcl_patch_level=%s\n", TCL_PATCH_LEVEL);
  if (interp && script && proc_exists ("dump_plugin")) {
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
  script = strdup (path);
  if (!script) {
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
  if (!script) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be "
                    "script=/path/to/script.tcl, not '%s'", key);
      return -1;
    }
    return load_script (value);
  }
  if (!proc_exists ("config")) {
    nbdkit_error ("%s: unknown parameter '%s' (the script has no config "
                  "proc)", script, key);
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
  if (!script) {
    nbdkit_error ("missing the script: nbdkit tcl /path/to/script.tcl");
    return -1;
  }
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!proc_exists (required[i])) {
      nbdkit_error ("%s: %s: the script does not define this required "
                    "proc", script, required[i]);
      return -1;
    }
  if (proc_exists ("config_complete"))
    return call ("config_complete", NULL, 0, NULL);
  return 0;
}

#define tcl_config_help \
  "[script=]<FILENAME>  (required) The Tcl script to run.\n" \
  "[KEY=VALUE ...]      Passed on to the script's config proc."

/* ---- connections ---- */

/* The handle is the Tcl object plugin_open returned, with a reference
 * held until close.
 */
static void *
tcl_open (int readonly)
{
  Tcl_Obj *arg = Tcl_NewBooleanObj (readonly);
  Tcl_Obj *h;

  pthread_mutex_lock (&interp_lock);
  int r = call ("plugin_open", &arg, 1, &h);
  pthread_mutex_unlock (&interp_lock);
  return r == -1 ? NULL : h;
}

static void
tcl_close (void *handle)
{
  Tcl_Obj *h = handle;

  pthread_mutex_lock (&interp_lock);
  if (proc_exists ("plugin_close"))
    call ("plugin_close", &h, 1, NULL);
  Tcl_DecrRefCount (h);
  pthread_mutex_unlock (&interp_lock);
}

static int64_t
tcl_get_size (void *handle)
{
  Tcl_Obj *h = handle, *res;
  Tcl_WideInt size = -1;

  pthread_mutex_lock (&interp_lock);
  if (call ("get_size", &h, 1, &res) == 0) {
    if (Tcl_GetWideIntFromObj (interp, res, &size) != TCL_OK) {
      report ("get_size", Tcl_GetStringResult (interp));
      Tcl_ResetResult (interp);
      size = -1;
    }
    else if (size < 0) {
      nbdkit_error ("%s: get_size: returned a negative size (%" PRId64 ")",
                    script, (int64_t) size);
      size = -1;
    }
    Tcl_DecrRefCount (res);
    if (size == -1)
      nbdkit_set_error (EIO);
  }
  pthread_mutex_unlock (&interp_lock);
  return size;
}

/* A can_* proc if the script has one, or whether the callback it
 * guards exists, as 1.32 decides.
 */
static int
can_or_has (void *handle, const char *can, const char *callback)
{
  pthread_mutex_lock (&interp_lock);
  int r = call_bool (can, handle, callback ? proc_exists (callback) : 0);
  pthread_mutex_unlock (&interp_lock);
  return r;
}

static int
tcl_can_write (void *handle)
{
  return can_or_has (handle, "can_write", "pwrite");
}

static int
tcl_can_flush (void *handle)
{
  return can_or_has (handle, "can_flush", "plugin_flush");
}

static int
tcl_can_trim (void *handle)
{
  return can_or_has (handle, "can_trim", "trim");
}

static int
tcl_is_rotational (void *handle)
{
  return can_or_has (handle, "is_rotational", NULL);
}

/* 1.32's host is an API version 1 plugin with a zero and a flush
 * callback of its own: the server always asks it to zero (it answers
 * "not supported" when the script has no zero proc, and the server
 * writes zeroes), advertises fast zero (refused at once) and emulates
 * FUA with a flush.  The same answers here give the client the same
 * flags.
 */
static int
tcl_can_zero (void *handle)
{
  return 1;
}

static int
tcl_can_fast_zero (void *handle)
{
  return 1;
}

static int
tcl_can_fua (void *handle)
{
  return NBDKIT_FUA_EMULATE;
}

/* ---- data ---- */

static int
tcl_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  Tcl_Obj *args[3] = { handle, Tcl_NewWideIntObj (count),
                       Tcl_NewWideIntObj ((Tcl_WideInt) offset) };
  Tcl_Obj *res;
  int r, len;

  pthread_mutex_lock (&interp_lock);
  r = call ("pread", args, 3, &res);
  if (r == 0) {
    const unsigned char *data = Tcl_GetByteArrayFromObj (res, &len);
    if (len < 0 || (uint32_t) len < count) {
      nbdkit_error ("%s: pread: returned %d bytes, expected %" PRIu32,
                    script, len, count);
      nbdkit_set_error (EIO);
      r = -1;
    }
    else
      memcpy (buf, data, count);
    Tcl_DecrRefCount (res);
  }
  pthread_mutex_unlock (&interp_lock);
  return r;
}

static int
tcl_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  Tcl_Obj *args[3] = { handle, Tcl_NewByteArrayObj (buf, count),
                       Tcl_NewWideIntObj ((Tcl_WideInt) offset) };

  pthread_mutex_lock (&interp_lock);
  int r = call ("pwrite", args, 3, NULL);
  pthread_mutex_unlock (&interp_lock);
  return r;
}

static int
tcl_flush (void *handle, uint32_t flags)
{
  Tcl_Obj *h = handle;
  int r = 0;

  pthread_mutex_lock (&interp_lock);
  if (proc_exists ("plugin_flush"))
    r = call ("plugin_flush", &h, 1, NULL);
  pthread_mutex_unlock (&interp_lock);
  return r;
}

static int
tcl_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  Tcl_Obj *args[3] = { handle, Tcl_NewWideIntObj (count),
                       Tcl_NewWideIntObj ((Tcl_WideInt) offset) };

  pthread_mutex_lock (&interp_lock);
  int r = call ("trim", args, 3, NULL);
  pthread_mutex_unlock (&interp_lock);
  return r;
}

static int
tcl_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  int r;

  /* Fast zero is refused at once, as 1.32's (version 1) host is. */
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    nbdkit_set_error (ENOTSUP);
    return -1;
  }
  pthread_mutex_lock (&interp_lock);
  if (!proc_exists ("zero")) {
    pthread_mutex_unlock (&interp_lock);
    nbdkit_debug ("no zero proc: the server writes zeroes");
    nbdkit_set_error (EOPNOTSUPP);
    return -1;
  }
  Tcl_Obj *args[4] = { handle, Tcl_NewWideIntObj (count),
                       Tcl_NewWideIntObj ((Tcl_WideInt) offset),
                       Tcl_NewBooleanObj (flags & NBDKIT_FLAG_MAY_TRIM) };
  r = call ("zero", args, 4, NULL);
  pthread_mutex_unlock (&interp_lock);
  return r;
}

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
  .open               = tcl_open,
  .close              = tcl_close,
  .get_size           = tcl_get_size,
  .can_write          = tcl_can_write,
  .can_flush          = tcl_can_flush,
  .can_trim           = tcl_can_trim,
  .is_rotational      = tcl_is_rotational,
  .can_zero           = tcl_can_zero,
  .can_fast_zero      = tcl_can_fast_zero,
  .can_fua            = tcl_can_fua,
  .pread              = tcl_pread,
  .pwrite             = tcl_pwrite,
  .flush              = tcl_flush,
  .trim               = tcl_trim,
  .zero               = tcl_zero,
};

NBDKIT_REGISTER_PLUGIN (plugin)
