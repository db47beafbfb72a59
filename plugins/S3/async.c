/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's asynchronous reads (include/nbdkit-async.h): one
 * event-loop thread of the plugin's drives the ranged GETs through a
 * libcurl multi handle, so a client's reads in flight cost no server
 * thread while the store answers.
 *
 * Only reads are taken.  A read becomes one GET per object it touches
 * (one in the single-object layout), all of them run by the loop, and
 * the client's request completes when the last has ended, with the
 * first error if any.  A missing object reads as zeroes (many objects)
 * exactly as in objects.c, whose s3_range_result checks each reply.
 * A read touching more than LIST_MAX objects (only with tiny objects)
 * is done by the synchronous code on the server's worker and completed
 * from there.  Writes, trim, zero and flush have no async callback: they
 * need object locks and read-modify-write, so the server runs them on
 * its workers as before.
 *
 * The way of a GET: the worker (async_pread) builds the request and
 * its URL and signed headers (s3_call_init), records the connection id
 * and cookie for the probes and for cancel (the loop thread has none),
 * queues the job on the loop's incoming list and wakes the loop.  The
 * loop moves it to its pending FIFO and starts it when the pool of
 * http.c has a handle (s3_handle_try_get; else it marks itself starved
 * and whoever gives a handle back wakes it).  s3_call_begin sets up
 * the handle, curl_multi_add_handle runs it; at its end s3_call_end
 * says whether to retry (5xx, dropped connection): then the handle
 * goes back, and the job waits in the FIFO until its back-off time has
 * passed (the loop's poll timeout, never a sleep).  Otherwise
 * s3_call_finish and s3_range_result give the job's result, as on the
 * synchronous path.  timeout= is an option of each easy handle, which
 * the multi enforces.
 *
 * cancel: the connection's id goes to the loop, which ends that
 * connection's pending and running GETs; their client requests
 * complete with ESHUTDOWN.
 *
 * Locking: start_lock protects starting and stopping the loop.  lock
 * protects the incoming list, the cancel list and stop; it is a leaf.
 * The loop thread alone touches the multi handle (but for
 * curl_multi_wakeup), the pending FIFO and the running list; it takes
 * pool_lock of http.c (try_get, put), never while holding lock.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>
#include <nbdkit-async.h>

#include "include/minmax.h"
#include "include/now-ns.h"
#include "s3.h"

/* The most objects one asynchronous read covers (as objects.c's
 * batches); larger reads are done synchronously.
 */
#define MAX_PARTS 1000

/* The longest the loop sleeps with nothing to do. */
#define LOOP_POLL_MS 1000

struct op;

/* One GET. */
struct job {
  struct job *next;
  struct op *op;
  struct s3_request req;
  struct s3_call call;
  char *name;                   /* the object's name, malloc'd */
  CURL *c;                      /* while it runs */
  uint64_t submit_ns;
  uint64_t due_ns;              /* not before (a retry's back-off) */
  bool waited;                  /* for a handle of the pool */
};

/* One client read: NR_JOBS GETs. */
struct op {
  struct nbdkit_async_request *areq;
  uint64_t conn_id;
  bool missing_ok;
  size_t left;                  /* GETs not ended (loop thread only) */
  int err;                      /* the first error */
  size_t nr_jobs;
  struct job jobs[];
};

struct cancel {
  struct cancel *next;
  uint64_t conn_id;
};

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool ready;
static bool stopping;
static pthread_t thread;
static CURLM *multi;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct job *in_head, *in_tail;
static struct cancel *cancels;
static bool stop;

static _Atomic bool starved;

/* The loop thread's alone. */
static struct job *pend_head, *pend_tail;
static struct job *running;

static void
push (struct job **head, struct job **tail, struct job *job)
{
  job->next = NULL;
  if (*tail)
    (*tail)->next = job;
  else
    *head = job;
  *tail = job;
}

static void
op_free (struct op *op)
{
  for (size_t i = 0; i < op->nr_jobs; ++i)
    free (op->jobs[i].name);
  free (op);
}

/* One GET of OP has ended with ERR (0 or an errno). */
static void
job_done (struct job *job, int err)
{
  struct op *op = job->op;

  if (err && op->err == 0)
    op->err = err;
  if (--op->left == 0) {
    nbdkit_async_complete (op->areq, op->err);
    op_free (op);
  }
}

void
s3_async_handle_back (void)
{
  if (ready && starved)
    curl_multi_wakeup (multi);
}

/* JOB's transfer on handle job->c ended with RC. */
static void
job_ended (struct job *job, CURLcode rc)
{
  long ms;
  int r;

  if (s3_call_end (&job->call, rc, &ms)) {
    s3_handle_put (job->c);
    job->c = NULL;
    job->due_ns = now_ns () + (uint64_t) ms * 1000000;
    push (&pend_head, &pend_tail, job);
    return;
  }
  s3_handle_put (job->c);
  job->c = NULL;
  r = s3_call_finish (&job->call);
  if (r == 0)
    r = s3_range_result (&job->req, job->op->missing_ok);
  job_done (job, r == 0 ? 0 : errno ? errno : EIO);
}

static void
job_start (struct job *job, CURL *c)
{
  CURLcode rc;
  CURLMcode m;

  if (job->waited)
    NBDKIT_PROBE (s3_pool_wait, job->req.conn_id, job->req.cookie,
                  now_ns () - job->submit_ns);
  job->waited = false;
  job->c = c;
  rc = s3_call_begin (&job->call, c);
  if (rc == CURLE_OK)
    rc = curl_easy_setopt (c, CURLOPT_PRIVATE, job);
  if (rc != CURLE_OK) {
    job_ended (job, rc);
    return;
  }
  m = curl_multi_add_handle (multi, c);
  if (m != CURLM_OK) {
    snprintf (job->call.errbuf, sizeof job->call.errbuf,
              "curl_multi_add_handle: %s", curl_multi_strerror (m));
    job_ended (job, CURLE_FAILED_INIT);
    return;
  }
  job->next = running;
  running = job;
}

/* Start the pending jobs that are due while the pool has handles.
 * Returns the ms until the next job waiting for its back-off is due.
 */
static long
start_pending (void)
{
  struct job **p = &pend_head, *job;
  uint64_t now = now_ns (), next = UINT64_MAX;

  pend_tail = NULL;
  while ((job = *p) != NULL) {
    CURL *c;

    if (job->due_ns > now) {
      next = MIN (next, job->due_ns);
      pend_tail = job;
      p = &job->next;
      continue;
    }
    c = s3_handle_try_get ();
    if (c == NULL && errno == EAGAIN) {
      /* Say so before looking again: a handle given back after this
       * look wakes us.
       */
      starved = true;
      c = s3_handle_try_get ();
      if (c == NULL && errno == EAGAIN) {
        /* The rest wait; keep the tail right. */
        while (*p) {
          (*p)->waited = true;
          pend_tail = *p;
          p = &(*p)->next;
        }
        break;
      }
    }
    starved = false;
    *p = job->next;
    if (c == NULL) {
      s3_call_abandon (&job->call);
      job_done (job, ENOMEM);
      continue;
    }
    job_start (job, c);
  }
  if (next == UINT64_MAX)
    return LOOP_POLL_MS;
  return (long) MIN ((next - now) / 1000000 + 1, (uint64_t) LOOP_POLL_MS);
}

static void
unlink_running (struct job *job)
{
  for (struct job **p = &running; *p; p = &(*p)->next)
    if (*p == job) {
      *p = job->next;
      return;
    }
}

/* End the transfers libcurl says are over; true if there were any. */
static bool
reap (void)
{
  CURLMsg *msg;
  int left;
  bool any = false;

  while ((msg = curl_multi_info_read (multi, &left)) != NULL) {
    CURL *c;
    CURLcode rc;
    char *priv = NULL;
    struct job *job;

    if (msg->msg != CURLMSG_DONE)
      continue;
    c = msg->easy_handle;
    rc = msg->data.result;      /* MSG dies with the removal */
    curl_easy_getinfo (c, CURLINFO_PRIVATE, &priv);
    job = (struct job *) priv;
    curl_multi_remove_handle (multi, c);
    unlink_running (job);
    job_ended (job, rc);
    any = true;
  }
  return any;
}

/* The client of connection ID is gone: end its GETs now. */
static void
cancel_connection (uint64_t id)
{
  struct job **p, *job;
  unsigned n = 0;

  for (p = &pend_head; (job = *p) != NULL; ) {
    if (job->op->conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    s3_call_abandon (&job->call);
    job_done (job, ESHUTDOWN);
    n++;
  }
  pend_tail = NULL;
  for (job = pend_head; job; job = job->next)
    pend_tail = job;
  for (p = &running; (job = *p) != NULL; ) {
    if (job->op->conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    curl_multi_remove_handle (multi, job->c);
    s3_handle_put (job->c);
    job->c = NULL;
    s3_call_abandon (&job->call);
    job_done (job, ESHUTDOWN);
    n++;
  }
  if (n > 0)
    nbdkit_debug ("S3: connection %" PRIu64 " gone: %u GETs cancelled",
                  id, n);
}

static void *
loop (void *arg)
{
  (void) arg;
  for (;;) {
    struct job *in;
    struct cancel *cl;
    bool stopping_now;
    long wait_ms;
    int n;

    pthread_mutex_lock (&lock);
    in = in_head;
    in_head = in_tail = NULL;
    cl = cancels;
    cancels = NULL;
    stopping_now = stop;
    pthread_mutex_unlock (&lock);

    while (in) {
      struct job *next = in->next;
      push (&pend_head, &pend_tail, in);
      in = next;
    }
    while (cl) {
      struct cancel *next = cl->next;
      cancel_connection (cl->conn_id);
      free (cl);
      cl = next;
    }
    wait_ms = start_pending ();
    if (stopping_now && !pend_head && !running)
      break;
    curl_multi_perform (multi, &n);
    /* Handles came back: start what waits for them before sleeping. */
    if (reap ())
      continue;
    curl_multi_poll (multi, NULL, 0, (int) wait_ms, NULL);
  }
  return NULL;
}

/* Start the loop if it is not running: 0, or -1 if it cannot be. */
static int
loop_start (void)
{
  int e;

  if (ready)
    return 0;
  pthread_mutex_lock (&start_lock);
  if (ready || stopping)
    goto out;
  multi = curl_multi_init ();
  if (multi == NULL) {
    nbdkit_error ("curl_multi_init failed");
    goto out;
  }
  curl_multi_setopt (multi, CURLMOPT_MAXCONNECTS, (long) s3_cfg.connections);
  e = pthread_create (&thread, NULL, loop, NULL);
  if (e != 0) {
    errno = e;
    nbdkit_error ("S3: no event loop thread: %m");
    curl_multi_cleanup (multi);
    multi = NULL;
    goto out;
  }
  ready = true;
 out:
  pthread_mutex_unlock (&start_lock);
  return ready ? 0 : -1;
}

void
s3_async_stop (void)
{
  pthread_mutex_lock (&start_lock);
  stopping = true;
  if (ready) {
    pthread_mutex_lock (&lock);
    stop = true;
    pthread_mutex_unlock (&lock);
    curl_multi_wakeup (multi);
    pthread_join (thread, NULL);
    ready = false;
    curl_multi_cleanup (multi);
    multi = NULL;
  }
  pthread_mutex_unlock (&start_lock);
}

/* The synchronous read, on the worker, completed from there. */
static int
read_sync (struct nbdkit_async_request *areq, void *buf, uint32_t count,
           uint64_t offset)
{
  int r = s3_cfg.object_size == 0 ? s3_single_pread (buf, count, offset)
    : s3_objects_pread (buf, count, offset);

  nbdkit_async_complete (areq, r == 0 ? 0 : errno ? errno : EIO);
  return 0;
}

static int
async_pread (void *handle, struct nbdkit_async_request *areq, void *buf,
             uint32_t count, uint64_t offset, uint32_t flags)
{
  const uint64_t os = s3_cfg.object_size;
  uint64_t first = 0, n = 1, now = now_ns ();
  struct op *op;
  char *p = buf;

  (void) handle;
  (void) flags;
  if (count == 0) {
    nbdkit_async_complete (areq, 0);
    return 0;
  }
  if (os) {
    first = offset / os;
    n = (offset + count - 1) / os - first + 1;
  }
  if (n > MAX_PARTS || loop_start () == -1)
    return read_sync (areq, buf, count, offset);

  op = calloc (1, sizeof *op + n * sizeof op->jobs[0]);
  if (op == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  op->areq = areq;
  op->conn_id = nbdkit_connection_id ();
  op->missing_ok = os != 0;
  op->nr_jobs = n;
  op->left = n;
  for (uint64_t i = 0; i < n; ++i) {
    struct job *job = &op->jobs[i];
    uint64_t in = os ? offset % os : offset;
    uint64_t len = os ? MIN ((uint64_t) count, os - in) : count;

    job->op = op;
    job->submit_ns = now;
    if (os && (job->name = s3_object_name (first + i)) == NULL)
      goto err;
    job->req = (struct s3_request) {
      .method = "GET", .object = os ? job->name : s3_cfg.key,
      .range_off = in, .range_len = len, .buf = p,
      .ids_set = true, .conn_id = op->conn_id,
      .cookie = nbdkit_request_cookie (),
    };
    if (s3_call_init (&job->call, &job->req) == -1)
      goto err;
    p += len;
    offset += len;
    count -= len;
  }

  pthread_mutex_lock (&lock);
  for (uint64_t i = 0; i < n; ++i)
    push (&in_head, &in_tail, &op->jobs[i]);
  pthread_mutex_unlock (&lock);
  curl_multi_wakeup (multi);
  return 0;

 err:
  {
    int e = errno;

    for (uint64_t i = 0; i < n; ++i)
      if (op->jobs[i].call.url)
        s3_call_abandon (&op->jobs[i].call);
    op_free (op);
    errno = e;
    return -1;
  }
}

static void
async_cancel (void *handle)
{
  uint64_t id = nbdkit_connection_id ();
  struct cancel *cl;

  (void) handle;
  if (!ready)
    return;
  cl = malloc (sizeof *cl);
  if (cl == NULL)
    return;                     /* its GETs end within timeout= */
  cl->conn_id = id;
  pthread_mutex_lock (&lock);
  cl->next = cancels;
  cancels = cl;
  pthread_mutex_unlock (&lock);
  curl_multi_wakeup (multi);
}

NBDKIT_DLL_PUBLIC const struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .pread = async_pread,
  .cancel = async_cancel,
};
