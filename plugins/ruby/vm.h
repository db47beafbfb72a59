/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ruby plugin's VM thread (vm.c), as the callbacks (ruby.c) see
 * it: a callback fills in a struct job, vm_run_job runs it on the VM
 * thread, vm_finish reports its error in the caller's thread.  The
 * job's fn runs on the VM thread with the GVL held: it may call Ruby,
 * put the arguments of a script method in vm_args and call it with
 * vm_call_method or vm_call_void.
 */
#ifndef NBDKIT_RUBY_VM_H
#define NBDKIT_RUBY_VM_H

#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

struct lh_call;

struct job {
  /* What to run on the VM thread (with the GVL), and its data. */
  void (*fn) (struct job *);
  const char *method;           /* the script's method, or NULL */
  int nargs;                    /* how many of vm_args it passes */
  uint64_t id, cookie;          /* the caller's connection and request */
  struct lh_call *call;         /* a data callback's (common/langhost) */
  void *handle;                 /* the handle to free */
  const char *key, *value;      /* config's parameter */

  /* Results. */
  int ret;                      /* 0, -1, or 1: no such method */
  bool found;                   /* lh_host_defined's answer */
  int err;                      /* the errno for the client */
  char *msg;                    /* the error line, logged by the caller */

  /* A probe the VM thread asks the caller to fire (Nbdkit.probe). */
  bool probe_pending;
  const char *probe_name, *probe_text;
  int64_t probe_a1, probe_a2;
  /* Nbdkit.disconnect during the job: 0 no, 1 soft, 2 forced.  The
   * caller acts on it, since only its thread knows the connection.
   */
  int disconnect;

  bool done;
};

/* Set up in load (vm_start), read-only afterwards. */
extern bool vm_started;         /* the VM thread runs, Ruby is set up */
extern char *vm_error;          /* why it could not start */
extern const char *vm_script;   /* the script's path, for messages */

/* The arguments of the script method a job calls (VM thread only). */
extern VALUE vm_args[4];

extern void vm_start (void);
extern void vm_stop (void);
extern int vm_after_fork (void);

/* In a callback's thread. */
extern void vm_job_init (struct job *job, const char *method,
                         void (*fn) (struct job *));
extern void vm_run_job (struct job *job);
extern int vm_finish (struct job *job);

/* On the VM thread, in a job's fn. */
extern bool vm_defines (const char *name);
extern int vm_call_method (struct job *job, VALUE *result);
extern void vm_call_void (struct job *job);
extern char *vm_describe_exception (VALUE exn);
extern void vm_job_error (struct job *job, int err, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

#endif /* NBDKIT_RUBY_VM_H */
