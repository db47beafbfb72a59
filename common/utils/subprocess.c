/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Running one child process: see subprocess.h for the interface.
 *
 * A run has three steps.  Set-up (start) makes the pipes and the
 * environment and spawns the program; every descriptor it makes is
 * close-on-exec and above stderr, so the child's dup2 onto 0, 1 and 2
 * never overwrites a source it still needs, even in a process started
 * with those closed.  The loop (pump) polls the pipes, feeding stdin
 * from a non-blocking descriptor and draining stdout and stderr as
 * they fill, until the three pipes are closed.  The end (reap) waits
 * for the child, within the time limit if there is one.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "subprocess.h"

extern char **environ;

#define DEFAULT_ERR_MAX 4096
#define READ_CHUNK 65536

/* The parent's side of one run. */
struct run {
  struct subprocess *sp;
  pid_t pid;
  int child_fd[3];              /* what the child gets as 0, 1, 2 */
  int in_fd, out_fd, err_fd;    /* our ends of the pipes, or -1 */
  size_t in_pos;
  int64_t deadline;             /* CLOCK_MONOTONIC ns, 0: none */
  bool timed_out;
  char **envp;                  /* ours to free (not the strings) */
};

static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
close_fd (int *fd)
{
  if (*fd >= 0) {
    close (*fd);
    *fd = -1;
  }
}

/* Move *FD above stderr (keeping it close-on-exec).  -1 on error. */
static int
above_stderr (int *fd)
{
  if (*fd > 2)
    return 0;
  int nfd = fcntl (*fd, F_DUPFD_CLOEXEC, 3);
  if (nfd == -1)
    return -1;
  close (*fd);
  *fd = nfd;
  return 0;
}

static int
make_pipe (int fd[2])
{
  if (pipe2 (fd, O_CLOEXEC) == -1)
    return -1;
  if (above_stderr (&fd[0]) == -1 || above_stderr (&fd[1]) == -1) {
    int e = errno;
    close_fd (&fd[0]);
    close_fd (&fd[1]);
    errno = e;
    return -1;
  }
  return 0;
}

/* Whether environment entries or edits A and B ("NAME=VALUE" or, for
 * an edit, "NAME") have the same name.
 */
static bool
same_name (const char *a, const char *b)
{
  size_t n = strcspn (a, "=");
  return n == strcspn (b, "=") && strncmp (a, b, n) == 0;
}

/* The child's environment: environ with EDITS applied.  Only the
 * array is allocated.  NULL (errno set) on error.
 */
static char **
make_env (const char *const *edits)
{
  size_t n = 0, nedits = 0, i, j, k = 0;
  char **env;

  while (environ[n])
    n++;
  while (edits[nedits])
    nedits++;
  env = calloc (n + nedits + 1, sizeof *env);
  if (env == NULL)
    return NULL;
  for (i = 0; i < n; i++) {
    for (j = 0; j < nedits; j++)
      if (same_name (environ[i], edits[j]))
        break;
    if (j == nedits)
      env[k++] = environ[i];
  }
  /* Of several edits of one name, the last wins. */
  for (i = 0; i < nedits; i++) {
    if (strchr (edits[i], '=') == NULL)
      continue;
    for (j = i + 1; j < nedits; j++)
      if (same_name (edits[i], edits[j]))
        break;
    if (j == nedits)
      env[k++] = (char *) edits[i];
  }
  env[k] = NULL;
  return env;
}

/* Wire child stream FD (0, 1, 2) as MODE says.  DEVNULL is opened on
 * first use.  -1 with SP->failed_call set on error.
 */
static int
wire (struct run *r, int fd, enum subprocess_mode mode, int user_fd,
      int *devnull, int *ours)
{
  int p[2];

  switch (mode) {
  case SUBPROCESS_INHERIT:
    return 0;
  case SUBPROCESS_NULL:
    if (*devnull == -1) {
      *devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
      if (*devnull == -1 || above_stderr (devnull) == -1) {
        r->sp->failed_call = "/dev/null";
        return -1;
      }
    }
    r->child_fd[fd] = fcntl (*devnull, F_DUPFD_CLOEXEC, 3);
    break;
  case SUBPROCESS_FD:
    /* A copy: the caller's may be 0, 1 or 2, which the child's own
     * dup2s may overwrite before using it.
     */
    r->child_fd[fd] = fcntl (user_fd, F_DUPFD_CLOEXEC, 3);
    break;
  case SUBPROCESS_PIPE:
  case SUBPROCESS_DISCARD:
    if (make_pipe (p) == -1) {
      r->sp->failed_call = "pipe";
      return -1;
    }
    r->child_fd[fd] = fd == 0 ? p[0] : p[1];
    *ours = fd == 0 ? p[1] : p[0];
    return 0;
  }
  if (r->child_fd[fd] == -1) {
    r->sp->failed_call = "fcntl";
    return -1;
  }
  return 0;
}

/* posix_spawn fails with the errno of the exec too, but ENOMEM and
 * EAGAIN (no process could be made) are errors of the run itself.
 */
static bool
is_exec_error (int e)
{
  return e != EAGAIN && e != ENOMEM;
}

/* Spawn FILE, searched for in the path if it has no '/', as execvp
 * does.  Returns 0 or an errno.
 */
static int
spawn (struct run *r, const char *file, char *const *argv,
       const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr)
{
  const char *path, *p, *end;
  bool eacces = false;
  int e = ENOENT;

  char *const *envp = r->envp ? r->envp : environ;

  if (strchr (file, '/'))
    return posix_spawn (&r->pid, file, fa, attr, argv, envp);

  path = r->sp->search_path;
  if (path == NULL)
    path = getenv ("PATH");
  if (path == NULL)
    path = "/bin:/usr/bin";
  for (p = path; ; p = end + 1) {
    end = strchrnul (p, ':');
    size_t dirlen = end - p;
    char *full = malloc (dirlen + strlen (file) + 2);
    if (full == NULL)
      return errno;
    /* An empty entry is the current directory. */
    if (dirlen == 0)
      strcpy (full, file);
    else
      sprintf (full, "%.*s/%s", (int) dirlen, p, file);
    e = posix_spawn (&r->pid, full, fa, attr, argv, envp);
    free (full);
    if (e == 0)
      return 0;
    if (e == EACCES)
      eacces = true;
    else if (e != ENOENT && e != ENOTDIR)
      return e;
    if (*end == '\0')
      break;
  }
  return eacces ? EACCES : e;
}

/* Set up the streams and start the program.  -1 on error. */
static int
start (struct run *r)
{
  struct subprocess *sp = r->sp;
  const char *shell_argv[] = { "sh", "-c", sp->shell_command, NULL };
  const char *const *argv = sp->shell_command ? shell_argv : sp->argv;
  const char *file = sp->shell_command ? "/bin/sh"
    : sp->file ? sp->file : argv[0];
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  int devnull = -1, ret = -1, e, i;

  if (sp->env) {
    r->envp = make_env (sp->env);
    if (r->envp == NULL) {
      sp->failed_call = "malloc";
      return -1;
    }
  }
  if (wire (r, 0, sp->stdin_mode, sp->stdin_fd, &devnull, &r->in_fd) == -1 ||
      wire (r, 1, sp->stdout_mode, sp->stdout_fd, &devnull,
            &r->out_fd) == -1 ||
      wire (r, 2, sp->stderr_mode, sp->stderr_fd, &devnull,
            &r->err_fd) == -1) {
    e = errno;
    close_fd (&devnull);
    errno = e;
    return -1;
  }
  close_fd (&devnull);
  if (sp->stderr_mode == SUBPROCESS_PIPE) {
    size_t max = sp->err_max ? sp->err_max : DEFAULT_ERR_MAX;
    if (sp->err.cap < max + 1) {
      char *p = realloc (sp->err.ptr, max + 1);
      if (p == NULL) {
        sp->failed_call = "malloc";
        return -1;
      }
      sp->err.ptr = p;
      sp->err.cap = max + 1;
    }
    sp->err.len = 0;
    sp->err.ptr[0] = '\0';
  }

  if ((e = posix_spawn_file_actions_init (&fa)) != 0) {
    errno = e;
    sp->failed_call = "posix_spawn";
    return -1;
  }
  if ((e = posix_spawnattr_init (&attr)) != 0) {
    posix_spawn_file_actions_destroy (&fa);
    errno = e;
    sp->failed_call = "posix_spawn";
    return -1;
  }
  for (i = 0; i < 3 && e == 0; i++)
    if (r->child_fd[i] >= 0)
      e = posix_spawn_file_actions_adddup2 (&fa, r->child_fd[i], i);
  /* dup2 onto itself clears close-on-exec in the child only. */
  if (e == 0 && sp->pass_fd > 2)
    e = posix_spawn_file_actions_adddup2 (&fa, sp->pass_fd, sp->pass_fd);
  if (e == 0 && sp->default_signals) {
    sigset_t pipe_set, none;
    sigemptyset (&pipe_set);
    sigaddset (&pipe_set, SIGPIPE);
    sigemptyset (&none);
    e = posix_spawnattr_setsigdefault (&attr, &pipe_set);
    if (e == 0)
      e = posix_spawnattr_setsigmask (&attr, &none);
    if (e == 0)
      e = posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGDEF |
                                    POSIX_SPAWN_SETSIGMASK);
  }
  if (e == 0) {
    e = spawn (r, file, (char *const *) argv, &fa, &attr);
    if (e != 0 && is_exec_error (e)) {
      /* What a shell says of a command it cannot run. */
      sp->exec_errno = e;
      sp->status = W_EXITCODE (127, 0);
      r->pid = -1;
      e = 0;
    }
  }
  if (e != 0) {
    sp->failed_call = "posix_spawn";
    r->pid = -1;
  }
  else
    ret = 0;
  posix_spawnattr_destroy (&attr);
  posix_spawn_file_actions_destroy (&fa);
  /* The child has its copies. */
  for (i = 0; i < 3; i++)
    close_fd (&r->child_fd[i]);
  errno = e;
  return ret;
}

static int
reserve (struct subprocess_buffer *b, size_t n)
{
  size_t need, cap;
  char *p;

  if (__builtin_add_overflow (b->len, n, &need)) {
    errno = ENOMEM;
    return -1;
  }
  if (need <= b->cap)
    return 0;
  cap = b->cap < READ_CHUNK ? READ_CHUNK : b->cap;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  p = realloc (b->ptr, cap);
  if (p == NULL)
    return -1;
  b->ptr = p;
  b->cap = cap;
  return 0;
}

/* Feed stdin once it is writable.  A child that stops reading (EPIPE)
 * just gets no more.
 */
static void
feed (struct run *r)
{
  const struct subprocess *sp = r->sp;
  ssize_t n = write (r->in_fd, (const char *) sp->in + r->in_pos,
                     sp->in_len - r->in_pos);
  if (n == -1 && errno != EAGAIN && errno != EINTR)
    close_fd (&r->in_fd);
  else if (n > 0 && (r->in_pos += n) == sp->in_len)
    close_fd (&r->in_fd);
}

/* Read stdout once it is readable.  -1 on error. */
static int
drain_out (struct run *r)
{
  struct subprocess *sp = r->sp;
  char scratch[4096];
  char *dst = scratch;
  size_t want = sizeof scratch;
  ssize_t n;

  if (sp->stdout_mode == SUBPROCESS_PIPE) {
    /* At the limit, one byte more tells whether there is more. */
    want = sp->out_max - sp->out.len;
    if (want > READ_CHUNK)
      want = READ_CHUNK;
    if (want > 0) {
      if (reserve (&sp->out, want) == -1) {
        sp->failed_call = "malloc";
        return -1;
      }
      dst = sp->out.ptr + sp->out.len;
    }
    else
      want = 1;
  }
  n = read (r->out_fd, dst, want);
  if (n == -1 && (errno == EINTR || errno == EAGAIN))
    return 0;
  if (n <= 0) {
    close_fd (&r->out_fd);
    return 0;
  }
  if (sp->stdout_mode != SUBPROCESS_PIPE)
    return 0;
  if (dst == scratch) {
    /* Killed before the pipe closes, so it cannot die of SIGPIPE first. */
    sp->out_overflow = true;
    if (sp->kill_on_overflow)
      kill (r->pid, SIGKILL);
    close_fd (&r->out_fd);
  }
  else
    sp->out.len += n;
  return 0;
}

/* Read stderr once it is readable, keeping its head or its tail. */
static void
drain_err (struct run *r)
{
  struct subprocess *sp = r->sp;
  struct subprocess_buffer *b = &sp->err;
  char buf[4096];
  size_t max = sp->err_max ? sp->err_max : DEFAULT_ERR_MAX, keep;
  ssize_t n = read (r->err_fd, buf, sizeof buf);

  if (n == -1 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0) {
    close_fd (&r->err_fd);
    return;
  }
  if (sp->stderr_mode != SUBPROCESS_PIPE)
    return;
  if (!sp->err_keep_tail) {
    keep = (size_t) n < max - b->len ? (size_t) n : max - b->len;
    memcpy (b->ptr + b->len, buf, keep);
    b->len += keep;
  }
  else if ((size_t) n >= max) {
    memcpy (b->ptr, buf + n - max, max);
    b->len = max;
  }
  else {
    if (b->len + n > max) {
      size_t drop = b->len + n - max;
      memmove (b->ptr, b->ptr + drop, b->len - drop);
      b->len -= drop;
    }
    memcpy (b->ptr + b->len, buf, n);
    b->len += n;
  }
  b->ptr[b->len] = '\0';
}

/* Milliseconds poll may wait, or -1 for ever; 0 once past the
 * deadline, which is then marked as reached.
 */
static int
poll_timeout (struct run *r)
{
  if (r->deadline == 0)
    return -1;
  int64_t left = r->deadline - now_ms ();
  if (left <= 0) {
    if (!r->timed_out) {
      r->timed_out = true;
      kill (r->pid, SIGKILL);
    }
    return 0;
  }
  return left > INT32_MAX ? INT32_MAX : (int) left;
}

/* Move data until the pipes are closed.  -1 on error. */
static int
pump (struct run *r)
{
  struct subprocess *sp = r->sp;
  bool watching = sp->watch != NULL;

  if (r->in_fd >= 0) {
    if (sp->in_len == 0)
      close_fd (&r->in_fd);
    else
      fcntl (r->in_fd, F_SETFL, O_NONBLOCK);
  }
  while (r->in_fd >= 0 || r->out_fd >= 0 || r->err_fd >= 0) {
    struct pollfd pfd[4] = {
      { .fd = r->in_fd, .events = POLLOUT },
      { .fd = r->out_fd, .events = POLLIN },
      { .fd = r->err_fd, .events = POLLIN },
      { .fd = watching ? sp->watch_fd : -1, .events = POLLIN },
    };
    int timeout = poll_timeout (r);
    if (r->timed_out)
      return 0;
    int n = poll (pfd, 4, timeout);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      sp->failed_call = "poll";
      return -1;
    }
    if (n == 0)
      continue;                 /* the deadline, checked above */
    if (r->in_fd >= 0 && pfd[0].revents)
      feed (r);
    if (r->out_fd >= 0 && pfd[1].revents && drain_out (r) == -1)
      return -1;
    if (r->err_fd >= 0 && pfd[2].revents)
      drain_err (r);
    if (watching && pfd[3].revents && sp->watch (sp->watch_opaque) == -1)
      watching = false;
  }
  return 0;
}

/* Wait for the child, within the deadline.  -1 on error. */
static int
reap (struct run *r)
{
  int status;

  for (;;) {
    bool limited = r->deadline != 0 && !r->timed_out;
    pid_t w = waitpid (r->pid, &status, limited ? WNOHANG : 0);
    if (w == r->pid)
      break;
    if (w == -1) {
      if (errno == EINTR)
        continue;
      r->sp->failed_call = "waitpid";
      r->pid = -1;
      return -1;
    }
    /* Still running, with a limit: look again shortly. */
    int left = poll_timeout (r);
    if (left > 0)
      poll (NULL, 0, left < 5 ? left : 5);
  }
  r->pid = -1;
  r->sp->status = status;
  return 0;
}

enum subprocess_outcome
subprocess_run (struct subprocess *sp)
{
  struct run r = {
    .sp = sp, .pid = -1, .child_fd = { -1, -1, -1 },
    .in_fd = -1, .out_fd = -1, .err_fd = -1,
  };
  sigset_t pipe_set, old_mask, pending;
  bool block_pipe, was_pending = false;
  int ret = -1, e = 0;

  sp->status = 0;
  sp->exec_errno = 0;
  sp->out_overflow = false;
  sp->failed_call = NULL;
  if (sp->timeout_ms)
    r.deadline = now_ms () + sp->timeout_ms;

  /* A write to a child that has stopped reading raises SIGPIPE in this
   * thread: hold it blocked, and take it back if the run raised it.
   */
  block_pipe = sp->stdin_mode == SUBPROCESS_PIPE && sp->in_len > 0;
  if (block_pipe) {
    sigemptyset (&pipe_set);
    sigaddset (&pipe_set, SIGPIPE);
    pthread_sigmask (SIG_BLOCK, &pipe_set, &old_mask);
    was_pending = sigpending (&pending) == 0 && sigismember (&pending, SIGPIPE);
  }

  if (start (&r) == 0) {
    if (r.pid == -1)
      ret = 0;                  /* it could not be executed */
    else if (pump (&r) == 0)
      ret = reap (&r);
  }
  e = errno;

  if (r.pid > 0) {
    /* Only after an error: leave no zombie. */
    kill (r.pid, SIGKILL);
    while (waitpid (r.pid, NULL, 0) == -1 && errno == EINTR)
      ;
  }
  for (int i = 0; i < 3; i++)
    close_fd (&r.child_fd[i]);
  close_fd (&r.in_fd);
  close_fd (&r.out_fd);
  close_fd (&r.err_fd);
  free (r.envp);

  if (block_pipe) {
    if (!was_pending && sigpending (&pending) == 0 &&
        sigismember (&pending, SIGPIPE)) {
      static const struct timespec zero = { 0, 0 };
      while (sigtimedwait (&pipe_set, NULL, &zero) == -1 && errno == EINTR)
        ;
    }
    pthread_sigmask (SIG_SETMASK, &old_mask, NULL);
  }

  if (ret == -1) {
    errno = e;
    return SUBPROCESS_ERROR;
  }
  return r.timed_out ? SUBPROCESS_TIMED_OUT : SUBPROCESS_FINISHED;
}

void
subprocess_free (struct subprocess *sp)
{
  free (sp->out.ptr);
  free (sp->err.ptr);
  sp->out.ptr = sp->err.ptr = NULL;
  sp->out.len = sp->out.cap = sp->err.len = sp->err.cap = 0;
}

int
subprocess_code (int status)
{
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return 255;
}

const char *
subprocess_last_line (struct subprocess *sp)
{
  char *buf = sp->err.ptr, *line, *p;
  size_t len = sp->err.len;

  if (buf == NULL)
    return "";
  buf[len] = '\0';
  while (len > 0 && strchr (" \t\r\n", buf[len - 1]))
    buf[--len] = '\0';
  line = memrchr (buf, '\n', len);
  line = line ? line + 1 : buf;
  for (p = line; *p; p++)
    if (*p == '\t')
      *p = ' ';
  return line;
}
