/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: what the files of the transmission phase share, and
 * nothing else includes.  A request is decoded and checked in
 * request.c, run down the layers by transmission.c, answered by
 * reply.c, on a worker of the pool in workers.c, which the stall
 * watcher (stalls.c) looks at.  A worker carries its
 * own buffers from one request to the next, so the data path allocates
 * nothing per request.
 */
#ifndef NBDKIT_TX_H
#define NBDKIT_TX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "internal.h"
#include "conn-io.h"
#include "metrics.h"
#include "protocol.h"

/* One request off the wire, decoded and checked (request.c). */
struct request {
  uint16_t flags;
  uint16_t type;
  uint64_t cookie;
  uint64_t offset;
  uint64_t count;
  int error;                    /* found by validation: reply, don't run */
  uint64_t start_ns;            /* only when request_done is traced */
};

/* What reading a request came to (tx_recv_request). */
enum recv_outcome {
  RECV_REQUEST,                 /* *req to run (or refuse with req->error)
                                 * and answer */
  RECV_DISCONNECT,              /* NBD_CMD_DISC: no reply, the end */
  RECV_CLOSED,                  /* the connection is over (end of file,
                                 * a read error, bad magic): no reply */
};

struct pool;

/* What the stall watcher saw of a worker at its last look (stalls.c). */
struct pool_look {
  uint64_t runs;                /* requests it had begun */
  uint64_t handed;              /* the run whose held replies it took */
};

/* What reply_send and reply_written are to report of a reply held
 * back (reply.c).
 */
struct held_reply {
  uint64_t cookie;
  uint64_t bytes;
  const char *kind;
};
DEFINE_VECTOR_TYPE (byte_vector, char);
DEFINE_VECTOR_TYPE (held_reply_list, struct held_reply);

/* One worker thread of a connection (workers.c starts them). */
struct worker {
  struct connection *conn;
  struct pool *pool;
  unsigned index;               /* in the pool */
  char *buf;                    /* payload in, data out */
  size_t cap;
  uint64_t holding;             /* of MAX_PAYLOAD_IN_FLIGHT, for the
                                 * request in hand (request.c) */
  struct nbd_block_descriptor_64 *desc;   /* block status scratch */
  byte_vector out;              /* replies held back to go out together */
  uint64_t out_n;               /* how many replies are in out */
  uint64_t requests;            /* requests this worker read */
  /* The message the plugin gave with nbdkit_error for the request in
   * hand (log.c's, this thread's), sent in a structured error reply.
   */
  const char *errmsg;
  held_reply_list held;         /* of those, the ones held while traced */
  /* A read mapped in place (common/zerocopy.h): ZC_HEAD free slots for
   * the held replies and the reply header, then zc_n data pieces.
   * While zc_mapped, this worker holds the connection's write lock.
   */
  bool zerocopy;                /* the top layer can map reads */
  bool zc_write;                /* and take write payloads */
  int zc_wn;                    /* pieces of a mapped write, or 0 */
  struct iovec *zc_iov;
  int zc_n;
  bool zc_mapped;
  /* Requests go to the plugin's asynchronous callbacks (async.c). */
  bool async;
  /* A read the plugin pointed at in a file, to go out with sendfile. */
  bool fd_read;                 /* the top layer can do that */
  bool fd_pending;
  int fd;
  uint64_t fd_offset;
  /* What the stall watcher (stalls.c) reads of this worker: how many
   * requests it has begun to run, times 4, plus the phase it is in (so
   * a request still running at two looks has run for a whole tick).
   * Only this worker writes it, except that the watcher may take a lent
   * w->out (PHASE_RUN_HELD to PHASE_FLUSHING) and give it back sent
   * (PHASE_RUN).
   */
  _Atomic uint64_t state;
  _Atomic pid_t tid;            /* for the watcher to read its state */
};

/* A worker's phase, for the stall watcher: the low bits of its state. */
enum worker_phase {
  PHASE_READ,                   /* between requests: reading one, waiting
                                 * to, answering one, or parked */
  PHASE_RUN,                    /* running one in the layers */
  PHASE_RUN_HELD,               /* the same, with replies held in w->out
                                 * that the watcher may send meanwhile */
  PHASE_FLUSHING,               /* the pool's flusher is sending them */
};
#define PHASE_MASK UINT64_C (3)
#define STATE_RUNS(state) ((state) >> 2)

/* Reads larger than MAX_HELD_REPLY (smaller replies are worth more
 * held back and sent together) and up to ZC_MAX_BYTES go out straight
 * from a plugin that can map them: 1 MiB is 258 pieces at worst for
 * 4 KiB pages, well inside ZC_MAX_IOV (and the kernel's IOV_MAX of
 * 1024, with the header).
 */
#define ZC_HEAD 4
#define ZC_MAX_IOV 1020
#define ZC_MAX_BYTES (1024 * 1024)

/* The most a read reply's header pieces take (an extended structured
 * reply chunk's header and offset: 40 bytes).
 */
#define MAX_REPLY_HEAD 64

/* Write payloads larger than this, up to ZC_MAX_BYTES, are received
 * straight into memory the plugin lends, if it will (the memory plugin
 * lends pages that then replace the stored ones).  For a small write
 * the plugin's bookkeeping would cost about what the copy saves.
 */
#define ZC_MIN_WRITE (64 * 1024)

/* Replies are held back (and sent together) up to this many bytes;
 * a reply larger than MAX_HELD_REPLY is worth its own sendmsg rather
 * than an extra copy.
 */
#define MAX_HELD_REPLIES (1024 * 1024)
#define MAX_HELD_REPLY (64 * 1024)

/* A worker keeps a buffer of up to KEPT_BUFFER bytes from one request
 * to the next.  A larger one (a read or write of more) is given back
 * with its reply (tx_return_payload), so that a connection that once
 * served large requests does not hold that much per worker for good.
 */
#define KEPT_BUFFER (4 * 1024 * 1024)

/* Fire request_dispatch for REQ: how long it waited since it was read,
 * and how many of the connection's requests are unanswered.  One for
 * both paths (transmission.c, async.c), so the arguments agree.
 */
static inline void
tx_trace_dispatch (struct connection *conn, const struct request *req)
{
  if (NBDKIT_REQUEST_DISPATCH_ENABLED ())
    NBDKIT_REQUEST_DISPATCH (conn->id, req->cookie,
                             req->start_ns ? now_ns () - req->start_ns : 0,
                             conn->requests -
                             __atomic_load_n (&conn->replies,
                                              __ATOMIC_RELAXED));
}

/* REQ ended with ERR, having moved BYTES of payload: fire request_done
 * and count it for --metrics.  One for both paths (transmission.c,
 * async.c), as tx_trace_dispatch is.
 */
static inline void
tx_trace_done (struct connection *conn, const struct request *req, int err,
               uint64_t bytes)
{
  if (!req->start_ns)
    return;
  if (NBDKIT_REQUEST_DONE_ENABLED ())
    NBDKIT_REQUEST_DONE (conn->id, req->cookie, (uint64_t) req->type,
                         (int64_t) err, bytes, now_ns () - req->start_ns);
  if (conn->metrics)
    metrics_request_done (conn->metrics, req->type, err, bytes,
                          req->start_ns);
}

/* Make the worker's buffer hold NEED bytes; what it held is lost.  It
 * starts on a page: where it happened to sit decided how fast the
 * kernel copied a payload from it into the file plugin's page cache
 * (three times the CPU per 1 MiB write with the buffer 16 bytes short
 * of a page, on the machine measured: bench/HISTORY.md).
 */
static inline bool
tx_grow (struct worker *w, size_t need)
{
  void *b;
  if (need <= w->cap)
    return true;
  if (posix_memalign (&b, 4096, need) != 0)
    return false;
  free (w->buf);
  w->buf = b;
  w->cap = need;
  return true;
}

/* The worker's piece list for mapped reads and writes, made on first
 * use.  False if out of memory.
 */
static inline bool
tx_have_zc_iov (struct worker *w)
{
  if (!w->zc_iov)
    w->zc_iov = malloc ((ZC_HEAD + ZC_MAX_IOV) * sizeof *w->zc_iov);
  return w->zc_iov != NULL;
}

/* Is the start of another request already in the input buffer?  Then
 * the client is still sending and will not wait for our replies, so
 * they can be held back and sent together.  Only meaningful while this
 * is the connection's only worker.
 */
static inline bool
tx_request_buffered (const struct connection *conn)
{
  size_t least = conn->nego.extended ? sizeof (struct nbd_extended_request)
                                : sizeof (struct nbd_request);
  return conn_buffered_input (conn) >= least;
}

/* request.c: with the connection's read lock held. */
extern enum recv_outcome tx_recv_request (struct connection *conn,
                                          struct worker *w,
                                          struct request *req);
/* request.c: once the reply to the request in hand is out (or failed),
 * give back its large buffer and its share of MAX_PAYLOAD_IN_FLIGHT.
 * With no connection lock held.
 */
extern void tx_return_payload (struct connection *conn, struct worker *w);

/* reply.c */
extern int tx_layer_error_for_reply (int err, uint16_t nbd_flags);
extern int tx_send_reply (struct connection *conn, struct worker *w,
                          const struct request *req, int err, int ndesc,
                          bool hold);
extern int tx_flush_replies (struct connection *conn, struct worker *w);

/* reply.c: how a reply goes: now (taking the write lock), held back
 * for the caller's tx_flush_replies (sent now if it cannot be held), or
 * now under the write lock the caller holds, having made sure that the
 * socket takes it without waiting (async.c's answer_now).
 */
enum reply_how { REPLY_NOW, REPLY_HOLD, REPLY_LOCKED };

/* reply.c: send the reply to REQ, as HOW says, whose read data (if
 * any) is in BUF rather than w->buf.  For async.c, whose replies leave
 * from its own threads.
 */
extern int tx_send_reply_from (struct connection *conn, struct worker *w,
                               const struct request *req, int err,
                               char *buf, enum reply_how how);

/* async.c: requests handed to a plugin's asynchronous callbacks
 * (include/nbdkit-async.h), and their replies, sent from the
 * connection's replier thread as they complete.
 *
 * tx_async_start, from tx_serve, sets the connection up for them if its
 * top layer has them (false: it takes the synchronous path).
 * tx_async_takes says whether a request read can go that way, and
 * tx_async_submit hands it over: true if the plugin took it (the worker
 * is done with it; if the connection then has as many requests in
 * flight as it may, it has waited for room first), else false with
 * *err for the worker to reply with.  tx_async_end, once the workers
 * have exited, cancels what is still in flight if the client is gone,
 * waits for every completion and its reply, and stops the replier.
 */
extern bool tx_async_start (struct connection *conn);
extern bool tx_async_takes (const struct connection *conn,
                            const struct worker *w,
                            const struct request *req);
extern bool tx_async_submit (struct connection *conn, struct worker *w,
                             const struct request *req, int *err);
extern void tx_async_end (struct connection *conn);

/* transmission.c: a worker's life (the pool's body). */
extern void *tx_worker_loop (void *arg);

/* The workers of one connection (workers.c).  A connection starts with
 * one, which reads, runs and answers requests in turn; the pool grows
 * while running requests side by side pays and parks workers again
 * when it stops paying.  Workers 0 .. active-1 take requests.
 */
struct pool {
  struct connection *conn;
  void *(*body) (void *);       /* what a worker's thread runs */
  pthread_mutex_t lock;         /* protects started, threads, done, and
                                 * pool_grow's changes to active and max */
  pthread_cond_t wake;          /* parked workers wait here */
  _Atomic unsigned max;         /* -t, lowered if a thread cannot start;
                                 * read without the lock */
  unsigned started;
  unsigned busy_max;            /* the most workers for busy requests */
  _Atomic unsigned active;      /* workers 0 .. active-1 take requests */
  bool done;                    /* the connection is over: exit */
  struct worker *workers;       /* max of them */
  pthread_t *threads;
  _Atomic unsigned grow_run;    /* requests in a row that want more */
  _Atomic unsigned window, fewer; /* requests, and those that want fewer */
  _Atomic bool shrink;          /* the highest worker is to park */
  _Atomic bool slow;            /* the last request was slow */
  /* The stall watcher's (stalls.c).  It looks at the pools on its
   * list, under its own lock, which is taken before pool->lock.
   */
  bool watched;                 /* on the watcher's list */
  struct pool *watch_prev, *watch_next;
  struct pool_look *seen;       /* max of them: what the last look saw */
  pthread_cond_t flushed;       /* with lock: a lent w->out came back */
  pthread_cond_t flush_wake;    /* with lock: the flusher has work */
  struct worker *flush_w;       /* with lock: whose w->out to send */
  bool flusher_started;         /* with lock */
  pthread_t flusher;
};

/* workers.c: called by the worker loop.  A sample of the calling
 * thread's CPU time and of how often it has blocked.
 */
struct pool_sample {
  uint64_t cpu_ns;              /* UINT64_MAX: not measured */
  long blocked;                 /* voluntary context switches */
};
extern struct pool_sample pool_thread_sample (void);
extern bool pool_account (struct pool *pool, struct worker *w, uint64_t wall,
                          struct pool_sample before, struct pool_sample after);

/* A request that spends longer in the layers is slow (workers.c). */
#define POOL_SLOW_REQUEST_NS 20000
extern bool pool_park (struct pool *pool, struct worker *w);
extern void pool_grow (struct pool *pool, unsigned n);

#endif /* NBDKIT_TX_H */
