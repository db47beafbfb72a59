/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's HTTP side: a pool of libcurl handles, s3_perform,
 * which runs one signed request on one of them, and s3_perform_many,
 * which runs several at once on helper threads (one handle each).
 *
 * Requests are signed by libcurl (CURLOPT_AWS_SIGV4) with the key pair
 * of s3_cfg.  The payload is not hashed: x-amz-content-sha256 is
 * UNSIGNED-PAYLOAD, which S3 and radosgw accept, and which libcurl
 * 7.88 needs to be given (it does not add the header itself).
 *
 * The pool holds up to s3_cfg.connections easy handles, made on
 * demand; a request takes a free one, or waits for one, and gives it
 * back with its connection kept alive.  Each request has a timeout
 * (CURLOPT_TIMEOUT_MS), so a wait for a handle is bounded by the
 * requests ahead of it.  The pool lock protects pool_free, nr_free and
 * nr_made; no other lock is taken under it.
 *
 * Every attempt fires the probes s3_request_start (connection id,
 * cookie, method, object, offset, count) and s3_request_done (id,
 * cookie, method, HTTP status, bytes, latency ns): six arguments at
 * most, as bpftrace reads no more of a USDT probe.  A request that
 * waited for a handle fires s3_pool_wait (id, cookie, ns).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "include/minmax.h"
#include "include/now-ns.h"
#include "s3.h"
#include "include/array-size.h"

/* The most threads one s3_perform_many runs at once. */
#define MAX_FANOUT 16

/* The most we keep of a listing or an error reply. */
#define MAX_BODY (4 * 1024 * 1024)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static CURL **pool_free;        /* free handles, nr_free of them */
static size_t nr_free;
static unsigned nr_made;        /* handles in existence */
/* --metrics' HTTP replies by status; NULL without --metrics. */
static struct nbdkit_metric *responses;

int
s3_http_init (void)
{
  responses = nbdkit_metric_counter ("http_responses", "HTTP replies from "
                                     "the store (each retry too), by "
                                     "status.", "status");
  pool_free = calloc (s3_cfg.connections, sizeof *pool_free);
  if (pool_free == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  return 0;
}

/* Close every handle (all are free when this runs: after the
 * start-up check, before the server forks, and at unload).
 */
void
s3_http_close_all (void)
{
  LOCK_FOR_SCOPE (&pool_lock);
  while (nr_free > 0)
    curl_easy_cleanup (pool_free[--nr_free]);
  nr_made = 0;
}

void
s3_http_free (void)
{
  s3_http_close_all ();
  free (pool_free);
  pool_free = NULL;
}

static CURL *
get_handle (const struct s3_request *req)
{
  CURL *c = NULL;
  uint64_t t0 = 0;
  bool waited = false;

  {
    LOCK_FOR_SCOPE (&pool_lock);
    while (nr_free == 0 && nr_made >= s3_cfg.connections) {
      if (!waited)
        t0 = now_ns ();
      waited = true;
      pthread_cond_wait (&pool_cond, &pool_lock);
    }
    if (nr_free > 0)
      c = pool_free[--nr_free];
    else {
      c = curl_easy_init ();
      if (c)
        nr_made++;
    }
  }
  if (waited)
    NBDKIT_PROBE (s3_pool_wait, req->conn_id, req->cookie, now_ns () - t0);
  if (c == NULL) {
    errno = ENOMEM;
    nbdkit_error ("curl_easy_init failed");
  }
  return c;
}

CURL *
s3_handle_try_get (void)
{
  CURL *c = NULL;

  {
    LOCK_FOR_SCOPE (&pool_lock);
    if (nr_free > 0)
      return pool_free[--nr_free];
    if (nr_made >= s3_cfg.connections) {
      errno = EAGAIN;
      return NULL;
    }
    c = curl_easy_init ();
    if (c)
      nr_made++;
  }
  if (c == NULL) {
    errno = ENOMEM;
    nbdkit_error ("curl_easy_init failed");
  }
  return c;
}

void
s3_handle_put (CURL *c)
{
  {
    LOCK_FOR_SCOPE (&pool_lock);
    pool_free[nr_free++] = c;
    pthread_cond_signal (&pool_cond);
  }
  /* Outside pool_lock: the loop may be waiting for this handle. */
  s3_async_handle_back ();
}

/* Append percent-encoded S to *OUT (length *LEN), keeping '/' if
 * KEEP_SLASH: the encoding SigV4 expects (RFC 3986 unreserved kept,
 * upper-case hex).
 */
static int
append_encoded (char **out, size_t *len, const char *s, bool keep_slash)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen (s);
  char *p = realloc (*out, *len + 3 * n + 1);

  if (p == NULL)
    return -1;
  *out = p;
  p += *len;
  for (; *s; s++) {
    unsigned char c = *s;

    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
        c == '~' || (c == '/' && keep_slash))
      *p++ = c;
    else {
      *p++ = '%';
      *p++ = hex[c >> 4];
      *p++ = hex[c & 15];
    }
  }
  *p = '\0';
  *len = p - *out;
  return 0;
}

static int
append_raw (char **out, size_t *len, const char *s)
{
  size_t n = strlen (s);
  char *p = realloc (*out, *len + n + 1);

  if (p == NULL)
    return -1;
  memcpy (p + *len, s, n + 1);
  *out = p;
  *len += n;
  return 0;
}

int
s3_query_add (char **q, const char *name, const char *value)
{
  size_t len = *q ? strlen (*q) : 0;

  if ((len > 0 && append_raw (q, &len, "&") == -1) ||
      append_encoded (q, &len, name, false) == -1 ||
      append_raw (q, &len, "=") == -1 ||
      append_encoded (q, &len, value, false) == -1) {
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

/* The request's URL, malloc'd. */
static char *
make_url (const struct s3_request *req)
{
  char *url = NULL;
  size_t len = 0;

  if (append_raw (&url, &len, s3_cfg.endpoint) == -1 ||
      append_raw (&url, &len, "/") == -1 ||
      (s3_cfg.path_style &&
       (append_encoded (&url, &len, s3_cfg.bucket, false) == -1 ||
        append_raw (&url, &len, "/") == -1)) ||
      (req->object &&
       append_encoded (&url, &len, req->object, true) == -1) ||
      (req->query &&
       (append_raw (&url, &len, "?") == -1 ||
        append_raw (&url, &len, req->query) == -1))) {
    free (url);
    return NULL;
  }
  return url;
}


static int
keep_body (struct s3_request *req, const char *data, size_t n)
{
  char *p;

  if (req->body_len + n > MAX_BODY)
    return 0;                   /* a reply that big is not ours to keep */
  p = realloc (req->body, req->body_len + n + 1);
  if (p == NULL)
    return -1;
  memcpy (p + req->body_len, data, n);
  req->body = p;
  req->body_len += n;
  p[req->body_len] = '\0';
  return 0;
}

static size_t
write_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct xfer *x = opaque;
  struct s3_request *req = x->req;
  size_t n = size * nmemb, use;

  if (x->status == 0) {
    curl_easy_getinfo (x->c, CURLINFO_RESPONSE_CODE, &x->status);
    /* A server that ignored the range sent the whole object. */
    if (x->status == 200 && req->range_len > 0)
      x->skip = req->range_off;
  }
  if (x->status >= 300 || req->list || req->buf == NULL)
    return keep_body (req, data, n) == 0 ? n : 0;

  use = n;
  if (x->skip > 0) {
    size_t s = MIN ((uint64_t) use, x->skip);

    x->skip -= s;
    data += s;
    use -= s;
  }
  use = MIN ((uint64_t) use, req->range_len - req->got);
  memcpy ((char *) req->buf + req->got, data, use);
  req->got += use;
  return n;
}

static size_t
read_cb (char *data, size_t size, size_t nmemb, void *opaque)
{
  struct xfer *x = opaque;
  size_t n = MIN (size * nmemb, x->req->wlen - x->wpos);

  memcpy (data, (const char *) x->req->wbuf + x->wpos, n);
  x->wpos += n;
  return n;
}

/* Rewinding the PUT body, when libcurl resends it (after a 100
 * continue that did not come, or a redirect).
 */
static int
seek_cb (void *opaque, curl_off_t offset, int origin)
{
  struct xfer *x = opaque;

  if (origin != SEEK_SET || offset < 0 || (size_t) offset > x->req->wlen)
    return CURL_SEEKFUNC_CANTSEEK;
  x->wpos = offset;
  return CURL_SEEKFUNC_OK;
}

static int
debug_cb (CURL *c, curl_infotype type, char *data, size_t size, void *opaque)
{
  (void) c;
  (void) opaque;
  if (type == CURLINFO_TEXT || type == CURLINFO_HEADER_IN ||
      type == CURLINFO_HEADER_OUT) {
    /* One debug line per line of text, without the line ends. */
    while (size > 0) {
      size_t n = 0;

      static const char token[] = "x-amz-security-token:";
      const size_t tlen = sizeof token - 1;
      const char *dir = type == CURLINFO_TEXT ? "*" :
        type == CURLINFO_HEADER_IN ? "<" : ">";

      while (n < size && data[n] != '\n' && data[n] != '\r')
        n++;
      /* The session token is a credential: not in the log. */
      if (n >= tlen && strncasecmp (data, token, tlen) == 0)
        nbdkit_debug ("S3: curl %s %s (hidden)", dir, token);
      else if (n > 0)
        nbdkit_debug ("S3: curl %s %.*s", dir, (int) n, data);
      while (n < size && (data[n] == '\n' || data[n] == '\r'))
        n++;
      data += n;
      size -= n;
    }
  }
  return 0;
}

CURLcode
s3_call_begin (struct s3_call *call, CURL *c)
{
  struct s3_request *req = call->req;
  struct xfer *x = &call->x;
  char *errbuf = call->errbuf;
  CURLcode rc;

  *x = (struct xfer) { .req = req, .c = c };
  call->c = c;
  if (call->attempt > 0)
    nbdkit_debug ("S3: %s %s: retry %u", req->method, call->url,
                  call->attempt);
  NBDKIT_PROBE (s3_request_start, req->conn_id, req->cookie, req->method,
                req->object ? req->object : "", req->range_off,
                call->is_put ? (uint64_t) req->wlen : req->range_len);
  call->t0 = now_ns ();

  curl_easy_reset (c);
  errbuf[0] = '\0';
  req->status = 0;
  req->got = 0;
  req->content_length = -1;
  free (req->body);
  req->body = NULL;
  req->body_len = 0;

  rc = curl_easy_setopt (c, CURLOPT_URL, call->url);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_ERRORBUFFER, errbuf);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85 */
  if (rc == CURLE_OK)
    rc = curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  if (rc == CURLE_OK)
    rc = curl_easy_setopt (c, CURLOPT_PROTOCOLS,
                           (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_TIMEOUT_MS,
                                             s3_cfg.timeout_ms);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS,
                                             s3_cfg.connect_timeout_ms);
  if (rc == CURLE_OK) {
    char sig[128];

    snprintf (sig, sizeof sig, "aws:amz:%s:s3", s3_cfg.region);
    rc = curl_easy_setopt (c, CURLOPT_AWS_SIGV4, sig);
  }
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_USERNAME,
                                             s3_cfg.access_key);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_PASSWORD,
                                             s3_cfg.secret_key);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_HTTPHEADER,
                                             call->headers);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_WRITEFUNCTION,
                                             write_cb);
  if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_WRITEDATA, x);
  if (rc == CURLE_OK && S3_debug_verbose) {
    rc = curl_easy_setopt (c, CURLOPT_DEBUGFUNCTION, debug_cb);
    if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_VERBOSE, 1L);
  }
  if (rc == CURLE_OK && strcmp (req->method, "HEAD") == 0)
    rc = curl_easy_setopt (c, CURLOPT_NOBODY, 1L);
  else if (rc == CURLE_OK && strcmp (req->method, "PUT") == 0) {
    rc = curl_easy_setopt (c, CURLOPT_UPLOAD, 1L);
    if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_READFUNCTION,
                                               read_cb);
    if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_READDATA, x);
    if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_SEEKFUNCTION,
                                               seek_cb);
    if (rc == CURLE_OK) rc = curl_easy_setopt (c, CURLOPT_SEEKDATA, x);
    if (rc == CURLE_OK)
      rc = curl_easy_setopt (c, CURLOPT_INFILESIZE_LARGE,
                             (curl_off_t) req->wlen);
  }
  else if (rc == CURLE_OK && strcmp (req->method, "GET") != 0)
    rc = curl_easy_setopt (c, CURLOPT_CUSTOMREQUEST, req->method);
  return rc;
}

static bool
retryable (CURLcode rc, long status)
{
  if (rc != CURLE_OK)
    return rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR ||
      rc == CURLE_RECV_ERROR || rc == CURLE_PARTIAL_FILE;
  return status == 500 || status == 502 || status == 503 || status == 504;
}

/* Whether the attempt that ended with RC should be made again: the
 * reply (if any) is read into the request, the probe fires, and *DELAY_MS
 * is the back-off before the next try (0.1 s, 0.4 s, 1.6 s, ...).
 */
bool
s3_call_end (struct s3_call *call, CURLcode rc, long *delay_ms)
{
  struct s3_request *req = call->req;
  long ms = 100;

  if (rc == CURLE_OK) {
    curl_off_t cl = -1;
    char s[24];

    curl_easy_getinfo (call->c, CURLINFO_RESPONSE_CODE, &req->status);
    if (curl_easy_getinfo (call->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl)
        == CURLE_OK)
      req->content_length = cl;
    if (responses != NULL) {    /* NULL without --metrics */
      snprintf (s, sizeof s, "%ld", req->status);
      nbdkit_metric_add_conn (responses, req->conn_id, s, 1);
    }
  }
  NBDKIT_PROBE (s3_request_done, req->conn_id, req->cookie, req->method,
                req->status,
                call->is_put ? (uint64_t) req->wlen
                : req->got + req->body_len,
                now_ns () - call->t0);
  call->rc = rc;
  if (call->attempt >= s3_cfg.retries || !retryable (rc, req->status))
    return false;
  for (unsigned j = 0; j < call->attempt; ++j)
    ms *= 4;
  call->attempt++;
  *delay_ms = ms;
  return true;
}

/* Free what s3_call_init made. */
static void
call_free (struct s3_call *call)
{
  curl_slist_free_all (call->headers);
  call->headers = NULL;
  free (call->url);
  call->url = NULL;
}

void
s3_call_abandon (struct s3_call *call)
{
  call_free (call);
  free (call->req->body);
  call->req->body = NULL;
}

int
s3_call_finish (struct s3_call *call)
{
  struct s3_request *req = call->req;
  const CURLcode rc = call->rc;

  if (rc != CURLE_OK) {
    /* A timeout is EIO too: ETIMEDOUT would reach the client as
     * EINVAL.
     */
    req->err = rc == CURLE_OUT_OF_MEMORY ? ENOMEM : EIO;
    free (req->body);
    req->body = NULL;
    nbdkit_error ("%s %s: %s", req->method, call->url,
                  call->errbuf[0] ? call->errbuf : curl_easy_strerror (rc));
    call_free (call);
    errno = req->err;
    return -1;
  }
  if (req->status >= 300 && req->body) {
    CLEANUP_FREE char *code = s3_xml_next (req->body, "Code", NULL);

    if (code)
      snprintf (req->code, sizeof req->code, "%s", code);
  }
  nbdkit_debug ("S3: %s %s: %ld %s", req->method, call->url, req->status,
                req->code);
  call_free (call);
  return 0;
}

int
s3_call_init (struct s3_call *call, struct s3_request *req)
{
  struct curl_slist *h;
  char line[256];

  *call = (struct s3_call) {
    .req = req, .is_put = strcmp (req->method, "PUT") == 0,
    .rc = CURLE_OK,
  };
  req->body = NULL;
  req->code[0] = '\0';
  req->err = 0;
  if (!req->ids_set) {
    req->conn_id = nbdkit_connection_id ();
    req->cookie = nbdkit_request_cookie ();
    req->ids_set = true;
  }
  call->url = make_url (req);
  if (call->url == NULL) {
    errno = req->err = ENOMEM;
    nbdkit_error ("building the URL: %m");
    return -1;
  }

  /* The headers: sent, and signed by libcurl. */
#define ADD_HEADER(str)                                 \
  do {                                                  \
    h = curl_slist_append (call->headers, (str));       \
    if (h == NULL)                                      \
      goto enomem;                                      \
    call->headers = h;                                  \
  } while (0)
  ADD_HEADER ("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (s3_cfg.session_token) {
    CLEANUP_FREE char *tok = NULL;

    if (asprintf (&tok, "x-amz-security-token: %s",
                  s3_cfg.session_token) == -1)
      goto enomem;
    ADD_HEADER (tok);
  }
  if (req->range_len > 0) {
    snprintf (line, sizeof line, "Range: bytes=%" PRIu64 "-%" PRIu64,
              req->range_off, req->range_off + req->range_len - 1);
    ADD_HEADER (line);
  }
#undef ADD_HEADER
  return 0;

 enomem:
  call_free (call);
  errno = req->err = ENOMEM;
  nbdkit_error ("%m");
  return -1;
}

int
s3_perform (struct s3_request *req)
{
  struct s3_call call;
  CURL *c;
  long ms;

  if (s3_call_init (&call, req) == -1)
    return -1;
  c = get_handle (req);
  if (c == NULL) {
    req->err = errno;
    call_free (&call);
    return -1;
  }
  for (;;) {
    CURLcode rc = s3_call_begin (&call, c);

    if (rc == CURLE_OK)
      rc = curl_easy_perform (c);
    if (!s3_call_end (&call, rc, &ms))
      break;
    struct timespec ts = { .tv_sec = ms / 1000,
                           .tv_nsec = (ms % 1000) * 1000000L };
    nanosleep (&ts, NULL);
  }
  s3_handle_put (c);
  return s3_call_finish (&call);
}

/* The requests of one s3_perform_many, taken in turn by its threads. */
struct batch {
  struct s3_request *reqs;
  size_t n;
  size_t next;                  /* the next request not yet taken */
  pthread_mutex_t lock;         /* protects next */
};

static void *
batch_worker (void *opaque)
{
  struct batch *b = opaque;

  for (;;) {
    size_t i;

    pthread_mutex_lock (&b->lock);
    i = b->next++;
    pthread_mutex_unlock (&b->lock);
    if (i >= b->n)
      return NULL;
    if (s3_perform (&b->reqs[i]) == -1 && b->reqs[i].err == 0)
      b->reqs[i].err = EIO;
  }
}

int
s3_perform_many (struct s3_request *reqs, size_t n)
{
  struct batch b = { .reqs = reqs, .n = n, .lock = PTHREAD_MUTEX_INITIALIZER };
  const size_t width = MIN (MIN (n, (size_t) s3_cfg.connections),
                            (size_t) MAX_FANOUT);
  pthread_t threads[MAX_FANOUT - 1];
  size_t started = 0;

  /* The helper threads are not the server's: they fire the probes
   * with the ids of the thread that asked.
   */
  for (size_t i = 0; i < n; ++i) {
    reqs[i].conn_id = nbdkit_connection_id ();
    reqs[i].cookie = nbdkit_request_cookie ();
    reqs[i].ids_set = true;
    reqs[i].err = 0;
  }
  /* The calling thread works too; too few threads only cost time. */
  while (started + 1 < width &&
         pthread_create (&threads[started], NULL, batch_worker, &b) == 0)
    started++;
  batch_worker (&b);
  for (size_t i = 0; i < started; ++i)
    pthread_join (threads[i], NULL);
  pthread_mutex_destroy (&b.lock);

  for (size_t i = 0; i < n; ++i)
    if (reqs[i].err) {
      errno = reqs[i].err;
      return -1;
    }
  return 0;
}

int
s3_status_errno (const struct s3_request *req)
{
  /* Only some errnos survive the trip to the client (EPERM, EIO,
   * ENOSPC, ...; the others arrive as EINVAL), so only those.
   */
  if (strcmp (req->code, "QuotaExceeded") == 0 ||
      strcmp (req->code, "EntityTooLarge") == 0 || req->status == 507)
    return ENOSPC;
  if (req->status == 403)
    return EPERM;
  return EIO;
}

/* Decode the five XML entities and numeric ones in place. */
static void
xml_decode (char *s)
{
  static const struct { const char *name; char c; } ents[] = {
    { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
    { "&quot;", '"' }, { "&apos;", '\'' },
  };
  char *w = s;

  while (*s) {
    size_t i;

    if (*s != '&') {
      *w++ = *s++;
      continue;
    }
    for (i = 0; i < ARRAY_SIZE (ents); ++i) {
      size_t n = strlen (ents[i].name);
      if (strncmp (s, ents[i].name, n) == 0) {
        *w++ = ents[i].c;
        s += n;
        break;
      }
    }
    if (i < ARRAY_SIZE (ents))
      continue;
    if (s[1] == '#') {
      char *end;
      unsigned long v = s[2] == 'x' ? strtoul (s + 3, &end, 16)
        : strtoul (s + 2, &end, 10);

      if (*end == ';' && v > 0 && v < 128) {
        *w++ = (char) v;
        s = end + 1;
        continue;
      }
    }
    *w++ = *s++;
  }
  *w = '\0';
}

char *
s3_xml_next (const char *body, const char *tag, const char **pos)
{
  char open[80], close[80];
  const char *from = pos && *pos ? *pos : body;
  const char *a, *b;
  char *ret;

  if (from == NULL)             /* an empty reply */
    return NULL;

  snprintf (open, sizeof open, "<%s>", tag);
  snprintf (close, sizeof close, "</%s>", tag);
  a = strstr (from, open);
  if (a == NULL)
    return NULL;
  a += strlen (open);
  b = strstr (a, close);
  if (b == NULL)
    return NULL;
  ret = strndup (a, b - a);
  if (ret == NULL)
    return NULL;
  xml_decode (ret);
  if (pos)
    *pos = b + strlen (close);
  return ret;
}
