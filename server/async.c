/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: asynchronous requests (include/nbdkit-async.h).  When
 * the top layer is a plugin with nbdkit_async_ops and the thread model
 * is parallel, a worker hands each read, write, flush, trim and zero
 * it can to the plugin (tx_async_submit) with a request object that
 * owns the request's buffer, and goes back to reading requests.  The
 * plugin completes it later from any thread (nbdkit_async_complete),
 * which only queues it on the connection's done list; the connection's
 * replier thread takes the whole list at once, sends the replies
 * (reply.c, under the write lock, the small ones together in one
 * write) and recycles the objects.  So no thread of the plugin ever
 * waits on the client, and a connection has as many requests in flight
 * as its bound allows with two threads of the server.
 *
 * The bound: at most max_in_flight requests (the plugin's, or
 * ASYNC_MAX_IN_FLIGHT) and about MAX_PAYLOAD_IN_FLIGHT bytes of
 * buffers are in flight per connection; a worker whose submission
 * reached it waits (wait_room) before it reads another request, so the
 * connection reads no more (beyond one request per other worker, each
 * of which then waits the same way) until a completion has been
 * answered.  The wait is here, and not before each read, so that a
 * connection without asynchronous requests pays nothing for it.  Larger buffers also hold
 * their share of the payload budget of request.c, as on the
 * synchronous path.
 *
 * The end: tx_async_end runs in the connection's thread after its
 * workers have exited, and before the layers are closed.  If the
 * client is gone it calls the plugin's cancel once; it waits until
 * every request in flight has completed and been answered (or, for a
 * client that is gone, thrown away), then stops the replier.  So no
 * completion can reach a connection that is gone, and the plugin's
 * close comes after the last completion.
 *
 * Lock order: a->lock is a leaf, taken alone (no lock of the
 * connection is held while a worker waits for room); nbdkit_async_complete takes only it, so a plugin may
 * call it holding locks of its own.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"
#include "protocol.h"
#include "tx.h"
#include "nbdkit-async.h"

/* Requests in flight per connection when the plugin does not say. */
#define ASYNC_MAX_IN_FLIGHT 256

/* A recycled request keeps a buffer up to this size. */
#define ASYNC_KEPT_BUFFER (256 * 1024)

/* How often a wait looks whether the connection is still there. */
#define ASYNC_LOOK_NS 100000000

enum async_state {
  ASYNC_FREE,
  ASYNC_IN_PLUGIN,              /* submitted, not completed */
  ASYNC_DONE,                   /* completed, on the done list */
};

struct nbdkit_async_request {
  struct async_conn *a;
  struct nbdkit_async_request *next;    /* on the done or free list */
  struct request req;
  enum layer_async_cmd cmd;
  uint32_t flags;               /* the layer flags it went down with */
  char *buf;                    /* the data, the request's own */
  size_t cap;
  uint64_t holding;             /* of MAX_PAYLOAD_IN_FLIGHT (request.c) */
  uint64_t bytes;               /* counted in a->bytes */
  uint64_t submit_ns;           /* only when request_complete is traced */
  int err;
  _Atomic int state;            /* enum async_state */
};

struct async_conn {
  struct connection *conn;
  const struct nbdkit_async_ops *ops;
  bool fua_native, zero_native;
  uint32_t max;                 /* requests in flight at most */
  pthread_mutex_t lock;         /* protects what follows */
  pthread_cond_t work;          /* the replier has completions, or stops */
  pthread_cond_t room;          /* in_flight or bytes went down */
  _Atomic uint32_t in_flight;   /* submitted, reply not yet sent */
  _Atomic uint64_t bytes;       /* buffers of requests in flight */
  struct nbdkit_async_request *done_head, *done_tail;
  struct nbdkit_async_request *free_list;
  uint32_t n_free;
  bool stopping;
  pthread_t replier;
  struct worker rw;             /* the replier's reply buffers */
};

/* The connection may read another request now: fewer than the bound
 * in flight.  Read without the lock: only the room wait needs it.
 */
static inline bool
has_room (const struct async_conn *a)
{
  return a->in_flight < a->max && a->bytes < MAX_PAYLOAD_IN_FLIGHT;
}

/* Is the client still there (its end not shut)? */
static bool
peer_gone (struct connection *conn)
{
  struct pollfd pfd = { .fd = conn->sockin, .events = POLLRDHUP };
  return poll (&pfd, 1, 0) == 1 &&
    (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void
deadline_in (struct timespec *ts, long ns)
{
  clock_gettime (CLOCK_REALTIME, ts);
  ts->tv_nsec += ns;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

/* Wait while the connection has as many requests in flight as it may
 * have, or until the client is gone.
 */
static void
wait_room (struct connection *conn)
{
  struct async_conn *a = conn->async;
  pthread_mutex_lock (&a->lock);
  while (!has_room (a)) {
    struct timespec ts;
    deadline_in (&ts, ASYNC_LOOK_NS);
    if (pthread_cond_timedwait (&a->room, &a->lock, &ts) == ETIMEDOUT) {
      /* A client that hung up sends no more: stop waiting for room to
       * read what will never come, so that cancel can follow.
       */
      pthread_mutex_unlock (&a->lock);
      if (conn_is_closing (conn))
        return;
      if (peer_gone (conn)) {
        conn_set_closing (conn, "eof");
        shutdown (conn->sockin, SHUT_RD);   /* wake the other workers */
        return;
      }
      pthread_mutex_lock (&a->lock);
    }
  }
  pthread_mutex_unlock (&a->lock);
}

bool
tx_async_takes (const struct connection *conn, const struct worker *w,
                const struct request *req)
{
  const struct async_conn *a = conn->async;
  const struct nbdkit_async_ops *ops = a->ops;
  bool fua = req->flags & NBD_CMD_FLAG_FUA;

  switch (req->type) {
  case NBD_CMD_READ:
    return ops->pread != NULL;
  case NBD_CMD_WRITE:
    /* A payload already in the plugin's own memory is written by
     * handing it back (common/zerocopy.h), synchronously.
     */
    return ops->pwrite && !w->zc_wn && (!fua || a->fua_native);
  case NBD_CMD_FLUSH:
    return ops->flush != NULL;
  case NBD_CMD_TRIM:
    return ops->trim && req->count <= UINT32_MAX && (!fua || a->fua_native);
  case NBD_CMD_WRITE_ZEROES:
    return ops->zero && a->zero_native && req->count <= UINT32_MAX &&
      (!fua || a->fua_native);
  default:
    return false;
  }
}

/* With a->lock held: a request object, from the free list if it has
 * one.  NULL if out of memory.
 */
static struct nbdkit_async_request *
take_object (struct async_conn *a)
{
  struct nbdkit_async_request *r = a->free_list;
  if (r) {
    a->free_list = r->next;
    a->n_free--;
    return r;
  }
  r = calloc (1, sizeof *r);
  if (r)
    r->a = a;
  return r;
}

/* A request leaves flight: its budget goes back, the object onto the
 * free list (or away), and a worker waiting for room may read on.
 */
static void
finish (struct async_conn *a, struct nbdkit_async_request *r)
{
  struct connection *conn = a->conn;
  if (r->holding) {
    LOCK_FOR_SCOPE (&conn->payload_lock);
    conn->payload_held -= r->holding;
    r->holding = 0;
    pthread_cond_broadcast (&conn->payload_back);
  }
  if (r->cap > ASYNC_KEPT_BUFFER) {
    free (r->buf);
    r->buf = NULL;
    r->cap = 0;
  }
  r->state = ASYNC_FREE;
  LOCK_FOR_SCOPE (&a->lock);
  a->bytes -= r->bytes;
  a->in_flight--;
  if (a->n_free < a->max) {
    r->next = a->free_list;
    a->free_list = r;
    a->n_free++;
  }
  else {
    free (r->buf);
    free (r);
  }
  pthread_cond_broadcast (&a->room);
}

static bool
grow (struct nbdkit_async_request *r, size_t need)
{
  void *b;
  if (need <= r->cap)
    return true;
  if (posix_memalign (&b, 4096, need) != 0)
    return false;
  free (r->buf);
  r->buf = b;
  r->cap = need;
  return true;
}

bool
tx_async_submit (struct connection *conn, struct worker *w,
                 const struct request *req, int *err)
{
  struct async_conn *a = conn->async;
  struct nbdkit_async_request *r;
  uint64_t bytes = 0;
  void *buf = NULL;

  if (req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE)
    bytes = req->count;
  {
    LOCK_FOR_SCOPE (&a->lock);
    r = take_object (a);
    if (!r) {
      *err = ENOMEM;
      return false;
    }
    a->in_flight++;
    a->bytes += bytes;
  }
  r->req = *req;
  r->bytes = bytes;
  r->err = 0;
  r->flags = 0;
  /* The budget a large buffer holds goes with the request. */
  r->holding = w->holding;
  w->holding = 0;
  switch (req->type) {
  case NBD_CMD_READ:
    r->cmd = LAYER_ASYNC_PREAD;
    if (!grow (r, req->count)) {
      *err = ENOMEM;
      goto refused;
    }
    buf = r->buf;
    break;
  case NBD_CMD_WRITE: {
    /* The payload is in the worker's buffer: the request takes that
     * buffer, and the worker its old one, so nothing is copied.
     */
    char *b = r->buf;
    size_t cap = r->cap;
    r->buf = w->buf;
    r->cap = w->cap;
    w->buf = b;
    w->cap = cap;
    r->cmd = LAYER_ASYNC_PWRITE;
    buf = r->buf;
    break;
  }
  case NBD_CMD_FLUSH: r->cmd = LAYER_ASYNC_FLUSH; break;
  case NBD_CMD_TRIM: r->cmd = LAYER_ASYNC_TRIM; break;
  default: r->cmd = LAYER_ASYNC_ZERO; break;
  }
  if ((req->flags & NBD_CMD_FLAG_FUA) && r->cmd != LAYER_ASYNC_PREAD &&
      r->cmd != LAYER_ASYNC_FLUSH)
    r->flags |= NBDKIT_FLAG_FUA;
  if (r->cmd == LAYER_ASYNC_ZERO) {
    if (!(req->flags & NBD_CMD_FLAG_NO_HOLE))
      r->flags |= NBDKIT_FLAG_MAY_TRIM;
    if (req->flags & NBD_CMD_FLAG_FAST_ZERO)
      r->flags |= NBDKIT_FLAG_FAST_ZERO;
  }

  if (NBDKIT_REQUEST_DISPATCH_ENABLED ())
    NBDKIT_REQUEST_DISPATCH (conn->id, req->cookie,
                             req->start_ns ? now_ns () - req->start_ns : 0,
                             conn->requests -
                             __atomic_load_n (&conn->replies,
                                              __ATOMIC_RELAXED));
  r->submit_ns = NBDKIT_REQUEST_COMPLETE_ENABLED () ? now_ns () : 0;
  if (NBDKIT_REQUEST_SUBMIT_ENABLED ())
    NBDKIT_REQUEST_SUBMIT (conn->id, req->cookie, (uint64_t) req->type,
                           req->offset, req->count);
  r->state = ASYNC_IN_PLUGIN;
  /* From here the request may complete, and be answered and recycled,
   * at any moment: r is not touched again unless the plugin refused.
   */
  layer_set_cookie (req->cookie);
  int rc = layer_async_submit (conn->nego.top, r, r->cmd, buf,
                               (uint32_t) req->count, req->offset, r->flags,
                               err);
  layer_set_cookie (0);
  if (rc == 0) {
    /* At the bound, read no more until a completion is answered. */
    if (!has_room (a))
      wait_room (conn);
    return true;
  }
  int was = ASYNC_IN_PLUGIN;
  if (!atomic_compare_exchange_strong (&r->state, &was, ASYNC_FREE)) {
    /* Refused, but completed as well (which the API forbids): the
     * completion answers it.
     */
    nbdkit_debug ("async: a refused request was also completed");
    return true;
  }
  *err = tx_layer_error_for_reply (*err, req->flags);
  if (NBDKIT_REQUEST_COMPLETE_ENABLED ())
    NBDKIT_REQUEST_COMPLETE (conn->id, req->cookie, (int64_t) *err,
                             r->submit_ns ? now_ns () - r->submit_ns : 0);

 refused:
  /* Answered by the worker, which gives the budget back then. */
  w->holding = r->holding;
  r->holding = 0;
  finish (a, r);
  return false;
}

void
nbdkit_async_complete (struct nbdkit_async_request *r, int err)
{
  int was = ASYNC_IN_PLUGIN;
  if (!atomic_compare_exchange_strong (&r->state, &was, ASYNC_DONE)) {
    /* Completed twice, or never submitted: the object may already be
     * another request's.  Nothing safe can be done with it.
     */
    nbdkit_error ("nbdkit_async_complete: request %p is not in flight "
                  "(completed twice?)", (void *) r);
    abort ();
  }
  struct async_conn *a = r->a;
  r->err = err;
  if (NBDKIT_REQUEST_COMPLETE_ENABLED ())
    NBDKIT_REQUEST_COMPLETE (a->conn->id, r->req.cookie, (int64_t) err,
                             r->submit_ns ? now_ns () - r->submit_ns : 0);
  /* The last touch of the connection's memory is under a->lock: the
   * connection ends only after the replier has taken this request off
   * the list, which it cannot do before this unlock.
   */
  pthread_mutex_lock (&a->lock);
  r->next = NULL;
  if (a->done_tail)
    a->done_tail->next = r;
  else {
    a->done_head = r;
    pthread_cond_signal (&a->work);
  }
  a->done_tail = r;
  pthread_mutex_unlock (&a->lock);
}

/* The errno the client gets for R. */
static int
reply_error (struct async_conn *a, struct nbdkit_async_request *r)
{
  int err = r->err;
  /* A zero the plugin would not do like this is written as zeroes, as
   * the synchronous path does (backend.c), unless the client asked for
   * a fast zero.  Rare: it runs here, on the replier.
   */
  if (r->cmd == LAYER_ASYNC_ZERO && (err == ENOTSUP || err == EOPNOTSUPP) &&
      !(r->flags & NBDKIT_FLAG_FAST_ZERO)) {
    err = 0;
    layer_set_cookie (r->req.cookie);
    layer_zero (a->conn->nego.top, (uint32_t) r->req.count, r->req.offset,
                r->flags, &err);
    layer_set_cookie (0);
  }
  return tx_layer_error_for_reply (err, r->req.flags);
}

/* Answer the completed requests of LIST, in the order they completed,
 * and recycle them.  The small replies go out together.  Once the
 * connection is aborted (the client gone) nothing is sent.
 */
static void
answer (struct async_conn *a, struct nbdkit_async_request *list)
{
  struct connection *conn = a->conn;
  bool send = !conn_is_aborted (conn);

  while (list) {
    struct nbdkit_async_request *r = list;
    list = r->next;
    int err = reply_error (a, r);
    if (r->req.start_ns && NBDKIT_REQUEST_DONE_ENABLED ()) {
      uint64_t bytes = err ? 0 : r->bytes;
      NBDKIT_REQUEST_DONE (conn->id, r->req.cookie, (uint64_t) r->req.type,
                           (int64_t) err, bytes,
                           now_ns () - r->req.start_ns);
    }
    if (send && tx_send_reply_from (conn, &a->rw, &r->req, err, r->buf,
                                    list != NULL) == -1) {
      conn_set_closing (conn, "write error");
      shutdown (conn->sockin, SHUT_RD);     /* wake the reader */
      send = false;
    }
    finish (a, r);
  }
  if (send && a->rw.out.len && tx_flush_replies (conn, &a->rw) == -1) {
    conn_set_closing (conn, "write error");
    shutdown (conn->sockin, SHUT_RD);
  }
  a->rw.out.len = 0;
  a->rw.out_n = 0;
}

static void *
replier (void *arg)
{
  struct async_conn *a = arg;
  conn_set_current (a->conn);
  pthread_mutex_lock (&a->lock);
  for (;;) {
    while (!a->done_head && !a->stopping)
      pthread_cond_wait (&a->work, &a->lock);
    if (!a->done_head)
      break;                    /* stopping, and nothing is in flight */
    struct nbdkit_async_request *list = a->done_head;
    a->done_head = a->done_tail = NULL;
    pthread_mutex_unlock (&a->lock);
    answer (a, list);
    pthread_mutex_lock (&a->lock);
  }
  pthread_mutex_unlock (&a->lock);
  conn_set_current (NULL);
  return NULL;
}

bool
tx_async_start (struct connection *conn)
{
  struct context *top = conn->nego.top;
  const struct nbdkit_async_ops *ops = layer_async_ops (top);
  /* Requests overlap in the plugin however few threads there are:
   * only a plugin that allows that gets them.
   */
  if (!ops || !runtime_async ||
      conn->cfg->thread_model != NBDKIT_THREAD_MODEL_PARALLEL)
    return false;

  struct async_conn *a = calloc (1, sizeof *a);
  if (!a) {
    nbdkit_error ("calloc: %m");
    return false;
  }
  a->conn = conn;
  a->ops = ops;
  a->max = ops->max_in_flight ? ops->max_in_flight : ASYNC_MAX_IN_FLIGHT;
  if (conn->nego.can_write) {
    a->fua_native = layer_can_fua (top) == NBDKIT_FUA_NATIVE;
    a->zero_native = layer_can_zero (top) == NBDKIT_ZERO_NATIVE;
  }
  a->rw.conn = conn;
  a->rw.index = UINT32_MAX;     /* no worker of the pool */
  pthread_mutex_init (&a->lock, NULL);
  pthread_cond_init (&a->work, NULL);
  pthread_cond_init (&a->room, NULL);
  int e = pthread_create (&a->replier, NULL, replier, a);
  if (e != 0) {
    errno = e;
    nbdkit_debug ("async: no replier thread (%m): requests go the "
                  "synchronous way");
    pthread_cond_destroy (&a->room);
    pthread_cond_destroy (&a->work);
    pthread_mutex_destroy (&a->lock);
    free (a);
    return false;
  }
  conn->async = a;
  return true;
}

void
tx_async_end (struct connection *conn)
{
  struct async_conn *a = conn->async;
  bool cancelled = false;

  if (!a)
    return;
  for (;;) {
    {
      LOCK_FOR_SCOPE (&a->lock);
      if (a->in_flight == 0) {
        a->stopping = true;
        pthread_cond_signal (&a->work);
        break;
      }
    }
    /* Nothing more reaches a client that is gone, or that the end of
     * a drain cut short: the plugin may give up what it holds.
     */
    if (!cancelled && conn_is_aborted (conn)) {
      cancelled = true;
      nbdkit_debug ("async: %u requests in flight at the end: cancelling",
                    (unsigned) a->in_flight);
      layer_async_cancel (conn->nego.top);
      continue;
    }
    LOCK_FOR_SCOPE (&a->lock);
    if (a->in_flight > 0) {
      struct timespec ts;
      deadline_in (&ts, ASYNC_LOOK_NS);
      pthread_cond_timedwait (&a->room, &a->lock, &ts);
    }
  }
  pthread_join (a->replier, NULL);
  assert (a->in_flight == 0 && a->done_head == NULL);
  while (a->free_list) {
    struct nbdkit_async_request *r = a->free_list;
    a->free_list = r->next;
    free (r->buf);
    free (r);
  }
  byte_vector_reset (&a->rw.out);
  held_reply_list_reset (&a->rw.held);
  pthread_cond_destroy (&a->room);
  pthread_cond_destroy (&a->work);
  pthread_mutex_destroy (&a->lock);
  conn->async = NULL;
  free (a);
}
