/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ssh plugin's watchdog (see watchdog.h).
 *
 * One thread, started by the first watch_add and stopped by
 * watch_stop (at start-up, before the server may fork, and at
 * unload).  watch_lock protects the list and every field of the
 * watches on it; it is only held for a few instructions, never across
 * a call into libssh.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "watchdog.h"

/* How often the thread looks at the watches. */
#define WATCH_PERIOD_NS 250000000

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond;       /* on CLOCK_MONOTONIC */
static pthread_once_t watch_cond_once = PTHREAD_ONCE_INIT;
static struct ssh_watch *watches;       /* under watch_lock */
static bool running, quit;              /* under watch_lock */
static pthread_t thread;

static void
init_cond (void)
{
  pthread_condattr_t attr;

  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&watch_cond, &attr);
  pthread_condattr_destroy (&attr);
}

static void *
watch_thread (void *arg)
{
  (void) arg;
  pthread_mutex_lock (&watch_lock);
  while (!quit) {
    struct timespec until;
    uint64_t now;
    struct ssh_watch *w;

    clock_gettime (CLOCK_MONOTONIC, &until);
    until.tv_nsec += WATCH_PERIOD_NS;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&watch_cond, &watch_lock, &until);
    now = watch_now_ns ();
    for (w = watches; w; w = w->next)
      if (w->deadline != 0 && now > w->deadline && !w->fired) {
        w->fired = true;
        /* The owner's thread still owns the fd: shutdown, not close. */
        shutdown (w->fd, SHUT_RDWR);
      }
  }
  pthread_mutex_unlock (&watch_lock);
  return NULL;
}

int
watch_add (struct ssh_watch *w, int fd)
{
  int err = 0;

  pthread_once (&watch_cond_once, init_cond);
  w->fd = fd;
  w->deadline = 0;
  w->fired = false;
  pthread_mutex_lock (&watch_lock);
  if (!running) {
    quit = false;
    err = pthread_create (&thread, NULL, watch_thread, NULL);
    running = err == 0;
  }
  if (err == 0) {
    w->next = watches;
    watches = w;
  }
  pthread_mutex_unlock (&watch_lock);
  if (err != 0) {
    nbdkit_error ("pthread_create: %s", strerror (err));
    return -1;
  }
  return 0;
}

void
watch_remove (struct ssh_watch *w)
{
  struct ssh_watch **p;

  pthread_mutex_lock (&watch_lock);
  for (p = &watches; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  pthread_mutex_unlock (&watch_lock);
}

void
watch_arm (struct ssh_watch *w, long secs)
{
  const uint64_t deadline = watch_now_ns () + (uint64_t) secs * 1000000000;

  pthread_mutex_lock (&watch_lock);
  w->deadline = deadline;
  pthread_mutex_unlock (&watch_lock);
}

void
watch_disarm (struct ssh_watch *w)
{
  pthread_mutex_lock (&watch_lock);
  w->deadline = 0;
  pthread_mutex_unlock (&watch_lock);
}

bool
watch_fired (struct ssh_watch *w)
{
  bool r;

  pthread_mutex_lock (&watch_lock);
  r = w->fired;
  pthread_mutex_unlock (&watch_lock);
  return r;
}

void
watch_stop (void)
{
  bool was_running;

  pthread_mutex_lock (&watch_lock);
  was_running = running;
  quit = true;
  running = false;
  pthread_cond_signal (&watch_cond);
  pthread_mutex_unlock (&watch_lock);
  if (was_running)
    pthread_join (thread, NULL);
}
