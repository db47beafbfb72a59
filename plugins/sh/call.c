/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Running one method of a script: start it (subprocess_run, which
 * feeds stdin and collects stdout and stderr), and turn its exit code
 * into a script_status.
 *
 * Callers are any of the server's threads at once (the script may ask
 * for the parallel thread model), so nothing here keeps state between
 * calls except $tmpdir and the probe helper, which are set once at
 * load.  $tmpdir is in each script's own environment, not the
 * server's, so that a --run command does not inherit it.  Pipes are
 * created close-on-exec so a script started by one thread never holds
 * another thread's pipe open.
 *
 * Probes from scripts: every script gets a fourth pipe, named by
 * $NBDKIT_PROBE_FD, and the command nbdkit-probe (written at load
 * into $tmpdir/.nbdkit-bin, which is put first on the script's PATH).
 * The command writes one record to the pipe, NAME ARG1 ARG2 TEXT, each
 * field ending in a NUL byte; this file reads the records while the
 * script runs and fires the server's generic probe for each with
 * nbdkit_probe, in the thread that runs the script, so the probe
 * carries the connection id and the request's cookie.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "now-ns.h"
#include "array-size.h"
#include "call.h"
#include "cleanup.h"
#include "minmax.h"
#include "subprocess.h"

struct script_hooks script_hooks;
char *script_tmpdir;
static pid_t tmpdir_owner;      /* a forked child must not remove it */

/* Keep at most this much of stderr for the error message. */
#define MAX_STDERR 65536

/* "PATH=$tmpdir/.nbdkit-bin:$PATH", for every script; NULL if the
 * helper could not be written (scripts then run without it).
 */
static char *probe_path_env;

/* "tmpdir=...", for every script. */
static char *tmpdir_env;

/* The longest probe record kept; a longer one is dropped whole. */
#define MAX_PROBE_RECORD 65536

/* The nbdkit-probe command.  It checks its arguments, so that a
 * script's mistake is reported to the script, and writes one record;
 * /dev/fd/N reopens the pipe, where "> &N" would limit N to one digit
 * in dash.
 */
static const char probe_helper[] =
  "#!/bin/sh\n"
  "# nbdkit-probe NAME [ARG1 [ARG2 [TEXT]]]: fire the nbdkit server's\n"
  "# probe \"user\" from a script of the sh or eval plugin.\n"
  "if [ $# -lt 1 ] || [ $# -gt 4 ] || [ -z \"$1\" ]; then\n"
  "  echo 'usage: nbdkit-probe NAME [ARG1 [ARG2 [TEXT]]]' >&2\n"
  "  exit 1\n"
  "fi\n"
  "if [ -z \"${NBDKIT_PROBE_FD:-}\" ]; then\n"
  "  echo 'nbdkit-probe: not run from a script of nbdkit' >&2\n"
  "  exit 1\n"
  "fi\n"
  "for a in \"${2:-0}\" \"${3:-0}\"; do\n"
  "  case ${a#-} in\n"
  "  ''|*[!0-9]*) echo \"nbdkit-probe: $a: not an integer\" >&2; exit 1 ;;\n"
  "  esac\n"
  "done\n"
  "printf '%s\\0%s\\0%s\\0%s\\0' \"$1\" \"${2:-0}\" \"${3:-0}\" \"${4:-}\" \\\n"
  "  > \"/dev/fd/$NBDKIT_PROBE_FD\"\n";

/* Write the helper into $tmpdir/.nbdkit-bin and make the PATH that
 * scripts get.  Failing is not fatal: scripts run, without probes.
 */
static void
probe_helper_create (void)
{
  CLEANUP_FREE char *dir = NULL, *path = NULL;
  const char *old = getenv ("PATH");
  FILE *fp;

  if (asprintf (&dir, "%s/.nbdkit-bin", script_tmpdir) == -1 ||
      asprintf (&path, "%s/nbdkit-probe", dir) == -1) {
    nbdkit_debug ("asprintf: %m");
    return;
  }
  if (mkdir (dir, 0700) == -1 || (fp = fopen (path, "w")) == NULL) {
    nbdkit_debug ("%s: %m (scripts cannot fire probes)", path);
    return;
  }
  if (fputs (probe_helper, fp) == EOF || fchmod (fileno (fp), 0700) == -1) {
    nbdkit_debug ("%s: %m (scripts cannot fire probes)", path);
    fclose (fp);
    return;
  }
  if (fclose (fp) == EOF) {
    nbdkit_debug ("%s: %m (scripts cannot fire probes)", path);
    return;
  }
  if (asprintf (&probe_path_env, "PATH=%s:%s", dir,
                old && *old ? old : "/usr/bin:/bin") == -1) {
    probe_path_env = NULL;
    nbdkit_debug ("asprintf: %m");
  }
}

int
script_tmpdir_create (void)
{
  const char *base = getenv ("TMPDIR");
  if (!base || *base == '\0')
    base = "/tmp";
  if (asprintf (&script_tmpdir, "%s/nbdkitshXXXXXX", base) == -1) {
    script_tmpdir = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  if (mkdtemp (script_tmpdir) == NULL) {
    nbdkit_error ("mkdtemp: %s: %m", script_tmpdir);
    free (script_tmpdir);
    script_tmpdir = NULL;
    return -1;
  }
  tmpdir_owner = getpid ();
  /* Every script sees it as $tmpdir (script_environ). */
  if (asprintf (&tmpdir_env, "tmpdir=%s", script_tmpdir) == -1) {
    tmpdir_env = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  probe_helper_create ();
  return 0;
}

static int
remove_one (const char *path, const struct stat *st, int type,
            struct FTW *ftw)
{
  if (remove (path) == -1)
    nbdkit_debug ("remove: %s: %m", path);
  return 0;
}

void
script_tmpdir_remove (void)
{
  if (script_tmpdir) {
    nftw (script_tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    free (script_tmpdir);
    script_tmpdir = NULL;
  }
  free (probe_path_env);
  probe_path_env = NULL;
  free (tmpdir_env);
  tmpdir_env = NULL;
}

/* The server exits without unloading the plugin on some paths (a
 * parameter error, --dump-plugin): $tmpdir must not outlive it.
 */
static void __attribute__ ((destructor))
remove_tmpdir_at_exit (void)
{
  if (getpid () == tmpdir_owner)
    script_tmpdir_remove ();
}

/* One trailing newline goes, as nbdkit-sh-plugin(3) says of open and
 * export_description: an open that echoes the export name "\n" must
 * give the handle "\n".
 */
int
script_output_string (byte_vector *out)
{
  if (out->len > 0 && out->ptr[out->len - 1] == '\n')
    out->len--;
  if (byte_vector_append (out, '\0') == -1)
    return -1;
  out->len--;                   /* the '\0' is not part of the string */
  return 0;
}

/* The errno names a script may print at the start of stderr: the ones
 * nbdkit's sh plugin knows, in any case.  Any other text, a name that
 * the NBD protocol cannot carry (EPIPE) or one after leading blanks,
 * is a message and the error is EIO, as with nbdkit.
 */
static const struct { const char *name; int value; } errno_names[] = {
#define E(n) { #n, n }
  E (EPERM), E (EIO), E (ENOMEM), E (EINVAL), E (ENOSPC), E (EROFS),
  E (ESHUTDOWN), E (ENOTSUP), E (EOPNOTSUPP), E (EOVERFLOW), E (EDQUOT),
  E (EFBIG),
#undef E
};

/* The errno named by the first LEN bytes of WORD, or 0. */
static int
errno_by_name (const char *word, size_t len)
{
  for (size_t i = 0; i < ARRAY_SIZE (errno_names); ++i)
    if (strlen (errno_names[i].name) == len &&
        strncasecmp (errno_names[i].name, word, len) == 0)
      return errno_names[i].value;
  return 0;
}

/* Report a failed run.  STDERR_TEXT is a C string (possibly empty).
 * Returns the errno to set.
 */
static int
report_error (const char *method, const char *why, char *stderr_text,
              int default_err)
{
  const char *name = script_hooks.display_name
    ? script_hooks.display_name () : NULL;
  char *msg = stderr_text;
  int err = default_err;

  /* The name must start the text, and whitespace or the end follow it. */
  size_t wordlen = strcspn (msg, " \t\r\n");
  int e = wordlen > 0 ? errno_by_name (msg, wordlen) : 0;

  /* Trim whitespace at both ends for the log. */
  size_t n = strlen (msg);
  while (n > 0 && strchr (" \t\r\n", msg[n - 1]))
    msg[--n] = '\0';
  if (e != 0) {
    err = e;
    if (msg[wordlen] != '\0')
      msg += wordlen;
  }
  msg += strspn (msg, " \t\r\n");

  if (why && *msg)
    nbdkit_error ("%s%s%s: %s: %s", name ? name : "", name ? ": " : "",
                  method, why, msg);
  else if (why)
    nbdkit_error ("%s%s%s: %s", name ? name : "", name ? ": " : "",
                  method, why);
  else if (*msg)
    nbdkit_error ("%s%s%s: %s", name ? name : "", name ? ": " : "",
                  method, msg);
  else
    nbdkit_error ("%s%s%s: the script exited with an error but printed "
                  "no message on stderr", name ? name : "",
                  name ? ": " : "", method);
  return err;
}

/* A close-on-exec pipe whose ends are both above stderr, so that the
 * child's dup2 onto 0, 1 and 2 never clobbers another of its pipes
 * (the server may run with stdin or stdout closed).
 */
static int
make_pipe (int fd[2])
{
  if (pipe2 (fd, O_CLOEXEC) == -1)
    return -1;
  for (int i = 0; i < 2; ++i) {
    if (fd[i] <= 2) {
      int nfd = fcntl (fd[i], F_DUPFD_CLOEXEC, 3);
      if (nfd == -1) {
        int e = errno;
        close (fd[0]);
        close (fd[1]);
        errno = e;
        return -1;
      }
      close (fd[i]);
      fd[i] = nfd;
    }
  }
  return 0;
}

static void
close_fd (int *fd)
{
  if (*fd >= 0) {
    close (*fd);
    *fd = -1;
  }
}

/* Fire the probe for each whole record in BUF (NAME ARG1 ARG2 TEXT,
 * each ending in NUL) and keep what is left of a partial one.
 */
static void
probe_records (byte_vector *buf)
{
  size_t pos = 0;

  for (;;) {
    const char *field[4];
    size_t p = pos;
    int i;

    for (i = 0; i < 4 && p < buf->len; ++i) {
      const char *nul = memchr (buf->ptr + p, '\0', buf->len - p);
      if (!nul)
        break;
      field[i] = buf->ptr + p;
      p = nul - buf->ptr + 1;
    }
    if (i < 4)
      break;
    nbdkit_probe (field[0], strtoll (field[1], NULL, 10),
                  strtoll (field[2], NULL, 10), field[3]);
    pos = p;
  }
  memmove (buf->ptr, buf->ptr + pos, buf->len - pos);
  buf->len -= pos;
  if (buf->len > MAX_PROBE_RECORD)
    buf->len = 0;               /* not a record we wrote: drop it */
}

/* Read what the probe pipe holds.  Returns 1 if it gave bytes, 0 if
 * not (nothing yet, or it is closed now).
 */
static int
probe_read (int *fd, byte_vector *buf)
{
  ssize_t r;

  if (byte_vector_reserve (buf, 4096) == -1) {
    nbdkit_debug ("realloc: %m (probes of this script are dropped)");
    close (*fd);
    *fd = -1;
    return 0;
  }
  r = read (*fd, buf->ptr + buf->len, 4096);
  if (r > 0) {
    buf->len += r;
    probe_records (buf);
    return 1;
  }
  if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
    close (*fd);
    *fd = -1;
  }
  return 0;
}

/* The probe pipe, read while the script runs (subprocess watch). */
struct probe_pipe {
  int fd;
  byte_vector buf;
};

static int
probe_watch (void *opaque)
{
  struct probe_pipe *pp = opaque;

  probe_read (&pp->fd, &pp->buf);
  return pp->fd >= 0 ? 0 : -1;
}

enum script_status
script_call (const char *method, const char **args,
             const void *in, size_t inlen,
             byte_vector *out, size_t maxout)
{
  const char *path = script_hooks.path (method);
  if (path == NULL)
    return SCRIPT_MISSING;

  /* argv for /bin/sh: "/bin/sh" PATH METHOD ARGS... NULL; the direct
   * exec uses it from PATH on.
   */
  size_t nargs = 0;
  while (args && args[nargs])
    nargs++;
  CLEANUP_FREE const char **argv = calloc (nargs + 4, sizeof *argv);
  if (!argv) {
    nbdkit_error ("calloc: %m");
    return SCRIPT_ERROR;
  }
  argv[0] = "/bin/sh";
  argv[1] = path;
  argv[2] = method;
  for (size_t i = 0; i < nargs; ++i)
    argv[3 + i] = args[i];

  int probefd[2] = { -1, -1 };
  struct probe_pipe pp = { .fd = -1, .buf = empty_vector };
  char fdvar[64];
  const char *env[5];
  size_t nenv = 0;
  enum script_status ret = SCRIPT_ERROR;
  int status = 0, err = 0;
  int64_t start = now_ns ();

  /* Without the probe pipe the script still runs; nbdkit-probe then
   * says it cannot fire.
   */
  if (probe_path_env) {
    if (make_pipe (probefd) == -1)
      nbdkit_debug ("pipe: %m (no probes from this script)");
    else
      fcntl (probefd[0], F_SETFL, O_NONBLOCK);
  }
  /* The server's environment, with $tmpdir, and when the probe pipe is
   * there the helper's directory first on PATH and NBDKIT_PROBE_FD.
   */
  env[nenv++] = "NBDKIT_PROBE_FD";
  if (tmpdir_env)
    env[nenv++] = tmpdir_env;
  if (probefd[1] >= 0) {
    env[nenv++] = probe_path_env;
    snprintf (fdvar, sizeof fdvar, "NBDKIT_PROBE_FD=%d", probefd[1]);
    env[nenv++] = fdvar;
  }
  env[nenv] = NULL;
  pp.fd = probefd[0];

  /* The server ignores SIGPIPE and may block signals in its threads; a
   * script expects neither.
   */
  struct subprocess sp = {
    .argv = script_hooks.use_sh ? argv : &argv[1],
    .env = env,
    .stdin_mode = SUBPROCESS_PIPE, .in = in, .in_len = inlen,
    .stdout_mode = out ? SUBPROCESS_PIPE : SUBPROCESS_DISCARD,
    .out_max = maxout,
    .stderr_mode = SUBPROCESS_PIPE, .err_max = MAX_STDERR,
    .pass_fd = probefd[1] >= 0 ? probefd[1] : 0,
    .watch_fd = probefd[0], .watch = probefd[0] >= 0 ? probe_watch : NULL,
    .watch_opaque = &pp,
    .default_signals = true,
  };
  if (out) {
    sp.out.ptr = out->ptr;
    sp.out.cap = out->cap;
  }
  enum subprocess_outcome r = subprocess_run (&sp);
  /* A script without "#!" runs under /bin/sh, as execvp would. */
  if (r == SUBPROCESS_FINISHED && sp.exec_errno == ENOEXEC &&
      !script_hooks.use_sh) {
    sp.argv = argv;
    r = subprocess_run (&sp);
  }
  if (out) {
    out->ptr = sp.out.ptr;
    out->len = sp.out.len;
    out->cap = sp.out.cap;
  }
  if (r != SUBPROCESS_FINISHED) {
    err = errno;
    nbdkit_error ("%s: %m", sp.failed_call);
    goto out;
  }
  /* Records written just before the script closed its output (a
   * process it left behind may still write more: those are lost).
   */
  while (pp.fd >= 0 && probe_read (&pp.fd, &pp.buf))
    ;
  status = sp.status;
  if (sp.exec_errno != 0) {
    static const char msg[] = "cannot execute the script";
    memcpy (sp.err.ptr, msg, sizeof msg);
    status = W_EXITCODE (126, 0);
  }
  bool too_much = sp.out_overflow;

  if (WIFSIGNALED (status)) {
    char why[64];
    snprintf (why, sizeof why, "script terminated by signal %d",
              WTERMSIG (status));
    err = report_error (method, too_much ? "the script printed too much"
                        : why, sp.err.ptr, EIO);
    status = 128 + WTERMSIG (status);
    goto out;
  }
  status = WEXITSTATUS (status);
  if (too_much && status == 0) {
    err = report_error (method, "the script printed too much", sp.err.ptr,
                        EIO);
    goto out;
  }
  switch (status) {
  case 0:
    ret = SCRIPT_OK;
    break;
  case 2:
    ret = SCRIPT_MISSING;
    break;
  case 3:
    ret = SCRIPT_FALSE;
    break;
  /* nbdkit 1.34's codes for ending the server or this connection from
   * a script: done here, in the callback's thread, which knows the
   * connection.  The failing ones default to ESHUTDOWN.
   */
  case 4:
  case 5:
    nbdkit_shutdown ();
    if (status == 4)
      ret = SCRIPT_OK;
    else
      err = report_error (method, NULL, sp.err.ptr, ESHUTDOWN);
    break;
  case 6:
    nbdkit_disconnect (1);      /* no reply goes out: the status is moot */
    err = ESHUTDOWN;
    nbdkit_error ("%s: the script cut the connection (exit code 6)",
                  method);
    break;
  case 7:
  case 8:
    nbdkit_disconnect (0);
    if (status == 7)
      ret = SCRIPT_OK;
    else
      err = report_error (method, NULL, sp.err.ptr, ESHUTDOWN);
    break;
  default:
    err = report_error (method, NULL, sp.err.ptr, EIO);
    break;
  }

 out:
  close_fd (&probefd[1]);
  close_fd (&pp.fd);
  byte_vector_reset (&pp.buf);
  free (sp.err.ptr);
  if (script_hooks.probe)
    script_hooks.probe (method, status, now_ns () - start,
                        ret == SCRIPT_ERROR ? err : 0);
  if (ret == SCRIPT_ERROR)
    errno = err ? err : EIO;
  return ret;
}
