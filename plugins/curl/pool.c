/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's pool of libcurl handles.
 *
 * A libcurl easy handle runs one transfer at a time, but keeps its
 * connection to the server open between transfers.  The pool holds up
 * to connections=N handles, shared by every NBD connection and
 * created when first needed: a request takes a free handle, or makes
 * a new one while there are fewer than N, or waits until another
 * request gives one back.  So N requests can be in flight to the
 * server at once and the (N+1)th waits; the curl_pool_wait probe says
 * for how long.  A synchronous request waits in pool_get; an
 * asynchronous one waits in the event loop's queue (async.c), which
 * takes handles with pool_try_get as they come back.
 *
 * handle_new sets every option that does not change from one request
 * to the next.  The handles share cookies, DNS answers and TLS
 * sessions through one CURLSH, so a cookie one handle received is sent
 * by the others and only the first handle pays a full TLS handshake.
 *
 * Lock order: pool_lock, then the share's locks (taken by libcurl).
 * pool_lock is taken with no other lock of the plugin's held.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "curldefs.h"
#include "now-ns.h"

NBDKIT_PROBE_SEMAPHORE (curl_pool_wait);

/* The stall guard: with timeout=0, a transfer that moves nothing for
 * this long fails, and connecting may take at most this long, so that
 * no request waits on a silent server for ever.
 */
#define STALL_SECONDS 60L

#define RECV_BUFFER_SIZE (512L * 1024)

/* pool_lock protects handles, nr_handles and in_use[]; pool_cond is
 * signalled when a handle is given back.
 */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct handle **handles;
static bool *in_use;
static unsigned nr_handles;

/* The share and its locks, one per kind of data libcurl shares. */
static CURLSH *share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

static void
share_lock (CURL *c, curl_lock_data data, curl_lock_access access,
            void *user)
{
  (void) c; (void) access; (void) user;
  pthread_mutex_lock (&share_locks[data]);
}

static void
share_unlock (CURL *c, curl_lock_data data, void *user)
{
  (void) c; (void) user;
  pthread_mutex_unlock (&share_locks[data]);
}

int
pool_init (void)
{
  unsigned i;

  handles = calloc (params.connections, sizeof *handles);
  in_use = calloc (params.connections, sizeof *in_use);
  if (!handles || !in_use) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
    pthread_mutex_init (&share_locks[i], NULL);
  share = curl_share_init ();
  if (!share) {
    nbdkit_error ("curl_share_init failed");
    return -1;
  }
  curl_share_setopt (share, CURLSHOPT_LOCKFUNC, share_lock);
  curl_share_setopt (share, CURLSHOPT_UNLOCKFUNC, share_unlock);
  curl_share_setopt (share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
  curl_share_setopt (share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt (share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return 0;
}

/* At unload: every request has ended, so no handle is in use.  The
 * cookie jar (cookiejar=) is written when the handles go.
 */
void
pool_free (void)
{
  unsigned i;

  for (i = 0; i < nr_handles; i++)
    handle_free (handles[i]);
  free (handles);
  free (in_use);
  handles = NULL;
  in_use = NULL;
  nr_handles = 0;
  if (share) {
    curl_share_cleanup (share);
    share = NULL;
  }
}

/* -D curl.verbose=1: libcurl's trace lines go to the server's debug
 * log, not to stderr.  Payload bytes are left out.
 */
static int
debug_cb (CURL *c, curl_infotype type, char *data, size_t size, void *user)
{
  const char *what;
  (void) c; (void) user;

  switch (type) {
  case CURLINFO_TEXT: what = "*"; break;
  case CURLINFO_HEADER_IN: what = "<"; break;
  case CURLINFO_HEADER_OUT: what = ">"; break;
  default: return 0;
  }
  /* A header block holds several lines: one debug message each. */
  while (size > 0) {
    const char *nl = memchr (data, '\n', size);
    size_t len = nl ? (size_t) (nl - data) : size;
    size_t next = nl ? len + 1 : len;
    if (len > 0 && data[len - 1] == '\r')
      len--;
    if (len > 0)
      nbdkit_debug ("curl %s %.*s", what, (int) len, data);
    data += next;
    size -= next;
  }
  return 0;
}

/* The bytes of a read's reply land in the request's buffer; more than
 * were asked for (a server that ignored Range) stops the transfer.
 */
static size_t
write_cb (char *ptr, size_t size, size_t nmemb, void *opaque)
{
  struct handle *h = opaque;
  size_t n = size * nmemb;

  if (h->headers_only)          /* the size's GET: the headers were it */
    return CURL_WRITEFUNC_ERROR;
  if (!h->rbuf)                 /* a HEAD, or an error page */
    return n;
  if (n > h->count - h->done) {
    h->overrun = true;
    return CURL_WRITEFUNC_ERROR;
  }
  memcpy (h->rbuf + h->done, ptr, n);
  h->done += n;
  return n;
}

/* The bytes of a write's request body come from the request. */
static size_t
read_cb (char *ptr, size_t size, size_t nmemb, void *opaque)
{
  struct handle *h = opaque;
  size_t n = size * nmemb;

  if (!h->wbuf)
    return 0;
  if (n > h->count - h->done)
    n = h->count - h->done;
  memcpy (ptr, h->wbuf + h->done, n);
  h->done += n;
  return n;
}

/* If the header line PTR (N bytes, not terminated) is NAME (with its
 * colon, any case), the offset of its value after blanks, else 0.
 */
static size_t
header_value (const char *ptr, size_t n, const char *name)
{
  size_t len = strlen (name), i;
  if (n <= len || strncasecmp (ptr, name, len) != 0)
    return 0;
  for (i = len; i < n && (ptr[i] == ' ' || ptr[i] == '\t'); i++)
    ;
  return i;
}

/* "bytes A-B/..." (the value of a Content-Range header, N bytes from
 * P): A and B into *FIRST and *LAST.  False if it is not that.
 */
static bool
parse_content_range (const char *p, size_t n, uint64_t *first,
                     uint64_t *last)
{
  char buf[96], *end;
  if (n >= sizeof buf)
    return false;
  memcpy (buf, p, n);
  buf[n] = '\0';
  if (strncasecmp (buf, "bytes ", 6) != 0)
    return false;
  p = buf + 6;
  if (*p < '0' || *p > '9')
    return false;
  errno = 0;
  *first = strtoull (p, &end, 10);
  if (errno || *end != '-' || end[1] < '0' || end[1] > '9')
    return false;
  *last = strtoull (end + 1, &end, 10);
  return errno == 0 && *end == '/' && *last >= *first;
}

/* Each reply header: remember whether the (last) reply offers byte
 * ranges, and which range it says it carries.  A new status line
 * starts a new reply (after a redirect).
 */
static size_t
header_cb (char *ptr, size_t size, size_t nmemb, void *opaque)
{
  struct handle *h = opaque;
  size_t n = size * nmemb, i;

  /* The value ends before the line's CR LF. */
  size_t len = n;
  while (len > 0 && (ptr[len - 1] == '\r' || ptr[len - 1] == '\n'))
    len--;
  if (n >= 5 && strncmp (ptr, "HTTP/", 5) == 0)
    h->accept_ranges = h->have_range = false;
  else if ((i = header_value (ptr, len, "accept-ranges:")) != 0) {
    if (len - i >= 5 && strncasecmp (&ptr[i], "bytes", 5) == 0)
      h->accept_ranges = true;
  }
  else if ((i = header_value (ptr, len, "content-range:")) != 0)
    h->have_range = parse_content_range (&ptr[i], len - i, &h->range_first,
                                         &h->range_last);
  return n;
}

#define SET(opt, val)                                                   \
  do {                                                                  \
    CURLcode r_ = curl_easy_setopt (h->c, (opt), (val));                \
    if (r_ != CURLE_OK) {                                               \
      nbdkit_error ("curl_easy_setopt: %s: %s", #opt,                   \
                    curl_easy_strerror (r_));                           \
      goto err;                                                         \
    }                                                                   \
  } while (0)

/* A new handle with every fixed option set. */
struct handle *
handle_new (void)
{
  struct handle *h = calloc (1, sizeof *h);

  if (!h) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->c = curl_easy_init ();
  if (!h->c) {
    nbdkit_error ("curl_easy_init failed");
    free (h);
    return NULL;
  }

  if (curl_debug_verbose) {
    SET (CURLOPT_VERBOSE, 1L);
    SET (CURLOPT_DEBUGFUNCTION, debug_cb);
  }
  SET (CURLOPT_ERRORBUFFER, h->errbuf);
  SET (CURLOPT_NOSIGNAL, 1L);   /* threads: no SIGALRM for DNS */
  SET (CURLOPT_URL, params.url);
  SET (CURLOPT_FAILONERROR, 0L);  /* the status is checked by hand */
  SET (CURLOPT_WRITEFUNCTION, write_cb);
  SET (CURLOPT_WRITEDATA, h);
  SET (CURLOPT_READFUNCTION, read_cb);
  SET (CURLOPT_READDATA, h);
  /* A larger receive buffer than libcurl's 16 KiB: fewer reads and
   * callbacks for the large ranges a block device asks for.
   */
  SET (CURLOPT_BUFFERSIZE, RECV_BUFFER_SIZE);
  SET (CURLOPT_HEADERFUNCTION, header_cb);
  SET (CURLOPT_HEADERDATA, h);
  if (share)
    SET (CURLOPT_SHARE, share);

  if (params.user)
    SET (CURLOPT_USERNAME, params.user);
  if (params.password)
    SET (CURLOPT_PASSWORD, params.password);
  if (params.proxy)
    SET (CURLOPT_PROXY, params.proxy);
  if (params.proxy_user)
    SET (CURLOPT_PROXYUSERNAME, params.proxy_user);
  if (params.proxy_password)
    SET (CURLOPT_PROXYPASSWORD, params.proxy_password);
  if (params.cookie)
    SET (CURLOPT_COOKIE, params.cookie);
  if (params.cookiefile)
    SET (CURLOPT_COOKIEFILE, params.cookiefile);
  if (params.cookiejar)
    SET (CURLOPT_COOKIEJAR, params.cookiejar);
  if (params.headers)
    SET (CURLOPT_HTTPHEADER, params.headers);
  if (params.cainfo) {
    if (params.cainfo[0] == '\0')
      SET (CURLOPT_CAINFO, (char *) NULL);  /* no default store */
    else
      SET (CURLOPT_CAINFO, params.cainfo);
  }
  if (params.capath)
    SET (CURLOPT_CAPATH, params.capath);
  if (params.protocols) {
#if LIBCURL_VERSION_NUM >= 0x075500     /* 7.85.0 */
    SET (CURLOPT_PROTOCOLS_STR, params.protocols);
    SET (CURLOPT_REDIR_PROTOCOLS_STR, params.protocols);
#else
    SET (CURLOPT_PROTOCOLS, params.protocol_bits);
    SET (CURLOPT_REDIR_PROTOCOLS, params.protocol_bits);
#endif
  }
  if (!params.sslverify) {
    SET (CURLOPT_SSL_VERIFYPEER, 0L);
    SET (CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (params.ssl_version != CURL_SSLVERSION_DEFAULT)
    SET (CURLOPT_SSLVERSION, params.ssl_version);
  if (params.ssl_cipher_list)
    SET (CURLOPT_SSL_CIPHER_LIST, params.ssl_cipher_list);
  if (params.tls13_ciphers)
    SET (CURLOPT_TLS13_CIPHERS, params.tls13_ciphers);
  SET (CURLOPT_TCP_KEEPALIVE, params.tcp_keepalive ? 1L : 0L);
  SET (CURLOPT_TCP_NODELAY, params.tcp_nodelay ? 1L : 0L);
  if (params.timeout > 0) {
    SET (CURLOPT_TIMEOUT, params.timeout);
    SET (CURLOPT_CONNECTTIMEOUT, params.timeout);
  }
  else {
    SET (CURLOPT_CONNECTTIMEOUT, STALL_SECONDS);
    SET (CURLOPT_LOW_SPEED_LIMIT, 1L);
    SET (CURLOPT_LOW_SPEED_TIME, STALL_SECONDS);
  }
  if (params.ipresolve != CURL_IPRESOLVE_WHATEVER)
    SET (CURLOPT_IPRESOLVE, params.ipresolve);
  if (params.resolve)
    SET (CURLOPT_RESOLVE, params.resolve);
  if (params.unix_socket_path)
    SET (CURLOPT_UNIX_SOCKET_PATH, params.unix_socket_path);
  if (params.user_agent)
    SET (CURLOPT_USERAGENT, params.user_agent);
  SET (CURLOPT_FOLLOWLOCATION, params.followlocation ? 1L : 0L);
  SET (CURLOPT_MAXREDIRS, 20L);
  SET (CURLOPT_AUTOREFERER, 1L);
  return h;

 err:
  handle_free (h);
  return NULL;
}

void
handle_free (struct handle *h)
{
  if (!h)
    return;
  curl_easy_cleanup (h->c);
  curl_slist_free_all (h->own_headers);
  free (h);
}

/* libcurl's message for a failed transfer: the error buffer says more
 * than curl_easy_strerror where it was filled.
 */
const char *
handle_error (struct handle *h, CURLcode r)
{
  return h->errbuf[0] ? h->errbuf : curl_easy_strerror (r);
}

/* With pool_lock held: a free handle, or a new one while the pool is
 * not full, marked in use.  NULL with errno EAGAIN if every handle is
 * busy, ENOMEM if a new one could not be made.
 */
static struct handle *
take_locked (void)
{
  struct handle *h;
  unsigned i;

  for (i = 0; i < nr_handles; i++) {
    if (!in_use[i]) {
      in_use[i] = true;
      return handles[i];
    }
  }
  if (nr_handles == params.connections) {
    errno = EAGAIN;
    return NULL;
  }
  h = handle_new ();
  if (!h) {
    errno = ENOMEM;
    return NULL;
  }
  h->index = nr_handles;
  handles[nr_handles++] = h;
  in_use[h->index] = true;
  return h;
}

/* A request took H after waiting WAIT_NS: say so to a tracer, and
 * clear what the last transfer left in its error buffer.
 */
void
pool_took (struct handle *h, uint64_t conn_id, uint64_t cookie,
           uint64_t wait_ns)
{
  if (NBDKIT_PROBE_ENABLED (curl_pool_wait))
    NBDKIT_PROBE (curl_pool_wait, conn_id, cookie, wait_ns,
                  (unsigned) h->index);
  h->errbuf[0] = '\0';
}

/* Take a handle for one request: a free one, a new one while the pool
 * is not full, or the first one given back.  Every request that holds
 * one ends within the transfer's timeout (or the stall guard), so the
 * wait is bounded.  The scripts' headers and cookies are brought up to
 * date on the handle before it is returned.
 */
struct handle *
pool_get (void)
{
  uint64_t t0 = now_ns ();
  struct handle *h;

  pthread_mutex_lock (&pool_lock);
  while ((h = take_locked ()) == NULL && errno == EAGAIN)
    pthread_cond_wait (&pool_cond, &pool_lock);
  pthread_mutex_unlock (&pool_lock);
  if (!h)
    return NULL;

  pool_took (h, nbdkit_connection_id (), nbdkit_request_cookie (),
             now_ns () - t0);
  if (scripts_refresh (h) == -1) {
    pool_put (h);
    errno = EIO;
    return NULL;
  }
  return h;
}

/* The event loop's way (async.c): never waits.  NULL with errno EAGAIN
 * while every handle is busy.  The caller brings the scripts' output
 * to the handle (scripts_apply) and calls pool_took.
 */
struct handle *
pool_try_get (void)
{
  struct handle *h;
  int e;

  pthread_mutex_lock (&pool_lock);
  h = take_locked ();
  e = errno;
  pthread_mutex_unlock (&pool_lock);
  errno = e;
  return h;
}

void
pool_put (struct handle *h)
{
  pthread_mutex_lock (&pool_lock);
  in_use[h->index] = false;
  pthread_cond_signal (&pool_cond);
  pthread_mutex_unlock (&pool_lock);
}
