/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ssh plugin's watchdog: a limit on each wait for the server.
 *
 * libssh 0.10's SFTP calls wait for their reply without a limit (its
 * SSH_OPTIONS_TIMEOUT covers the connection and the login only).  A
 * handle arms its watch before calls that wait and disarms it after;
 * a thread of this module checks the armed watches four times a
 * second and shuts down the socket of one that is overdue, which
 * makes the waiting libssh call fail at once.  The session is then
 * finished: every later call on it fails.
 */
#ifndef NBDKIT_SSH_WATCHDOG_H
#define NBDKIT_SSH_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The clock of the deadlines (CLOCK_MONOTONIC), in ns; the plugin's
 * probes time their durations with it too.
 */
static inline uint64_t
watch_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct ssh_watch {
  struct ssh_watch *next;       /* the list of watches, under the lock */
  int fd;                       /* the session's socket */
  uint64_t deadline;            /* CLOCK_MONOTONIC ns, 0 when disarmed */
  bool fired;                   /* the socket was shut down */
};

/* Watch the socket FD (starting the thread if needed); -1 on error. */
extern int watch_add (struct ssh_watch *w, int fd);
/* Stop watching W (before its socket is closed). */
extern void watch_remove (struct ssh_watch *w);
/* Shut the socket down unless watch_disarm comes within SECS. */
extern void watch_arm (struct ssh_watch *w, long secs);
extern void watch_disarm (struct ssh_watch *w);
/* Whether W's socket was shut down for want of a reply. */
extern bool watch_fired (struct ssh_watch *w);
/* Stop the thread (no watches left); the next watch_add restarts it. */
extern void watch_stop (void);

#endif /* NBDKIT_SSH_WATCHDOG_H */
