/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's shared definitions: the parameters (curl.c fills
 * them during configuration, everything reads them afterwards), the
 * handle pool (pool.c) and the header and cookie scripts (scripts.c).
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
};
extern struct curl_params params;

/* -D curl.verbose=1: libcurl's own trace; -D curl.scripts=1: what
 * the scripts printed.
 */
extern int curl_debug_verbose;
extern int curl_debug_scripts;

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

  /* The transfer in progress. */
  char *rbuf;                   /* read: where the bytes go */
  const char *wbuf;             /* write: where they come from */
  size_t count, done;           /* bytes wanted, bytes moved */
  bool overrun;                 /* the server sent more than count */
  bool accept_ranges;           /* "Accept-Ranges: bytes" in the reply */
  bool have_range;              /* "Content-Range: bytes A-B/..." came */
  uint64_t range_first, range_last; /* and said A and B */
};

/* pool.c */
extern int pool_init (void);
extern void pool_free (void);
extern struct handle *pool_get (void);
extern void pool_put (struct handle *h);
extern struct handle *handle_new (void);
extern void handle_free (struct handle *h);
extern const char *handle_error (struct handle *h, CURLcode r);

/* scripts.c */
extern int scripts_refresh (struct handle *h);
extern void scripts_free (void);

#endif /* NBDKIT_CURLDEFS_H */
