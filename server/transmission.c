/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the transmission phase, one request at a time.  Each
 * worker of the pool (workers.c) runs tx_worker_loop: under the
 * connection's read lock it reads one request (request.c), then, with
 * no connection lock held, runs it down the layers (run, here), then
 * answers it (reply.c) under the write lock, or holds the answer back
 * to go with the next ones while it is the only worker and the client
 * keeps sending.  So requests are read in wire order, run side by side
 * when the pool has grown, and answered in the order they finish.  A
 * request that failed its checks is answered without running.  When
 * the plugin completes requests asynchronously (async.c), a worker
 * only hands each one over and reads on; the replier answers it.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "protocol.h"
#include "tx.h"
#include "stalls.h"

/* Block status replies carry at most this many descriptors. */
#define MAX_DESCRIPTORS 65536

/* Trim, zero and cache with 64-bit lengths go down in pieces. */
#define MAX_EFFECT_CHUNK (UINT32_C (1) << 30)

static uint32_t
layer_flags (uint16_t nbd_flags, uint16_t type)
{
  uint32_t f = 0;
  bool writes = type == NBD_CMD_WRITE || type == NBD_CMD_TRIM ||
    type == NBD_CMD_WRITE_ZEROES;
  if ((nbd_flags & NBD_CMD_FLAG_FUA) && writes)
    f |= NBDKIT_FLAG_FUA;
  if (type == NBD_CMD_WRITE_ZEROES && !(nbd_flags & NBD_CMD_FLAG_NO_HOLE))
    f |= NBDKIT_FLAG_MAY_TRIM;
  if (nbd_flags & NBD_CMD_FLAG_FAST_ZERO)
    f |= NBDKIT_FLAG_FAST_ZERO;
  if (nbd_flags & NBD_CMD_FLAG_REQ_ONE)
    f |= NBDKIT_FLAG_REQ_ONE;
  return f;
}

/* For trim, zero and cache: split a 64-bit length into layer calls. */
typedef int (*effect_fn) (struct context *, uint32_t, uint64_t, uint32_t,
                          int *);

static int
in_chunks (struct context *c, effect_fn fn, uint64_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  while (count > 0) {
    uint32_t n = count > MAX_EFFECT_CHUNK ? MAX_EFFECT_CHUNK : count;
    /* FUA applies to the last piece, after which all are durable. */
    uint32_t f = n == count ? flags : flags & ~NBDKIT_FLAG_FUA;
    if (fn (c, n, offset, f, err) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

/* Block status: fill w->desc, return the descriptor count or -1.
 *
 * The layers are asked about at most MAX_EFFECT_CHUNK bytes (the
 * length is a hint), and their answer may run past the request: it is
 * clipped only at the end of the export.  As the protocol asks, every
 * descriptor but the last ends before offset+count, and with REQ_ONE
 * the one descriptor ends by then too; the last may go further, which
 * saves the client asking again about what the layer already said
 * (nbdkit 1.32 answers the same way).  Compact descriptors carry
 * 32-bit lengths, so without extended headers a longer extent is cut
 * to fit, and is then the last.
 */
static int
block_status (struct connection *conn, struct worker *w,
              const struct request *req, uint32_t flags, int *err)
{
  const uint64_t count = req->count > MAX_EFFECT_CHUNK
    ? MAX_EFFECT_CHUNK : req->count;
  const uint64_t wanted = req->offset + req->count; /* checked at the edge */
  const bool one = flags & NBDKIT_FLAG_REQ_ONE;

  struct nbdkit_extents *e =
    extents_new_wanted (req->offset, wanted, conn->nego.exportsize);
  if (!e) {
    *err = ENOMEM;
    return -1;
  }
  if (layer_extents (conn->nego.top, count, req->offset, flags, e,
                     err) == -1) {
    nbdkit_extents_free (e);
    return -1;
  }
  size_t n = nbdkit_extents_count (e);
  if (n == 0) {
    nbdkit_error ("extents callback returned no extents");
    nbdkit_extents_free (e);
    *err = EIO;
    return -1;
  }
  if (!one && n > MAX_DESCRIPTORS) {
    NBDKIT_LIMIT_HIT (conn->id, "descriptors");
    n = MAX_DESCRIPTORS;
  }
  if (!w->desc) {
    w->desc = malloc (MAX_DESCRIPTORS * sizeof *w->desc);
    if (!w->desc) {
      nbdkit_extents_free (e);
      *err = ENOMEM;
      return -1;
    }
  }
  size_t i = 0;
  while (i < n) {
    struct nbdkit_extent x = nbdkit_get_extent (e, i);
    uint64_t len = x.length;
    if (one && len > req->count)
      len = req->count;
    if (!conn->nego.extended && len > UINT32_MAX)
      len = UINT32_MAX;
    w->desc[i].length = len;
    w->desc[i].status_flags = x.type & (NBD_STATE_HOLE | NBD_STATE_ZERO);
    i++;
    if (one || len < x.length || x.offset + len >= wanted)
      break;
  }
  nbdkit_extents_free (e);
  return i;
}

/* Run one validated request.  Returns the errno for the reply; for
 * block status, *ndesc is set.
 */
static int
run (struct connection *conn, struct worker *w, const struct request *req,
     int *ndesc)
{
  struct context *c = conn->nego.top;
  uint32_t f = layer_flags (req->flags, req->type);
  int err = 0;

  switch (req->type) {
  case NBD_CMD_READ:
    /* From the plugin's file, if it can say where: send_fd reads it in
     * the send.  (Small replies are worth more held back together.)
     */
    if (w->fd_read && req->count > MAX_HELD_REPLY) {
      if (layer_read_fd (c, req->count, req->offset, &w->fd, &w->fd_offset,
                         &err) == 0) {
        w->fd_pending = true;
        break;
      }
      err = 0;                  /* it cannot: copy instead */
    }
    /* Straight from the plugin's memory, if it can, this worker can
     * have the write lock at once (so the plugin's memory is never
     * held while another reply waits on the client), and the worker
     * has its piece list and room to copy out whatever of the reply
     * the socket will not take at once.
     */
    if (w->zerocopy && req->count > MAX_HELD_REPLY &&
        req->count <= ZC_MAX_BYTES && tx_have_zc_iov (w) &&
        tx_grow (w, w->out.len + MAX_REPLY_HEAD + req->count) &&
        pthread_mutex_trylock (&conn->write_lock) == 0) {
      int n = ZC_MAX_IOV;
      if (layer_map_read (c, req->count, req->offset, w->zc_iov + ZC_HEAD,
                          &n, &err) == 0) {
        w->zc_n = n;
        w->zc_mapped = true;    /* send_mapped lets go of both */
        break;
      }
      pthread_mutex_unlock (&conn->write_lock);
      if (err != E2BIG)
        break;
      err = 0;                  /* too many pieces: copy instead */
    }
    if (!tx_grow (w, req->count))
      return ENOMEM;
    layer_pread (c, w->buf, req->count, req->offset, 0, &err);
    break;
  case NBD_CMD_WRITE:
    if (w->zc_wn) {             /* received into the plugin's memory */
      w->zc_wn = 0;
      layer_unmap_write (c, req->count, req->offset, w->zc_iov, 1, &err);
    }
    else
      layer_pwrite (c, w->buf, req->count, req->offset, f, &err);
    break;
  case NBD_CMD_FLUSH:
    layer_flush (c, 0, &err);
    break;
  case NBD_CMD_TRIM:
    in_chunks (c, layer_trim, req->count, req->offset, f, &err);
    break;
  case NBD_CMD_WRITE_ZEROES:
    in_chunks (c, layer_zero, req->count, req->offset, f, &err);
    break;
  case NBD_CMD_CACHE:
    in_chunks (c, layer_cache, req->count, req->offset, 0, &err);
    break;
  case NBD_CMD_BLOCK_STATUS:
    *ndesc = block_status (conn, w, req, f, &err);
    break;
  }
  return err;
}

void *
tx_worker_loop (void *arg)
{
  struct worker *w = arg;
  struct pool *pool = w->pool;
  struct connection *conn = w->conn;
  conn_set_current (conn, conn->id);
  w->tid = gettid ();
  if (NBDKIT_WORKER_START_ENABLED ())
    NBDKIT_WORKER_START (conn->id, (uint64_t) w->index,
                         layer_thread_model_name (conn->cfg->thread_model),
                         (uint64_t) pool->max);
  for (;;) {
    struct request req;
    enum recv_outcome r;
    bool parking = false;

    /* Held-back replies go out before we might wait for the client. */
    if (w->out.len && (pool->active > 1 || !tx_request_buffered (conn)) &&
        tx_flush_replies (conn, w) == -1) {
      conn_set_closing (conn, "write error");
      break;
    }
    if (w->index >= pool->active && !pool_park (pool, w))
      break;

    /* No request in hand yet: cookie 0. */
    lock_or_wait (&conn->read_lock, conn->id, 0, "read");
    if (conn_is_closing (conn)) {
      pthread_mutex_unlock (&conn->read_lock);
      break;
    }
    r = tx_recv_request (conn, w, &req);
    conn_poll_feedback (conn, tx_request_buffered (conn));
    pthread_mutex_unlock (&conn->read_lock);
    if (r == RECV_CLOSED || r == RECV_DISCONNECT) {
      conn_set_closing (conn, "read error");  /* keeps an earlier reason */
      break;
    }

    conn->requests++;
    w->requests++;
    int err = req.error, ndesc = 0;
    w->errmsg = NULL;
    /* The plugin answers it when it completes (async.c); or else it
     * failed (err), or takes the synchronous path after all.
     */
    if (err == 0 && w->async && tx_async_takes (conn, w, &req) &&
        tx_async_submit (conn, w, &req, &err))
      continue;
    if (err == 0) {
      /* SERIALIZE_ALL_REQUESTS: one request at a time, server-wide.
       * The cookie is set first, for the wait probes.
       */
      layer_set_cookie (req.cookie);
      layer_requests_lock ();
      tx_trace_dispatch (conn, &req);
      uint64_t t0 = 0;
      struct pool_sample s0 = { .cpu_ns = UINT64_MAX };
      if (pool->max > 1) {
        t0 = now_ns ();
        if (pool->slow)
          s0 = pool_thread_sample ();
      }
      /* Replies held back may go out while this one runs, unless it
       * is a read that would send them along with its mapped data.
       */
      bool lend = w->out.len && pool->watched &&
        !(w->zerocopy && req.type == NBD_CMD_READ &&
          req.count > MAX_HELD_REPLY);
      uint64_t ran = pool_run_start (w, lend);
      log_clear_last_error ();
      err = tx_layer_error_for_reply (run (conn, w, &req, &ndesc), req.flags);
      w->errmsg = err ? log_last_error () : NULL;
      layer_set_cookie (0);
      /* The request's time in the layers ends here: waiting for held
       * replies the watcher is sending, or for the pool's lock, is no
       * part of it, and the watcher must not see this worker running
       * meanwhile.
       */
      uint64_t wall = 0;
      struct pool_sample s1 = { .cpu_ns = UINT64_MAX };
      if (t0) {
        wall = now_ns () - t0;
        if (s0.cpu_ns != UINT64_MAX && wall >= POOL_SLOW_REQUEST_NS)
          s1 = pool_thread_sample ();
      }
      pool_run_end (pool, w, ran);
      layer_requests_unlock ();
      if (t0)
        parking = pool_account (pool, w, wall, s0, s1);
    }
    tx_trace_done (conn, &req, err,
                   err ? 0 : (req.type == NBD_CMD_READ ||
                              req.type == NBD_CMD_WRITE) ? req.count : 0);
    /* Hold the reply back while more requests wait in the buffer, if
     * this is the connection's only worker.
     */
    bool hold = !parking && w->index == 0 && pool->active == 1 &&
      tx_request_buffered (conn);
    if (tx_send_reply (conn, w, &req, err, ndesc, hold) == -1) {
      conn_set_closing (conn, "write error");
      break;
    }
  }
  if (w->out.len && tx_flush_replies (conn, w) == -1)
    conn_set_closing (conn, "write error");
  /* Wake a worker blocked in read so it sees we are closing. */
  if (conn_is_closing (conn))
    shutdown (conn->sockin, SHUT_RD);
  free (w->buf);
  free (w->desc);
  byte_vector_reset (&w->out);
  held_reply_list_reset (&w->held);
  free (w->zc_iov);
  if (NBDKIT_WORKER_STOP_ENABLED ())
    NBDKIT_WORKER_STOP (conn->id, (uint64_t) w->index, w->requests);
  return NULL;
}

/* Serve requests until the connection ends: set up its pool, run
 * worker 0 here, then wait for the others to exit.
 */
void
tx_serve (struct connection *conn)
{
  struct pool pool = { .conn = conn, .body = tx_worker_loop,
                       .max = conn->cfg->threads };
  if (conn->cfg->thread_model < NBDKIT_THREAD_MODEL_PARALLEL ||
      pool.max < 1)
    pool.max = 1;

  pool.workers = calloc (pool.max, sizeof *pool.workers);
  pool.threads = calloc (pool.max, sizeof *pool.threads);
  if (!pool.workers || !pool.threads) {
    nbdkit_error ("calloc: %m");
    free (pool.workers);
    free (pool.threads);
    conn_set_closing (conn, "out of memory");
    return;
  }
  /* Reads straight from the plugin's memory need a plugin that can map
   * them with no filter above it, and a plain socket (not TLS, whose
   * records are built from a copy anyway).
   */
  bool zerocopy = layer_has_map_read (conn->nego.top) &&
    conn_can_send_nowait (conn);
  /* Write payloads straight into its memory: any transport will do
   * (TLS decrypts into it).
   */
  bool zc_write = layer_has_map_write (conn->nego.top);
  /* Reads sent from the plugin's file: not through TLS, which must
   * encrypt a copy anyway.
   */
  bool fd_read = layer_has_read_fd (conn->nego.top) &&
    conn_can_send_nowait (conn);
  /* Requests handed to the plugin to complete later: a plugin with
   * asynchronous callbacks and no filter above it (async.c).
   */
  bool async = tx_async_start (conn);
  pthread_mutex_init (&pool.lock, NULL);
  pthread_cond_init (&pool.wake, NULL);
  for (unsigned i = 0; i < pool.max; i++) {
    pool.workers[i].conn = conn;
    pool.workers[i].pool = &pool;
    pool.workers[i].index = i;
    pool.workers[i].zerocopy = zerocopy;
    pool.workers[i].zc_write = zc_write;
    pool.workers[i].fd_read = fd_read;
    pool.workers[i].async = async;
  }
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  pool.busy_max = cpus >= 4 ? cpus / 2 : 1;
  if (pool.busy_max > pool.max)
    pool.busy_max = pool.max;
  pool.started = 1;             /* worker 0 is this thread */
  pool.active = 1;
  pool_watch_add (&pool);
  tx_worker_loop (&pool.workers[0]);

  /* Worker 0 never parks, so it returns only when the connection is
   * over.  No worker starts after DONE (pool_grow checks under the
   * lock), so the set to join is final; parked workers wake and exit.
   */
  pthread_mutex_lock (&pool.lock);
  pool.done = true;
  pthread_cond_broadcast (&pool.wake);
  unsigned started = pool.started;
  pthread_mutex_unlock (&pool.lock);
  for (unsigned i = 1; i < started; i++)
    pthread_join (pool.threads[i], NULL);
  /* Every request still in the plugin completes (and is answered, if
   * the client is still there) before the layers are closed.
   */
  tx_async_end (conn);
  pool_watch_remove (&pool);
  pthread_cond_destroy (&pool.wake);
  pthread_mutex_destroy (&pool.lock);
  free (pool.workers);
  free (pool.threads);
}
