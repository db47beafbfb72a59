/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's asynchronous writes, zeroes, trims and flushes
 * (include/nbdkit-async.h), run by the event loop of async.c.  They do
 * what objects.c does on a worker, object by object, without holding a
 * server thread while the store answers.
 *
 * A client request becomes one unit per object it touches:
 *
 *   a whole object written      PUT from the client's buffer;
 *   a whole object zeroed or    DELETE (a missing object is fine);
 *     trimmed
 *   part of an object written   read-modify-write: GET the object (a
 *     or zeroed                 missing one is zeroes), merge, PUT it
 *                               back; zeroes into a missing object
 *                               need no PUT.  Fires s3_rmw.
 *
 * A trim leaves the parts of objects alone, as objects.c does.  Every
 * unit holds its object's lock (objects.c) from before its first
 * request to after its last, and the worker asks for the locks of all
 * the units of a request at once (s3_objects_lock_async): two requests
 * in flight on one object run one after the other, in the order they
 * were submitted, and a synchronous write on another worker waits for
 * them as for another worker.  A unit whose object is busy waits in
 * objects.c's queue, holding nothing, and is started by whoever
 * unlocks the object (unit_granted).  The units of one request run
 * side by side; the request completes when the last has ended, with
 * the first error.  Errors are mapped by objects.c's s3_write_result,
 * s3_delete_result and s3_range_result, as on the synchronous path.
 *
 * What the synchronous code does on the worker (and completes from
 * there): a request of more than MAX_UNITS objects, a zero or trim of
 * more than MAX_DELETES whole objects (the synchronous path lists the
 * bucket first and deletes only the objects there), and any request
 * when the loop cannot start.
 *
 * Every write is in the store before it completes, so FUA is native
 * and a flush, which covers only writes completed before it, has
 * nothing to wait for: it completes at once.
 *
 * The units' requests carry the client request's connection id and
 * cookie (saved on the worker) for the probes and for cancel.  A unit
 * ends on the loop thread, or where its lock was given (see
 * unit_granted), or on the worker that failed to start it; left and
 * err are atomic for that reason.
 */
#include <config.h>

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
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

/* The most objects one asynchronous request covers. */
#define MAX_UNITS 1000

/* The most whole objects an asynchronous zero or trim deletes (in
 * parallel, without listing them first).
 */
#define MAX_DELETES 64

enum step { PUT_WHOLE, DELETE_WHOLE, RMW_GET, RMW_PUT };

struct wop;

/* One object's part of a client request. */
struct unit {
  struct s3_job job;            /* first: the loop's job is this */
  struct s3_obj_waiter w;       /* the object's lock; w.n the object */
  struct wop *op;
  enum step step;
  uint64_t in, len;             /* the bytes of the object written */
  const char *src;              /* the client's bytes; NULL: zeroes */
  char *name;                   /* the object's name */
  char *obj;                    /* read-modify-write: the object */
};

/* One client write, zero or trim. */
struct wop {
  struct nbdkit_async_request *areq;
  uint64_t conn_id, cookie;
  _Atomic size_t left;          /* units not ended, + 1 for the worker */
  _Atomic int err;              /* the first error */
  size_t nr;
  struct unit units[];
};

static struct unit *
unit_of_waiter (struct s3_obj_waiter *w)
{
  return (struct unit *) ((char *) w - offsetof (struct unit, w));
}

/* Drop one reference of OP, with ERR (0 or an errno): the last
 * completes the client's request.
 */
static void
op_put (struct wop *op, int err)
{
  int zero = 0;

  if (err)
    atomic_compare_exchange_strong (&op->err, &zero, err);
  if (atomic_fetch_sub (&op->left, 1) != 1)
    return;
  nbdkit_async_complete (op->areq, atomic_load (&op->err));
  for (size_t i = 0; i < op->nr; ++i) {
    free (op->units[i].name);
    free (op->units[i].obj);
  }
  free (op);
}

/* U is over with ERR; UNLOCK if it holds its object. */
static void
unit_end (struct unit *u, int err, bool unlock)
{
  free (u->obj);
  u->obj = NULL;
  if (unlock)
    s3_object_unlock (u->w.n);
  op_put (u->op, err);
}

/* Set up U's next request (METHOD, on the object's bytes [OFF, OFF +
 * LEN) of BUF for a GET, or LEN bytes of WBUF for a PUT): its job, to
 * be submitted, or NULL if it could not be (U has ended).
 */
static struct s3_job *
unit_request (struct unit *u, const char *method, void *buf,
              const void *wbuf, uint64_t len)
{
  struct s3_job *job = &u->job;

  job->next = NULL;
  job->submit_ns = now_ns ();
  job->req = (struct s3_request) {
    .method = method, .object = u->name,
    .range_len = buf ? len : 0, .buf = buf,
    .wbuf = wbuf, .wlen = wbuf ? len : 0,
    .ids_set = true, .conn_id = u->op->conn_id, .cookie = u->op->cookie,
  };
  if (s3_call_init (&job->call, &job->req) == -1) {
    unit_end (u, errno, true);
    return NULL;
  }
  return job;
}

/* U holds its object: its first request's job, or NULL (U ended). */
static struct s3_job *
unit_begin (struct unit *u)
{
  const uint64_t os = s3_cfg.object_size;

  switch (u->step) {
  case PUT_WHOLE:
    return unit_request (u, "PUT", NULL, u->src, os);
  case DELETE_WHOLE:
    return unit_request (u, "DELETE", NULL, NULL, 0);
  case RMW_GET:
    NBDKIT_PROBE (s3_rmw, u->op->conn_id, u->op->cookie, u->w.n, u->in,
                  u->len);
    u->obj = malloc (os);
    if (u->obj == NULL) {
      nbdkit_error ("malloc: %m");
      unit_end (u, ENOMEM, true);
      return NULL;
    }
    return unit_request (u, "GET", u->obj, NULL, os);
  case RMW_PUT:
    break;
  }
  abort ();
}

/* objects.c handed U its object (on the unlocking thread). */
static void
unit_granted (struct s3_obj_waiter *w)
{
  struct s3_job *job = unit_begin (unit_of_waiter (w));

  if (job)
    s3_loop_submit (job);
}

/* A request of U's ended, on the loop thread (see s3_job's done). */
static void
unit_done (struct s3_job *job, int err)
{
  struct unit *u = (struct unit *) job;
  struct s3_request *req = &job->req;
  int r;

  if (err) {
    unit_end (u, err, true);
    return;
  }
  switch (u->step) {
  case PUT_WHOLE:
  case RMW_PUT:
    r = s3_write_result (req);
    break;
  case DELETE_WHOLE:
    r = s3_delete_result (req);
    break;
  case RMW_GET:
    if (u->src == NULL && (s3_no_such_key (req) || req->status == 416)) {
      free (req->body);
      r = 0;                    /* zeroes into nothing */
      break;
    }
    if ((r = s3_range_result (req, true)) == -1)
      break;
    if (u->src)
      memcpy (u->obj + u->in, u->src, u->len);
    else
      memset (u->obj + u->in, 0, u->len);
    u->step = RMW_PUT;
    job = unit_request (u, "PUT", NULL, u->obj, s3_cfg.object_size);
    if (job)
      s3_loop_submit (job);
    return;
  default:
    abort ();
  }
  unit_end (u, r == 0 ? 0 : errno ? errno : EIO, true);
}

unsigned
s3_write_cancel (uint64_t id)
{
  struct s3_obj_waiter *w = s3_objects_cancel_waiters (id);
  unsigned n = 0;

  while (w) {
    struct s3_obj_waiter *next = w->next;

    unit_end (unit_of_waiter (w), ESHUTDOWN, false);
    n++;
    w = next;
  }
  return n;
}

enum kind { WRITE, ZERO, TRIM };

/* The synchronous code, on the worker, completed from there. */
static int
run_sync (struct nbdkit_async_request *areq, enum kind kind,
          const void *buf, uint32_t count, uint64_t offset)
{
  int r;

  switch (kind) {
  case WRITE: r = s3_objects_pwrite (buf, count, offset); break;
  case ZERO: r = s3_objects_zero (count, offset); break;
  default: r = s3_objects_trim (count, offset); break;
  }
  nbdkit_async_complete (areq, r == 0 ? 0 : errno ? errno : EIO);
  return 0;
}

/* Start KIND of COUNT bytes at OFFSET (of BUF for a write). */
static int
submit (struct nbdkit_async_request *areq, enum kind kind, const char *buf,
        uint32_t count, uint64_t offset)
{
  const uint64_t os = s3_cfg.object_size;
  const uint64_t end = offset + count;
  uint64_t first, last, nr, deletes = 0;
  struct s3_job *chain = NULL, **tail = &chain;
  struct s3_obj_waiter *waiters = NULL;
  struct wop *op;

  /* The objects touched: a trim only the whole ones. */
  if (count == 0) {
    nbdkit_async_complete (areq, 0);
    return 0;
  }
  if (kind == TRIM) {
    first = (offset + os - 1) / os;
    last = end / os;
    if (first >= last) {
      nbdkit_async_complete (areq, 0);
      return 0;
    }
    last--;
    deletes = last - first + 1;
  }
  else {
    first = offset / os;
    last = (end - 1) / os;
    if (kind == ZERO)
      deletes = end / os > (offset + os - 1) / os ?
        end / os - (offset + os - 1) / os : 0;
  }
  nr = last - first + 1;
  if (nr > MAX_UNITS || deletes > MAX_DELETES || s3_loop_start () == -1)
    return run_sync (areq, kind, buf, count, offset);

  op = calloc (1, sizeof *op + nr * sizeof op->units[0]);
  if (op == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  op->areq = areq;
  op->conn_id = nbdkit_connection_id ();
  op->cookie = nbdkit_request_cookie ();
  op->nr = nr;
  atomic_init (&op->left, nr + 1);
  atomic_init (&op->err, 0);
  for (uint64_t i = nr; i-- > 0; ) {
    struct unit *u = &op->units[i];
    const uint64_t n = first + i;
    const uint64_t a = MAX (offset, n * os), b = MIN (end, (n + 1) * os);

    u->op = op;
    u->job.done = unit_done;
    u->in = a - n * os;
    u->len = b - a;
    u->src = buf ? buf + (a - offset) : NULL;
    u->step = u->len < os ? RMW_GET : buf ? PUT_WHOLE : DELETE_WHOLE;
    u->w = (struct s3_obj_waiter) {
      .next = waiters, .n = n, .conn_id = op->conn_id,
      .granted = unit_granted,
    };
    waiters = &u->w;
    if ((u->name = s3_object_name (n)) == NULL) {
      for (uint64_t j = i + 1; j < nr; ++j)
        free (op->units[j].name);
      free (op);
      return -1;
    }
  }

  /* From here OP is shared: a queued unit may run and end at once. */
  s3_objects_lock_async (waiters);
  for (uint64_t i = 0; i < nr; ++i) {
    struct unit *u = &op->units[i];
    struct s3_job *job;

    switch (u->w.state) {
    case S3_WAIT_LOCKED:
      if ((job = unit_begin (u)) != NULL) {
        *tail = job;
        tail = &job->next;
      }
      break;
    case S3_WAIT_FAILED:
      unit_end (u, ENOMEM, false);
      break;
    case S3_WAIT_QUEUED:
      break;
    }
  }
  if (chain)
    s3_loop_submit (chain);
  op_put (op, 0);
  return 0;
}

int
s3_async_pwrite (void *handle, struct nbdkit_async_request *areq,
                 const void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags)
{
  (void) handle;
  (void) flags;                 /* FUA: every write is in the store */
  return submit (areq, WRITE, buf, count, offset);
}

int
s3_async_zero (void *handle, struct nbdkit_async_request *areq,
               uint32_t count, uint64_t offset, uint32_t flags)
{
  (void) handle;
  (void) flags;                 /* as the synchronous zero */
  return submit (areq, ZERO, NULL, count, offset);
}

int
s3_async_trim (void *handle, struct nbdkit_async_request *areq,
               uint32_t count, uint64_t offset, uint32_t flags)
{
  (void) handle;
  (void) flags;
  return submit (areq, TRIM, NULL, count, offset);
}

int
s3_async_flush (void *handle, struct nbdkit_async_request *areq,
                uint32_t flags)
{
  (void) handle;
  (void) flags;
  /* The writes completed before it are in the store already. */
  nbdkit_async_complete (areq, 0);
  return 0;
}
