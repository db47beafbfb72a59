/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The exitwhen filter: stop the server gracefully when an outside
 * event happens: a file appears or disappears, a pipe's writer closes
 * it, a process exits, or a script says so (exit status 88).
 *
 * The events are checked when a client connects or disconnects, and,
 * while no client is connected, by a thread started in .after_fork
 * every exit-when-poll seconds.  Once an event is seen the filter is
 * "exiting": new clients are refused, and when the last connected one
 * closes (or at once if there is none) it calls nbdkit_shutdown.  The
 * event list is read-only after config; LOCK guards the rest.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "subprocess.h"
#include "vector.h"

enum event_type {
  FILE_CREATED, FILE_DELETED, PIPE_CLOSED, PROCESS_EXITS, SCRIPT,
};

struct event {
  enum event_type type;
  char *text;                   /* a file name or a script */
  int fd;                       /* PIPE_CLOSED */
  pid_t pid;                    /* PROCESS_EXITS */
  unsigned long long start;     /* PROCESS_EXITS: its start time */
};
DEFINE_VECTOR_TYPE (event_list, struct event);

/* Set by config, read-only afterwards. */
static event_list events = empty_vector;
static unsigned poll_secs = 60;

/* LOCK guards everything below; POLL_COND wakes the poll thread. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poll_cond = PTHREAD_COND_INITIALIZER;
static unsigned connections;    /* clients with the export open */
static bool exiting;            /* an event happened */
static bool stop_thread;        /* .cleanup: the poll thread must end */
static bool have_thread;
static pthread_t poll_thread;

static void
exitwhen_unload (void)
{
  for (size_t i = 0; i < events.len; i++) {
    free (events.ptr[i].text);
    if (events.ptr[i].type == PIPE_CLOSED)
      close (events.ptr[i].fd);
  }
  event_list_reset (&events);
}

/* Field 3 (state) and field 22 (start time) of /proc/PID/stat; -1 if
 * there is no such process.  The name (field 2) may hold spaces and
 * parentheses, so parsing starts after its last ')'.
 */
static int
process_stat (pid_t pid, char *state, unsigned long long *start)
{
  char path[64], buf[1024];
  snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return -1;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  char *p = strrchr (buf, ')');
  if (!p || sscanf (p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s"
                    " %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                    state, start) != 2)
    return -1;
  return 0;
}

static int
add_event (struct event e)
{
  if (event_list_append (&events, e) == -1) {
    nbdkit_error ("%m");
    free (e.text);
    return -1;
  }
  return 0;
}

static int
exitwhen_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  struct event e = { .fd = -1 };

  if (strcmp (key, "exit-when-file-created") == 0 ||
      strcmp (key, "exit-when-file-deleted") == 0) {
    e.type = key[15] == 'c' ? FILE_CREATED : FILE_DELETED;
    if (*value == '\0') {
      nbdkit_error ("%s: needs a file name", key);
      return -1;
    }
    /* The server may change directory when it daemonizes. */
    e.text = nbdkit_absolute_path (value);
    if (!e.text)
      return -1;
    return add_event (e);
  }
  if (strcmp (key, "exit-when-pipe-closed") == 0) {
    e.type = PIPE_CLOSED;
    if (nbdkit_parse_int (key, value, &e.fd) == -1)
      return -1;
    if (e.fd < 0 || fcntl (e.fd, F_GETFD) == -1) {
      nbdkit_error ("%s: %s is not an open file descriptor", key, value);
      return -1;
    }
    /* Not inherited by scripts, which must not hold the pipe open. */
    fcntl (e.fd, F_SETFD, FD_CLOEXEC);
    return add_event (e);
  }
  if (strcmp (key, "exit-when-process-exits") == 0) {
    int pid;
    char state;
    e.type = PROCESS_EXITS;
    if (nbdkit_parse_int (key, value, &pid) == -1)
      return -1;
    if (pid <= 0) {
      nbdkit_error ("%s: %s is not a process ID", key, value);
      return -1;
    }
    e.pid = pid;
    /* Its start time tells it apart from a later process that reuses
     * the ID.
     */
    if (process_stat (e.pid, &state, &e.start) == -1) {
      nbdkit_error ("%s: there is no process %d", key, pid);
      return -1;
    }
    return add_event (e);
  }
  if (strcmp (key, "exit-when-script") == 0) {
    e.type = SCRIPT;
    e.text = strdup (value);
    if (!e.text) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return add_event (e);
  }
  if (strcmp (key, "exit-when-poll") == 0)
    return nbdkit_parse_unsigned (key, value, &poll_secs);
  return next (nxdata, key, value);
}

#define exitwhen_config_help \
  "exit-when-file-created=FILE   Exit when FILE exists.\n" \
  "exit-when-file-deleted=FILE   Exit when FILE does not exist.\n" \
  "exit-when-pipe-closed=FD      Exit when the pipe on FD is closed.\n" \
  "exit-when-process-exits=PID   Exit when process PID exits.\n" \
  "exit-when-script=SCRIPT       Exit when SCRIPT exits with status 88.\n" \
  "exit-when-poll=SECS           Check every SECS when idle (default 60)."

/* Run a script: true if it reports the event (exit status 88). */
static bool
script_says_exit (const char *script)
{
  const char *const argv[] = { "/bin/sh", "-c", script, NULL };
  struct subprocess sp = { .argv = argv };

  /* A script that could not be started is named; a failed wait is
   * not the script's fault.
   */
  if (subprocess_run (&sp) == SUBPROCESS_ERROR) {
    nbdkit_error ("exit-when-script: %s: %m",
                  strcmp (sp.failed_call, "waitpid") == 0 ? "waitpid"
                  : script);
    return false;
  }
  if (sp.exec_errno != 0) {
    errno = sp.exec_errno;
    nbdkit_error ("exit-when-script: %s: %m", script);
    return false;
  }
  if (WIFEXITED (sp.status)) {
    switch (WEXITSTATUS (sp.status)) {
    case 0:
      return false;
    case 88:
      return true;
    default:
      nbdkit_error ("exit-when-script: %s: exit status %d", script,
                    WEXITSTATUS (sp.status));
      return false;
    }
  }
  if (WIFSIGNALED (sp.status))
    nbdkit_error ("exit-when-script: %s: killed by signal %d", script,
                  WTERMSIG (sp.status));
  return false;
}

/* Has event E happened?  Describes it in WHY if so. */
static bool
happened (const struct event *e, char *why, size_t len)
{
  struct pollfd pfd;
  unsigned long long start;
  char state;

  switch (e->type) {
  case FILE_CREATED:
    if (access (e->text, F_OK) == 0) {
      snprintf (why, len, "file created: %s", e->text);
      return true;
    }
    return false;
  case FILE_DELETED:
    if (access (e->text, F_OK) == -1 && errno == ENOENT) {
      snprintf (why, len, "file deleted: %s", e->text);
      return true;
    }
    return false;
  case PIPE_CLOSED:
    /* Never read: the data is not ours.  A closed writer shows as
     * POLLHUP, with or without data still in the pipe.
     */
    pfd.fd = e->fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll (&pfd, 1, 0) == 1 &&
        (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))) {
      snprintf (why, len, "pipe closed: fd %d", e->fd);
      return true;
    }
    return false;
  case PROCESS_EXITS:
    if (process_stat (e->pid, &state, &start) == -1 || start != e->start ||
        state == 'Z' || state == 'X') {
      snprintf (why, len, "process exited: %d", (int) e->pid);
      return true;
    }
    return false;
  case SCRIPT:
    if (script_says_exit (e->text)) {
      snprintf (why, len, "script: %s", e->text);
      return true;
    }
    return false;
  }
  return false;
}

/* Check every event, without the lock (a script may take a while);
 * then, under it, become exiting if one happened.  Returns whether
 * the filter is exiting.
 */
static bool
check_events (void)
{
  char why[512];
  size_t i;

  {
    LOCK_FOR_SCOPE (&lock);
    if (exiting)
      return true;
  }
  for (i = 0; i < events.len; i++)
    if (happened (&events.ptr[i], why, sizeof why))
      break;
  if (i == events.len)
    return false;

  LOCK_FOR_SCOPE (&lock);
  if (!exiting) {
    exiting = true;
    NBDKIT_PROBE (exitwhen_triggered, why);
    nbdkit_debug ("%s: refusing new clients, exiting when the %u "
                  "connected ones have gone", why, connections);
    pthread_cond_broadcast (&poll_cond);
  }
  return true;
}

/* Stop the server if an event happened and nobody is connected.
 * Called with the lock held.
 */
static void
exit_if_idle (void)
{
  static bool shut_down;
  if (exiting && connections == 0 && !shut_down) {
    shut_down = true;
    nbdkit_debug ("exitwhen: no clients left: stopping the server");
    nbdkit_shutdown ();
  }
}

static void *
poll_loop (void *arg)
{
  for (;;) {
    bool idle;
    {
      LOCK_FOR_SCOPE (&lock);
      if (stop_thread)
        return NULL;
      idle = connections == 0;
    }
    /* Events are only polled while idle: a client's coming and going
     * checks them otherwise.
     */
    if (idle)
      check_events ();

    LOCK_FOR_SCOPE (&lock);
    exit_if_idle ();
    if (exiting || stop_thread)
      return NULL;
    struct timespec until;
    clock_gettime (CLOCK_REALTIME, &until);
    if (poll_secs == 0)         /* as often as is sane */
      until.tv_nsec += 100000000;
    else
      until.tv_sec += poll_secs;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&poll_cond, &lock, &until);
  }
}

static int
exitwhen_after_fork (nbdkit_backend *backend)
{
  int r;
  if (events.len == 0)
    return 0;
  r = pthread_create (&poll_thread, NULL, poll_loop, NULL);
  if (r != 0) {
    errno = r;
    nbdkit_error ("pthread_create: %m");
    return -1;
  }
  have_thread = true;
  return 0;
}

static void
exitwhen_cleanup (nbdkit_backend *backend)
{
  if (!have_thread)
    return;
  {
    LOCK_FOR_SCOPE (&lock);
    stop_thread = true;
    pthread_cond_broadcast (&poll_cond);
  }
  pthread_join (poll_thread, NULL);
  have_thread = false;
}

static int
refuse_if_exiting (void)
{
  LOCK_FOR_SCOPE (&lock);
  if (!exiting)
    return 0;
  nbdkit_error ("the server is exiting: new connections are refused");
  exit_if_idle ();
  return -1;
}

static int
exitwhen_preconnect (nbdkit_next_preconnect *next, nbdkit_backend *nxdata,
                     int readonly)
{
  if (events.len > 0)
    check_events ();
  if (refuse_if_exiting () == -1)
    return -1;
  return next (nxdata, readonly);
}

static void *
exitwhen_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  {
    LOCK_FOR_SCOPE (&lock);
    if (exiting) {
      nbdkit_error ("the server is exiting: new connections are refused");
      return NULL;
    }
    connections++;
  }
  if (next (context, readonly, exportname) == -1) {
    LOCK_FOR_SCOPE (&lock);
    connections--;
    exit_if_idle ();
    return NULL;
  }
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
exitwhen_close (void *handle)
{
  {
    LOCK_FOR_SCOPE (&lock);
    connections--;
  }
  if (events.len > 0)
    check_events ();
  LOCK_FOR_SCOPE (&lock);
  exit_if_idle ();
}

static struct nbdkit_filter filter = {
  .name = "exitwhen",
  .longname = "nbdkit exitwhen filter",
  .unload = exitwhen_unload,
  .config = exitwhen_config,
  .config_help = exitwhen_config_help,
  .after_fork = exitwhen_after_fork,
  .cleanup = exitwhen_cleanup,
  .preconnect = exitwhen_preconnect,
  .open = exitwhen_open,
  .close = exitwhen_close,
};

NBDKIT_REGISTER_FILTER (filter)
