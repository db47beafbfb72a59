/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: telling a tracer that attaches late whose requests it
 * sees.  The request probes carry only the connection id; the export,
 * the peer and the transport appear once, when the connection starts.
 * connection_info repeats them: connection.c fires it when a
 * connection's negotiation ends, and the watcher here fires it for
 * every live connection (conn_foreach_live) soon after a tracer
 * attaches to it.
 *
 * A process cannot see a tracer attach, only the probe's semaphore,
 * which the kernel raises when the first tracer puts its breakpoints
 * in and lowers when the last takes them out.  A second tracer leaves
 * it as it is (Linux 6.18 counts breakpoints, not tracers; a tracer
 * that sets the semaphore itself, on kernels without ref_ctr_offset,
 * does add one).  So the watcher looks at the semaphore every
 * WATCH_TICK_MS: when it has risen it announces every connection at
 * once, and while it stays up it announces them again every
 * WATCH_REPEAT_TICKS ticks, which is how a second tracer learns them.
 *
 * The watcher is a thread started with the first connection
 * (conn_watch_start) and stopped and joined at shutdown
 * (conn_watch_stop).  It touches no request: untraced, the cost is a
 * wake-up every WATCH_TICK_MS that reads one short.  Builds without
 * probes have no watcher.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

#ifdef ENABLE_PROBES

/* A tracer that attaches is answered within a tick while it is the
 * first, and within WATCH_REPEAT_TICKS ticks otherwise: under the 0.5
 * s that docs/nbdkit-probes.pod promises.
 */
#define WATCH_TICK_MS 200
#define WATCH_REPEAT_TICKS 2

/* watch_lock guards the fields below and is never held with another
 * lock: the watcher lets go of it before it announces.
 */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_wake;   /* on CLOCK_MONOTONIC, once started */
static bool watch_started;          /* watch_thread exists */
static bool watch_ended;            /* stopped: never start again */
static pthread_t watch_thread;

/* The semaphore is written by the kernel, from outside the program:
 * read it afresh each time.
 */
static unsigned
info_semaphore (void)
{
  return *(volatile unsigned short *) &nbdkit_connection_info_semaphore;
}

static void *
watch_loop (void *arg)
{
  (void) arg;
  unsigned last = 0, ticks = 0;

  pthread_mutex_lock (&watch_lock);
  while (!watch_ended) {
    struct timespec when;
    clock_gettime (CLOCK_MONOTONIC, &when);
    when.tv_nsec += WATCH_TICK_MS * 1000000L;
    if (when.tv_nsec >= 1000000000L) {
      when.tv_sec++;
      when.tv_nsec -= 1000000000L;
    }
    while (!watch_ended &&
           pthread_cond_timedwait (&watch_wake, &watch_lock, &when) !=
           ETIMEDOUT)
      ;
    if (watch_ended)
      break;
    pthread_mutex_unlock (&watch_lock);

    unsigned now = info_semaphore ();
    if (now > last || (now > 0 && ++ticks >= WATCH_REPEAT_TICKS)) {
      conn_foreach_live (conn_info_fire);
      ticks = 0;
    }
    last = now;

    pthread_mutex_lock (&watch_lock);
  }
  pthread_mutex_unlock (&watch_lock);
  return NULL;
}

/* Start the watcher, if it is not running and was never stopped.  A
 * watcher that cannot start costs late tracers their list, nothing
 * more.
 */
void
conn_watch_start (void)
{
  LOCK_FOR_SCOPE (&watch_lock);
  if (watch_started || watch_ended)
    return;
  pthread_condattr_t attr;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&watch_wake, &attr);
  pthread_condattr_destroy (&attr);
  int e = pthread_create (&watch_thread, NULL, watch_loop, NULL);
  if (e != 0) {
    errno = e;
    nbdkit_debug ("connection_info watcher: pthread_create: %m");
    pthread_cond_destroy (&watch_wake);
    return;
  }
  watch_started = true;
}

/* Stop the watcher for good and wait for it. */
void
conn_watch_stop (void)
{
  pthread_mutex_lock (&watch_lock);
  bool started = watch_started;
  watch_started = false;
  watch_ended = true;
  if (started)
    pthread_cond_signal (&watch_wake);
  pthread_mutex_unlock (&watch_lock);
  if (started) {
    pthread_join (watch_thread, NULL);
    pthread_cond_destroy (&watch_wake);
  }
}

#else /* !ENABLE_PROBES */

void
conn_watch_start (void)
{
}

void
conn_watch_stop (void)
{
}

#endif /* !ENABLE_PROBES */
