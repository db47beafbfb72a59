/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: asynchronous requests (include/nbdkit-async.h).  When
 * the top layer is a plugin with nbdkit_async_ops and the thread model
 * is parallel, a worker hands each read, write, flush, trim and zero
 * it can to the plugin (tx_async_submit) with a request object that
 * owns the request's buffer, and goes back to reading requests.  The
 * plugin completes it later from any thread (nbdkit_async_complete).
 * If the reply carries no data and sending it cannot wait on the
 * client (the socket takes it whole at once, and nothing else of the
 * connection is being answered), the completing thread sends the reply
 * itself (answer_now); otherwise it
 * queues the request on the connection's done list, and the
 * connection's replier thread takes the whole list at once, sends the
 * replies (reply.c, under the write lock, the small ones together in
 * one write) and recycles the objects.  So no thread of the plugin
 * ever waits on the client, and a connection has as many requests in
 * flight as its bound allows with two threads of the server.
 *
 * The bound: at most max_in_flight requests (the plugin's, or
 * ASYNC_MAX_IN_FLIGHT) and about MAX_PAYLOAD_IN_FLIGHT bytes of
 * buffers are in flight per connection; a worker whose submission
 * reached it waits (wait_room) before it reads another request, so the
 * connection reads no more (beyond one request per other worker, each
 * of which then waits the same way) until a completion has been
 * answered.  The wait is here, and not before each read, so that a
 * connection without asynchronous requests pays nothing for it.
 * Larger buffers also hold their share of the payload budget of
 * request.c, as on the synchronous path.
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
 * connection is held while a worker waits for room).
 * nbdkit_async_complete takes it and at most tries the write lock
 * (answer_now), so a plugin may call it holding locks of its own.
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

/* A recycled request keeps a buffer up to this size; and larger ones,
 * up to KEPT_BUFFER (tx.h), while those on a connection's free list
 * come to at most ASYNC_KEPT_LARGE.  So a connection copying 1 MiB at
 * a time does not map and unmap a buffer per request (a page fault per
 * page of it), and one idle after a burst holds little.
 */
#define ASYNC_KEPT_BUFFER (256 * 1024)
#define ASYNC_KEPT_LARGE (32 * 1024 * 1024)

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
  struct context *bottom;       /* the plugin's context */
  bool filtered;                /* filters above it: prepare each request */
  unsigned cmds;                /* 1 << LAYER_ASYNC_*: every layer takes */
  /* The plugin's answers, for what the layers above it pass down. */
  uint64_t size;
  bool can_write, can_flush, can_trim, fast_zero;
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
  uint64_t kept_large;          /* buffers over ASYNC_KEPT_BUFFER there */
  bool stopping;
  bool direct;                  /* completions may answer (answer_now) */
  bool answering;               /* a thread is answering: it has rw */
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
 * have, or until the client is gone: the wait probes' "in_flight",
 * cookie 0 (the next request is not read yet).
 */
static void
wait_room (struct connection *conn)
{
  struct async_conn *a = conn->async;
  uint64_t t0 = 0;
  pthread_mutex_lock (&a->lock);
  if (!has_room (a))
    t0 = wait_begin (conn->id, 0, "in_flight");
  while (!has_room (a)) {
    struct timespec ts;
    deadline_in (&ts, ASYNC_LOOK_NS);
    if (pthread_cond_timedwait (&a->room, &a->lock, &ts) == ETIMEDOUT) {
      /* A client that hung up sends no more: stop waiting for room to
       * read what will never come, so that cancel can follow.
       */
      pthread_mutex_unlock (&a->lock);
      if (conn_is_closing (conn))
        goto out;
      if (peer_gone (conn)) {
        conn_set_closing (conn, "eof");
        shutdown (conn->sockin, SHUT_RD);   /* wake the other workers */
        goto out;
      }
      pthread_mutex_lock (&a->lock);
    }
  }
  pthread_mutex_unlock (&a->lock);
 out:
  wait_end (conn->id, 0, "in_flight", t0);
}

/* The asynchronous command of a request type, or -1 for none. */
static int
cmd_of (uint16_t type)
{
  switch (type) {
  case NBD_CMD_READ: return LAYER_ASYNC_PREAD;
  case NBD_CMD_WRITE: return LAYER_ASYNC_PWRITE;
  case NBD_CMD_FLUSH: return LAYER_ASYNC_FLUSH;
  case NBD_CMD_TRIM: return LAYER_ASYNC_TRIM;
  case NBD_CMD_WRITE_ZEROES: return LAYER_ASYNC_ZERO;
  default: return -1;
  }
}

bool
tx_async_takes (const struct connection *conn, const struct worker *w,
                const struct request *req)
{
  const struct async_conn *a = conn->async;
  int cmd = cmd_of (req->type);

  if (cmd == -1 || !(a->cmds & (1u << cmd)))
    return false;
  /* A payload already in the plugin's own memory is written by handing
   * it back (common/zerocopy.h), synchronously.
   */
  if (cmd == LAYER_ASYNC_PWRITE && w->zc_wn)
    return false;
  /* Extended headers allow trims and zeroes the callbacks cannot say. */
  return req->count <= UINT32_MAX;
}

/* The plugin can take CMD with FLAGS as they reach it, with nothing
 * asked of the server to emulate, and COUNT bytes at OFFSET are within
 * its size.  Always so without filters (the server checked the request
 * against the plugin's answers already), but for FUA and zeroes.
 */
static bool
bottom_takes (const struct async_conn *a, enum layer_async_cmd cmd,
              uint32_t count, uint64_t offset, uint32_t flags)
{
  bool fua = flags & NBDKIT_FLAG_FUA;
  if (cmd != LAYER_ASYNC_FLUSH &&
      (count == 0 || offset > a->size || count > a->size - offset))
    return false;
  switch (cmd) {
  case LAYER_ASYNC_PREAD:
    return flags == 0;
  case LAYER_ASYNC_PWRITE:
    return a->can_write && (!fua || a->fua_native);
  case LAYER_ASYNC_FLUSH:
    return a->can_flush && flags == 0;
  case LAYER_ASYNC_TRIM:
    return a->can_write && a->can_trim && (!fua || a->fua_native);
  case LAYER_ASYNC_ZERO:
    return a->can_write && a->zero_native && (!fua || a->fua_native) &&
      (!(flags & NBDKIT_FLAG_FAST_ZERO) || a->fast_zero);
  }
  return false;
}

/* The layer flags of a request as the client sent it. */
static uint32_t
top_flags (const struct request *req, enum layer_async_cmd cmd)
{
  uint32_t flags = 0;
  if ((req->flags & NBD_CMD_FLAG_FUA) && cmd != LAYER_ASYNC_PREAD &&
      cmd != LAYER_ASYNC_FLUSH)
    flags |= NBDKIT_FLAG_FUA;
  if (cmd == LAYER_ASYNC_ZERO) {
    if (!(req->flags & NBD_CMD_FLAG_NO_HOLE))
      flags |= NBDKIT_FLAG_MAY_TRIM;
    if (req->flags & NBD_CMD_FLAG_FAST_ZERO)
      flags |= NBDKIT_FLAG_FAST_ZERO;
  }
  return flags;
}

/* The most filters a request passes asynchronously; a deeper stack
 * takes the synchronous path.
 */
#define ASYNC_MAX_FILTERS 16

/* Where a request was at each filter it passed, for its trace. */
struct async_path {
  unsigned n;
  struct {
    struct context *c;
    uint64_t offset;
    uint32_t count;
  } at[ASYNC_MAX_FILTERS];
};

/* Take REQ down through the filters above the plugin, each adjusting
 * it (COUNT, OFFSET, FLAGS) for the one below.  1: it reaches the
 * plugin; 0: a layer wants it synchronous; -1: a filter failed it
 * (*err).
 */
static int
walk_filters (struct async_conn *a, enum layer_async_cmd cmd,
              uint32_t *count, uint64_t *offset, uint32_t *flags,
              struct async_path *path, int *err)
{
  path->n = 0;
  for (struct context *c = a->conn->nego.top; c != a->bottom;
       c = c->below) {
    if (path->n == ASYNC_MAX_FILTERS)
      return 0;
    path->at[path->n].c = c;
    path->at[path->n].offset = *offset;
    path->at[path->n].count = *count;
    path->n++;
    int r = layer_async_prepare (c, cmd, count, offset, flags, err);
    if (r != NBDKIT_ASYNC_PASS)
      return r == -1 ? -1 : 0;
  }
  return 1;
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
    if (r->cap > ASYNC_KEPT_BUFFER)
      a->kept_large -= r->cap;
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
  r->state = ASYNC_FREE;
  void *drop_buf = NULL, *drop = NULL;    /* freed with the lock let go */
  {
    LOCK_FOR_SCOPE (&a->lock);
    a->bytes -= r->bytes;
    a->in_flight--;
    if (a->n_free < a->max) {
      if (r->cap > ASYNC_KEPT_BUFFER) {
        if (r->cap <= KEPT_BUFFER &&
            a->kept_large + r->cap <= ASYNC_KEPT_LARGE)
          a->kept_large += r->cap;
        else {
          drop_buf = r->buf;
          r->buf = NULL;
          r->cap = 0;
        }
      }
      r->next = a->free_list;
      a->free_list = r;
      a->n_free++;
    }
    else {
      drop_buf = r->buf;
      drop = r;
    }
    pthread_cond_broadcast (&a->room);
  }
  free (drop_buf);
  free (drop);
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
  enum layer_async_cmd cmd = cmd_of (req->type);
  uint32_t count = req->count, flags = top_flags (req, cmd);
  uint64_t offset = req->offset;
  struct async_path path = { .n = 0 };

  if (a->filtered) {
    /* The filters' probes fired as they decide (the cache filter's
     * cache_miss, cow's cow_read_through) name this request.
     */
    layer_set_cookie (req->cookie);
    int walked = walk_filters (a, cmd, &count, &offset, &flags, &path, err);
    layer_set_cookie (0);
    switch (walked) {
    case -1:
      *err = tx_layer_error_for_reply (*err, req->flags);
      return false;
    case 0:
      *err = 0;                 /* the worker runs it synchronously */
      return false;
    }
  }
  if (!bottom_takes (a, cmd, count, offset, flags)) {
    *err = 0;
    return false;
  }

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
  r->cmd = cmd;
  r->flags = flags;
  /* The budget a large buffer holds goes with the request. */
  r->holding = w->holding;
  w->holding = 0;
  switch (cmd) {
  case LAYER_ASYNC_PREAD:
    if (!grow (r, req->count)) {
      *err = ENOMEM;
      goto refused;
    }
    buf = r->buf;
    break;
  case LAYER_ASYNC_PWRITE: {
    /* The payload is in the worker's buffer: the request takes that
     * buffer, and the worker its old one, so nothing is copied.
     */
    char *b = r->buf;
    size_t cap = r->cap;
    r->buf = w->buf;
    r->cap = w->cap;
    w->buf = b;
    w->cap = cap;
    buf = r->buf;
    break;
  }
  default:
    break;
  }

  tx_trace_dispatch (conn, req);
  r->submit_ns = NBDKIT_REQUEST_COMPLETE_ENABLED () ? now_ns () : 0;
  if (NBDKIT_REQUEST_SUBMIT_ENABLED ())
    NBDKIT_REQUEST_SUBMIT (conn->id, req->cookie, (uint64_t) req->type,
                           req->offset, req->count);
  r->state = ASYNC_IN_PLUGIN;
  /* From here the request may complete, and be answered and recycled,
   * at any moment: r is not touched again unless the plugin refused.
   */
  layer_set_cookie (req->cookie);
  for (unsigned i = 0; i < path.n; i++)
    layer_async_trace_start (path.at[i].c, cmd, path.at[i].offset,
                             path.at[i].count);
  int rc = layer_async_submit (a->bottom, r, cmd, buf, count, offset, flags,
                               err);
  for (unsigned i = path.n; i-- > 0;)
    layer_async_trace_done (path.at[i].c, cmd, rc == 0 ? 0 : *err);
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

static bool answer_one (struct async_conn *a, struct nbdkit_async_request *r,
                        bool send, enum reply_how how);

/* On the thread completing R, a request whose reply carries no data
 * (a write, flush, trim or zero, or an error): answer it now if that
 * cannot wait on the client, or on anything but a->lock and the write
 * lock tried once.  The socket is plain, nobody else is writing, and
 * the socket has room for the whole reply (conn_send_fits); a zero the
 * plugin refused, which the replier writes as zeroes by calling the
 * plugin again, is left to the replier.  Returns false if R is still
 * to be answered.  The caller has set a->answering: rw is this
 * thread's.
 *
 * Replies with read data are left to the replier: it sends several
 * together in one write, and the completing thread (often the one
 * loop of the plugin, which has the next completions to read) does not
 * copy the data into the socket.  Measured: a proxy's 4 KiB reads
 * (bench/nbd-proxy.sh) lose a fifth when its loop sends them, its
 * writes gain a tenth; rbd's reads are within noise either way.
 */
static bool
answer_now (struct async_conn *a, struct nbdkit_async_request *r)
{
  struct connection *conn = a->conn;

  if (r->cmd == LAYER_ASYNC_ZERO && r->err != 0)
    return false;
  if (pthread_mutex_trylock (&conn->write_lock) != 0)
    return false;
  if (conn_is_aborted (conn) || !conn_send_fits (conn, MAX_REPLY_HEAD)) {
    pthread_mutex_unlock (&conn->write_lock);
    return false;
  }
  answer_one (a, r, true, REPLY_LOCKED);
  pthread_mutex_unlock (&conn->write_lock);
  finish (a, r);
  return true;
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
  if (a->direct && !a->answering && !a->done_head &&
      (r->cmd != LAYER_ASYNC_PREAD || err != 0)) {
    /* Nothing waits to be answered before it: try answering it here,
     * which saves waking the replier.
     */
    a->answering = true;
    pthread_mutex_unlock (&a->lock);
    bool answered = answer_now (a, r);
    pthread_mutex_lock (&a->lock);
    a->answering = false;
    if (answered) {
      /* Those completed meanwhile, and the end (tx_async_end) waiting
       * for this thread to be out of rw, are the replier's to see to.
       */
      if (a->done_head)
        pthread_cond_signal (&a->work);
      pthread_cond_broadcast (&a->room);
      pthread_mutex_unlock (&a->lock);
      return;
    }
  }
  if (a->done_tail)
    a->done_tail->next = r;
  else
    a->done_head = r;
  a->done_tail = r;
  if (!a->answering)
    pthread_cond_signal (&a->work);
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
                top_flags (&r->req, r->cmd), &err);
    layer_set_cookie (0);
  }
  return tx_layer_error_for_reply (err, r->req.flags);
}

/* The client can no longer be written to: the connection closes. */
static void
write_failed (struct connection *conn)
{
  conn_set_closing (conn, "write error");
  shutdown (conn->sockin, SHUT_RD);     /* wake the reader */
}

/* R's reply: the errno the client gets, the trace of its end and, if
 * SEND, the reply itself, sent as HOW says (REPLY_HOLD with more to
 * come, which the caller's flush sends).  Returns SEND, or false once a
 * write failed.  R is still the caller's to finish.
 */
static bool
answer_one (struct async_conn *a, struct nbdkit_async_request *r,
            bool send, enum reply_how how)
{
  struct connection *conn = a->conn;
  int err = reply_error (a, r);
  tx_trace_done (conn, &r->req, err, err ? 0 : r->bytes);
  if (send && tx_send_reply_from (conn, &a->rw, &r->req, err, r->buf,
                                  how) == -1) {
    write_failed (conn);
    return false;
  }
  return send;
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
    send = answer_one (a, r, send, list ? REPLY_HOLD : REPLY_NOW);
    finish (a, r);
  }
  if (send && a->rw.out.len && tx_flush_replies (conn, &a->rw) == -1)
    write_failed (conn);
  a->rw.out.len = 0;
  a->rw.out_n = 0;
}

static void *
replier (void *arg)
{
  struct async_conn *a = arg;
  conn_set_current (a->conn, a->conn->id);
  pthread_mutex_lock (&a->lock);
  for (;;) {
    while ((!a->done_head || a->answering) && !a->stopping)
      pthread_cond_wait (&a->work, &a->lock);
    if (!a->done_head)
      break;                    /* stopping, and nothing is in flight */
    struct nbdkit_async_request *list = a->done_head;
    a->done_head = a->done_tail = NULL;
    a->answering = true;
    pthread_mutex_unlock (&a->lock);
    answer (a, list);
    pthread_mutex_lock (&a->lock);
    a->answering = false;
  }
  pthread_mutex_unlock (&a->lock);
  conn_set_current (NULL, 0);
  return NULL;
}

bool
tx_async_start (struct connection *conn)
{
  struct context *top = conn->nego.top, *c = top;
  unsigned cmds = (1u << LAYER_ASYNC_PREAD) | (1u << LAYER_ASYNC_PWRITE) |
    (1u << LAYER_ASYNC_FLUSH) | (1u << LAYER_ASYNC_TRIM) |
    (1u << LAYER_ASYNC_ZERO);
  if (!runtime_async ||
      conn->cfg->thread_model != NBDKIT_THREAD_MODEL_PARALLEL)
    return false;
  /* Down to the plugin, through filters that pass requests on. */
  while (c->layer->next) {
    cmds &= layer_async_passes (c);     /* 0 unless c->below */
    if (!cmds)
      return false;
    c = c->below;
  }
  /* Requests overlap in the plugin however few threads there are:
   * only a plugin that allows that gets them (the test above).
   */
  const struct nbdkit_async_ops *ops = layer_async_ops (c);
  if (!ops)
    return false;
  if (!ops->pread) cmds &= ~(1u << LAYER_ASYNC_PREAD);
  if (!ops->pwrite) cmds &= ~(1u << LAYER_ASYNC_PWRITE);
  if (!ops->flush) cmds &= ~(1u << LAYER_ASYNC_FLUSH);
  if (!ops->trim) cmds &= ~(1u << LAYER_ASYNC_TRIM);
  if (!ops->zero) cmds &= ~(1u << LAYER_ASYNC_ZERO);
  if (!cmds)
    return false;

  struct async_conn *a = calloc (1, sizeof *a);
  if (!a) {
    nbdkit_error ("calloc: %m");
    return false;
  }
  a->conn = conn;
  a->ops = ops;
  a->bottom = c;
  a->filtered = c != top;
  a->cmds = cmds;
  a->max = ops->max_in_flight ? ops->max_in_flight : ASYNC_MAX_IN_FLIGHT;
  int64_t size = layer_get_size (c);
  a->size = size > 0 ? size : 0;
  a->can_flush = layer_can_flush (c) == 1;
  if (conn->nego.can_write && layer_can_write (c) == 1) {
    a->can_write = true;
    a->can_trim = layer_can_trim (c) == 1;
    a->fua_native = layer_can_fua (c) == NBDKIT_FUA_NATIVE;
    a->zero_native = layer_can_zero (c) == NBDKIT_ZERO_NATIVE;
    a->fast_zero = layer_can_fast_zero (c) == 1;
  }
  a->rw.conn = conn;
  a->rw.index = UINT32_MAX;     /* no worker of the pool */
  a->direct = runtime_async_direct && conn_can_send_nowait (conn);
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
  /* Named here, not by the thread: it may not run before the first
   * reply (which a completion may send itself).
   */
  pthread_setname_np (a->replier, "nbdkit-replier");
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
      if (a->in_flight == 0 && !a->answering) {
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
      layer_async_cancel (a->bottom);
      continue;
    }
    LOCK_FOR_SCOPE (&a->lock);
    if (a->in_flight > 0 || a->answering) {
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
