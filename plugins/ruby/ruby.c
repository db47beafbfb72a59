/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ruby plugin: serves a disk whose callbacks are methods of a
 * Ruby script, run in one embedded Ruby VM on a thread of its own
 * (vm.c).
 *
 * This file owns the plugin's callbacks.  The script is loaded when
 * script= arrives (the first parameter, or the bare path through
 * magic_config_key), later parameters go to its config method, and
 * each data callback (langhost's, common/langhost) calls the top-level
 * method of the same name as nbdkit 1.32's Ruby host does, as a job
 * run on the VM thread (lh_host_call below).  A
 * method that raises gives the client EIO, or the errno chosen with
 * Nbdkit.set_error (or carried by a SystemCallError); a result of the
 * wrong type or length is an error too.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruby.h>
#include <ruby/version.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "langhost.h"
#include "vm.h"
#include "array-size.h"

struct handle {
  VALUE obj;                    /* what open returned, kept from the GC */
};

/* ---- start-up ---- */

static void
ruby_load (void)
{
  vm_start ();
}

static void
ruby_unload (void)
{
  vm_stop ();
  free (lh_script);
}

static void
job_dump_plugin (struct job *job)
{
  if (lh_script && vm_defines ("dump_plugin")) {
    job->method = "dump_plugin";
    vm_call_void (job);
    rb_io_flush (rb_stdout);
  }
}

static void
ruby_dump_plugin (void)
{
  struct job job;

  printf ("ruby_api_version=%d.%d.%d\n", RUBY_API_VERSION_MAJOR,
          RUBY_API_VERSION_MINOR, RUBY_API_VERSION_TEENY);
  fflush (stdout);
  if (vm_started && lh_script) {
    vm_job_init (&job, NULL, job_dump_plugin);
    vm_run_job (&job);
    vm_finish (&job);
  }
}

static VALUE
load_protected (VALUE path)
{
  rb_load (path, 0);
  return Qnil;
}

static void
job_load_script (struct job *job)
{
  int state = 0;

  ruby_script (lh_script);
  rb_protect (load_protected, rb_str_new_cstr (lh_script), &state);
  if (state) {
    VALUE exn = rb_errinfo ();
    rb_set_errinfo (Qnil);
    char *d = NIL_P (exn) ? NULL : vm_describe_exception (exn);
    vm_job_error (job, EIO, "%s: could not load the Ruby script: %s",
                  lh_script, d ? d : "error");
    free (d);
  }
}

static void
job_config (struct job *job)
{
  if (!vm_defines ("config")) {
    vm_job_error (job, EINVAL, "%s: unknown parameter '%s' (the script has no "
               "config method)", lh_script, job->key);
    return;
  }
  job->nargs = 2;
  vm_args[0] = rb_str_new_cstr (job->key);
  vm_args[1] = rb_str_new_cstr (job->value);
  vm_call_void (job);
}

static int
ruby_config (const char *key, const char *value)
{
  struct job job;

  if (!lh_script) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be script=/path/to/script.rb, "
                    "not '%s'", key);
      return -1;
    }
    if (!vm_started) {
      nbdkit_error ("cannot start the Ruby interpreter: %s",
                    vm_error ? vm_error : "unknown error");
      return -1;
    }
    /* Absolute: Ruby's load looks for a relative path in $LOAD_PATH. */
    lh_script = realpath (value, NULL);
    if (!lh_script) {
      nbdkit_error ("script=%s: %m", value);
      return -1;
    }
    vm_script = lh_script;
    vm_job_init (&job, NULL, job_load_script);
    vm_run_job (&job);
    return vm_finish (&job);
  }
  vm_job_init (&job, "config", job_config);
  job.key = key;
  job.value = value;
  vm_run_job (&job);
  return vm_finish (&job);
}

static void
job_config_complete (struct job *job)
{
  static const char *const required[] = { "open", "get_size", "pread" };

  for (size_t i = 0; i < ARRAY_SIZE (required); i++)
    if (!vm_defines (required[i])) {
      vm_job_error (job, EINVAL, "%s: %s: the script does not define this "
                 "required method", lh_script, required[i]);
      return;
    }
  if (vm_defines ("config_complete"))
    vm_call_void (job);
}

static int
ruby_config_complete (void)
{
  struct job job;

  if (!lh_script) {
    nbdkit_error ("missing the script: nbdkit ruby /path/to/script.rb");
    return -1;
  }
  vm_job_init (&job, "config_complete", job_config_complete);
  vm_run_job (&job);
  return vm_finish (&job);
}

/* In the child of the daemon fork the VM thread must be brought back
 * (see "fork" in vm.c).
 */
static int
ruby_after_fork (void)
{
  return vm_after_fork ();
}

#define ruby_config_help \
  "[script=]<FILENAME>  (required) The Ruby script to run.\n" \
  "[KEY=VALUE ...]      Passed on to the script's config method."

/* ---- the language side of langhost's callbacks ---- */

/* Each call langhost describes runs as one job on the VM thread:
 * job_call marshals the arguments into vm_args, calls the method and
 * converts its result there; errors are logged by vm_finish in the
 * caller's thread.
 */

static void
job_defined (struct job *job)
{
  job->found = vm_defines (job->method);
}

bool
lh_host_defined (const char *name)
{
  struct job job;

  vm_job_init (&job, name, job_defined);
  vm_run_job (&job);
  vm_finish (&job);
  return job.found;
}

static VALUE
arg_value (const struct lh_arg *a)
{
  switch (a->type) {
  case LH_HANDLE: return ((const struct handle *) a->p)->obj;
  case LH_BOOL:   return a->u ? Qtrue : Qfalse;
  case LH_UINT:   return ULL2NUM (a->u);
  case LH_BYTES:  return rb_str_new (a->p, (long) a->u);
  }
  abort ();
}

/* Convert the result R of a successful call (VM thread). */
static void
convert (struct job *job, VALUE r)
{
  struct lh_call *c = job->call;

  switch (c->want) {
  case LH_NOTHING:
    return;
  case LH_NEW_HANDLE: {
    struct handle *h = malloc (sizeof *h);
    if (!h) {
      vm_job_error (job, ENOMEM, "%s: %s: out of memory", lh_script,
                    c->name);
      return;
    }
    h->obj = r;
    rb_gc_register_address (&h->obj);
    c->handle = h;
    return;
  }
  case LH_SIZE:
    if (!FIXNUM_P (r)) {
      vm_job_error (job, EIO, "%s: %s: returned %s, expected an Integer "
                    "(0 to 2**62-1)", lh_script, c->name,
                    rb_obj_classname (r));
      return;
    }
    c->size = FIX2LONG (r);
    if (c->size < 0)
      vm_job_error (job, EIO, "%s: %s: returned a negative size (%ld)",
                    lh_script, c->name, (long) c->size);
    return;
  case LH_TRUTH:
    c->truth = RTEST (r);
    return;
  case LH_DATA:
    if (!RB_TYPE_P (r, T_STRING)) {
      vm_job_error (job, EIO, "%s: %s: returned %s, expected a String",
                    lh_script, c->name, rb_obj_classname (r));
      return;
    }
    if ((uint64_t) RSTRING_LEN (r) < c->count) {
      vm_job_error (job, EIO, "%s: %s: returned %ld bytes, expected %"
                    PRIu32, lh_script, c->name, (long) RSTRING_LEN (r),
                    c->count);
      return;
    }
    memcpy (c->buf, RSTRING_PTR (r), c->count);
    RB_GC_GUARD (r);
    return;
  }
  abort ();
}

static void
job_call (struct job *job)
{
  struct lh_call *c = job->call;
  VALUE r;

  if (c->optional && !vm_defines (c->name)) {
    job->ret = LH_ABSENT;
    return;
  }
  job->nargs = (int) c->nargs;
  for (size_t i = 0; i < c->nargs; i++)
    vm_args[i] = arg_value (&c->args[i]);
  if (vm_call_method (job, &r) == -1) {
    job->ret = -1;
    return;
  }
  convert (job, r);
}

enum lh_outcome
lh_host_call (struct lh_call *c)
{
  struct job job;

  vm_job_init (&job, c->name, job_call);
  job.call = c;
  vm_run_job (&job);
  if (job.ret == LH_ABSENT)
    return LH_ABSENT;
  /* A zero that says "not supported" (Nbdkit.set_error with
   * EOPNOTSUPP) is no error: the server writes zeroes instead.
   */
  if (job.ret == -1 && strcmp (c->name, "zero") == 0 &&
      (job.err == EOPNOTSUPP || job.err == ENOTSUP)) {
    nbdkit_debug ("%s", langhost.no_zero_note);
    free (job.msg);
    nbdkit_set_error (job.err);
    return LH_FAILED;
  }
  return vm_finish (&job) == -1 ? LH_FAILED : LH_DONE;
}

static void
job_free_handle (struct job *job)
{
  rb_gc_unregister_address (&((struct handle *) job->handle)->obj);
}

void
lh_host_free_handle (void *handle)
{
  struct job job;

  vm_job_init (&job, NULL, job_free_handle);
  job.handle = handle;
  vm_run_job (&job);
  vm_finish (&job);
  free (handle);
}

/* As nbdkit 1.32's Ruby host: version 1 arguments, and the callbacks
 * it has are called without looking first.
 */
const struct langhost langhost = {
  .word = "method",
  .open = "open",
  .close = "close",
  .flush = "flush",
  .pass_flags = false,
  .look_first = false,
  .no_zero_note = "zero not supported: the server writes zeroes",
};

/* One interpreter, as 1.32's host; the VM thread serialises anyway. */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

static struct nbdkit_plugin plugin = {
  .name               = "ruby",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit Ruby plugin host",
  .load               = ruby_load,
  .unload             = ruby_unload,
  .dump_plugin        = ruby_dump_plugin,
  .config             = ruby_config,
  .config_complete    = ruby_config_complete,
  .config_help        = ruby_config_help,
  .magic_config_key   = "script",
  .after_fork         = ruby_after_fork,
  .can_zero           = lh_yes,
  .can_fast_zero      = lh_yes,
  .can_fua            = lh_fua_emulate,
  LANGHOST_CALLBACKS
};

NBDKIT_REGISTER_PLUGIN (plugin)
