/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's shared declarations: the configuration (filled by
 * S3.c's config callbacks and credentials.c, read-only once the server
 * is ready) and the request interface of http.c.
 */
#ifndef NBDKIT_S3_H
#define NBDKIT_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

struct s3_config {
  char *access_key;             /* credentials: parameters, environment */
  char *secret_key;             /* or files (credentials.c) */
  char *session_token;          /* NULL if none */
  char *endpoint;               /* scheme://host[:port], no trailing / */
  char *region;
  char *profile;                /* profile= (else AWS_PROFILE, default) */
  char *bucket;
  char *key;                    /* object, or prefix of the objects */
  bool path_style;              /* URL is ENDPOINT/BUCKET/KEY */
  uint64_t size;                /* size=, 0 in single-object mode */
  uint64_t object_size;         /* object-size=, 0 in single-object mode */
  long timeout_ms;              /* every request */
  long connect_timeout_ms;
  unsigned connections;         /* the most handles in the pool */
  unsigned retries;             /* for 5xx and dropped connections */
};

extern struct s3_config s3_cfg;

/* -D S3.verbose=1: libcurl's own trace of each request. */
extern int S3_debug_verbose;

/* credentials.c: fill access_key, secret_key, session_token, region
 * and endpoint from the environment and the AWS files where the
 * parameters left them unset.  -1 after nbdkit_error.
 */
extern int s3_resolve_credentials (void);

/* One HTTP request to the store. */
struct s3_request {
  const char *method;           /* GET PUT HEAD DELETE */
  const char *object;           /* the object's key, NULL for the bucket */
  const char *query;            /* canonical (sorted, encoded) or NULL */

  /* GET: where the body goes.  With range_len > 0, a Range request
   * for [range_off, range_off + range_len) into buf (range_len bytes).
   * With list set, the body is kept in a malloc'd string instead.
   */
  uint64_t range_off;
  uint64_t range_len;
  void *buf;
  bool list;

  /* PUT: the body. */
  const void *wbuf;
  size_t wlen;

  /* For the probes: the client request this is part of.  Filled by
   * s3_perform from the calling thread unless ids_set.
   */
  bool ids_set;
  uint64_t conn_id;
  uint64_t cookie;

  /* Results. */
  int err;                      /* errno if s3_perform failed */
  long status;                  /* HTTP status, 0 if none came back */
  uint64_t got;                 /* body bytes stored in buf */
  int64_t content_length;       /* HEAD: the object's size, else -1 */
  char *body;                   /* list, and error bodies: caller frees */
  size_t body_len;
  char code[64];                /* S3 error code of an error reply */
};

/* One transfer's state for libcurl's callbacks (http.c). */
struct xfer {
  struct s3_request *req;
  CURL *c;
  long status;                  /* read once, at the first body bytes */
  uint64_t skip;                /* body bytes before the range (a 200) */
  size_t wpos;                  /* PUT body sent so far */
};

/* One request on its way, in halves that the synchronous path
 * (s3_perform) and the event loop (async.c) share:
 *
 *   s3_call_init     URL and signed headers; ids of the calling thread
 *                    unless req->ids_set
 *   s3_call_begin    one attempt's options on handle C (then
 *                    curl_easy_perform, or a multi handle, runs it)
 *   s3_call_end      the attempt's reply and probe; true if it is to
 *                    be tried again after *delay_ms
 *   s3_call_finish   error mapping and logging, as s3_perform returns
 *   s3_call_abandon  instead of finish, for a request cancelled
 */
struct s3_call {
  struct s3_request *req;
  char *url;
  struct curl_slist *headers;
  struct xfer x;
  CURL *c;
  bool is_put;
  unsigned attempt;             /* 0 for the first try */
  uint64_t t0;
  CURLcode rc;                  /* of the last attempt */
  char errbuf[CURL_ERROR_SIZE];
};

/* http.c */
extern int s3_call_init (struct s3_call *call, struct s3_request *req);
extern CURLcode s3_call_begin (struct s3_call *call, CURL *c);
extern bool s3_call_end (struct s3_call *call, CURLcode rc, long *delay_ms);
extern int s3_call_finish (struct s3_call *call);
extern void s3_call_abandon (struct s3_call *call);
/* A free handle of the pool, or NULL: EAGAIN if all are in use. */
extern CURL *s3_handle_try_get (void);
extern void s3_handle_put (CURL *c);

/* async.c: the event loop.  One HTTP request it runs for a client's
 * asynchronous request: req (with ids_set) and call (s3_call_init'd)
 * are filled before s3_loop_submit, next links a chain of them.
 */
struct s3_job {
  struct s3_job *next;
  struct s3_request req;
  struct s3_call call;
  CURL *c;                      /* while it runs */
  uint64_t submit_ns;           /* for s3_pool_wait */
  uint64_t due_ns;              /* not before (a retry's back-off) */
  bool waited;                  /* for a handle of the pool */
  /* Once, on the loop thread: ERR is 0 if a reply came back (in req,
   * any status), else the errno (ESHUTDOWN if cancelled), as
   * s3_perform's outcome.  It may submit the job again.
   */
  void (*done) (struct s3_job *job, int err);
};

extern void s3_async_handle_back (void);
extern void s3_async_stop (void);
/* Start the loop if it is not running: 0, or -1 if it cannot be. */
extern int s3_loop_start (void);
/* Queue the jobs of CHAIN (from any thread, the loop's too). */
extern void s3_loop_submit (struct s3_job *chain);

/* awrite.c: the asynchronous writes, zeroes, trims and flushes. */
struct nbdkit_async_request;
extern int s3_async_pwrite (void *handle, struct nbdkit_async_request *areq,
                            const void *buf, uint32_t count,
                            uint64_t offset, uint32_t flags);
extern int s3_async_zero (void *handle, struct nbdkit_async_request *areq,
                          uint32_t count, uint64_t offset, uint32_t flags);
extern int s3_async_trim (void *handle, struct nbdkit_async_request *areq,
                          uint32_t count, uint64_t offset, uint32_t flags);
extern int s3_async_flush (void *handle, struct nbdkit_async_request *areq,
                           uint32_t flags);
/* On the loop thread: end connection ID's writes that wait for an
 * object's lock; how many.
 */
extern unsigned s3_write_cancel (uint64_t id);

extern int s3_http_init (void);
extern void s3_http_close_all (void);
extern void s3_http_free (void);
/* Run REQ on a handle of the pool, retrying 5xx and dropped
 * connections.  0 if an HTTP reply came back (any status), -1 after
 * nbdkit_error (with errno set) if none did.
 */
extern int s3_perform (struct s3_request *req);
/* Run the N requests of REQS, several at a time (each on its own
 * thread and handle, up to s3_cfg.connections).  0 if each got an HTTP
 * reply; else -1 with errno set from the first that did not (each
 * failed one has its err set and was reported).
 */
extern int s3_perform_many (struct s3_request *reqs, size_t n);
/* The errno for an HTTP error reply. */
extern int s3_status_errno (const struct s3_request *req);
/* An XML element's text, entities decoded, from *POS on; *POS moves
 * past it.  NULL if there is none (or ENOMEM, errno set).
 */
extern char *s3_xml_next (const char *body, const char *tag,
                          const char **pos);
/* NAME=VALUE, VALUE percent-encoded as SigV4 wants, appended to *Q
 * with & (Q must start NULL; the caller frees).  Names must be added
 * in sorted order.  -1 on ENOMEM.
 */
extern int s3_query_add (char **q, const char *name, const char *value);

/* objects.c: the data path (see there). */
struct nbdkit_extents;
extern void s3_objects_free (void);
extern bool s3_no_such_key (const struct s3_request *req);
extern char *s3_object_name (uint64_t n);
extern int s3_range_result (struct s3_request *req, bool missing_ok);
/* The outcome of a PUT, of a DELETE (a missing object is fine): 0, or
 * -1 after nbdkit_error with errno set.
 */
extern int s3_write_result (struct s3_request *req);
extern int s3_delete_result (struct s3_request *req);
extern int s3_single_pread (void *buf, uint32_t count, uint64_t offset);
extern int s3_objects_pread (void *buf, uint32_t count, uint64_t offset);
extern int s3_objects_pwrite (const void *buf, uint32_t count,
                              uint64_t offset);
extern int s3_objects_zero (uint32_t count, uint64_t offset);
extern int s3_objects_trim (uint32_t count, uint64_t offset);
extern int s3_delete_objects (uint64_t a, uint64_t b);

/* Object locks for the asynchronous writes: a waiter asks for object
 * n and is either given it at once or queued behind the holder; the
 * thread that unlocks it then hands it over and calls granted (after
 * dropping obj_lock, on that thread: the loop's, a worker's).  The
 * synchronous writes take the same locks, so the two paths never
 * interleave a read-modify-write.
 */
enum s3_wait_state { S3_WAIT_LOCKED, S3_WAIT_QUEUED, S3_WAIT_FAILED };
struct s3_obj_waiter {
  struct s3_obj_waiter *next;
  uint64_t n;                   /* the object */
  uint64_t conn_id;             /* for s3_objects_cancel_waiters */
  enum s3_wait_state state;
  void (*granted) (struct s3_obj_waiter *w);
};
/* Ask for the objects of the waiters of CHAIN (linked by next,
 * distinct objects) in one go, so that two writes in flight take their objects in the same
 * order.  Each comes back LOCKED, QUEUED (granted is called later) or
 * FAILED (ENOMEM, reported).  Once QUEUED, a waiter may be granted
 * before this returns.
 */
extern void s3_objects_lock_async (struct s3_obj_waiter *chain);
extern void s3_object_unlock (uint64_t n);
/* The waiters of connection ID still queued, taken out of the queue
 * and chained through next.
 */
extern struct s3_obj_waiter *s3_objects_cancel_waiters (uint64_t id);
extern int s3_objects_extents (uint32_t count, uint64_t offset,
                               struct nbdkit_extents *extents);

#endif /* NBDKIT_S3_H */
