/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the ground floor.  The state every other file of the
 * server reads, kept here so that reading it never means calling up
 * into a file that stands above the reader:
 *
 *  - the configuration, published by main.c once options.c has filled
 *    it (read-only once the first connection thread starts);
 *  - the stop: its reason, the quit pipe that wakes the accept loop,
 *    and the end of its drain (nbdkit_nanosleep wakes on that);
 *  - what this thread is serving: its connection and the cookie of the
 *    request it runs (both thread-local);
 *  - the thread model's lock around calls into the layers, and the
 *    wait probes of every lock a request may wait for.
 *
 * This file calls no other file of the server (a connection's closing
 * flag, which runtime.h declares with the rest, is inline in conn.h).
 */
#include <config.h>

#include <assert.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

/* ---- the configuration ---- */

static const struct config *the_config;

void
runtime_set_config (const struct config *cfg)
{
  the_config = cfg;
}

const struct config *
server_config (void)
{
  return the_config;
}

/* ---- the stop ---- */

/* Written by signal handlers, the --run waiter and nbdkit_shutdown;
 * read by the accept loop.  Made once, before any thread starts.
 */
static int quit_pipe[2] = { -1, -1 };
static const char *volatile stop_reason;

/* The end of a stop's drain (server_end_drain): requests still in
 * flight then, such as those asleep in nbdkit_nanosleep, are cut short.
 */
static int drain_pipe[2] = { -1, -1 };
static volatile bool drain_over;

int
runtime_stop_init (void)
{
  if (pipe2 (quit_pipe, O_CLOEXEC) == -1)
    return -1;
  return pipe2 (drain_pipe, O_CLOEXEC);
}

int
server_quit_fd (void)
{
  return quit_pipe[0];
}

const char *
server_stop_reason (void)
{
  return stop_reason ? stop_reason : "unknown";
}

/* Safe in a signal handler: a store and a write(2). */
void
server_request_shutdown (const char *reason)
{
  if (!stop_reason)
    stop_reason = reason;
  if (quit_pipe[1] >= 0) {
    char c = 0;
    ssize_t r = write (quit_pipe[1], &c, 1);
    (void) r;
  }
}

/* A stop first lets requests in flight finish (conn_shutdown_all),
 * sleeps included; only at the end of that time are sleeps cut short.
 */
bool
server_drain_over (void)
{
  return drain_over;
}

int
server_drain_fd (void)
{
  return drain_pipe[0];
}

void
server_end_drain (void)
{
  drain_over = true;
  if (drain_pipe[1] >= 0) {
    char c = 0;
    ssize_t r = write (drain_pipe[1], &c, 1);
    (void) r;
  }
}

/* ---- opt-in behaviours (-D nbdkit.*) ---- */

int runtime_contain_open_crashes;
int runtime_async = 1;
int runtime_async_direct = 1;

/* ---- what this thread serves ---- */

static __thread struct connection *current;
static __thread uint64_t current_id;     /* its id, for the wait probes */

/* The cookie of the request this thread is running, 0 outside one. */
static __thread uint64_t call_cookie;

struct connection *
conn_current (void)
{
  return current;
}

void
conn_set_current (struct connection *conn, uint64_t id)
{
  current = conn;
  current_id = id;
}

void
layer_set_cookie (uint64_t cookie)
{
  call_cookie = cookie;
}

uint64_t
layer_current_cookie (void)
{
  return call_cookie;
}

/* ---- the thread model's request lock ---- */

/* With SERIALIZE_ALL_REQUESTS (or SERIALIZE_CONNECTIONS), at most one
 * call from any connection is inside the chain at a time: requests,
 * and also open, prepare, the handshake's questions, finalize and
 * close.  A connection's thread takes the lock around each outermost
 * call; the calls a filter makes down the chain run under the lock its
 * caller holds (the depth counts them).  Threads a filter starts for
 * itself hold no connection and do not take it, as in nbdkit.
 * SERIALIZE_CONNECTIONS is also enforced around a whole connection by
 * connection.c (that lock is taken first).  It lives here because it
 * is process-wide: every layer call (layer-call.h) takes it.
 */
static pthread_mutex_t all_requests_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread unsigned requests_lock_depth;

static bool
serialize_all (void)
{
  const struct config *cfg = server_config ();
  return cfg &&
    cfg->thread_model <= NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS;
}

void
layer_requests_lock (void)
{
  if (requests_lock_depth++ == 0 && serialize_all ())
    lock_or_wait (&all_requests_lock, current_id, call_cookie,
                  "serialize_all");
}

void
layer_requests_unlock (void)
{
  assert (requests_lock_depth > 0);
  if (--requests_lock_depth == 0 && serialize_all ())
    pthread_mutex_unlock (&all_requests_lock);
}

/* ---- waiting for a lock ---- */

/* The only sites of wait_start and wait_done: a lock (lock_wait) and
 * the waits for room (request.c's payload budget, async.c's requests
 * in flight) go through these, so that LOCK is a register at both.
 */
uint64_t __attribute__ ((noinline))
wait_begin (uint64_t id, uint64_t cookie, const char *lock)
{
  if (!NBDKIT_WAIT_START_ENABLED () && !NBDKIT_WAIT_DONE_ENABLED ())
    return 0;
  uint64_t t0 = now_ns ();
  NBDKIT_WAIT_START (id, cookie, lock);
  return t0;
}

void __attribute__ ((noinline))
wait_end (uint64_t id, uint64_t cookie, const char *lock, uint64_t t0)
{
  if (t0 && NBDKIT_WAIT_DONE_ENABLED ())
    NBDKIT_WAIT_DONE (id, cookie, lock, now_ns () - t0);
}

void
lock_wait (pthread_mutex_t *m, uint64_t id, uint64_t cookie,
           const char *lock)
{
  if (!NBDKIT_WAIT_START_ENABLED () && !NBDKIT_WAIT_DONE_ENABLED ()) {
    pthread_mutex_lock (m);
    return;
  }
  uint64_t t0 = wait_begin (id, cookie, lock);
  pthread_mutex_lock (m);
  wait_end (id, cookie, lock, t0);
}
