/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Running one child process to the end: the one place in plugins and
 * filters that starts a program.
 *
 *   struct subprocess sp = { .shell_command = "mke2fs ...",
 *                            .stdin_mode = SUBPROCESS_NULL,
 *                            .stderr_mode = SUBPROCESS_PIPE };
 *   switch (subprocess_run (&sp)) { ... }
 *   ... sp.status, subprocess_last_line (&sp) ...
 *   subprocess_free (&sp);
 *
 * The caller fills in what to run and where each standard stream goes;
 * subprocess_run starts the program (posix_spawn: no fork of a large
 * server, no pthread_atfork handlers), feeds its stdin and drains its
 * stdout and stderr together with poll, so neither side can fill a
 * pipe and wait for the other, and waits for it.  It is safe from any
 * thread: the descriptors it makes are close-on-exec, so a program
 * started by another thread never holds them, and a SIGPIPE raised by
 * a child that stops reading its input is swallowed, not delivered.
 *
 * Nothing here reports errors: the caller turns the outcome into its
 * own messages.
 */
#ifndef NBDKIT_SUBPROCESS_H
#define NBDKIT_SUBPROCESS_H

#include <stdbool.h>
#include <stddef.h>

/* Where one of the child's standard streams goes.  The zero value
 * leaves it as the caller's own.
 */
enum subprocess_mode {
  SUBPROCESS_INHERIT = 0,       /* the caller's stdin/stdout/stderr */
  SUBPROCESS_NULL,              /* /dev/null */
  SUBPROCESS_FD,                /* the descriptor given in *_fd */
  SUBPROCESS_PIPE,              /* stdin: fed from in/in_len;
                                   stdout, stderr: kept in out/err */
  SUBPROCESS_DISCARD,           /* stdout, stderr: a pipe read and
                                   thrown away */
};

/* A growing buffer: the same three fields as a vector of char. */
struct subprocess_buffer {
  char *ptr;
  size_t len;
  size_t cap;
};

enum subprocess_outcome {
  SUBPROCESS_FINISHED,          /* it ran and was waited for: see
                                   status (and exec_errno) */
  SUBPROCESS_ERROR,             /* a call failed: errno, failed_call */
  SUBPROCESS_TIMED_OUT,         /* killed with SIGKILL at the limit */
};

struct subprocess {
  /* What to run: either SHELL_COMMAND, run as /bin/sh -c, or ARGV
   * (NULL-terminated).  FILE is the program for ARGV (NULL: ARGV[0]);
   * a name without '/' is looked for in SEARCH_PATH, a colon list
   * (NULL: $PATH, or /bin:/usr/bin without one).
   */
  const char *shell_command;
  const char *const *argv;
  const char *file;
  const char *search_path;

  /* Changes to the caller's environment for the child, applied in
   * order: "NAME=VALUE" sets NAME, "NAME" unsets it.  NULL-terminated,
   * or NULL for none.
   */
  const char *const *env;

  /* The streams.  With stdin SUBPROCESS_PIPE the child reads IN_LEN
   * bytes of IN, then end of file (also when IN_LEN is 0).  With
   * stdout SUBPROCESS_PIPE at most OUT_MAX bytes are kept in OUT
   * (SIZE_MAX: no limit; 0: none may come); more sets out_overflow and
   * closes the pipe, and with KILL_ON_OVERFLOW also kills the child.  With stderr
   * SUBPROCESS_PIPE, ERR keeps ERR_MAX bytes (0: 4096): the first ones,
   * or the last ones with ERR_KEEP_TAIL, followed by a '\0'.
   */
  enum subprocess_mode stdin_mode, stdout_mode, stderr_mode;
  int stdin_fd, stdout_fd, stderr_fd;
  const void *in;
  size_t in_len;
  size_t out_max;
  bool kill_on_overflow;
  size_t err_max;
  bool err_keep_tail;

  /* PASS_FD (if above 2) stays open in the child under the same
   * number, although close-on-exec in the caller.
   */
  int pass_fd;

  /* While the child runs, WATCH (if not NULL) is called each time
   * WATCH_FD is readable or closed; it returns -1 to be called no more.
   */
  int watch_fd;
  int (*watch) (void *opaque);
  void *watch_opaque;

  /* SIGPIPE back to its default action and no blocked signals in the
   * child (otherwise it inherits the caller's, as a forked child does).
   */
  bool default_signals;

  /* Kill the child with SIGKILL after this many milliseconds (0: no
   * limit): the whole run, waiting for its exit included.
   */
  unsigned timeout_ms;

  /* Results.  OUT and ERR belong to the caller (subprocess_free frees
   * them); a buffer given in OUT is appended to.  STATUS is a wait
   * status.  A program that could not be executed gives the status of
   * exit code 127, as the shell does, and its errno in EXEC_ERRNO
   * (else 0).  FAILED_CALL names the call behind SUBPROCESS_ERROR
   * ("pipe", "fcntl", "posix_spawn", "/dev/null", "poll", "waitpid",
   * "malloc").
   */
  struct subprocess_buffer out, err;
  int status;
  int exec_errno;
  bool out_overflow;
  const char *failed_call;
};

extern enum subprocess_outcome subprocess_run (struct subprocess *sp);

/* Free OUT and ERR. */
extern void subprocess_free (struct subprocess *sp);

/* The exit code of a wait STATUS, or 128 + the signal that killed it,
 * as the shell prints it in $?.
 */
extern int subprocess_code (int status);

/* The last line of ERR with anything but blanks on it, its trailing
 * blanks removed and tabs made spaces, so that it fits in one log
 * line; "" if none.  Points into ERR (and changes it).
 */
extern const char *subprocess_last_line (struct subprocess *sp);

#endif /* NBDKIT_SUBPROCESS_H */
