/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the stall watcher.  A connection's pool (workers.c)
 * grows after a slow request has finished; until then a worker stuck
 * in the layers reads nothing more, so a burst of requests to a slow
 * backend would run one at a time, and replies held back to go out
 * together (reply.c) would wait behind the stuck one.  One thread for
 * the whole server looks at every pool each tick (STALL_TICK_NS, and
 * up to MAX_TICK_NS while it finds nothing stuck):
 *
 *  - a worker that is running the same request at two looks in a row
 *    is stuck.  If every active worker of its pool is running a
 *    request (none is left to read the next one) and a stuck one is
 *    blocked rather than running, the watcher adds a worker for each
 *    request the client has sent that nobody has read yet, up to -t;
 *    when all are busy on the CPU it adds one, up to busy_max
 *    (workers.c says why).  A request seen running for the first time
 *    is looked at again after RELOOK_NS, so a stuck one is found within
 *    RELOOK_NS to a tick + RELOOK_NS of its start (within
 *    RELOOK_NS of a connection's first request, which wakes the
 *    watcher to look at once, and of any request that wakes it from
 *    its sleep).  A worker
 *    answering a client that does not read its replies counts as free
 *    to read, so such a client gets no more workers;
 *  - a stuck worker that lent its held replies has them sent by the
 *    pool's flusher, a thread started the first time it is needed
 *    (never, for most connections), so the watcher itself never waits
 *    on a client.
 *
 * Requests faster than RELOOK_NS are never stuck, so they pay no
 * hand-off: two stores and a load each (pool_run_start and pool_run_end
 * in tx.h), and a share of the watcher's looks (two a tick
 * while requests run).
 * The watcher sleeps for good once no pool has run a request at
 * IDLE_TICKS looks in a row; the next request to start wakes it.
 *
 * Locks: watch_lock guards the list of pools, held through a look; it
 * is taken before a pool's lock (pool_grow, the flusher hand-off),
 * never after.  sleep_lock guards the watcher's sleep, and is taken
 * alone.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#include "protocol.h"
#include "tx.h"
#include "stalls.h"

#define STALL_TICK_NS 4000000   /* 4 ms */
#define MAX_TICK_NS 64000000    /* 64 ms */
#define RELOOK_NS 250000        /* 250 us */
#define NUDGE_RELOOK_NS 100000  /* 100 us: a connection's first request */
#define IDLE_TICKS 64

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool *pools;              /* with watch_lock: those watched */

/* sleep_lock: the watcher's sleep and its start and stop.  Taken alone
 * and never for long, so that a worker waking the watcher at the start
 * of a run (pool_watch_wake) is not held up by a look.
 */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond;       /* CLOCK_MONOTONIC, once started */
static bool watcher_started, watcher_ended;
static bool nudged;                     /* look now (pool_watch_nudge) */
static pthread_t watcher;

/* Set (sequentially consistent) just before the watcher sleeps for
 * good; a worker that starts a run and sees it wakes the watcher.
 */
_Atomic bool pool_watch_asleep;

static void *flusher_loop (void *arg);

/* Hand W's lent replies to the pool's flusher (W is stuck in the
 * layers).  With watch_lock held.
 */
static void
hand_out (struct pool *pool, struct worker *w, uint64_t state)
{
  uint64_t runs = state & ~PHASE_MASK;
  if (!atomic_compare_exchange_strong (&w->state, &state,
                                       runs | PHASE_FLUSHING))
    return;                     /* W came back first */

  LOCK_FOR_SCOPE (&pool->lock);
  if (!pool->done && !pool->flush_w) {
    if (!pool->flusher_started &&
        pthread_create (&pool->flusher, NULL, flusher_loop, pool) == 0)
      pool->flusher_started = true;
    if (pool->flusher_started) {
      pool->flush_w = w;
      pthread_cond_signal (&pool->flush_wake);
      return;
    }
  }
  /* Nobody can send them: W keeps them. */
  atomic_store (&w->state, runs | PHASE_RUN_HELD);
  pthread_cond_broadcast (&pool->flushed);
}

/* The flusher of one pool: sends the replies a stuck worker lent, and
 * gives them back (PHASE_RUN, w->out empty).
 */
static void *
flusher_loop (void *arg)
{
  struct pool *pool = arg;
  conn_set_current (pool->conn, pool->conn->id);
  pthread_mutex_lock (&pool->lock);
  for (;;) {
    while (!pool->flush_w && !pool->done)
      pthread_cond_wait (&pool->flush_wake, &pool->lock);
    struct worker *w = pool->flush_w;
    if (!w)
      break;
    pthread_mutex_unlock (&pool->lock);
    nbdkit_debug ("sending replies held behind a slow request");
    if (tx_flush_replies (pool->conn, w) == -1)
      conn_set_closing (pool->conn, "write error");
    pthread_mutex_lock (&pool->lock);
    pool->flush_w = NULL;
    atomic_store (&w->state, (atomic_load (&w->state) & ~PHASE_MASK) |
                  PHASE_RUN);
    pthread_cond_broadcast (&pool->flushed);
  }
  pthread_mutex_unlock (&pool->lock);
  return NULL;
}

/* W's run is over but the watcher took its replies: wait until they
 * are back, sent (or, if nobody could send them, as they were).
 */
void
pool_take_back_out (struct pool *pool, struct worker *w)
{
  LOCK_FOR_SCOPE (&pool->lock);
  while ((atomic_load (&w->state) & PHASE_MASK) == PHASE_FLUSHING)
    pthread_cond_wait (&pool->flushed, &pool->lock);
  atomic_store_explicit (&w->state, atomic_load (&w->state) & ~PHASE_MASK,
                         memory_order_relaxed);
}

/* Is thread TID blocked now (asleep or in an uninterruptible wait),
 * rather than running or waiting for a CPU?
 */
static bool
blocked (pid_t tid)
{
  char path[64], buf[256];
  snprintf (path, sizeof path, "/proc/self/task/%d/stat", (int) tid);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return false;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  /* "TID (COMM) STATE ...": COMM may hold anything, even ") ". */
  const char *p = strrchr (buf, ')');
  return p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
}

/* What a look at the pools found. */
struct sight {
  bool running;                 /* a worker was running a request */
  bool fresh;                   /* one that the last look had not seen */
  bool stuck;                   /* one, seen at the last look too, that
                                 * waits with no worker free to read */
};

/* How many more workers would have a request to read: the bytes the
 * client has sent and nobody has read yet, at the size of the smallest
 * request (a write's payload counts too, so this overshoots, which at
 * worst starts workers that find nothing to read).  At least one.
 */
static unsigned
wanted (struct pool *pool)
{
  size_t bytes = conn_pending_input (pool->conn);
  size_t per = pool->conn->nego.extended ? sizeof (struct nbd_extended_request)
                                    : sizeof (struct nbd_request);
  size_t n = bytes / per;
  return n < 1 ? 1 : n > pool->max ? pool->max : n;
}

/* One look at POOL, with watch_lock held. */
static void
look (struct pool *pool, struct sight *sight)
{
  unsigned active = atomic_load (&pool->active);
  bool reader = false;
  unsigned stuck[2], nstuck = 0;

  for (unsigned i = 0; i < active; i++) {
    struct worker *w = &pool->workers[i];
    uint64_t state = atomic_load (&w->state);
    uint64_t runs = STATE_RUNS (state);
    bool same = runs == pool->seen[i].runs;
    pool->seen[i].runs = runs;
    switch (state & PHASE_MASK) {
    case PHASE_READ:
      reader = true;
      break;
    case PHASE_RUN_HELD:
      if (same) {
        hand_out (pool, w, state);
        pool->seen[i].handed = runs;
      }
      /* fallthrough */
    case PHASE_RUN:
    case PHASE_FLUSHING:
      sight->running = true;
      if (!same)
        sight->fresh = true;
      /* A run whose replies went to the flusher may be over, its
       * worker waiting for them back: no reason to add workers.
       */
      else if (nstuck < 2 && pool->seen[i].handed != runs)
        stuck[nstuck++] = i;
      break;
    }
  }

  /* Nobody is left to read the next request.  If a stuck worker is
   * blocked (on a disk, a server, a sleep), add as many workers as
   * there are requests waiting to be read, up to -t: a burst of slow
   * requests then runs side by side from the first look that finds
   * one stuck.  If they are all busy on the CPU, or waiting for one,
   * more workers would only queue for the CPUs (see workers.c): add
   * one, up to busy_max.  Two stuck workers looked at are enough to
   * judge by: with more, the pool grew for a reason already.
   */
  if (nstuck == 0 || reader || active >= pool->max ||
      conn_is_closing (pool->conn))
    return;
  bool wait = false;
  for (unsigned k = 0; k < nstuck && !wait; k++) {
    pid_t tid = atomic_load_explicit (&pool->workers[stuck[k]].tid,
                                      memory_order_relaxed);
    wait = tid > 0 && blocked (tid);
  }
  /* Keep looking often while this pool waits on its backend; a pool
   * that computes, or has a worker free, needs no hurry (and every look
   * at /proc costs the server CPU time).
   */
  sight->stuck |= wait;
  if (wait)
    pool_grow (pool, wanted (pool));
  else if (active < pool->busy_max)
    pool_grow (pool, 1);
}

/* With watch_lock held: is any worker of any pool running a request? */
static bool
any_running (void)
{
  for (struct pool *p = pools; p; p = p->watch_next) {
    unsigned active = atomic_load (&p->active);
    for (unsigned i = 0; i < active; i++) {
      if (atomic_load (&p->workers[i].state) & PHASE_MASK)
        return true;
    }
  }
  return false;
}

static void *
watch_loop (void *arg)
{
  (void) arg;
  unsigned idle = 0, fresh_looks = 0;
  bool after_nudge = false;
  uint64_t tick_ns = STALL_TICK_NS;
  struct sight sight = { 0 };

  /* So that top -H and perf name it. */
  pthread_setname_np (pthread_self (), "nbdkit-stalls");

  pthread_mutex_lock (&sleep_lock);
  while (!watcher_ended) {
    if (idle >= IDLE_TICKS) {
      /* Sleep until a run starts; look once more after saying so. */
      atomic_store (&pool_watch_asleep, true);
      pthread_mutex_lock (&watch_lock);
      bool running = any_running ();
      pthread_mutex_unlock (&watch_lock);
      if (running)
        atomic_store (&pool_watch_asleep, false);
      while (atomic_load (&pool_watch_asleep) && !watcher_ended)
        pthread_cond_wait (&watch_cond, &sleep_lock);
      idle = 0;
    }
    else {
      struct timespec when;
      clock_gettime (CLOCK_MONOTONIC, &when);
      /* A request seen running for the first time is looked at again
       * soon: if it is stuck, the sooner the better.  But while look
       * after look finds new requests running, requests come and go
       * faster than the looks: the next look can wait a tick, and the
       * ticks grow while no request is ever seen stuck (every wake-up
       * takes a CPU from a busy server and its clients).
       */
      uint64_t ns = !sight.fresh || fresh_looks > 1 ? tick_ns
        : after_nudge ? NUDGE_RELOOK_NS : RELOOK_NS;
      when.tv_sec += ns / 1000000000;
      when.tv_nsec += ns % 1000000000;
      if (when.tv_nsec >= 1000000000L) {
        when.tv_sec++;
        when.tv_nsec -= 1000000000L;
      }
      while (!watcher_ended && !nudged &&
             pthread_cond_timedwait (&watch_cond, &sleep_lock, &when) !=
             ETIMEDOUT)
        ;
    }
    after_nudge = nudged;
    if (nudged)
      tick_ns = STALL_TICK_NS;  /* a new connection: it may be slow */
    nudged = false;
    if (watcher_ended)
      break;
    pthread_mutex_unlock (&sleep_lock);

    sight = (struct sight) { 0 };
    pthread_mutex_lock (&watch_lock);
    for (struct pool *p = pools; p; p = p->watch_next)
      look (p, &sight);
    pthread_mutex_unlock (&watch_lock);
    idle = sight.running ? 0 : idle + 1;
    fresh_looks = sight.fresh ? fresh_looks + 1 : 0;
    tick_ns = sight.stuck ? STALL_TICK_NS
      : tick_ns * 2 < MAX_TICK_NS ? tick_ns * 2 : MAX_TICK_NS;

    pthread_mutex_lock (&sleep_lock);
  }
  pthread_mutex_unlock (&sleep_lock);
  return NULL;
}

/* A connection runs its first request: look at once, rather than at
 * the next tick, so that a first burst of slow requests is found stuck
 * RELOOK_NS after it starts.  One wake-up per connection.
 */
void
pool_watch_nudge (void)
{
  LOCK_FOR_SCOPE (&sleep_lock);
  atomic_store (&pool_watch_asleep, false);
  nudged = true;
  pthread_cond_signal (&watch_cond);
}

void
pool_watch_wake (void)
{
  LOCK_FOR_SCOPE (&sleep_lock);
  if (atomic_load (&pool_watch_asleep)) {
    atomic_store (&pool_watch_asleep, false);
    pthread_cond_signal (&watch_cond);
  }
}

/* Watch POOL from now on (its workers and max are set).  Without
 * memory or a watcher thread the pool is not watched: it grows only
 * after slow requests, as workers.c decides.
 */
void
pool_watch_add (struct pool *pool)
{
  pthread_cond_init (&pool->flushed, NULL);
  pthread_cond_init (&pool->flush_wake, NULL);
  pool->seen = calloc (pool->max, sizeof *pool->seen);
  if (!pool->seen)
    return;

  {
    LOCK_FOR_SCOPE (&sleep_lock);
    if (!watcher_started && !watcher_ended) {
      pthread_condattr_t attr;
      pthread_condattr_init (&attr);
      pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
      pthread_cond_init (&watch_cond, &attr);
      pthread_condattr_destroy (&attr);
      int e = pthread_create (&watcher, NULL, watch_loop, NULL);
      if (e != 0) {
        errno = e;
        nbdkit_debug ("stall watcher: pthread_create: %m");
        pthread_cond_destroy (&watch_cond);
        watcher_ended = true;   /* do not try again per connection */
      }
      else
        watcher_started = true;
    }
    if (!watcher_started)
      return;
  }
  LOCK_FOR_SCOPE (&watch_lock);
  pool->watch_prev = NULL;
  pool->watch_next = pools;
  if (pools)
    pools->watch_prev = pool;
  pools = pool;
  /* A pool that is not watched lends nothing: see pool_run_start. */
  pool->watched = true;
}

/* Stop watching POOL (pool->done is set and its workers have exited),
 * stop its flusher and free what pool_watch_add made.
 */
void
pool_watch_remove (struct pool *pool)
{
  if (pool->watched) {
    LOCK_FOR_SCOPE (&watch_lock);
    if (pool->watch_prev)
      pool->watch_prev->watch_next = pool->watch_next;
    else
      pools = pool->watch_next;
    if (pool->watch_next)
      pool->watch_next->watch_prev = pool->watch_prev;
  }
  pthread_mutex_lock (&pool->lock);
  bool flusher = pool->flusher_started;
  pthread_cond_broadcast (&pool->flush_wake);
  pthread_mutex_unlock (&pool->lock);
  if (flusher)
    pthread_join (pool->flusher, NULL);
  pthread_cond_destroy (&pool->flushed);
  pthread_cond_destroy (&pool->flush_wake);
  free (pool->seen);
}

/* At shutdown, once no connection is left: stop the watcher for good. */
void
pool_watch_stop (void)
{
  pthread_mutex_lock (&sleep_lock);
  bool started = watcher_started;
  watcher_started = false;
  watcher_ended = true;
  if (started)
    pthread_cond_signal (&watch_cond);
  pthread_mutex_unlock (&sleep_lock);
  if (started) {
    pthread_join (watcher, NULL);
    pthread_cond_destroy (&watch_cond);
  }
}
