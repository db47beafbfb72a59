/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ruby plugin: serves a disk whose callbacks are methods of a
 * Ruby script, run in one embedded Ruby VM on a thread of its own
 * (vm.c).
 *
 * This file owns the plugin's callbacks.  The script is loaded when
 * script= arrives (the first parameter, or the bare path through
 * magic_config_key), later parameters go to its config method, and
 * each plugin callback calls the top-level method of the same name as
 * nbdkit 1.32's Ruby host does, as a job run on the VM thread.  A
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

#include "vm.h"

static char *script;            /* the script's path, once loaded */

struct handle {
  VALUE obj;                    /* what open returned, kept from the GC */
};

#define H(job) (((struct handle *) (job)->handle)->obj)

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
  free (script);
}

static void
job_dump_plugin (struct job *job)
{
  if (script && vm_defines ("dump_plugin")) {
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
  if (vm_started && script) {
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

  ruby_script (script);
  rb_protect (load_protected, rb_str_new_cstr (script), &state);
  if (state) {
    VALUE exn = rb_errinfo ();
    rb_set_errinfo (Qnil);
    char *d = NIL_P (exn) ? NULL : vm_describe_exception (exn);
    vm_job_error (job, EIO, "%s: could not load the Ruby script: %s", script,
               d ? d : "error");
    free (d);
  }
}

static void
job_config (struct job *job)
{
  if (!vm_defines ("config")) {
    vm_job_error (job, EINVAL, "%s: unknown parameter '%s' (the script has no "
               "config method)", script, job->key);
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

  if (!script) {
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
    script = realpath (value, NULL);
    if (!script) {
      nbdkit_error ("script=%s: %m", value);
      return -1;
    }
    vm_script = script;
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

  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!vm_defines (required[i])) {
      vm_job_error (job, EINVAL, "%s: %s: the script does not define this "
                 "required method", script, required[i]);
      return;
    }
  if (vm_defines ("config_complete"))
    vm_call_void (job);
}

static int
ruby_config_complete (void)
{
  struct job job;

  if (!script) {
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

/* ---- connections ---- */

static void
job_open (struct job *job)
{
  VALUE r;

  job->nargs = 1;
  vm_args[0] = job->flags ? Qtrue : Qfalse;
  if (vm_call_method (job, &r) == -1)
    return;
  struct handle *h = malloc (sizeof *h);
  if (!h) {
    vm_job_error (job, ENOMEM, "%s: open: out of memory", script);
    return;
  }
  h->obj = r;
  rb_gc_register_address (&h->obj);
  job->handle = h;
}

static void *
ruby_open (int readonly)
{
  struct job job;

  vm_job_init (&job, "open", job_open);
  job.flags = readonly;
  vm_run_job (&job);
  if (vm_finish (&job) == -1)
    return NULL;
  return job.handle;
}

static void
job_close (struct job *job)
{
  if (vm_defines ("close")) {
    job->nargs = 1;
    vm_args[0] = H (job);
    vm_call_void (job);
  }
  rb_gc_unregister_address (&((struct handle *) job->handle)->obj);
}

static void
ruby_close (void *handle)
{
  struct job job;

  vm_job_init (&job, "close", job_close);
  job.handle = handle;
  vm_run_job (&job);
  vm_finish (&job);
  free (handle);
}

static void
job_get_size (struct job *job)
{
  VALUE r;

  job->nargs = 1;
  vm_args[0] = H (job);
  if (vm_call_method (job, &r) == -1)
    return;
  if (!FIXNUM_P (r)) {
    vm_job_error (job, EIO, "%s: get_size: returned %s, expected an Integer "
               "(0 to 2**62-1)", script, rb_obj_classname (r));
    return;
  }
  long size = FIX2LONG (r);
  if (size < 0) {
    vm_job_error (job, EIO, "%s: get_size: returned a negative size (%ld)",
               script, size);
    return;
  }
  job->ival = size;
}

static int64_t
ruby_get_size (void *handle)
{
  struct job job;

  vm_job_init (&job, "get_size", job_get_size);
  job.handle = handle;
  vm_run_job (&job);
  return vm_finish (&job) == -1 ? -1 : job.ival;
}

/* A can_* method if the script has one (its result's truth), else
 * whether the callback it guards is defined, as 1.32 decides.
 */
static void
job_can (struct job *job)
{
  VALUE r;

  if (!vm_defines (job->method)) {
    job->ival = job->key ? vm_defines (job->key) : 0;
    return;
  }
  job->nargs = 1;
  vm_args[0] = H (job);
  if (vm_call_method (job, &r) == 0)
    job->ival = RTEST (r);
}

static int
can (void *handle, const char *method, const char *callback)
{
  struct job job;

  vm_job_init (&job, method, job_can);
  job.handle = handle;
  job.key = callback;
  vm_run_job (&job);
  return vm_finish (&job) == -1 ? -1 : job.ival;
}

static int
ruby_can_write (void *handle)
{
  return can (handle, "can_write", "pwrite");
}

static int
ruby_can_flush (void *handle)
{
  return can (handle, "can_flush", "flush");
}

static int
ruby_can_trim (void *handle)
{
  return can (handle, "can_trim", "trim");
}

static int
ruby_is_rotational (void *handle)
{
  return can (handle, "is_rotational", NULL);
}

/* 1.32's host is an API version 1 plugin with zero and flush callbacks
 * of its own: the server always asks it to zero (a script without zero
 * answers "not supported" and the server writes zeroes), advertises
 * fast zero (refused at once) and emulates FUA with a flush.  The same
 * answers give the client the same flags.
 */
static int
ruby_can_zero (void *handle)
{
  return 1;
}

static int
ruby_can_fast_zero (void *handle)
{
  return 1;
}

static int
ruby_can_fua (void *handle)
{
  return NBDKIT_FUA_EMULATE;
}

/* ---- data ---- */

static void
job_pread (struct job *job)
{
  VALUE r;

  job->nargs = 3;
  vm_args[0] = H (job);
  vm_args[1] = UINT2NUM (job->count);
  vm_args[2] = ULL2NUM (job->offset);
  if (vm_call_method (job, &r) == -1)
    return;
  if (!RB_TYPE_P (r, T_STRING)) {
    vm_job_error (job, EIO, "%s: pread: returned %s, expected a String",
               script, rb_obj_classname (r));
    return;
  }
  if ((uint64_t) RSTRING_LEN (r) < job->count) {
    vm_job_error (job, EIO, "%s: pread: returned %ld bytes, expected %" PRIu32,
               script, (long) RSTRING_LEN (r), job->count);
    return;
  }
  memcpy (job->rbuf, RSTRING_PTR (r), job->count);
  RB_GC_GUARD (r);
}

static int
ruby_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct job job;

  vm_job_init (&job, "pread", job_pread);
  job.handle = handle;
  job.rbuf = buf;
  job.count = count;
  job.offset = offset;
  vm_run_job (&job);
  return vm_finish (&job);
}

static void
job_pwrite (struct job *job)
{
  job->nargs = 3;
  vm_args[0] = H (job);
  vm_args[1] = rb_str_new (job->wbuf, job->count);
  vm_args[2] = ULL2NUM (job->offset);
  vm_call_void (job);
}

static int
ruby_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  struct job job;

  vm_job_init (&job, "pwrite", job_pwrite);
  job.handle = handle;
  job.wbuf = buf;
  job.count = count;
  job.offset = offset;
  vm_run_job (&job);
  return vm_finish (&job);
}

static void
job_flush (struct job *job)
{
  if (vm_defines ("flush")) {
    job->nargs = 1;
    vm_args[0] = H (job);
    vm_call_void (job);
  }
}

static int
ruby_flush (void *handle, uint32_t flags)
{
  struct job job;

  vm_job_init (&job, "flush", job_flush);
  job.handle = handle;
  vm_run_job (&job);
  return vm_finish (&job);
}

static void
job_trim (struct job *job)
{
  job->nargs = 3;
  vm_args[0] = H (job);
  vm_args[1] = UINT2NUM (job->count);
  vm_args[2] = ULL2NUM (job->offset);
  vm_call_void (job);
}

static int
ruby_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct job job;

  vm_job_init (&job, "trim", job_trim);
  job.handle = handle;
  job.count = count;
  job.offset = offset;
  vm_run_job (&job);
  return vm_finish (&job);
}

static void
job_zero (struct job *job)
{
  if (!vm_defines ("zero")) {
    job->ret = -1;
    job->err = EOPNOTSUPP;
    return;
  }
  job->nargs = 4;
  vm_args[0] = H (job);
  vm_args[1] = UINT2NUM (job->count);
  vm_args[2] = ULL2NUM (job->offset);
  vm_args[3] = (job->flags & NBDKIT_FLAG_MAY_TRIM) ? Qtrue : Qfalse;
  vm_call_void (job);
}

static int
ruby_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct job job;

  /* Fast zero is refused at once, as 1.32's (version 1) host does. */
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    nbdkit_set_error (ENOTSUP);
    return -1;
  }
  vm_job_init (&job, "zero", job_zero);
  job.handle = handle;
  job.count = count;
  job.offset = offset;
  job.flags = flags;
  vm_run_job (&job);
  /* "Not supported" (no zero method, or Nbdkit.set_error with
   * EOPNOTSUPP) is no error: the server writes zeroes instead.
   */
  if (job.ret == -1 && (job.err == EOPNOTSUPP || job.err == ENOTSUP)) {
    nbdkit_debug ("zero not supported: the server writes zeroes");
    free (job.msg);
    nbdkit_set_error (job.err);
    return -1;
  }
  return vm_finish (&job);
}

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
  .open               = ruby_open,
  .close              = ruby_close,
  .get_size           = ruby_get_size,
  .can_write          = ruby_can_write,
  .can_flush          = ruby_can_flush,
  .can_trim           = ruby_can_trim,
  .is_rotational      = ruby_is_rotational,
  .can_zero           = ruby_can_zero,
  .can_fast_zero      = ruby_can_fast_zero,
  .can_fua            = ruby_can_fua,
  .pread              = ruby_pread,
  .pwrite             = ruby_pwrite,
  .flush              = ruby_flush,
  .trim               = ruby_trim,
  .zero               = ruby_zero,
};

NBDKIT_REGISTER_PLUGIN (plugin)
