/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the event loop an asynchronous plugin may complete
 * its requests from (nbdkit_async_watch, include/nbdkit-async.h), so
 * that it needs no thread of its own to wait on a socket, a timer or
 * an io_uring's eventfd.
 *
 * One thread for the server, "nbdkit-events", started by the first
 * watch, waits in epoll (level-triggered) on every watched descriptor
 * and calls each ready watch's callback in turn, without any lock of
 * ours held, so a callback may call nbdkit_async_complete and any
 * function here (watch, change, unwatch, its own watch included).
 *
 * Freeing: epoll hands back a batch of pointers to watches, and an
 * unwatched one may still sit in a batch the thread has taken (or is
 * taking) from epoll.  So nbdkit_async_unwatch marks the watch dead and
 * takes it out of the epoll set; the thread skips dead watches; and a
 * watch is freed once no batch can hold it: by the thread itself at
 * the end of the batch when unwatched from a callback, otherwise by
 * the caller, after waking the thread (an eventfd) and waiting until
 * it has finished one more batch, as any batch taken before the watch
 * left the set ends no later than that.
 * After nbdkit_async_unwatch returns, the callback is not running
 * (except in the caller itself) and will not be called again.
 *
 * Lock order: loop_lock is a leaf; it is never held across a callback.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"
#include "nbdkit-async.h"

/* Events taken from epoll at once. */
#define EVLOOP_BATCH 64

struct nbdkit_async_watch {
  int fd;
  void (*cb) (void *opaque, int revents);
  void *opaque;
  const char *layer;            /* the watcher's, for its log lines */
  bool dead;
  struct nbdkit_async_watch *next_dead;
};

static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t batch_done = PTHREAD_COND_INITIALIZER;
static int epfd = -1;
static int wakefd = -1;         /* in the set with a NULL pointer */
static pthread_t loop_thread;
static uint64_t batches;        /* batches gone through */
/* Unwatched from a callback during the batch: freed at its end. */
static struct nbdkit_async_watch *dead_list;

/* The epoll events of poll's: the same bits on Linux, said here. */
static_assert (POLLIN == EPOLLIN && POLLOUT == EPOLLOUT &&
               POLLPRI == EPOLLPRI && POLLERR == EPOLLERR &&
               POLLHUP == EPOLLHUP, "poll and epoll events");

static void *
loop (void *arg)
{
  struct epoll_event ev[EVLOOP_BATCH];

  pthread_setname_np (pthread_self (), "nbdkit-events");
  for (;;) {
    int n = epoll_wait (epfd, ev, EVLOOP_BATCH, -1);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("event loop: epoll_wait: %m");
      return NULL;
    }
    pthread_mutex_lock (&loop_lock);
    for (int i = 0; i < n; i++) {
      struct nbdkit_async_watch *w = ev[i].data.ptr;
      if (!w) {
        uint64_t v;
        ssize_t r = read (wakefd, &v, sizeof v);
        (void) r;
        continue;
      }
      if (w->dead)
        continue;
      pthread_mutex_unlock (&loop_lock);
      const char *outer = log_swap_layer_name (w->layer);
      w->cb (w->opaque, (int) ev[i].events);
      log_swap_layer_name (outer);
      pthread_mutex_lock (&loop_lock);
    }
    batches++;
    struct nbdkit_async_watch *dead = dead_list;
    dead_list = NULL;
    pthread_cond_broadcast (&batch_done);
    pthread_mutex_unlock (&loop_lock);
    while (dead) {
      struct nbdkit_async_watch *next = dead->next_dead;
      free (dead);
      dead = next;
    }
  }
}

/* With loop_lock held: the epoll set and its thread, made once. */
static int
start_loop (void)
{
  if (epfd >= 0)
    return 0;
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
  epfd = epoll_create1 (EPOLL_CLOEXEC);
  wakefd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epfd == -1 || wakefd == -1 ||
      epoll_ctl (epfd, EPOLL_CTL_ADD, wakefd, &ev) == -1) {
    nbdkit_error ("event loop: %m");
    goto err;
  }
  int e = pthread_create (&loop_thread, NULL, loop, NULL);
  if (e != 0) {
    errno = e;
    nbdkit_error ("event loop: pthread_create: %m");
    goto err;
  }
  pthread_detach (loop_thread);
  return 0;

 err:
  if (epfd >= 0)
    close (epfd);
  if (wakefd >= 0)
    close (wakefd);
  epfd = wakefd = -1;
  return -1;
}

NBDKIT_DLL_PUBLIC struct nbdkit_async_watch *
nbdkit_async_watch (int fd, int events,
                    void (*cb) (void *opaque, int revents), void *opaque)
{
  if (fd < 0 || !cb) {
    nbdkit_error ("nbdkit_async_watch: no descriptor or no callback");
    errno = EINVAL;
    return NULL;
  }
  struct nbdkit_async_watch *w = calloc (1, sizeof *w);
  if (!w) {
    nbdkit_error ("nbdkit_async_watch: calloc: %m");
    return NULL;
  }
  w->fd = fd;
  w->cb = cb;
  w->opaque = opaque;
  /* What the callback logs is the plugin's, as on the thread that
   * watched (the layer's name outlives its watches).
   */
  w->layer = log_swap_layer_name (NULL);
  log_swap_layer_name (w->layer);
  struct epoll_event ev = { .events = (uint32_t) events, .data.ptr = w };
  LOCK_FOR_SCOPE (&loop_lock);
  if (start_loop () == -1) {
    free (w);
    return NULL;
  }
  if (epoll_ctl (epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
    nbdkit_error ("nbdkit_async_watch: epoll_ctl: %m");
    free (w);
    return NULL;
  }
  return w;
}

NBDKIT_DLL_PUBLIC int
nbdkit_async_watch_events (struct nbdkit_async_watch *w, int events)
{
  struct epoll_event ev = { .events = (uint32_t) events, .data.ptr = w };
  if (epoll_ctl (epfd, EPOLL_CTL_MOD, w->fd, &ev) == -1) {
    nbdkit_error ("nbdkit_async_watch_events: epoll_ctl: %m");
    return -1;
  }
  return 0;
}

NBDKIT_DLL_PUBLIC void
nbdkit_async_unwatch (struct nbdkit_async_watch *w)
{
  if (!w)
    return;
  pthread_mutex_lock (&loop_lock);
  w->dead = true;
  /* The descriptor may be closed already, which took it out. */
  if (epoll_ctl (epfd, EPOLL_CTL_DEL, w->fd, NULL) == -1 &&
      errno != EBADF && errno != ENOENT)
    nbdkit_debug ("nbdkit_async_unwatch: epoll_ctl: %m");
  if (pthread_equal (pthread_self (), loop_thread)) {
    /* From a callback: the batch in progress may hold it. */
    w->next_dead = dead_list;
    dead_list = w;
    pthread_mutex_unlock (&loop_lock);
    return;
  }
  uint64_t seen = batches, one = 1;
  ssize_t r = write (wakefd, &one, sizeof one);
  (void) r;
  while (batches == seen)
    pthread_cond_wait (&batch_done, &loop_lock);
  pthread_mutex_unlock (&loop_lock);
  free (w);
}
