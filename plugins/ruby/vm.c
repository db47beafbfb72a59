/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ruby plugin's VM thread: the one thread that runs Ruby, the jobs
 * that bring it the plugin's callbacks, the Nbdkit module, and the
 * fork of the server into the background.
 *
 * The Ruby VM may only be entered from the native thread that
 * initialised it (or from threads Ruby itself created): its current
 * execution context is a thread-local variable, and its garbage
 * collector scans the C stack of that thread between the bounds
 * recorded at initialisation.  A server worker thread calling into
 * Ruby finds no execution context and crashes (nbdkit 1.32's host does
 * exactly that with Ruby 3.1).  So the VM lives on a thread of its
 * own, the VM thread, started in load: it calls ruby_init_stack and
 * ruby_setup, then serves jobs one at a time.  Every callback (from the
 * main thread at start-up, from worker threads afterwards) is a job:
 * the caller fills in a struct job, wakes the VM thread and waits for
 * it to finish.  The VM thread waits for work with the GVL released
 * (rb_thread_call_without_gvl), so Ruby threads the script starts run
 * between requests.
 *
 * What must happen in the caller's thread is sent back to it: the log
 * line of an error (the server prefixes it with the connection), the
 * errno (nbdkit_set_error is per thread) and Nbdkit.probe (the server
 * reads the connection id and the request's cookie from the calling
 * thread): the VM thread posts the probe to the waiting caller, which
 * fires it and lets the VM thread go on.
 *
 * fork: a thread does not survive fork, and nbdkit without -f forks
 * into the background after start-up: see "fork" below for how the VM
 * thread is brought back in the child.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <ruby.h>
#include <ruby/thread.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "now-ns.h"
#include "vm.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (ruby_call_start);
NBDKIT_PROBE_SEMAPHORE (ruby_call_done);

/* -D ruby.verbose=1: log each callback passed to the script. */
NBDKIT_DLL_PUBLIC int ruby_debug_verbose = 0;

/* ---- jobs: one call into Ruby, from a caller thread to the VM ---- */


/* jobs_lock protects current, vm_stop_request and every job's done and probe
 * fields; callers take call_lock first (one job at a time).
 */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_cond = PTHREAD_COND_INITIALIZER;
static struct job *current;     /* the job being run or waiting */
static bool vm_stop_request;    /* unload: the VM thread ends */
static bool vm_interrupted;     /* Ruby asked the waiting VM thread */
static bool park_request;       /* a fork is coming: park the VM thread */
static bool parked;             /* the VM thread is parked */

/* Set in load and config, read-only afterwards. */
static pthread_t vm_thread;
bool vm_started;               /* the VM thread runs, Ruby is set up */
char *vm_error;                /* why it could not start */
const char *vm_script;         /* the script's path, for messages */
static pid_t vm_pid;            /* the process the VM thread lives in */
static void *vm_stack;          /* the VM thread's stack (ours, see fork) */
#define VM_STACK_SIZE (16 * 1024 * 1024)
static void *vm_ec;             /* the VM thread's Ruby execution context */
static stack_t vm_altstack;     /* its signal stack before Ruby's */

/* Ruby's current execution context, a thread-local variable that
 * libruby exports (not in its public headers).  Restoring it is what
 * lets a new thread take the VM thread's place after fork.
 */
extern __thread void *ruby_current_ec;
static VALUE nbdkit_module;

/* Run JOB on the VM thread and wait for it, firing the probes it asks
 * for on the way.
 */
void
vm_run_job (struct job *job)
{
  /* Logged here, so that the line names the caller's connection. */
  if (ruby_debug_verbose && job->method)
    nbdkit_debug ("%s callback", job->method);
  pthread_mutex_lock (&call_lock);
  pthread_mutex_lock (&jobs_lock);
  job->done = false;
  job->probe_pending = false;
  job->disconnect = 0;
  current = job;
  pthread_cond_broadcast (&jobs_cond);
  while (!job->done) {
    pthread_cond_wait (&jobs_cond, &jobs_lock);
    if (job->probe_pending) {
      nbdkit_probe (job->probe_name, job->probe_a1, job->probe_a2,
                    job->probe_text);
      job->probe_pending = false;
      pthread_cond_broadcast (&jobs_cond);
    }
  }
  current = NULL;
  pthread_mutex_unlock (&jobs_lock);
  pthread_mutex_unlock (&call_lock);
  /* Still inside the server's callback: a forced disconnect loses its
   * reply, a soft one lets it go out.
   */
  if (job->disconnect)
    nbdkit_disconnect (job->disconnect == 2);
}

/* ---- on the VM thread: calling the script ---- */

/* The errno chosen by Nbdkit.set_error during the current call. */
static int set_error_errno;

/* The arguments of the current call.  They live here, registered with
 * the collector, and not in the job: a job is on the caller's stack,
 * which Ruby's collector does not scan, and building one argument (a
 * String) may collect another.
 */
VALUE vm_args[4];

struct funcall {
  ID mid;
  int nargs;
  VALUE *args;
};

static VALUE
funcall_protected (VALUE arg)
{
  struct funcall *f = (struct funcall *) arg;
  return rb_funcallv (Qnil, f->mid, f->nargs, f->args);
}

bool
vm_defines (const char *name)
{
  VALUE sym = ID2SYM (rb_intern (name));
  return
    RTEST (rb_funcall (rb_cObject, rb_intern ("private_method_defined?"), 2,
                       sym, Qfalse)) ||
    RTEST (rb_funcall (rb_cObject, rb_intern ("method_defined?"), 2,
                       sym, Qfalse));
}

/* "Class: message (file:line)", on one line; NULL if out of memory. */
char *
vm_describe_exception (VALUE exn)
{
  VALUE cls = rb_class_name (rb_obj_class (exn));
  VALUE text = rb_funcall (exn, rb_intern ("message"), 0);
  VALUE bt = rb_funcall (exn, rb_intern ("backtrace"), 0);
  VALUE where = Qnil;
  char *s;

  if (RB_TYPE_P (bt, T_ARRAY) && RARRAY_LEN (bt) > 0)
    where = rb_ary_entry (bt, 0);
  if (!RB_TYPE_P (text, T_STRING))
    text = rb_obj_as_string (text);
  if (asprintf (&s, "%s: %.*s%s%.*s%s",
                StringValueCStr (cls),
                (int) RSTRING_LEN (text), RSTRING_PTR (text),
                NIL_P (where) ? "" : " (",
                NIL_P (where) ? 0 : (int) RSTRING_LEN (where),
                NIL_P (where) ? "" : RSTRING_PTR (where),
                NIL_P (where) ? "" : ")") == -1)
    return NULL;
  for (char *p = s; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  return s;
}

void
vm_job_error (struct job *job, int err, const char *fmt, ...)
{
  va_list ap;
  char *m = NULL;

  va_start (ap, fmt);
  if (vasprintf (&m, fmt, ap) == -1)
    m = NULL;
  va_end (ap);
  free (job->msg);
  job->msg = m;
  job->err = err;
  job->ret = -1;
}

/* Call the script's method job->method with job->args.  On success
 * returns 0 and the result in *RESULT; on an exception fills in the
 * job's error and returns -1.  Fires the ruby_call_* probes.
 */
int
vm_call_method (struct job *job, VALUE *result)
{
  struct funcall f = { rb_intern (job->method), job->nargs, vm_args };
  int state = 0, err = 0;
  int64_t start = 0;
  char *msg = NULL;

  set_error_errno = 0;
  NBDKIT_PROBE (ruby_call_start, job->id, job->cookie, job->method);
  if (NBDKIT_PROBE_ENABLED (ruby_call_done))
    start = now_ns ();

  VALUE r = rb_protect (funcall_protected, (VALUE) &f, &state);

  if (state) {
    VALUE exn = rb_errinfo ();
    rb_set_errinfo (Qnil);
    err = set_error_errno;
    if (err == 0 && RTEST (rb_obj_is_kind_of (exn, rb_eSystemCallError)))
      err = NUM2INT (rb_funcall (exn, rb_intern ("errno"), 0));
    if (err <= 0)
      err = EIO;
    msg = NIL_P (exn) ? strdup ("interrupted") : vm_describe_exception (exn);
  }
  if (NBDKIT_PROBE_ENABLED (ruby_call_done)) {
    int64_t ns = start ? now_ns () - start : 0;
    const char *text = msg ? msg : "";
    NBDKIT_PROBE (ruby_call_done, job->id, job->cookie, job->method, ns,
                  err, text);
  }
  for (int i = 0; i < 4; i++)
    vm_args[i] = Qnil;
  if (state) {
    vm_job_error (job, err, "%s: %s: %s", vm_script, job->method,
               msg ? msg : "exception");
    free (msg);
    return -1;
  }
  *result = r;
  return 0;
}

/* Call a method whose result does not matter (config, close, ...). */
void
vm_call_void (struct job *job)
{
  VALUE r;
  job->ret = vm_call_method (job, &r);
}

/* ---- the Nbdkit module ---- */

static VALUE
nbdkit_set_error_rb (VALUE self, VALUE arg)
{
  int err;

  if (RB_INTEGER_TYPE_P (arg))
    err = NUM2INT (arg);
  else if (rb_respond_to (arg, rb_intern ("errno")))
    err = NUM2INT (rb_funcall (arg, rb_intern ("errno"), 0));
  else if (RB_TYPE_P (arg, T_CLASS) &&
           RTEST (rb_const_defined (arg, rb_intern ("Errno"))))
    err = NUM2INT (rb_const_get (arg, rb_intern ("Errno")));
  else
    rb_raise (rb_eArgError,
              "Nbdkit.set_error: expected an errno, an Errno class or an "
              "exception with errno");
  set_error_errno = err;
  return Qnil;
}

/* Nbdkit.probe(name, arg1 = 0, arg2 = 0, text = "") */
static VALUE
nbdkit_probe_rb (int argc, VALUE *argv, VALUE self)
{
  struct job *job;

  if (argc < 1 || argc > 4)
    rb_raise (rb_eArgError, "Nbdkit.probe: wrong number of arguments "
              "(given %d, expected 1..4)", argc);
  VALUE name = argv[0];
  VALUE a1 = argc > 1 ? argv[1] : Qnil;
  VALUE a2 = argc > 2 ? argv[2] : Qnil;
  VALUE text = argc > 3 ? argv[3] : Qnil;
  const char *n = StringValueCStr (name);
  int64_t i1 = NIL_P (a1) ? 0 : NUM2LL (a1);
  int64_t i2 = NIL_P (a2) ? 0 : NUM2LL (a2);
  const char *t = NIL_P (text) ? "" : StringValueCStr (text);

  /* Fired by the caller's thread, which knows the connection and the
   * request; the VM thread waits until it has.
   */
  pthread_mutex_lock (&jobs_lock);
  job = current;
  if (job) {
    job->probe_name = n;
    job->probe_a1 = i1;
    job->probe_a2 = i2;
    job->probe_text = t;
    job->probe_pending = true;
    pthread_cond_broadcast (&jobs_cond);
    while (job->probe_pending)
      pthread_cond_wait (&jobs_cond, &jobs_lock);
  }
  pthread_mutex_unlock (&jobs_lock);
  if (!job)
    nbdkit_probe (n, i1, i2, t);
  RB_GC_GUARD (name);
  RB_GC_GUARD (text);
  return Qnil;
}

/* Nbdkit.disconnect(force = false): recorded in the current job, for
 * its caller (vm_run_job) to carry out.
 */
static VALUE
nbdkit_disconnect_rb (int argc, VALUE *argv, VALUE self)
{
  if (argc > 1)
    rb_raise (rb_eArgError, "Nbdkit.disconnect: wrong number of arguments "
              "(given %d, expected 0..1)", argc);
  int how = argc == 1 && RTEST (argv[0]) ? 2 : 1;

  pthread_mutex_lock (&jobs_lock);
  if (current && current->disconnect < how)
    current->disconnect = how;
  pthread_mutex_unlock (&jobs_lock);
  return Qnil;
}

/* Nbdkit.parse_probability(what, str) and Nbdkit.parse_delay(what,
 * str), the latter [sec, nsec].  A bad string raises ArgumentError
 * (the server has logged why).
 */
static VALUE
nbdkit_parse_probability_rb (VALUE self, VALUE what, VALUE str)
{
  const char *w = StringValueCStr (what), *s = StringValueCStr (str);
  double d;

  if (nbdkit_parse_probability (w, s, &d) == -1)
    rb_raise (rb_eArgError, "Nbdkit.parse_probability: %s: cannot parse "
              "'%s'", w, s);
  return DBL2NUM (d);
}

static VALUE
nbdkit_parse_delay_rb (VALUE self, VALUE what, VALUE str)
{
  const char *w = StringValueCStr (what), *s = StringValueCStr (str);
  unsigned sec, nsec;

  if (nbdkit_parse_delay (w, s, &sec, &nsec) == -1)
    rb_raise (rb_eArgError, "Nbdkit.parse_delay: %s: cannot parse '%s'",
              w, s);
  return rb_ary_new_from_args (2, UINT2NUM (sec), UINT2NUM (nsec));
}

/* ---- the VM thread ---- */

static void
stop_waiting (void *unused)
{
  pthread_mutex_lock (&jobs_lock);
  vm_interrupted = true;
  pthread_cond_broadcast (&jobs_cond);
  pthread_mutex_unlock (&jobs_lock);
}

/* Without the GVL: wait until there is something to do: a job, a
 * park request, the end, or Ruby asking (stop_waiting).  The job is
 * taken afterwards from current, with the GVL held.
 */
static void *
wait_for_work (void *unused)
{
  pthread_mutex_lock (&jobs_lock);
  while (!vm_stop_request && !vm_interrupted && !park_request &&
         (current == NULL || current->done))
    pthread_cond_wait (&jobs_cond, &jobs_lock);
  vm_interrupted = false;
  pthread_mutex_unlock (&jobs_lock);
  return NULL;
}

/* Leaving the blocking region runs Ruby's pending interrupts, which
 * may raise (Thread.main.raise from a script's thread): caught here,
 * outside any job, and dropped.
 */
static VALUE
wait_protected (VALUE unused)
{
  rb_thread_call_without_gvl (wait_for_work, NULL, stop_waiting, NULL);
  return Qnil;
}

static VALUE
run_one (VALUE arg)
{
  struct job *job = (struct job *) arg;
  job->fn (job);
  return Qnil;
}

/* The signals Ruby would take over from the server. */
static const int server_signals[] = {
  SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM,
  SIGCHLD, SIGSEGV, SIGBUS,
};
#define NR_SIGNALS (ARRAY_SIZE (server_signals))

/* The VM thread's loop: wait for a job without the GVL, run it with
 * the GVL; park for a fork (see vm_prepare_fork); end at unload.
 */
static void
serve (void)
{
  for (;;) {
    int st = 0;
    rb_protect (wait_protected, Qnil, &st);
    if (st)
      rb_set_errinfo (Qnil);

    pthread_mutex_lock (&jobs_lock);
    struct job *job = NULL;
    if (!vm_stop_request && !park_request && current && !current->done)
      job = current;
    pthread_mutex_unlock (&jobs_lock);
    if (job) {
      st = 0;
      rb_protect (run_one, (VALUE) job, &st);
      if (st) {
        /* Only a bug in this file raises outside vm_call_method. */
        rb_set_errinfo (Qnil);
        vm_job_error (job, EIO, "%s: %s: internal error", vm_script,
                   job->method ? job->method : "ruby");
      }
      pthread_mutex_lock (&jobs_lock);
      job->done = true;
      pthread_cond_broadcast (&jobs_cond);
      pthread_mutex_unlock (&jobs_lock);
      continue;
    }
    pthread_mutex_lock (&jobs_lock);
    bool stop = vm_stop_request;
    if (park_request) {
      /* Holding the GVL, outside any Ruby call: the state a thread
       * can be brought back to in the child (vm_resume).
       */
      parked = true;
      pthread_cond_broadcast (&jobs_cond);
      while (park_request)
        pthread_cond_wait (&jobs_cond, &jobs_lock);
      parked = false;
    }
    pthread_mutex_unlock (&jobs_lock);
    if (stop)
      break;
  }
}

static void *
vm_main (void *startup)
{
  sem_t *ready = startup;
  struct sigaction saved[NR_SIGNALS];

  /* The stack Ruby's collector scans starts in this frame. */
  RUBY_INIT_STACK;

  /* ruby_setup installs handlers for the signals the server handles
   * (SIGTERM, SIGINT, ...); put the server's back.
   */
  for (size_t i = 0; i < NR_SIGNALS; i++)
    sigaction (server_signals[i], NULL, &saved[i]);
  /* Ruby also gives the thread an alternate signal stack of its own;
   * the one it had goes back before the thread ends (a sanitizer's
   * runtime frees the one it set up).
   */
  sigaltstack (NULL, &vm_altstack);
  int state = ruby_setup ();
  if (state == 0) {
    /* The ruby command's start-up, on an empty program: it loads what
     * ruby_setup leaves out, the core methods written in Ruby
     * (GC.start, Kernel#then, ...) and rubygems, so that scripts can
     * require gems.  The script itself is loaded later, by config.
     */
    static char arg0[] = "nbdkit", arg1[] = "-e", arg2[] = "";
    char *argv[] = { arg0, arg1, arg2, NULL };
    void *node = ruby_options (3, argv);
    if (!ruby_executable_node (node, &state) && state == 0)
      state = -1;
  }
  for (size_t i = 0; i < NR_SIGNALS; i++)
    sigaction (server_signals[i], &saved[i], NULL);
  if (state != 0) {
    if (asprintf (&vm_error, "the Ruby VM did not start (state %d)",
                  state) == -1)
      vm_error = NULL;
    sem_post (ready);
    return NULL;
  }
  ruby_script ("nbdkit");
  for (int i = 0; i < 4; i++) {
    vm_args[i] = Qnil;
    rb_gc_register_address (&vm_args[i]);
  }
  nbdkit_module = rb_define_module ("Nbdkit");
  rb_define_module_function (nbdkit_module, "set_error",
                             nbdkit_set_error_rb, 1);
  rb_define_module_function (nbdkit_module, "probe", nbdkit_probe_rb, -1);
  rb_define_module_function (nbdkit_module, "disconnect",
                             nbdkit_disconnect_rb, -1);
  rb_define_module_function (nbdkit_module, "parse_probability",
                             nbdkit_parse_probability_rb, 2);
  rb_define_module_function (nbdkit_module, "parse_delay",
                             nbdkit_parse_delay_rb, 2);
  vm_ec = ruby_current_ec;
  vm_started = true;
  sem_post (ready);

  serve ();
  ruby_cleanup (0);
  sigaltstack (&vm_altstack, NULL);
  return NULL;
}

/* ---- fork ----
 *
 * A thread does not survive fork(2), and nbdkit forks into the
 * background after start-up (without -f), when the script is loaded
 * and the VM set up on the VM thread.  In the child the VM's memory
 * is all there, the VM thread's stack too (it is ours, mapped in
 * load), but no thread runs on it.  So:
 *
 * - before any fork (pthread_atfork), the VM thread is parked: it
 *   stops between jobs, holding the GVL, outside any Ruby call;
 * - in the server's child (after_fork), a new thread is started on
 *   the same stack, so glibc puts its thread descriptor where the old
 *   one was and pthread_self () is what Ruby recorded; it sets Ruby's
 *   thread-local execution context to the VM thread's and calls
 *   rb_thread_atfork, which is what Ruby itself runs in a child after
 *   Process.fork (the surviving thread becomes the VM's main thread,
 *   the GVL and the other threads' records are reset), then serves.
 *
 * The new thread's frames overwrite the old thread's, which were only
 * the parked loop; the collector scans from the new frames up to the
 * stack start Ruby recorded in vm_main, at the same depth.
 */
static void
vm_prepare_fork (void)
{
  if (!vm_started || getpid () != vm_pid ||
      pthread_equal (pthread_self (), vm_thread))
    return;
  pthread_mutex_lock (&jobs_lock);
  park_request = true;
  pthread_cond_broadcast (&jobs_cond);
  while (!parked && !vm_stop_request)
    pthread_cond_wait (&jobs_cond, &jobs_lock);
  pthread_mutex_unlock (&jobs_lock);
}

static void
vm_parent_after_fork (void)
{
  if (!vm_started || getpid () != vm_pid ||
      pthread_equal (pthread_self (), vm_thread))
    return;
  pthread_mutex_lock (&jobs_lock);
  park_request = false;
  pthread_cond_broadcast (&jobs_cond);
  pthread_mutex_unlock (&jobs_lock);
}

static void *
vm_resume (void *startup)
{
  sem_t *ready = startup;

  ruby_current_ec = vm_ec;
  rb_thread_atfork ();
  sem_post (ready);
  serve ();
  ruby_cleanup (0);
  sigaltstack (&vm_altstack, NULL);
  return NULL;
}

/* Start a thread on STACK running FN; 0 or an errno. */
static int
start_vm_thread (void *(*fn) (void *))
{
  pthread_attr_t attr;
  sem_t ready;
  int r;

  sem_init (&ready, 0, 0);
  pthread_attr_init (&attr);
  pthread_attr_setstack (&attr, vm_stack, VM_STACK_SIZE);
  r = pthread_create (&vm_thread, &attr, fn, &ready);
  pthread_attr_destroy (&attr);
  if (r == 0)
    while (sem_wait (&ready) == -1 && errno == EINTR)
      ;
  sem_destroy (&ready);
  return r;
}

/* ---- caller side ---- */

/* Log the job's error in the caller's thread and set its errno. */
int
vm_finish (struct job *job)
{
  if (job->ret == -1) {
    if (job->msg)
      nbdkit_error ("%s", job->msg);
    else
      nbdkit_error ("%s: %s: failed (out of memory)", vm_script,
                    job->method ? job->method : "ruby");
    nbdkit_set_error (job->err ? job->err : EIO);
  }
  free (job->msg);
  job->msg = NULL;
  return job->ret;
}

void
vm_job_init (struct job *job, const char *method, void (*fn) (struct job *))
{
  memset (job, 0, sizeof *job);
  job->fn = fn;
  job->method = method;
  job->id = nbdkit_connection_id ();
  job->cookie = nbdkit_request_cookie ();
}



/* ---- start and stop ---- */

/* Start the VM thread and set up Ruby on it: in load, so that a
 * failure is reported by config (load cannot fail).
 */
void
vm_start (void)
{
  int r;

  vm_pid = getpid ();
  /* Ruby's own threads get 1 MiB; scripts recurse: be generous.  The
   * stack is ours so that a thread can take it over after fork.
   */
  vm_stack = mmap (NULL, VM_STACK_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (vm_stack == MAP_FAILED) {
    vm_stack = NULL;
    if (asprintf (&vm_error, "mmap: %m") == -1)
      vm_error = NULL;
    return;
  }
  /* A guard page at the bottom: an overflow faults, not corrupts. */
  mprotect (vm_stack, 4096, PROT_NONE);
  r = start_vm_thread (vm_main);
  if (r != 0) {
    errno = r;
    if (asprintf (&vm_error, "cannot start the Ruby thread: %m") == -1)
      vm_error = NULL;
    return;
  }
  if (!vm_started) {
    pthread_join (vm_thread, NULL);
    return;
  }
  pthread_atfork (vm_prepare_fork, vm_parent_after_fork, NULL);
}

void
vm_stop (void)
{
  /* The VM thread is not there to stop in a forked child. */
  if (vm_started && getpid () == vm_pid) {
    pthread_mutex_lock (&jobs_lock);
    vm_stop_request = true;
    pthread_cond_broadcast (&jobs_cond);
    pthread_mutex_unlock (&jobs_lock);
    pthread_join (vm_thread, NULL);
  }
  /* The stack stays mapped: the process is ending. */
  free (vm_error);
  vm_error = NULL;
}

/* In the child of the daemon fork: bring the VM thread back (see
 * "fork" above).
 */
int
vm_after_fork (void)
{
  if (!vm_started || getpid () == vm_pid)
    return 0;
  /* The old thread may have been waiting on these: start afresh. */
  pthread_mutex_init (&call_lock, NULL);
  pthread_mutex_init (&jobs_lock, NULL);
  pthread_cond_init (&jobs_cond, NULL);
  park_request = parked = vm_interrupted = false;
  current = NULL;
  vm_pid = getpid ();
  pthread_t old = vm_thread;
  int r = start_vm_thread (vm_resume);
  if (r != 0) {
    errno = r;
    nbdkit_error ("%s: cannot restart the Ruby thread after fork: %m",
                  vm_script);
    vm_started = false;
    return -1;
  }
  /* Ruby signals its threads by pthread_t: the new one must be the
   * old one's double (it is, with glibc: the descriptor sits at the
   * top of the given stack).
   */
  if (!pthread_equal (old, vm_thread)) {
    nbdkit_error ("%s: the Ruby thread could not be restarted in the "
                  "background process: run nbdkit with -f", vm_script);
    return -1;
  }
  return 0;
}
