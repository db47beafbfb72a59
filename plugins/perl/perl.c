/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The perl plugin: one embedded Perl interpreter runs a script whose
 * subs (open, get_size, pread, ...) are the plugin's callbacks.
 *
 * This file owns the interpreter: it is created at load, the script
 * named by script= (the magic key, so "nbdkit perl disk.pl" works) is
 * parsed and run at config, and it is destroyed at unload, which runs
 * the script's END blocks.  The data callbacks are langhost's
 * (common/langhost): for each call it describes, lh_host_call turns
 * the arguments into Perl values, calls the sub of that name through
 * call_sub, and checks what came back.  The script sees the Nbdkit::
 * package: debug, set_error, probe and the flag constants.
 *
 * There is one interpreter, so the thread model is
 * serialize_all_requests, as in nbdkit 1.32: the server never runs two
 * callbacks at once, and each one first makes the interpreter current
 * in the calling thread (Perl keeps it in thread-local storage).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#define PERL_NO_GET_CONTEXT
#include <EXTERN.h>
#include <perl.h>
#include <XSUB.h>

#include "langhost.h"
#include "now-ns.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (perl_call_start);
NBDKIT_PROBE_SEMAPHORE (perl_call_done);

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

/* The interpreter, created at load and freed at unload.  Perl's own
 * macros (aTHX) name it my_perl.
 */
static PerlInterpreter *my_perl;

/* The errno the script passed to Nbdkit::set_error during the
 * current call (0 if none).  Calls are serialized, so one will do.
 */
static int script_errno;

/* What Perl gives XS code for its static modules: DynaLoader, so that
 * scripts can "use POSIX" and other modules written in C.
 */
EXTERN_C void boot_DynaLoader (pTHX_ CV *cv);

/* Nbdkit::debug ($msg) */
static
XS (xs_debug)
{
  dXSARGS;
  if (items >= 1)
    nbdkit_debug ("%s", SvPV_nolen (ST (0)));
  XSRETURN_EMPTY;
}

/* Nbdkit::set_error ($errno): $! works too, as its number. */
static
XS (xs_set_error)
{
  dXSARGS;
  if (items >= 1) {
    script_errno = (int) SvIV (ST (0));
    nbdkit_set_error (script_errno);
  }
  XSRETURN_EMPTY;
}

/* Nbdkit::probe ($name, $arg1, $arg2, $text): the server's generic
 * probe "user".  Missing arguments are 0 or "".
 */
static
XS (xs_probe)
{
  dXSARGS;
  const char *name = items >= 1 ? SvPV_nolen (ST (0)) : "";
  int64_t arg1 = items >= 2 ? (int64_t) SvIV (ST (1)) : 0;
  int64_t arg2 = items >= 3 ? (int64_t) SvIV (ST (2)) : 0;
  const char *text = items >= 4 ? SvPV_nolen (ST (3)) : "";
  nbdkit_probe (name, arg1, arg2, text);
  XSRETURN_EMPTY;
}

/* Nbdkit::disconnect ($force): end this connection only. */
static
XS (xs_disconnect)
{
  dXSARGS;
  nbdkit_disconnect (items >= 1 && SvTRUE (ST (0)));
  XSRETURN_EMPTY;
}

/* Nbdkit::parse_probability ($what, $str) and Nbdkit::parse_delay
 * ($what, $str), the latter a list ($sec, $nsec).  A bad string dies
 * (the server has logged why), as Perl code expects of a failure.
 */
static
XS (xs_parse_probability)
{
  dXSARGS;
  if (items != 2)
    croak ("Usage: Nbdkit::parse_probability (what, str)");
  const char *what = SvPV_nolen (ST (0)), *str = SvPV_nolen (ST (1));
  double d;
  if (nbdkit_parse_probability (what, str, &d) == -1)
    croak ("Nbdkit::parse_probability: %s: cannot parse '%s'\n", what, str);
  ST (0) = sv_2mortal (newSVnv (d));
  XSRETURN (1);
}

static
XS (xs_parse_delay)
{
  dXSARGS;
  if (items != 2)
    croak ("Usage: Nbdkit::parse_delay (what, str)");
  const char *what = SvPV_nolen (ST (0)), *str = SvPV_nolen (ST (1));
  unsigned sec, nsec;
  if (nbdkit_parse_delay (what, str, &sec, &nsec) == -1)
    croak ("Nbdkit::parse_delay: %s: cannot parse '%s'\n", what, str);
  ST (0) = sv_2mortal (newSVuv (sec));
  ST (1) = sv_2mortal (newSVuv (nsec));
  XSRETURN (2);
}

static void
xs_init (pTHX)
{
  static const struct { const char *name; int value; } constants[] = {
    { "Nbdkit::FLAG_MAY_TRIM", NBDKIT_FLAG_MAY_TRIM },
    { "Nbdkit::FLAG_FUA", NBDKIT_FLAG_FUA },
    { "Nbdkit::FLAG_REQ_ONE", NBDKIT_FLAG_REQ_ONE },
    { "Nbdkit::FLAG_FAST_ZERO", NBDKIT_FLAG_FAST_ZERO },
    { "Nbdkit::FUA_NONE", NBDKIT_FUA_NONE },
    { "Nbdkit::FUA_EMULATE", NBDKIT_FUA_EMULATE },
    { "Nbdkit::FUA_NATIVE", NBDKIT_FUA_NATIVE },
    { "Nbdkit::CACHE_NONE", NBDKIT_CACHE_NONE },
    { "Nbdkit::CACHE_EMULATE", NBDKIT_CACHE_EMULATE },
    { "Nbdkit::CACHE_NATIVE", NBDKIT_CACHE_NATIVE },
    { "Nbdkit::EXTENT_HOLE", NBDKIT_EXTENT_HOLE },
    { "Nbdkit::EXTENT_ZERO", NBDKIT_EXTENT_ZERO },
  };
  size_t i;

  newXS ("DynaLoader::boot_DynaLoader", boot_DynaLoader, __FILE__);
  newXS ("Nbdkit::debug", xs_debug, __FILE__);
  newXS ("Nbdkit::set_error", xs_set_error, __FILE__);
  newXS ("Nbdkit::probe", xs_probe, __FILE__);
  newXS ("Nbdkit::disconnect", xs_disconnect, __FILE__);
  newXS ("Nbdkit::parse_probability", xs_parse_probability, __FILE__);
  newXS ("Nbdkit::parse_delay", xs_parse_delay, __FILE__);
  for (i = 0; i < ARRAY_SIZE (constants); ++i)
    sv_setiv (get_sv (constants[i].name, GV_ADD), constants[i].value);
}

static void
perl_load (void)
{
  static int argc = 1;
  static char arg0[] = "nbdkit";
  static char *argv_[] = { arg0, NULL };
  static char *env_[] = { NULL };
  char **argv = argv_, **env = env_;

  PERL_SYS_INIT3 (&argc, &argv, &env);
  my_perl = perl_alloc ();
  if (my_perl == NULL)
    return;                     /* reported at config */
  PERL_SET_CONTEXT (my_perl);
  perl_construct (my_perl);
  /* Free everything at unload (leak checkers see no libperl memory),
   * and run END blocks in perl_destruct, as a perl program would.
   */
  PL_perl_destruct_level = 1;
  PL_exit_flags |= PERL_EXIT_DESTRUCT_END;
}

static void
perl_unload (void)
{
  if (my_perl != NULL) {
    PERL_SET_CONTEXT (my_perl);
    perl_destruct (my_perl);
    perl_free (my_perl);
    my_perl = NULL;
    PERL_SYS_TERM ();
  }
  free (lh_script);
  lh_script = NULL;
}

/* Is the sub NAME defined by the script (in package main)? */
static bool
defined (const char *name)
{
  CV *cv;

  if (my_perl == NULL || lh_script == NULL)
    return false;
  PERL_SET_CONTEXT (my_perl);
  cv = get_cv (name, 0);
  return cv != NULL && (CvROOT (cv) != NULL || CvXSUB (cv) != NULL);
}

/* Copy the error in $@ to a malloc'd single line (newlines become
 * spaces, the trailing one goes).
 */
static char *
error_text (void)
{
  STRLEN len;
  const char *s = SvPV (ERRSV, len);
  char *r = strndup (s, len);
  size_t i;

  if (r == NULL)
    return NULL;
  len = strlen (r);
  while (len > 0 && (r[len - 1] == '\n' || r[len - 1] == ' '))
    r[--len] = '\0';
  for (i = 0; i < len; ++i)
    if (r[i] == '\n' || r[i] == '\r')
      r[i] = ' ';
  return r;
}

/* What a callback makes of the value a sub returned; it reports a
 * wrong one (naming the sub) and returns -1.
 */
typedef int (*result_fn) (const char *name, SV *sv, void *opaque);

/* Call the script's sub NAME with ARGS (new references, which it
 * consumes: they are made mortal inside the call's scope, so that
 * they are freed at its end; mortals made by the caller would outlive
 * every scope of an embedded interpreter and pile up).  If CHECK is
 * not NULL, the sub's scalar result goes to it.  Returns 0 or -1 after
 * reporting the error: one line naming the script and the sub, with the
 * errno the script set (else EIO) for the client.  Fires perl_call_start
 * and perl_call_done around the call.
 */
static int
call_sub (const char *name, SV **args, size_t nargs,
          result_fn check, void *opaque)
{
  dSP;
  bool traced = NBDKIT_PROBE_ENABLED (perl_call_done);
  uint64_t id = 0, cookie = 0, t0 = 0;
  char *msg = NULL;
  int r = 0, count;
  size_t i;

  PERL_SET_CONTEXT (my_perl);
  if (traced || NBDKIT_PROBE_ENABLED (perl_call_start)) {
    id = nbdkit_connection_id ();
    cookie = nbdkit_request_cookie ();
    NBDKIT_PROBE (perl_call_start, id, cookie, name);
    t0 = now_ns ();
  }
  script_errno = 0;

  ENTER;
  SAVETMPS;
  PUSHMARK (SP);
  EXTEND (SP, (SSize_t) nargs);
  for (i = 0; i < nargs; ++i)
    PUSHs (sv_2mortal (args[i]));
  PUTBACK;
  count = call_pv (name, G_SCALAR | G_EVAL);
  SPAGAIN;
  if (SvTRUE (ERRSV)) {
    msg = error_text ();
    nbdkit_error ("%s: %s: %s", lh_script, name, msg ? msg : "died");
    r = -1;
  }
  else if (count != 1) {
    nbdkit_error ("%s: %s: returned %d values", lh_script, name, count);
    r = -1;
  }
  else if (check && check (name, TOPs, opaque) == -1)
    r = -1;
  SP -= count;
  PUTBACK;
  FREETMPS;
  LEAVE;

  if (r == -1) {
    if (script_errno == 0)
      nbdkit_set_error (EIO);
    else
      nbdkit_set_error (script_errno);
  }
  if (traced) {
    int err = r == 0 ? 0 : script_errno ? script_errno : EIO;
    NBDKIT_PROBE (perl_call_done, id, cookie, name, now_ns () - t0, err,
                  r == 0 ? "" : msg ? msg : "wrong result");
  }
  free (msg);
  return r;
}

static int
result_size (const char *name, SV *sv, void *opaque)
{
  struct lh_call *c = opaque;

  if (!SvOK (sv) || SvROK (sv) || !looks_like_number (sv))
    return lh_wrong (name, "returned a value that is not an integer");
  if (SvIOK (sv) || SvUOK (sv)) {
    if (SvUOK (sv) && SvUV (sv) > INT64_MAX)
      return lh_wrong (name, "returned an integer out of range");
    c->size = SvIV (sv);
  }
  else {
    NV nv = SvNV (sv);
    if (nv != nv || nv < -9.2e18 || nv > 9.2e18 || nv != (NV) (int64_t) nv)
      return lh_wrong (name, "returned a value that is not an integer");
    c->size = (int64_t) nv;
  }
  return 0;
}

static int
result_truth (const char *name, SV *sv, void *opaque)
{
  struct lh_call *c = opaque;
  c->truth = SvTRUE (sv) ? 1 : 0;
  return 0;
}

static int
result_handle (const char *name, SV *sv, void *opaque)
{
  struct lh_call *c = opaque;
  c->handle = newSVsv (sv);
  return 0;
}

static int
result_data (const char *name, SV *sv, void *opaque)
{
  const char *p;
  STRLEN len;

  if (!SvOK (sv) || SvROK (sv))
    return lh_wrong (name, "returned a value that is not a string");
  p = SvPV (sv, len);
  return lh_take_data (opaque, p, len);
}

static const result_fn results[] = {
  [LH_NOTHING] = NULL,
  [LH_NEW_HANDLE] = result_handle,
  [LH_SIZE] = result_size,
  [LH_TRUTH] = result_truth,
  [LH_DATA] = result_data,
};

static void
perl_dump_plugin (void)
{
  printf ("perl_version=%s\n", PERL_VERSION_STRING);
  if (defined ("dump_plugin")) {
    fflush (stdout);
    call_sub ("dump_plugin", NULL, 0, NULL, NULL);
    PERL_SET_CONTEXT (my_perl);
    PerlIO_flush (PerlIO_stdout ());
  }
}

/* Parse and run the script: its top-level statements run now. */
static int
load_script (const char *path)
{
  char arg0[] = "";
  char *argv[] = { arg0, (char *) path, NULL };
  int r;

  if (my_perl == NULL) {
    nbdkit_error ("could not create the Perl interpreter");
    return -1;
  }
  if (access (path, R_OK) == -1) {
    nbdkit_error ("%s: %m", path);
    return -1;
  }
  lh_script = strdup (path);
  if (lh_script == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  PERL_SET_CONTEXT (my_perl);
  if (perl_parse (my_perl, xs_init, 2, argv, NULL) != 0) {
    nbdkit_error ("%s: the script does not parse (see the messages above)",
                  lh_script);
    return -1;
  }
  r = perl_run (my_perl);
  if (r != 0) {
    nbdkit_error ("%s: the script failed when run at start-up", lh_script);
    return -1;
  }
  return 0;
}

static int
perl_config (const char *key, const char *value)
{
  if (lh_script == NULL) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be script=/path/to/script.pl");
      return -1;
    }
    return load_script (value);
  }
  if (defined ("config"))
    return call_sub ("config", (SV *[]) {
        newSVpv (key, 0), newSVpv (value, 0)
      }, 2, NULL, NULL);
  nbdkit_error ("%s: the script takes no parameters (no sub config), "
                "but was given %s=%s", lh_script, key, value);
  return -1;
}

static int
perl_config_complete (void)
{
  static const char *required[] = { "open", "get_size", "pread" };
  size_t i;

  if (lh_script == NULL) {
    nbdkit_error ("no script given: use script=/path/to/script.pl");
    return -1;
  }
  for (i = 0; i < ARRAY_SIZE (required); ++i) {
    if (!defined (required[i])) {
      nbdkit_error ("%s: the script does not define the required sub %s",
                    lh_script, required[i]);
      return -1;
    }
  }
  if (defined ("config_complete"))
    return call_sub ("config_complete", NULL, 0, NULL, NULL);
  return 0;
}

static int
perl_get_ready (void)
{
  if (defined ("get_ready"))
    return call_sub ("get_ready", NULL, 0, NULL, NULL);
  return 0;
}

#define perl_config_help \
  "script=<FILENAME>     (required) The Perl script to serve.\n" \
  "Other parameters are passed to the script's config sub."

/* ---- the language side of langhost's callbacks ---- */

bool
lh_host_defined (const char *name)
{
  return defined (name);
}

/* A write's data as a new Perl string.  Perl stops the whole process
 * when it cannot allocate, so the copy (up to the server's largest
 * request) is malloc'd here, where a failure is ENOMEM for one request,
 * and handed to the string (Perl frees it with the system's free,
 * unless it was built with its own malloc).
 */
static SV *
buffer_sv (const void *buf, uint32_t count)
{
#ifdef MYMALLOC
  return newSVpvn (buf, count);
#else
  char *p = malloc ((size_t) count + 1);
  SV *sv;

  if (p == NULL)
    return NULL;
  memcpy (p, buf, count);
  p[count] = '\0';
  sv = newSV (0);
  sv_usepvn_flags (sv, p, count, SV_HAS_TRAILING_NUL);
  return sv;
#endif
}

/* An argument as a new Perl value.  The handle is passed as a copy of
 * the reference, so a sub that shifts or modifies it does not change
 * ours.
 */
static SV *
arg_sv (const struct lh_arg *a)
{
  switch (a->type) {
  case LH_HANDLE: return newSVsv ((SV *) a->p);
  case LH_BOOL:   return a->u ? &PL_sv_yes : &PL_sv_no;
  case LH_UINT:   return newSVuv ((UV) a->u);
  case LH_BYTES:  return buffer_sv (a->p, (uint32_t) a->u);
  }
  abort ();
}

enum lh_outcome
lh_host_call (struct lh_call *c)
{
  SV *args[LH_MAX_ARGS];
  size_t i;

  if (c->optional && !defined (c->name))
    return LH_ABSENT;
  PERL_SET_CONTEXT (my_perl);
  for (i = 0; i < c->nargs; ++i) {
    args[i] = arg_sv (&c->args[i]);
    if (args[i] == NULL) {
      nbdkit_error ("%s: %s: %m", lh_script, c->name);
      while (i > 0)
        SvREFCNT_dec (args[--i]);
      nbdkit_set_error (ENOMEM);
      return LH_FAILED;
    }
  }
  if (call_sub (c->name, args, c->nargs, results[c->want], c) == -1)
    return LH_FAILED;
  if (c->want == LH_SIZE && c->size < 0) {
    lh_wrong (c->name, "returned a negative size");
    nbdkit_set_error (EIO);
    return LH_FAILED;
  }
  return LH_DONE;
}

void
lh_host_free_handle (void *handle)
{
  PERL_SET_CONTEXT (my_perl);
  SvREFCNT_dec ((SV *) handle);
}

const struct langhost langhost = {
  .word = "sub",
  .open = "open",
  .close = "close",
  .flush = "flush",
  .pass_flags = true,           /* version 2 arguments, as 1.32's */
  .look_first = true,
  .no_zero_note = "no sub zero: falling back to pwrite",
};

static struct nbdkit_plugin plugin = {
  .name               = "perl",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit Perl plugin host",
  .load               = perl_load,
  .unload             = perl_unload,
  .dump_plugin        = perl_dump_plugin,
  .config             = perl_config,
  .config_complete    = perl_config_complete,
  .config_help        = perl_config_help,
  .magic_config_key   = "script",
  .get_ready          = perl_get_ready,
  LANGHOST_CALLBACKS
};

NBDKIT_REGISTER_PLUGIN (plugin)
