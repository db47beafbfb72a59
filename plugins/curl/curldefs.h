/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's shared definitions: the parameters (curl.c fills
 * them during configuration, everything reads them afterwards), the
 * handle pool (pool.c), the header and cookie scripts (scripts.c) and
 * the event loop of the asynchronous requests (async.c).
 */
#ifndef NBDKIT_CURLDEFS_H
#define NBDKIT_CURLDEFS_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

/* Parameters, set by config and read-only once the server serves;
 * the strings are the plugin's own, freed by unload.
 */
struct curl_params {
  char *url;
  char *user, *password;
  char *proxy, *proxy_user, *proxy_password;
  char *cookie;                 /* cookie= */
  char *cookiefile, *cookiejar;
  struct curl_slist *headers;   /* header=, in order */
  char *header_script, *cookie_script;
  unsigned header_script_renew, cookie_script_renew; /* seconds, 0 never */
  char *cainfo, *capath;
  char *protocols;              /* comma-separated, checked */
  long protocol_bits;           /* the same, for libcurl < 7.85 */
  bool sslverify;
  long ssl_version;
  char *ssl_cipher_list, *tls13_ciphers;
  bool tcp_keepalive, tcp_nodelay;
  long timeout;                 /* seconds, 0: none (the stall guard) */
  char *unix_socket_path;
  char *user_agent;
  bool followlocation;
  unsigned connections;         /* size of the handle pool */
  long ipresolve;               /* ipresolve=: CURL_IPRESOLVE_* */
  struct curl_slist *resolve;   /* resolve=, in order */
};
extern struct curl_params params;

/* -D curl.verbose=1: libcurl's own trace; -D curl.scripts=1: what
 * the scripts printed.
 */
extern int curl_debug_verbose;
extern int curl_debug_scripts;
/* -D curl.times=1: the time spent in each stage of the transfers. */
extern int curl_debug_times;

/* One libcurl easy handle and what the transfer in progress on it
 * needs.  A handle belongs to one request at a time (pool.c).
 */
struct handle {
  CURL *c;
  unsigned index;               /* in the pool, from 0 */
  char errbuf[CURL_ERROR_SIZE];

  /* The header list this handle was given, when it is its own copy
   * (header-script), and the script generations it carries.
   */
  struct curl_slist *own_headers;
  uint64_t header_gen, cookie_gen;

  /* The transfer in progress: the request it serves (for the probes,
   * which may fire on the event loop's thread, where the server knows
   * no request), and what transfer_begin set up for transfer_end.
   */
  uint64_t conn_id, cookie;
  bool write;
  uint64_t offset;
  uint64_t t0;                  /* when it began, ns */
  struct curl_slist *extra;     /* write: the headers with Content-Range */
  char *rbuf;                   /* read: where the bytes go */
  const char *wbuf;             /* write: where they come from */
  size_t count, done;           /* bytes wanted, bytes moved */
  bool overrun;                 /* the server sent more than count */
  bool headers_only;            /* stop at the first byte of the body */
  bool accept_ranges;           /* "Accept-Ranges: bytes" in the reply */
  bool have_range;              /* "Content-Range: bytes A-B/..." came */
  uint64_t range_first, range_last; /* and said A and B */
};

/* curl.c: one transfer in two halves, so that either curl_easy_perform
 * (the synchronous path) or the event loop (async.c) may run it in
 * between.  The caller sets h->conn_id, h->cookie and h->rbuf or
 * h->wbuf first.  Both return 0 or -1 having reported the error.
 */
extern int transfer_begin (struct handle *h, bool write, uint64_t offset,
                           uint32_t count);
extern int transfer_end (struct handle *h, CURLcode r);
/* The whole transfer on the calling thread (errno EIO if it failed). */
extern int curl_sync_transfer (bool write, void *rbuf, const void *wbuf,
                               uint32_t count, uint64_t offset);

/* pool.c */
extern int pool_init (void);
extern void pool_free (void);
extern struct handle *pool_get (void);
extern struct handle *pool_try_get (void);
extern void pool_took (struct handle *h, uint64_t conn_id, uint64_t cookie,
                       uint64_t wait_ns);
extern void pool_put (struct handle *h);
extern struct handle *handle_new (void);
extern void handle_free (struct handle *h);
extern const char *handle_error (struct handle *h, CURLcode r);

/* scripts.c */
extern int scripts_refresh (struct handle *h);
extern int scripts_run_due (void);
extern int scripts_apply (struct handle *h);
extern void scripts_free (void);

/* times.c: add one finished transfer's timings (-D curl.times=1);
 * print the totals at unload.
 */
extern void times_add (CURL *c);
extern void times_report (void);

/* async.c */
extern void async_stop (void);
extern void async_handle_back (void);

#endif /* NBDKIT_CURLDEFS_H */
