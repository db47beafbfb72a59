/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's asynchronous requests (include/nbdkit-async.h):
 * reads and writes completed by event-loop threads, each driving its
 * transfers through a libcurl multi handle of its own.
 *
 * The loops are the plugin's, not one per NBD connection: the pool of
 * connections=N handles (pool.c), and the connections to the web
 * server they keep open, belong to the plugin and are shared by every
 * NBD connection, as on the synchronous path.  A multi handle runs any
 * number of transfers from one thread, so a loop per connection would
 * only split the pool or add a thread per client.  There are as many
 * loops as CPUs (at most MAX_LOOPS, and no more than connections=N):
 * every byte read is copied by the thread that receives it, and one
 * thread alone would cap large reads at what one CPU copies.  Requests
 * are dealt to the loops in turn.
 *
 * The way of a request: the callback (async_pread, async_pwrite) runs
 * on the server's worker.  It runs the header and cookie scripts if
 * they are due, as pool_get does for a synchronous request (so a
 * script never runs on the loop), records the request as a job on the
 * incoming queue of the next loop, wakes it (curl_multi_wakeup) and
 * returns.  The loop moves incoming jobs to its FIFO of pending jobs
 * and starts each while the pool has a handle for it (pool_try_get):
 * the scripts'
 * current output onto the handle (scripts_apply), transfer_begin,
 * curl_multi_add_handle.  curl_multi_perform moves the bytes: the
 * handle's callbacks (pool.c) fill or read the request's buffer.  When
 * curl_multi_info_read reports a transfer done, transfer_end checks it
 * exactly as on the synchronous path (status, Content-Range, length,
 * the overrun of a server that ignored Range), the handle goes back to
 * the pool, and the request completes with 0 or EIO.  A request waiting
 * for a handle waits in the FIFO, not on a thread (a loop with such
 * requests says so in its "starved" flag, and whoever gives a handle
 * back wakes it); the curl_pool_wait
 * probe gives its wait from submission.  timeout= and the stall guard
 * are options of each easy handle, which libcurl enforces in the multi
 * as in curl_easy_perform.
 *
 * cancel (the client hung up with requests in flight) sends the
 * connection's id to every loop, each of which completes that connection's
 * pending jobs with ESHUTDOWN and aborts its transfers.  The server
 * calls cancel after the connection's last submission, so by then
 * every job of that connection is on the incoming queue or later.
 *
 * If the loop cannot be started, a request is done on the worker by
 * the synchronous path and completed from there.
 *
 * Locking: start_lock protects starting and stopping the loops.  Each
 * loop's lock protects its incoming queue and cancel list, and is a
 * leaf: no other lock is taken under it.  A loop's thread alone
 * touches its multi handle (apart from curl_multi_wakeup, which any
 * thread may call), its pending FIFO and its list of running jobs; it
 * takes pool_lock (pool_try_get,
 * pool_put), gen_lock (scripts_apply) and libcurl's share locks, one
 * at a time, and never script_lock, so no script delays a transfer.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#include "curldefs.h"
#include "now-ns.h"

/* The longest the loop sleeps with nothing to do (a wake-up or one of
 * libcurl's own timers ends the wait sooner).
 */
#define LOOP_POLL_MS 1000

#define MAX_LOOPS 8

/* -D curl.loops=N: N event loops rather than one per CPU (to compare). */
NBDKIT_DLL_PUBLIC int curl_debug_loops = 0;

/* One request handed to a loop. */
struct job {
  struct job *next;
  struct nbdkit_async_request *req;
  bool write;
  void *rbuf;
  const void *wbuf;
  uint32_t count;
  uint64_t offset;
  uint64_t conn_id, cookie;     /* for the probes and cancel */
  uint64_t submit_ns;
  struct handle *h;             /* while its transfer runs */
};

struct cancel {
  struct cancel *next;
  uint64_t conn_id;
};

struct loop {
  pthread_mutex_t lock;         /* protects the next three */
  struct job *in_head, *in_tail;
  struct cancel *cancels;
  bool stop;
  CURLM *multi;                 /* set before the loops start */
  pthread_t thread;
  /* Jobs wait for a handle: whoever gives one back wakes this loop. */
  _Atomic bool starved;
  /* The loop thread's alone. */
  struct job *pend_head, *pend_tail;
  struct job *running;
};

/* start_lock protects nr_loops and stopping while the loops start or
 * stop; nr_loops is read without it once loops_ready is set.
 */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop loops[MAX_LOOPS];
static unsigned nr_loops;
static _Atomic bool loops_ready;
static bool stopping;
static _Atomic unsigned next_loop;

static void
fifo_push (struct job **head, struct job **tail, struct job *job)
{
  job->next = NULL;
  if (*tail)
    (*tail)->next = job;
  else
    *head = job;
  *tail = job;
}

/* Complete JOB, which is on no list, and forget it. */
static void
job_complete (struct job *job, int err)
{
  nbdkit_async_complete (job->req, err);
  free (job);
}

/* A handle went back to the pool: wake the loops waiting for one. */
void
async_handle_back (void)
{
  unsigned i;

  if (!loops_ready)
    return;
  for (i = 0; i < nr_loops; i++)
    if (loops[i].starved)
      curl_multi_wakeup (loops[i].multi);
}

/* Give the transfer's handle back and complete the job. */
static void
job_end (struct job *job, CURLcode r, int fail_err)
{
  struct handle *h = job->h;
  int rc = transfer_end (h, r);

  h->rbuf = NULL;
  h->wbuf = NULL;
  job->h = NULL;
  pool_put (h);
  async_handle_back ();
  job_complete (job, rc == 0 ? 0 : fail_err);
}

/* Start JOB's transfer on H.  On failure the job is completed. */
static void
job_start (struct loop *l, struct job *job, struct handle *h)
{
  CURLMcode m;

  pool_took (h, job->conn_id, job->cookie, now_ns () - job->submit_ns);
  h->conn_id = job->conn_id;
  h->cookie = job->cookie;
  h->rbuf = job->rbuf;
  h->wbuf = job->wbuf;
  if (scripts_apply (h) == -1 ||
      transfer_begin (h, job->write, job->offset, job->count) == -1) {
    h->rbuf = NULL;
    h->wbuf = NULL;
    pool_put (h);
    async_handle_back ();
    job_complete (job, EIO);
    return;
  }
  job->h = h;
  curl_easy_setopt (h->c, CURLOPT_PRIVATE, job);
  m = curl_multi_add_handle (l->multi, h->c);
  if (m != CURLM_OK) {
    nbdkit_error ("curl_multi_add_handle: %s", curl_multi_strerror (m));
    job_end (job, CURLE_FAILED_INIT, EIO);
    return;
  }
  job->next = l->running;
  l->running = job;
}

static struct job *
pending_pop (struct loop *l)
{
  struct job *job = l->pend_head;
  l->pend_head = job->next;
  if (!l->pend_head)
    l->pend_tail = NULL;
  return job;
}

/* Start pending jobs while the pool has handles. */
static void
start_pending (struct loop *l)
{
  while (l->pend_head) {
    struct handle *h = pool_try_get ();
    if (!h && errno == EAGAIN) {
      /* Say so before looking once more: a handle given back after
       * this look is seen by the one who gives it back.
       */
      l->starved = true;
      h = pool_try_get ();
      if (!h && errno == EAGAIN)
        return;                 /* a transfer's end will bring one */
    }
    l->starved = false;
    if (!h) {
      /* No handle could be made: the synchronous path fails alike. */
      job_complete (pending_pop (l), ENOMEM);
      continue;
    }
    job_start (l, pending_pop (l), h);
  }
  l->starved = false;
}

static void
unlink_running (struct loop *l, struct job *job)
{
  struct job **p;
  for (p = &l->running; *p; p = &(*p)->next) {
    if (*p == job) {
      *p = job->next;
      return;
    }
  }
}

/* Complete the transfers libcurl says are over.  True if any was. */
static bool
reap (struct loop *l)
{
  CURLMsg *msg;
  int left;
  bool any = false;

  while ((msg = curl_multi_info_read (l->multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    /* MSG is not valid once the handle leaves the multi. */
    CURL *c = msg->easy_handle;
    CURLcode r = msg->data.result;
    char *p = NULL;
    curl_easy_getinfo (c, CURLINFO_PRIVATE, &p);
    struct job *job = (struct job *) p;
    curl_multi_remove_handle (l->multi, c);
    unlink_running (l, job);
    job_end (job, r, EIO);
    any = true;
  }
  return any;
}

/* The client of connection ID is gone: end its requests on L now. */
static void
cancel_connection (struct loop *l, uint64_t id)
{
  struct job **p, *job;
  unsigned n = 0;

  for (p = &l->pend_head; *p; ) {
    job = *p;
    if (job->conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    job_complete (job, ESHUTDOWN);
    n++;
  }
  /* The tail may have gone: find it again. */
  l->pend_tail = NULL;
  for (job = l->pend_head; job; job = job->next)
    l->pend_tail = job;
  for (p = &l->running; *p; ) {
    job = *p;
    if (job->conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    curl_multi_remove_handle (l->multi, job->h->c);
    snprintf (job->h->errbuf, sizeof job->h->errbuf,
              "cancelled: the client is gone");
    job_end (job, CURLE_ABORTED_BY_CALLBACK, ESHUTDOWN);
    n++;
  }
  if (n > 0)
    nbdkit_debug ("curl: connection %" PRIu64 " gone: %u requests "
                  "cancelled", id, n);
}

static void *
loop (void *arg)
{
  struct loop *l = arg;

  for (;;) {
    struct job *in;
    struct cancel *cl;
    bool stop;
    int n;

    pthread_mutex_lock (&l->lock);
    in = l->in_head;
    l->in_head = l->in_tail = NULL;
    cl = l->cancels;
    l->cancels = NULL;
    stop = l->stop;
    pthread_mutex_unlock (&l->lock);

    while (in) {
      struct job *next = in->next;
      fifo_push (&l->pend_head, &l->pend_tail, in);
      in = next;
    }
    while (cl) {
      struct cancel *next = cl->next;
      cancel_connection (l, cl->conn_id);
      free (cl);
      cl = next;
    }
    start_pending (l);
    if (stop && !l->pend_head && !l->running)
      break;

    curl_multi_perform (l->multi, &n);
    /* Handles came back: start what waits for them before sleeping. */
    if (reap (l))
      continue;
    curl_multi_poll (l->multi, NULL, 0, LOOP_POLL_MS, NULL);
  }
  return NULL;
}

/* Stop and free loops [0, n). */
static void
loops_end (unsigned n)
{
  unsigned i;

  for (i = 0; i < n; i++) {
    pthread_mutex_lock (&loops[i].lock);
    loops[i].stop = true;
    pthread_mutex_unlock (&loops[i].lock);
    curl_multi_wakeup (loops[i].multi);
  }
  for (i = 0; i < n; i++) {
    pthread_join (loops[i].thread, NULL);
    curl_multi_cleanup (loops[i].multi);
    pthread_mutex_destroy (&loops[i].lock);
    memset (&loops[i], 0, sizeof loops[i]);
  }
}

/* Start the loops if they are not running.  0, or -1 if they cannot
 * be (then the requests take the synchronous path).
 */
static int
loops_start (void)
{
  unsigned i, want;
  long cpus;
  int e;

  if (loops_ready)
    return 0;
  pthread_mutex_lock (&start_lock);
  if (loops_ready || stopping)
    goto out;
  cpus = sysconf (_SC_NPROCESSORS_ONLN);
  want = cpus > 0 && cpus < MAX_LOOPS ? (unsigned) cpus : MAX_LOOPS;
  if (curl_debug_loops > 0)
    want = curl_debug_loops < MAX_LOOPS ? (unsigned) curl_debug_loops
      : MAX_LOOPS;
  if (want > params.connections)
    want = params.connections;
  for (i = 0; i < want; i++) {
    struct loop *l = &loops[i];
    pthread_mutex_init (&l->lock, NULL);
    l->multi = curl_multi_init ();
    if (!l->multi) {
      nbdkit_error ("curl_multi_init failed");
      pthread_mutex_destroy (&l->lock);
      break;
    }
    /* Keep as many idle connections as the synchronous path would. */
    curl_multi_setopt (l->multi, CURLMOPT_MAXCONNECTS,
                       (long) params.connections);
    e = pthread_create (&l->thread, NULL, loop, l);
    if (e != 0) {
      errno = e;
      nbdkit_error ("curl: no event loop thread: %m");
      curl_multi_cleanup (l->multi);
      pthread_mutex_destroy (&l->lock);
      break;
    }
  }
  if (i < want) {
    loops_end (i);
    goto out;
  }
  nr_loops = want;
  loops_ready = true;
 out:
  pthread_mutex_unlock (&start_lock);
  return loops_ready ? 0 : -1;
}

void
async_stop (void)
{
  pthread_mutex_lock (&start_lock);
  stopping = true;
  if (loops_ready) {
    loops_ready = false;
    loops_end (nr_loops);
    nr_loops = 0;
  }
  pthread_mutex_unlock (&start_lock);
}

/* Hand one read or write to a loop. */
static int
submit (struct nbdkit_async_request *req, bool write, void *rbuf,
        const void *wbuf, uint32_t count, uint64_t offset)
{
  struct job *job;
  struct loop *l;

  if (count == 0) {
    nbdkit_async_complete (req, 0);
    return 0;
  }
  /* On this thread, as pool_get would: the loop never runs a script. */
  if (scripts_run_due () == -1) {
    errno = EIO;
    return -1;
  }
  if (loops_start () == -1) {
    int r = curl_sync_transfer (write, rbuf, wbuf, count, offset);
    nbdkit_async_complete (req, r == 0 ? 0 : errno);
    return 0;
  }
  job = calloc (1, sizeof *job);
  if (!job) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  job->req = req;
  job->write = write;
  job->rbuf = rbuf;
  job->wbuf = wbuf;
  job->count = count;
  job->offset = offset;
  job->conn_id = nbdkit_connection_id ();
  job->cookie = nbdkit_request_cookie ();
  job->submit_ns = now_ns ();

  l = &loops[next_loop++ % nr_loops];
  pthread_mutex_lock (&l->lock);
  fifo_push (&l->in_head, &l->in_tail, job);
  pthread_mutex_unlock (&l->lock);
  curl_multi_wakeup (l->multi);
  return 0;
}

static int
async_pread (void *handle, struct nbdkit_async_request *req, void *buf,
             uint32_t count, uint64_t offset, uint32_t flags)
{
  (void) handle; (void) flags;
  return submit (req, false, buf, NULL, count, offset);
}

static int
async_pwrite (void *handle, struct nbdkit_async_request *req,
              const void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  (void) handle; (void) flags;
  return submit (req, true, NULL, buf, count, offset);
}

/* The connection's requests may be on any loop: tell each. */
static void
async_cancel (void *handle)
{
  uint64_t id = nbdkit_connection_id ();
  unsigned i;
  (void) handle;

  if (id == 0 || !loops_ready)
    return;
  for (i = 0; i < nr_loops; i++) {
    struct cancel *cl = malloc (sizeof *cl);
    if (!cl)
      continue;                 /* its transfers end within the timeout */
    cl->conn_id = id;
    pthread_mutex_lock (&loops[i].lock);
    cl->next = loops[i].cancels;
    loops[i].cancels = cl;
    pthread_mutex_unlock (&loops[i].lock);
    curl_multi_wakeup (loops[i].multi);
  }
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .pread = async_pread,
  .pwrite = async_pwrite,
  .cancel = async_cancel,
};
