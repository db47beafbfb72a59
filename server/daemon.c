/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: becoming a service process.  Forking into the
 * background, the pid file, giving up root for -u/-g (and handing the
 * private -U - socket to that user first, so a --run command running
 * as the user can still reach it), and --swap's memory locking.  main
 * calls these in the start-up order; each reports its own errors.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stddef.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

int
daemon_write_pidfile (const char *path)
{
  char tmp[PATH_MAX];
  if (snprintf (tmp, sizeof tmp, "%s.tmp", path) >= (int) sizeof tmp) {
    nbdkit_error ("pidfile path too long");
    return -1;
  }
  FILE *fp = fopen (tmp, "w");
  if (!fp || fprintf (fp, "%d\n", (int) getpid ()) < 0 ||
      fclose (fp) == EOF || rename (tmp, path) == -1) {
    nbdkit_error ("%s: %m", path);
    return -1;
  }
  return 0;
}

/* The write end of the pipe the parent of daemon_fork waits on, in the
 * server, until daemon_ready; -1 otherwise.
 */
static int ready_fd = -1;

/* Fork into the background.  The command returns (the parent exits)
 * only once the server is ready, with status 0, or has failed before
 * that, with status 1: a script that starts the server and then reads
 * the pid file or connects finds both there.
 */
int
daemon_fork (void)
{
  int p[2];
  if (pipe2 (p, O_CLOEXEC) == -1) {
    nbdkit_error ("pipe2: %m");
    return -1;
  }
  pid_t pid = fork ();
  if (pid == -1) {
    nbdkit_error ("fork: %m");
    return -1;
  }
  if (pid > 0) {
    char c;
    ssize_t r;
    close (p[1]);
    do
      r = read (p[0], &c, 1);
    while (r == -1 && errno == EINTR);
    _exit (r == 1 ? EXIT_SUCCESS : EXIT_FAILURE);
  }
  close (p[0]);
  setsid ();
  pid = fork ();
  if (pid == -1)
    _exit (EXIT_FAILURE);
  if (pid > 0)
    _exit (EXIT_SUCCESS);
  ready_fd = p[1];
  if (chdir ("/") == -1)
    return -1;
  int fd = open ("/dev/null", O_RDWR);
  if (fd >= 0) {
    dup2 (fd, STDIN_FILENO);
    dup2 (fd, STDOUT_FILENO);
    dup2 (fd, STDERR_FILENO);
    if (fd > 2)
      close (fd);
  }
  return 0;
}

/* $NOTIFY_SOCKET, taken from the environment at start-up
 * (daemon_take_notify_socket) so that no plugin, script or --run
 * command the server starts sends notices in its name; "" if unset.
 */
static char notify_path[sizeof ((struct sockaddr_un *) 0)->sun_path];

void
daemon_take_notify_socket (void)
{
  const char *path = getenv ("NOTIFY_SOCKET");
  if (path && (path[0] == '/' || path[0] == '@') &&
      strlen (path) < sizeof notify_path)
    strcpy (notify_path, path);
  unsetenv ("NOTIFY_SOCKET");
}

/* Tell systemd STATE on the datagram socket it named, as sd_notify(3)
 * does, without libsystemd.
 */
static void
notify_systemd (const char *state)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  size_t len = strlen (notify_path);

  if (len == 0)
    return;
  memcpy (addr.sun_path, notify_path, len);
  if (notify_path[0] == '@')
    addr.sun_path[0] = '\0';           /* an abstract socket */
  int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return;
  if (sendto (fd, state, strlen (state), MSG_NOSIGNAL,
              (struct sockaddr *) &addr,
              offsetof (struct sockaddr_un, sun_path) + len) == -1)
    nbdkit_debug ("NOTIFY_SOCKET %s: %m", notify_path);
  close (fd);
}

/* The server is ready: its sockets listen and the pid file is written.
 * The parent waiting in daemon_fork exits, and systemd hears READY=1.
 */
void
daemon_ready (void)
{
  if (ready_fd >= 0) {
    char c = 1;
    if (write (ready_fd, &c, 1) != 1)
      nbdkit_debug ("telling the parent the server is ready: %m");
    close (ready_fd);
    ready_fd = -1;
  }
  char state[64];
  snprintf (state, sizeof state, "READY=1\nMAINPID=%d\n", (int) getpid ());
  notify_systemd (state);
}

/* The server is stopping: systemd hears STOPPING=1. */
void
daemon_stopping (void)
{
  notify_systemd ("STOPPING=1\n");
}

/* -u and -g as ids (names or numbers).  *PW is the user's entry (or
 * NULL without -u); the gid is the group's, else the user's own.
 */
static int
resolve_ids (const struct config *cfg, struct passwd **pw, gid_t *gid)
{
  char *end;
  *pw = NULL;
  *gid = (gid_t) -1;
  if (cfg->user) {
    *pw = getpwnam (cfg->user);
    if (!*pw) {
      errno = 0;
      unsigned long n = strtoul (cfg->user, &end, 10);
      if (errno || *end || end == cfg->user || !(*pw = getpwuid (n))) {
        nbdkit_error ("-u: no such user: %s", cfg->user);
        return -1;
      }
    }
    *gid = (*pw)->pw_gid;
  }
  if (cfg->group) {
    struct group *gr = getgrnam (cfg->group);
    if (gr)
      *gid = gr->gr_gid;
    else {
      errno = 0;
      unsigned long n = strtoul (cfg->group, &end, 10);
      if (errno || *end || end == cfg->group || n >= (gid_t) -1) {
        nbdkit_error ("-g: no such group: %s", cfg->group);
        return -1;
      }
      *gid = n;
    }
  }
  return 0;
}

/* -u and -g name a user and group that exist: checked before the
 * server forks, so that a mistake is reported where the user sees it.
 */
int
daemon_check_ids (const struct config *cfg)
{
  struct passwd *pw;
  gid_t gid;
  return resolve_ids (cfg, &pw, &gid);
}

/* -u/-g with -U -: the private directory and its socket belong to
 * root and are closed to others, so the user the server (and the --run
 * command) becomes could not connect.  Give both to that user first.
 */
int
daemon_give_socket (const struct config *cfg)
{
  struct passwd *pw;
  gid_t gid;
  if (!cfg->tmpdir || (!cfg->user && !cfg->group))
    return 0;
  if (resolve_ids (cfg, &pw, &gid) == -1)
    return -1;
  uid_t uid = pw ? pw->pw_uid : (uid_t) -1;
  if (chown (cfg->tmpdir, uid, gid) == -1 ||
      chown (cfg->unixsocket, uid, gid) == -1) {
    nbdkit_error ("giving the private socket to -u/-g: %m");
    return -1;
  }
  return 0;
}

/* -u and -g: become GROUP and USER.  With -u alone the user's own
 * group and supplementary groups are taken.
 */
int
daemon_change_user (const struct config *cfg)
{
  struct passwd *pw;
  gid_t gid;

  if (!cfg->user && !cfg->group)
    return 0;
  if (resolve_ids (cfg, &pw, &gid) == -1)
    return -1;

  /* Groups first: once the uid is dropped they cannot change. */
  if (pw && !cfg->group ? initgroups (pw->pw_name, gid) == -1
                        : setgroups (1, &gid) == -1) {
    nbdkit_error ("setting supplementary groups: %m");
    return -1;
  }
  if (setgid (gid) == -1) {
    nbdkit_error ("setgid (%u): %m", (unsigned) gid);
    return -1;
  }
  if (pw && setuid (pw->pw_uid) == -1) {
    nbdkit_error ("setuid (%u): %m", (unsigned) pw->pw_uid);
    return -1;
  }
  nbdkit_debug ("running as uid %u, gid %u", (unsigned) getuid (),
                (unsigned) getgid ());
  return 0;
}

/* --swap: the export may be this machine's swap device, so the server
 * must never wait for memory that only swapping to itself could free.
 * Lock every page, now and later (mlockall, as nbdkit(1) says), and
 * where the kernel has it, mark the process an I/O flusher so its
 * allocations do not recurse into the block layer.  Called in the
 * process that serves: locks are not inherited across fork.
 */
int
daemon_lock_memory (const struct config *cfg)
{
  if (!cfg->swap)
    return 0;
  if (mlockall (MCL_CURRENT | MCL_FUTURE) == -1) {
    nbdkit_error ("--swap: mlockall: %m (raise RLIMIT_MEMLOCK, ulimit -l)");
    return -1;
  }
#ifdef PR_SET_IO_FLUSHER
  /* Needs CAP_SYS_RESOURCE: without it the locked memory still helps. */
  if (prctl (PR_SET_IO_FLUSHER, 1, 0, 0, 0) == -1)
    nbdkit_debug ("--swap: prctl (PR_SET_IO_FLUSHER): %m");
  else
    nbdkit_debug ("--swap: memory locked, I/O flusher set");
#endif
  return 0;
}
