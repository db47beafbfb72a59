/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of subprocess.c: exit codes and signals, a large stdin
 * echoed back without deadlock, the stdout limit, the last stderr
 * line, the time limit, a missing command, the environment, passed
 * descriptors and the signal set-up of the child.
 *
 * SIGPIPE keeps its default action here, so a write to a child that
 * does not read, if it leaked the signal, would kill this test.
 */
#include <config.h>

#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "subprocess.h"

#define BIG (3 << 20)           /* many times what a pipe holds */

static int
sh (struct subprocess *sp, const char *cmd)
{
  sp->shell_command = cmd;
  return subprocess_run (sp);
}

static void
test_exit_codes (void)
{
  struct subprocess sp = { 0 };

  assert (sh (&sp, "exit 0") == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0);
  assert (sh (&sp, "exit 3") == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 3);
  assert (subprocess_code (sp.status) == 3);
  assert (sp.exec_errno == 0);
  assert (sh (&sp, "kill -TERM $$; sleep 5") == SUBPROCESS_FINISHED);
  assert (WIFSIGNALED (sp.status) && WTERMSIG (sp.status) == SIGTERM);
  assert (subprocess_code (sp.status) == 128 + SIGTERM);
  subprocess_free (&sp);
}

static void
test_echo_big (void)
{
  const char *const argv[] = { "cat", NULL };
  struct subprocess sp = {
    .argv = argv,
    .stdin_mode = SUBPROCESS_PIPE, .stdout_mode = SUBPROCESS_PIPE,
    .out_max = SIZE_MAX,
  };
  char *in = malloc (BIG);
  size_t i;

  assert (in);
  for (i = 0; i < BIG; i++)
    in[i] = i * 13 + (i >> 16);
  sp.in = in;
  sp.in_len = BIG;
  assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0);
  assert (sp.out.len == BIG);
  assert (memcmp (sp.out.ptr, in, BIG) == 0);
  assert (!sp.out_overflow);

  /* The empty input is end of file at once. */
  sp.in_len = 0;
  sp.out.len = 0;
  assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
  assert (WEXITSTATUS (sp.status) == 0 && sp.out.len == 0);

  /* A child that reads none of it: no SIGPIPE here, no hang. */
  sp.in_len = BIG;
  assert (sh (&sp, "exit 4") == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 4);
  free (in);
  subprocess_free (&sp);
}

static void
test_stdout_limit (void)
{
  struct subprocess sp = {
    .stdout_mode = SUBPROCESS_PIPE, .out_max = 1000,
    .kill_on_overflow = true, .timeout_ms = 20000,
  };

  /* Endless output: cut at the limit, and the child killed. */
  assert (sh (&sp, "while :; do echo xxxxxxxx; done") ==
          SUBPROCESS_FINISHED);
  assert (sp.out_overflow);
  assert (sp.out.len == 1000);
  assert (memcmp (sp.out.ptr, "xxxxxxxx\n", 9) == 0);
  assert (WIFSIGNALED (sp.status) && WTERMSIG (sp.status) == SIGKILL);

  /* A limit of 0 takes nothing, and stops an endless writer. */
  sp.out.len = 0;
  sp.out_max = 0;
  sp.kill_on_overflow = false;
  sp.stderr_mode = SUBPROCESS_DISCARD;
  assert (sh (&sp, "trap '' PIPE; while echo x; do :; done; exit 7") ==
          SUBPROCESS_FINISHED);
  assert (sp.out_overflow && sp.out.len == 0);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 7);
  sp.out_max = 1000;
  sp.kill_on_overflow = true;
  sp.stderr_mode = SUBPROCESS_INHERIT;

  /* Exactly the limit is not too much. */
  sp.out.len = 0;
  assert (sh (&sp, "head -c 1000 /dev/zero") == SUBPROCESS_FINISHED);
  assert (!sp.out_overflow && sp.out.len == 1000);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0);
  subprocess_free (&sp);

  /* Discarded output is read to the end however long. */
  struct subprocess d = { .stdout_mode = SUBPROCESS_DISCARD };
  assert (sh (&d, "head -c 5000000 /dev/zero") == SUBPROCESS_FINISHED);
  assert (WIFEXITED (d.status) && WEXITSTATUS (d.status) == 0);
  assert (d.out.len == 0 && !d.out_overflow);
}

static void
test_stderr (void)
{
  struct subprocess sp = { .stderr_mode = SUBPROCESS_PIPE };

  assert (sh (&sp, "printf 'first\\nthe\\treason \\r\\n\\n  \\n' >&2; "
              "exit 1") == SUBPROCESS_FINISHED);
  assert (WEXITSTATUS (sp.status) == 1);
  assert (strcmp (subprocess_last_line (&sp), "the reason") == 0);

  assert (sh (&sp, "exit 1") == SUBPROCESS_FINISHED);
  assert (strcmp (subprocess_last_line (&sp), "") == 0);

  /* The tail of much more than ERR_MAX keeps the last line whole. */
  sp.err_keep_tail = true;
  assert (sh (&sp, "head -c 100000 /dev/zero | tr '\\0' a >&2; "
              "echo >&2; echo last >&2") == SUBPROCESS_FINISHED);
  assert (sp.err.len == 4096);
  assert (strcmp (subprocess_last_line (&sp), "last") == 0);

  /* The head keeps the first ERR_MAX bytes. */
  sp.err_keep_tail = false;
  sp.err_max = 10;
  assert (sh (&sp, "echo 0123456789abc >&2") == SUBPROCESS_FINISHED);
  assert (sp.err.len == 10 && strcmp (sp.err.ptr, "0123456789") == 0);
  subprocess_free (&sp);
}

static void
test_time_limit (void)
{
  struct subprocess sp = { .timeout_ms = 300 };
  struct timespec t0, t1;

  clock_gettime (CLOCK_MONOTONIC, &t0);
  assert (sh (&sp, "sleep 30") == SUBPROCESS_TIMED_OUT);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  assert (WIFSIGNALED (sp.status) && WTERMSIG (sp.status) == SIGKILL);
  assert (t1.tv_sec - t0.tv_sec < 10);

  /* The limit also bounds the wait after the output is closed. */
  sp.stdout_mode = SUBPROCESS_PIPE;
  sp.out_max = SIZE_MAX;
  assert (sh (&sp, "exec >/dev/null; sleep 30") == SUBPROCESS_TIMED_OUT);

  /* A quick child is not touched. */
  assert (sh (&sp, "echo hi") == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && sp.out.len == 3);
  subprocess_free (&sp);
}

static void
test_missing (void)
{
  const char *const argv[] = { "no-such-command-for-test-subprocess", NULL };
  const char *const abs_argv[] = { "/nonexistent/command", NULL };
  struct subprocess sp = { .argv = argv };

  assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 127);
  assert (sp.exec_errno == ENOENT);
  sp.argv = abs_argv;
  assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
  assert (WEXITSTATUS (sp.status) == 127 && sp.exec_errno == ENOENT);

  /* A search path of its own. */
  const char *const true_argv[] = { "true", NULL };
  sp.argv = true_argv;
  sp.search_path = "/nonexistent:/bin:/usr/bin";
  assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0);
  assert (sp.exec_errno == 0);
  sp.search_path = "/nonexistent";
  assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
  assert (WEXITSTATUS (sp.status) == 127 && sp.exec_errno == ENOENT);
}

static void
test_env (void)
{
  const char *const edits[] = {
    "TS_A=one", "TS_B", "TS_C=old", "TS_C=new", NULL
  };
  struct subprocess sp = {
    .env = edits, .stdout_mode = SUBPROCESS_PIPE, .out_max = SIZE_MAX,
  };

  setenv ("TS_A", "parent", 1);
  setenv ("TS_B", "parent", 1);
  assert (sh (&sp, "printf %s \"$TS_A,${TS_B-unset},$TS_C\"") ==
          SUBPROCESS_FINISHED);
  assert (sp.out.len == strlen ("one,unset,new"));
  assert (memcmp (sp.out.ptr, "one,unset,new", sp.out.len) == 0);
  /* The caller's own environment is unchanged. */
  assert (strcmp (getenv ("TS_A"), "parent") == 0);
  subprocess_free (&sp);
}

struct watched {
  int fd;
  char buf[64];
  size_t len;
};

static int
watch_fn (void *opaque)
{
  struct watched *w = opaque;
  ssize_t n = read (w->fd, w->buf + w->len, sizeof w->buf - 1 - w->len);
  if (n <= 0)
    return -1;
  w->len += n;
  return 0;
}

static void
test_fds (void)
{
  struct subprocess sp = {
    .stdout_mode = SUBPROCESS_PIPE, .out_max = SIZE_MAX,
  };
  struct watched w = { .len = 0 };
  char cmd[128];
  int p[2];

  /* The pass descriptor reaches the child although close-on-exec; the
   * watch callback sees what it writes while it runs.
   */
  assert (pipe2 (p, O_CLOEXEC) == 0);
  w.fd = p[0];
  sp.pass_fd = p[1];
  sp.watch_fd = p[0];
  sp.watch = watch_fn;
  sp.watch_opaque = &w;
  snprintf (cmd, sizeof cmd, "echo probe >&%d; sleep 0.2; echo out", p[1]);
  assert (sh (&sp, cmd) == SUBPROCESS_FINISHED);
  assert (WIFEXITED (sp.status) && WEXITSTATUS (sp.status) == 0);
  assert (w.len == 6 && memcmp (w.buf, "probe\n", 6) == 0);
  assert (sp.out.len == 4);

  /* Without pass_fd it is closed in the child. */
  sp.pass_fd = 0;
  sp.watch = NULL;
  sp.stderr_mode = SUBPROCESS_DISCARD;
  sp.out.len = 0;
  snprintf (cmd, sizeof cmd, "echo x >&%d", p[1]);
  assert (sh (&sp, cmd) == SUBPROCESS_FINISHED);
  assert (WEXITSTATUS (sp.status) != 0);
  close (p[0]);
  close (p[1]);

  /* stdout to a given descriptor, stdin from /dev/null. */
  FILE *tmp = tmpfile ();
  assert (tmp);
  struct subprocess f = {
    .stdin_mode = SUBPROCESS_NULL,
    .stdout_mode = SUBPROCESS_FD, .stdout_fd = fileno (tmp),
  };
  assert (sh (&f, "cat; echo to-file") == SUBPROCESS_FINISHED);
  assert (WEXITSTATUS (f.status) == 0);
  char buf[32] = "";
  assert (pread (fileno (tmp), buf, sizeof buf - 1, 0) == 8);
  assert (strcmp (buf, "to-file\n") == 0);
  fclose (tmp);

  /* stdout onto our stderr, which is descriptor 2 (cc's case), with
   * stderr a pipe: the copy of 2 is made before 2 is replaced.
   */
  tmp = tmpfile ();
  assert (tmp);
  int saved = dup (2);
  assert (saved >= 0 && dup2 (fileno (tmp), 2) == 2);
  struct subprocess e = {
    .stdout_mode = SUBPROCESS_FD, .stdout_fd = 2,
    .stderr_mode = SUBPROCESS_PIPE,
  };
  int r = sh (&e, "echo to-stderr; echo error >&2");
  assert (dup2 (saved, 2) == 2);
  close (saved);
  assert (r == SUBPROCESS_FINISHED);
  assert (WIFEXITED (e.status) && WEXITSTATUS (e.status) == 0);
  memset (buf, 0, sizeof buf);
  assert (pread (fileno (tmp), buf, sizeof buf - 1, 0) == 10);
  assert (strcmp (buf, "to-stderr\n") == 0);
  assert (strcmp (subprocess_last_line (&e), "error") == 0);
  fclose (tmp);
  subprocess_free (&e);
  subprocess_free (&sp);
}

/* SIGPIPE's action in a child, from its /proc status: 1 if ignored. */
static int
child_ignores_sigpipe (bool default_signals)
{
  struct subprocess sp = {
    .stdout_mode = SUBPROCESS_PIPE, .out_max = SIZE_MAX,
    .default_signals = default_signals,
  };
  unsigned long long mask;
  int r;

  assert (sh (&sp, "sed -n 's/^SigIgn:\\t*//p' /proc/$$/status") ==
          SUBPROCESS_FINISHED);
  assert (sp.out.len > 0);
  sp.out.ptr[sp.out.len - 1] = '\0';
  mask = strtoull (sp.out.ptr, NULL, 16);
  r = (mask >> (SIGPIPE - 1)) & 1;
  subprocess_free (&sp);
  return r;
}

static void
test_signals (void)
{
  if (access ("/proc/self/status", R_OK) == -1)
    return;
  signal (SIGPIPE, SIG_IGN);
  assert (child_ignores_sigpipe (false) == 1);
  assert (child_ignores_sigpipe (true) == 0);
  signal (SIGPIPE, SIG_DFL);
}

int
main (void)
{
  /* A deadlock fails the test rather than hanging it. */
  alarm (120);
  test_exit_codes ();
  test_echo_big ();
  test_stdout_limit ();
  test_stderr ();
  test_time_limit ();
  test_missing ();
  test_env ();
  test_fds ();
  test_signals ();
  printf ("test-subprocess: ok\n");
  return 0;
}
