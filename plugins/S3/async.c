/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's asynchronous requests (include/nbdkit-async.h): one
 * event-loop thread of the plugin's drives the HTTP requests through
 * a libcurl multi handle, so a client's requests in flight cost no
 * server thread while the store answers.  This file owns the loop and
 * the reads; writes, zeroes, trims and flushes are awrite.c's, which
 * hands its PUTs, GETs and DELETEs to the same loop (s3_loop_submit).
 *
 * A read becomes one GET per object it touches (one in the
 * single-object layout), all of them run by the loop, and the client's
 * request completes when the last has ended, with the first error if
 * any.  A missing object reads as zeroes (many objects) exactly as in
 * objects.c, whose s3_range_result checks each reply.  A read touching
 * more than MAX_PARTS objects (only with tiny objects) is done by the
 * synchronous code on the server's worker and completed from there.
 *
 * The way of a job (one HTTP request, struct s3_job): the worker
 * builds the request and its URL and signed headers (s3_call_init),
 * with the connection id and cookie for the probes and for cancel (the
 * loop thread has none), queues the job on the loop's incoming list
 * and wakes the loop.  The loop moves it to its pending FIFO and
 * starts it when the pool of http.c has a handle (s3_handle_try_get;
 * else it marks itself starved and whoever gives a handle back wakes
 * it).  s3_call_begin sets up the handle, curl_multi_add_handle runs
 * it; at its end s3_call_end says whether to retry (5xx, dropped
 * connection): then the handle goes back, and the job waits in the
 * FIFO until its back-off time has passed (the loop's poll timeout,
 * never a sleep).  Otherwise s3_call_finish maps the outcome as on the
 * synchronous path and the job's done callback runs, on the loop
 * thread.  timeout= is an option of each easy handle, which the multi
 * enforces.
 *
 * cancel: the connection's id goes to the loop, which ends that
 * connection's pending and running jobs (done with ESHUTDOWN) and the
 * writes of awrite.c still waiting for an object's lock.
 *
 * Locking: start_lock protects starting and stopping the loop.  lock
 * protects the incoming list, the cancel list and stop; it is a leaf.
 * The loop thread alone touches the multi handle (but for
 * curl_multi_wakeup), the pending FIFO and the running list; it takes
 * pool_lock of http.c (try_get, put) and obj_lock of objects.c, never
 * while holding lock.
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

/* One GET of a read. */
struct job {
  struct s3_job j;              /* first: the loop's s3_job is this */
  struct op *op;
  char *name;                   /* the object's name, malloc'd */
};

/* One client read: NR_JOBS GETs. */
struct op {
  struct nbdkit_async_request *areq;
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
static struct s3_job *in_head, *in_tail;
static struct cancel *cancels;
static bool stop;

static _Atomic bool starved;

/* The loop thread's alone. */
static struct s3_job *pend_head, *pend_tail;
static struct s3_job *running;

static void
push (struct s3_job **head, struct s3_job **tail, struct s3_job *job)
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
get_done (struct job *job, int err)
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

/* A GET of a read has ended: ERR as for s3_job's done. */
static void
read_get_done (struct s3_job *j, int err)
{
  struct job *job = (struct job *) j;

  if (err == 0 && s3_range_result (&j->req, job->op->missing_ok) == -1)
    err = errno ? errno : EIO;
  get_done (job, err);
}

/* JOB's transfer on handle job->c ended with RC. */
static void
job_ended (struct s3_job *job, CURLcode rc)
{
  long ms;

  if (s3_call_end (&job->call, rc, &ms)) {
    s3_handle_put (job->c);
    job->c = NULL;
    job->due_ns = now_ns () + (uint64_t) ms * 1000000;
    push (&pend_head, &pend_tail, job);
    return;
  }
  s3_handle_put (job->c);
  job->c = NULL;
  if (s3_call_finish (&job->call) == -1)
    job->done (job, errno ? errno : EIO);
  else
    job->done (job, 0);
}

static void
job_start (struct s3_job *job, CURL *c)
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
  struct s3_job **p = &pend_head, *job;
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
      job->done (job, ENOMEM);
      continue;
    }
    job_start (job, c);
  }
  if (next == UINT64_MAX)
    return LOOP_POLL_MS;
  return (long) MIN ((next - now) / 1000000 + 1, (uint64_t) LOOP_POLL_MS);
}

static void
unlink_running (struct s3_job *job)
{
  for (struct s3_job **p = &running; *p; p = &(*p)->next)
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
    struct s3_job *job;

    if (msg->msg != CURLMSG_DONE)
      continue;
    c = msg->easy_handle;
    rc = msg->data.result;      /* MSG dies with the removal */
    curl_easy_getinfo (c, CURLINFO_PRIVATE, &priv);
    job = (struct s3_job *) priv;
    curl_multi_remove_handle (multi, c);
    unlink_running (job);
    job_ended (job, rc);
    any = true;
  }
  return any;
}

/* The client of connection ID is gone: end its jobs now. */
static void
cancel_connection (uint64_t id)
{
  struct s3_job **p, *job;
  /* The writes waiting for a lock first: else ending a running one
   * would hand its object to the next of the same connection.
   */
  unsigned n = s3_write_cancel (id);

  for (p = &pend_head; (job = *p) != NULL; ) {
    if (job->req.conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    s3_call_abandon (&job->call);
    job->done (job, ESHUTDOWN);
    n++;
  }
  pend_tail = NULL;
  for (job = pend_head; job; job = job->next)
    pend_tail = job;
  for (p = &running; (job = *p) != NULL; ) {
    if (job->req.conn_id != id) {
      p = &job->next;
      continue;
    }
    *p = job->next;
    curl_multi_remove_handle (multi, job->c);
    s3_handle_put (job->c);
    job->c = NULL;
    s3_call_abandon (&job->call);
    job->done (job, ESHUTDOWN);
    n++;
  }
  if (n > 0)
    nbdkit_debug ("S3: connection %" PRIu64 " gone: %u requests cancelled",
                  id, n);
}

static void *
loop (void *arg)
{
  (void) arg;
  for (;;) {
    struct s3_job *in;
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
      struct s3_job *next = in->next;
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

int
s3_loop_start (void)
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

void
s3_loop_submit (struct s3_job *chain)
{
  pthread_mutex_lock (&lock);
  while (chain) {
    struct s3_job *next = chain->next;

    push (&in_head, &in_tail, chain);
    chain = next;
  }
  pthread_mutex_unlock (&lock);
  curl_multi_wakeup (multi);
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
  if (n > MAX_PARTS || s3_loop_start () == -1)
    return read_sync (areq, buf, count, offset);

  op = calloc (1, sizeof *op + n * sizeof op->jobs[0]);
  if (op == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  op->areq = areq;
  op->missing_ok = os != 0;
  op->nr_jobs = n;
  op->left = n;
  for (uint64_t i = 0; i < n; ++i) {
    struct job *job = &op->jobs[i];
    uint64_t in = os ? offset % os : offset;
    uint64_t len = os ? MIN ((uint64_t) count, os - in) : count;

    job->op = op;
    job->j.submit_ns = now;
    job->j.done = read_get_done;
    if (os && (job->name = s3_object_name (first + i)) == NULL)
      goto err;
    job->j.req = (struct s3_request) {
      .method = "GET", .object = os ? job->name : s3_cfg.key,
      .range_off = in, .range_len = len, .buf = p,
      .ids_set = true, .conn_id = nbdkit_connection_id (),
      .cookie = nbdkit_request_cookie (),
    };
    if (s3_call_init (&job->j.call, &job->j.req) == -1)
      goto err;
    job->j.next = i + 1 < n ? &op->jobs[i + 1].j : NULL;
    p += len;
    offset += len;
    count -= len;
  }

  s3_loop_submit (&op->jobs[0].j);
  return 0;

 err:
  {
    int e = errno;

    for (uint64_t i = 0; i < n; ++i)
      if (op->jobs[i].j.call.url)
        s3_call_abandon (&op->jobs[i].j.call);
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
  .pwrite = s3_async_pwrite,
  .flush = s3_async_flush,
  .trim = s3_async_trim,
  .zero = s3_async_zero,
  .cancel = async_cancel,
};
