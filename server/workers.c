/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the worker pool of a connection.  tx_serve
 * (transmission.c) runs worker 0 in the connection's own thread; as the
 * requests call for it, pool_grow starts or unparks more workers, up to
 * -t: each runs the pool's body (tx_worker_loop), which after each
 * request tells pool_account how long it took and parks in pool_park
 * when told to.  This file knows nothing of requests.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tx.h"

/* A connection starts with one worker, which reads, runs and answers
 * requests in turn: for a plugin that answers in microseconds this
 * costs no thread hand-offs at all (one read per batch of requests, one
 * sendmsg per batch of replies).  The pool grows, one worker at a time
 * up to -t, only while running requests side by side pays, and parks
 * workers again when it stops paying.  After each request the worker
 * classes it:
 *
 *  - fast: under POOL_SLOW_REQUEST_NS in the layers.  One worker is best.
 *  - waiting: slower, mostly off the CPU, and the worker blocked (a
 *    disk, a remote server, a sleep).  More workers overlap the waits:
 *    up to -t.
 *  - busy: slower, but mostly on the CPU (copying a 1 MiB read), or
 *    off it without ever blocking: that worker was preempted, and on a
 *    loaded machine more workers only lengthen the queue for the CPUs.
 *    More workers than half the CPUs only fight the client and each
 *    other for them: measured on 2 CPUs, 1 MiB reads ran at 2400 MiB/s
 *    with one worker and 1900 MiB/s with sixteen.
 *
 * Counting preempted requests as waiting would feed on itself: every
 * added worker stretches the others' wall time, which asks for more
 * workers (seen on 2 CPUs under AddressSanitizer, where the pool sat
 * at 16 workers serving reads that take microseconds).
 *
 * A worker's CPU time costs a system call, so it is read only while
 * requests are slow.  A busy request grows the pool by one worker after
 * GROW_AFTER of them in a row: on a busy machine the scheduler can
 * stretch any request by a whole time slice, so one proves nothing.
 * A waiting request is proof enough (the worker blocked of its own
 * accord and used little CPU), so each one doubles the active workers
 * at once, up to -t: a remote plugin whose requests take a round trip
 * (curl, S3, nbd, rbd, ssh) otherwise ran a client's first burst one
 * request at a time, four round trips per added worker.  The pool
 * parks one worker when at least half of a window of SHRINK_WINDOW
 * requests wanted fewer: the more workers there are the more often the
 * scheduler stretches a request, so shrinking must not wait for a
 * perfect run of fast ones.
 */
#define GROW_AFTER 4
#define SHRINK_WINDOW 1024

/* Add up to N active workers (unparking parked ones first), not above
 * -t.
 */
void
pool_grow (struct pool *pool, unsigned n)
{
  unsigned before;

  LOCK_FOR_SCOPE (&pool->lock);
  if (pool->done || conn_is_closing (pool->conn))
    return;
  before = pool->active;
  while (n-- > 0) {
    if (pool->active < pool->started) {
      pool->active++;           /* unpark one */
      pthread_cond_broadcast (&pool->wake);
    }
    else if (pool->started < pool->max) {
      unsigned i = pool->started;
      int e = pthread_create (&pool->threads[i], NULL, pool->body,
                              &pool->workers[i]);
      if (e != 0) {
        pool->max = pool->started;      /* stop trying */
        break;
      }
      pool->started++;
      pool->active++;
    }
    else
      break;
  }
  if (pool->active != before)
    nbdkit_debug ("slow requests: %u workers", (unsigned) pool->active);
}

struct pool_sample
pool_thread_sample (void)
{
  struct rusage ru;
  if (getrusage (RUSAGE_THREAD, &ru) == -1)
    return (struct pool_sample) { .cpu_ns = UINT64_MAX };
  uint64_t us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * UINT64_C (1000000)
    + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
  return (struct pool_sample) { .cpu_ns = us * 1000, .blocked = ru.ru_nvcsw };
}

/* Called by worker W after each request, which took WALL ns in the
 * layers; BEFORE and AFTER are W's samples from the request's start
 * and end (cpu_ns UINT64_MAX: not measured; AFTER is taken only for a
 * slow request measured from its start).
 * Returns true if W is to park.  Only the highest active worker ever
 * lowers ACTIVE, and only for itself, so worker 0 may trust that with
 * ACTIVE at 1 nobody else is reading requests.
 */
bool
pool_account (struct pool *pool, struct worker *w, uint64_t wall,
              struct pool_sample before, struct pool_sample after)
{
  unsigned target;
  bool slow = wall >= POOL_SLOW_REQUEST_NS, waiting = false;

  if (pool->slow != slow)
    pool->slow = slow;
  if (!slow)
    target = 1;
  else {
    /* A slow request that started while requests were fast was not
     * measured: it may have been preempted, so it votes for nothing.
     */
    if (before.cpu_ns == UINT64_MAX || after.cpu_ns == UINT64_MAX)
      return false;
    if (after.cpu_ns - before.cpu_ns >= wall / 2 ||
        after.blocked == before.blocked)
      target = pool->busy_max;
    else {
      target = pool->max;
      waiting = true;
    }
  }

  unsigned active = pool->active;
  if (target > active) {
    if (waiting) {
      pool->grow_run = 0;
      pool->shrink = false;
      pool_grow (pool, active < target - active ? active : target - active);
    }
    else if (atomic_fetch_add (&pool->grow_run, 1) + 1 >= GROW_AFTER) {
      pool->grow_run = 0;
      pool->shrink = false;
      pool_grow (pool, 1);
    }
    return false;
  }
  if (pool->grow_run)
    pool->grow_run = 0;
  if (active == 1)
    return false;

  if (target < active)
    pool->fewer++;
  if (atomic_fetch_add (&pool->window, 1) + 1 >= SHRINK_WINDOW) {
    if (pool->fewer >= SHRINK_WINDOW / 2)
      pool->shrink = true;
    pool->window = 0;
    pool->fewer = 0;
  }
  if (!pool->shrink || w->index + 1 != active || w->index == 0 ||
      !atomic_compare_exchange_strong (&pool->active, &active, w->index))
    return false;
  pool->shrink = false;
  nbdkit_debug ("%s requests: %u workers", slow ? "busy" : "fast", w->index);
  return true;
}

/* Wait while W is above the active count.  Returns false if the
 * connection ended meanwhile.
 */
bool
pool_park (struct pool *pool, struct worker *w)
{
  LOCK_FOR_SCOPE (&pool->lock);
  while (w->index >= pool->active && !pool->done)
    pthread_cond_wait (&pool->wake, &pool->lock);
  return !pool->done;
}
