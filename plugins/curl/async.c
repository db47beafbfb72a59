/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's asynchronous requests (include/nbdkit-async.h):
 * reads and writes completed by one event-loop thread that drives
 * every transfer through a libcurl multi handle.
 *
 * One loop for the plugin, not one per NBD connection: the pool of
 * connections=N handles (pool.c), and the connections to the web
 * server they keep open, belong to the plugin and are shared by every
 * NBD connection, as on the synchronous path.  A multi handle runs any
 * number of transfers from one thread, so a loop per connection would
 * only split the pool or add a thread per client.
 *
 * The way of a request: the callback (async_pread, async_pwrite) runs
 * on the server's worker.  It runs the header and cookie scripts if
 * they are due, as pool_get does for a synchronous request (so a
 * script never runs on the loop), records the request as a job on the
 * incoming queue, wakes the loop (curl_multi_wakeup) and returns.  The
 * loop moves incoming jobs to its FIFO of pending jobs and starts each
 * while the pool has a handle for it (pool_try_get): the scripts'
 * current output onto the handle (scripts_apply), transfer_begin,
 * curl_multi_add_handle.  curl_multi_perform moves the bytes: the
 * handle's callbacks (pool.c) fill or read the request's buffer.  When
 * curl_multi_info_read reports a transfer done, transfer_end checks it
 * exactly as on the synchronous path (status, Content-Range, length,
 * the overrun of a server that ignored Range), the handle goes back to
 * the pool, and the request completes with 0 or EIO.  A request waiting
 * for a handle waits in the FIFO, not on a thread; the curl_pool_wait
 * probe gives its wait from submission.  timeout= and the stall guard
 * are options of each easy handle, which libcurl enforces in the multi
 * as in curl_easy_perform.
 *
 * cancel (the client hung up with requests in flight) sends the
 * connection's id to the loop, which completes that connection's
 * pending jobs with ESHUTDOWN and aborts its transfers.  The server
 * calls cancel after the connection's last submission, so by then
 * every job of that connection is on the incoming queue or later.
 *
 * If the loop cannot be started, a request is done on the worker by
 * the synchronous path and completed from there.
 *
 * Locking: loop_lock protects the incoming queue, the cancel list and
 * the loop's state flags, and is a leaf: no other lock is taken under
 * it.  The loop thread alone touches the multi handle (apart from
 * curl_multi_wakeup, which any thread may call), the pending FIFO and
 * the list of running jobs; it takes pool_lock (pool_try_get,
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

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#include "curldefs.h"
#include "now-ns.h"

/* The longest the loop sleeps with nothing to do (a wake-up or one of
 * libcurl's own timers ends the wait sooner).
 */
#define LOOP_POLL_MS 1000

/* One request handed to the loop. */
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

static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
/* Protected by loop_lock. */
static struct job *in_head, *in_tail;
static struct cancel *cancels;
static bool stopping;
static bool started;
static pthread_t loop_thread;
/* Set before started and cleared after the loop has ended. */
static CURLM *multi;

/* The loop thread's alone. */
static struct job *pend_head, *pend_tail;
static struct job *running;

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
  job_complete (job, rc == 0 ? 0 : fail_err);
}

/* Start JOB's transfer on H.  On failure the job is completed. */
static void
job_start (struct job *job, struct handle *h)
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
    job_complete (job, EIO);
    return;
  }
  job->h = h;
  curl_easy_setopt (h->c, CURLOPT_PRIVATE, job);
  m = curl_multi_add_handle (multi, h->c);
  if (m != CURLM_OK) {
    nbdkit_error ("curl_multi_add_handle: %s", curl_multi_strerror (m));
    job_end (job, CURLE_FAILED_INIT, EIO);
    return;
  }
  job->next = running;
  running = job;
}

/* Start pending jobs while the pool has handles. */
static void
start_pending (void)
{
  while (pend_head) {
    struct handle *h = pool_try_get ();
    if (!h) {
      if (errno == EAGAIN)
        return;                 /* a transfer's end will bring one */
      /* No handle could be made: the synchronous path fails alike. */
      struct job *job = pend_head;
      pend_head = job->next;
      if (!pend_head)
        pend_tail = NULL;
      job_complete (job, ENOMEM);
      continue;
    }
    struct job *job = pend_head;
    pend_head = job->next;
    if (!pend_head)
      pend_tail = NULL;
    job_start (job, h);
  }
}

static void
unlink_running (struct job *job)
{
  struct job **p;
  for (p = &running; *p; p = &(*p)->next) {
    if (*p == job) {
      *p = job->next;
      return;
    }
  }
}

/* Complete the transfers libcurl says are over.  True if any was. */
static bool
reap (void)
{
  CURLMsg *msg;
  int left;
  bool any = false;

  while ((msg = curl_multi_info_read (multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    /* MSG is not valid once the handle leaves the multi. */
    CURL *c = msg->easy_handle;
    CURLcode r = msg->data.result;
    char *p = NULL;
    curl_easy_getinfo (c, CURLINFO_PRIVATE, &p);
    struct job *job = (struct job *) p;
    curl_multi_remove_handle (multi, c);
    unlink_running (job);
    job_end (job, r, EIO);
    any = true;
  }
  return any;
}

/* The client of connection ID is gone: end its requests now. */
static void
cancel_connection (uint64_t id)
{
  struct job **p, *job;
  struct job *prev = NULL;
  unsigned n = 0;

  for (job = pend_head; job; ) {
    struct job *next = job->next;
    if (job->conn_id == id) {
      if (prev)
        prev->next = next;
      else
        pend_head = next;
      if (pend_tail == job)
        pend_tail = prev;
      job_complete (job, ESHUTDOWN);
      n++;
    }
    else
      prev = job;
    job = next;
  }
  for (p = &running; *p; ) {
    job = *p;
    if (job->conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    curl_multi_remove_handle (multi, job->h->c);
    snprintf (job->h->errbuf, sizeof job->h->errbuf,
              "cancelled: the client is gone");
    job_end (job, CURLE_ABORTED_BY_CALLBACK, ESHUTDOWN);
    n++;
  }
  nbdkit_debug ("curl: connection %" PRIu64 " gone: %u requests cancelled",
                id, n);
}

static void *
loop (void *arg)
{
  (void) arg;
  for (;;) {
    struct job *in;
    struct cancel *cl;
    bool stop;
    int n;

    pthread_mutex_lock (&loop_lock);
    in = in_head;
    in_head = in_tail = NULL;
    cl = cancels;
    cancels = NULL;
    stop = stopping;
    pthread_mutex_unlock (&loop_lock);

    while (in) {
      struct job *next = in->next;
      fifo_push (&pend_head, &pend_tail, in);
      in = next;
    }
    while (cl) {
      struct cancel *next = cl->next;
      cancel_connection (cl->conn_id);
      free (cl);
      cl = next;
    }
    start_pending ();
    if (stop && !pend_head && !running)
      break;

    curl_multi_perform (multi, &n);
    /* Handles came back: start what waits for them before sleeping. */
    if (reap ())
      continue;
    curl_multi_poll (multi, NULL, 0, LOOP_POLL_MS, NULL);
  }
  return NULL;
}

/* Start the loop if it is not running.  0, or -1 if it cannot be. */
static int
loop_start (void)
{
  int ret = 0, e;

  pthread_mutex_lock (&loop_lock);
  if (started || stopping)
    goto out;
  multi = curl_multi_init ();
  if (!multi) {
    nbdkit_error ("curl_multi_init failed");
    ret = -1;
    goto out;
  }
  /* Keep as many idle connections as the synchronous path would. */
  curl_multi_setopt (multi, CURLMOPT_MAXCONNECTS, (long) params.connections);
  e = pthread_create (&loop_thread, NULL, loop, NULL);
  if (e != 0) {
    errno = e;
    nbdkit_error ("curl: no event loop thread: %m");
    curl_multi_cleanup (multi);
    multi = NULL;
    ret = -1;
    goto out;
  }
  started = true;
 out:
  if (ret == 0 && !started)
    ret = -1;
  pthread_mutex_unlock (&loop_lock);
  return ret;
}

void
async_stop (void)
{
  pthread_mutex_lock (&loop_lock);
  stopping = true;
  bool was = started;
  pthread_mutex_unlock (&loop_lock);
  if (!was)
    return;
  curl_multi_wakeup (multi);
  pthread_join (loop_thread, NULL);
  curl_multi_cleanup (multi);
  pthread_mutex_lock (&loop_lock);
  started = false;
  multi = NULL;
  pthread_mutex_unlock (&loop_lock);
}

void
async_handle_back (void)
{
  pthread_mutex_lock (&loop_lock);
  CURLM *m = started ? multi : NULL;
  pthread_mutex_unlock (&loop_lock);
  if (m)
    curl_multi_wakeup (m);
}

/* Hand one read or write to the loop. */
static int
submit (struct nbdkit_async_request *req, bool write, void *rbuf,
        const void *wbuf, uint32_t count, uint64_t offset)
{
  struct job *job;

  if (count == 0) {
    nbdkit_async_complete (req, 0);
    return 0;
  }
  /* On this thread, as pool_get would: the loop never runs a script. */
  if (scripts_run_due () == -1) {
    errno = EIO;
    return -1;
  }
  if (loop_start () == -1) {
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

  pthread_mutex_lock (&loop_lock);
  fifo_push (&in_head, &in_tail, job);
  CURLM *m = multi;
  pthread_mutex_unlock (&loop_lock);
  curl_multi_wakeup (m);
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

static void
async_cancel (void *handle)
{
  uint64_t id = nbdkit_connection_id ();
  struct cancel *cl;
  (void) handle;

  if (id == 0)
    return;
  cl = malloc (sizeof *cl);
  if (!cl)
    return;                     /* its transfers end within the timeout */
  cl->conn_id = id;
  pthread_mutex_lock (&loop_lock);
  if (!started) {
    pthread_mutex_unlock (&loop_lock);
    free (cl);
    return;
  }
  cl->next = cancels;
  cancels = cl;
  CURLM *m = multi;
  pthread_mutex_unlock (&loop_lock);
  curl_multi_wakeup (m);
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .pread = async_pread,
  .pwrite = async_pwrite,
  .cancel = async_cancel,
};
