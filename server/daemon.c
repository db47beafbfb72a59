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
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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

/* Fork into the background; the parent exits once the child is set. */
int
daemon_fork (void)
{
  pid_t pid = fork ();
  if (pid == -1) {
    nbdkit_error ("fork: %m");
    return -1;
  }
  if (pid > 0)
    _exit (EXIT_SUCCESS);
  setsid ();
  pid = fork ();
  if (pid == -1)
    _exit (EXIT_FAILURE);
  if (pid > 0)
    _exit (EXIT_SUCCESS);
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
