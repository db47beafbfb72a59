/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the stall watcher's side of a worker (stalls.c).
 * Only the worker loop (transmission.c) brackets its runs with these.
 */
#ifndef NBDKIT_STALLS_H
#define NBDKIT_STALLS_H

#include "tx.h"

/* stalls.c: the stall watcher.  A connection whose workers are all
 * stuck in slow requests reads no more of them: the watcher notices
 * within two ticks and adds a worker, and sends replies a stuck worker
 * was holding back.  pool_watch_add and pool_watch_remove bracket a
 * pool's life; pool_run_start and pool_run_end bracket each request's
 * run.
 */
extern void pool_watch_add (struct pool *pool);
extern void pool_watch_remove (struct pool *pool);
extern void pool_watch_wake (void);
extern void pool_watch_nudge (void);
extern void pool_take_back_out (struct pool *pool, struct worker *w);
extern _Atomic bool pool_watch_asleep;

/* W begins to run a request; LEND: its held replies may be sent
 * meanwhile (it will not touch w->out until pool_run_end).
 */
static inline uint64_t
pool_run_start (struct worker *w, bool lend)
{
  uint64_t runs = atomic_load_explicit (&w->state, memory_order_relaxed) &
    ~PHASE_MASK;
  uint64_t state = (runs + 4) | (lend ? PHASE_RUN_HELD : PHASE_RUN);
  /* Sequentially consistent, against the watcher going to sleep: either
   * it sees this run, or this worker sees it asleep and wakes it.
   */
  atomic_store (&w->state, state);
  if (runs == 0 && w->index == 0)
    pool_watch_nudge ();        /* the connection's first request */
  else if (atomic_load (&pool_watch_asleep))
    pool_watch_wake ();
  return state;
}

/* The run that pool_run_start began (and returned STATE for) is over. */
static inline void
pool_run_end (struct pool *pool, struct worker *w, uint64_t state)
{
  uint64_t read = state & ~PHASE_MASK;
  if ((state & PHASE_MASK) == PHASE_RUN)
    atomic_store_explicit (&w->state, read, memory_order_relaxed);
  else if (!atomic_compare_exchange_strong (&w->state, &state, read))
    pool_take_back_out (pool, w);
}

#endif /* NBDKIT_STALLS_H */
