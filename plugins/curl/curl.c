/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin: a disk image served by a web server (or any URL
 * libcurl can fetch), read with byte-range requests.
 *
 * config and config_complete fill "params" (curldefs.h).  get_ready,
 * before the server listens, asks the server for the size (a HEAD
 * request on HTTP) and checks that it serves byte ranges, so a wrong
 * URL, wrong credentials or a server without Range support stop the
 * server at start-up with one line.  Then each NBD read is one GET
 * with a Range header (each write one PUT with Content-Range, HTTP
 * only), on a handle taken from the pool (pool.c) for the time of the
 * transfer; the header and cookie scripts (scripts.c) are run from
 * there.  A transfer is set up by transfer_begin and checked by
 * transfer_end; in between, curl_easy_perform runs it on the server's
 * thread (the synchronous callbacks here), or the plugin's event loop
 * runs it with others (async.c, the asynchronous callbacks).  The
 * curl_range_start and curl_range_done probes fire around each
 * transfer (done: its HTTP status, bytes moved and latency).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "answers.h"
#include "curldefs.h"
#include "now-ns.h"
#include "params.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (curl_range_start);
NBDKIT_PROBE_SEMAPHORE (curl_range_done);
NBDKIT_PROBE_SEMAPHORE (curl_size);
NBDKIT_PROBE_SEMAPHORE (curl_bad_range);

#define DEFAULT_CONNECTIONS 4
#define MAX_CONNECTIONS 1024

struct curl_params params = {
  .sslverify = true,
  .ssl_version = CURL_SSLVERSION_DEFAULT,
  .tcp_nodelay = true,
  .followlocation = true,
  .connections = DEFAULT_CONNECTIONS,
  .ipresolve = CURL_IPRESOLVE_WHATEVER,
};

NBDKIT_DLL_PUBLIC int curl_debug_verbose = 0;
NBDKIT_DLL_PUBLIC int curl_debug_scripts = 0;

/* Found by get_ready, read-only afterwards. */
static int64_t size = -1;
static bool is_http;            /* http or https: ranges are checked */
static bool global_init;
/* --metrics' HTTP responses by status; NULL without --metrics. */
static struct nbdkit_metric *responses;

/* Count an HTTP reply with STATUS for connection CONN_ID (0: start-up,
 * outside any connection).  No reply, or not HTTP, is not counted.
 */
static void
count_response (uint64_t conn_id, long status)
{
  char s[24];
  if (responses == NULL || !is_http || status <= 0)
    return;                     /* without --metrics: nothing to format */
  snprintf (s, sizeof s, "%ld", status);
  nbdkit_metric_add_conn (responses, conn_id, s, 1);
}

static int
set_password (char **dst, const char *value)
{
  free (*dst);
  *dst = NULL;
  return nbdkit_read_password (value, dst);
}

static int
parse_ssl_version (const char *value, long *v)
{
  static const struct { const char *name; long v; } versions[] = {
    { "default", CURL_SSLVERSION_DEFAULT },
    { "tlsv1", CURL_SSLVERSION_TLSv1 },
    { "sslv2", CURL_SSLVERSION_SSLv2 },
    { "sslv3", CURL_SSLVERSION_SSLv3 },
    { "tlsv1.0", CURL_SSLVERSION_TLSv1_0 },
    { "tlsv1.1", CURL_SSLVERSION_TLSv1_1 },
    { "tlsv1.2", CURL_SSLVERSION_TLSv1_2 },
    { "tlsv1.3", CURL_SSLVERSION_TLSv1_3 },
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (versions); i++) {
    if (strcasecmp (value, versions[i].name) == 0) {
      *v = versions[i].v;
      return 0;
    }
  }
  nbdkit_error ("ssl-version: unknown version '%s' (try tlsv1.2 or tlsv1.3)",
                value);
  return -1;
}

#if LIBCURL_VERSION_NUM < 0x075500
/* Before CURLOPT_PROTOCOLS_STR, protocols are a bit mask. */
static long
protocol_bit (const char *name)
{
  static const struct { const char *name; long bit; } bits[] = {
    { "dict", CURLPROTO_DICT }, { "file", CURLPROTO_FILE },
    { "ftp", CURLPROTO_FTP }, { "ftps", CURLPROTO_FTPS },
    { "gopher", CURLPROTO_GOPHER }, { "http", CURLPROTO_HTTP },
    { "https", CURLPROTO_HTTPS }, { "imap", CURLPROTO_IMAP },
    { "imaps", CURLPROTO_IMAPS }, { "ldap", CURLPROTO_LDAP },
    { "ldaps", CURLPROTO_LDAPS }, { "pop3", CURLPROTO_POP3 },
    { "pop3s", CURLPROTO_POP3S }, { "rtsp", CURLPROTO_RTSP },
    { "scp", CURLPROTO_SCP }, { "sftp", CURLPROTO_SFTP },
    { "smb", CURLPROTO_SMB }, { "smbs", CURLPROTO_SMBS },
    { "smtp", CURLPROTO_SMTP }, { "smtps", CURLPROTO_SMTPS },
    { "telnet", CURLPROTO_TELNET }, { "tftp", CURLPROTO_TFTP },
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (bits); i++)
    if (strcasecmp (name, bits[i].name) == 0)
      return bits[i].bit;
  return 0;
}
#endif

/* protocols=a,b,c: each must be one this libcurl speaks. */
static int
check_protocols (const char *key, const char *value)
{
  const curl_version_info_data *info = curl_version_info (CURLVERSION_NOW);
  const char *p = value;

  if (*value == '\0') {
    nbdkit_error ("protocols: the list is empty");
    return -1;
  }
  while (*p) {
    size_t n = strcspn (p, ",");
    const char *const *q;
    bool found = false;

    for (q = info->protocols; *q; q++) {
      if (strlen (*q) == n && strncasecmp (*q, p, n) == 0) {
        found = true;
        break;
      }
    }
    if (n == 0 || !found) {
      nbdkit_error ("protocols: '%.*s' is not a protocol this libcurl "
                    "supports (see curl -V)", (int) n, p);
      return -1;
    }
#if LIBCURL_VERSION_NUM < 0x075500
    char name[32];
    snprintf (name, sizeof name, "%.*s", (int) n, p);
    params.protocol_bits |= protocol_bit (name);
#endif
    p += n;
    if (*p == ',')
      p++;
  }
  return 0;
}

/* libcurl 7.88 on GnuTLS (Debian's libcurl-gnutls) ignores
 * CURLOPT_SSL_CIPHER_LIST and lacks CURLOPT_TLS13_CIPHERS: refuse a
 * cipher choice that would not be enforced, rather than ignore it.
 */
static int
check_cipher_choice (const char *key, const char *value)
{
  const curl_version_info_data *info = curl_version_info (CURLVERSION_NOW);

  if (info->ssl_version && strncasecmp (info->ssl_version, "GnuTLS", 6) == 0) {
    nbdkit_error ("%s: this libcurl's TLS library (%s) cannot restrict "
                  "the ciphers", key, info->ssl_version);
    return -1;
  }
  return 0;
}

/* ipresolve=any|v4|v6: which address families a host name may give. */
static int
parse_ipresolve (const char *value, long *v)
{
  if (strcasecmp (value, "any") == 0)
    *v = CURL_IPRESOLVE_WHATEVER;
  else if (strcasecmp (value, "v4") == 0 || strcasecmp (value, "ipv4") == 0)
    *v = CURL_IPRESOLVE_V4;
  else if (strcasecmp (value, "v6") == 0 || strcasecmp (value, "ipv6") == 0)
    *v = CURL_IPRESOLVE_V6;
  else {
    nbdkit_error ("ipresolve: '%s' is not one of any, v4, v6", value);
    return -1;
  }
  return 0;
}

/* resolve=[+]HOST:PORT:ADDRESS[,ADDRESS...]: libcurl takes a malformed
 * entry only when the first transfer starts, and then fails every
 * transfer; check the shape here so the mistake stops the server at
 * start-up with the entry named.  The addresses themselves are
 * libcurl's to parse (IPv6 ones may be in brackets).
 */
static int
add_resolve (const char *value)
{
  const char *host = value[0] == '+' ? value + 1 : value;
  const char *colon1 = strchr (host, ':'), *colon2, *p;
  struct curl_slist *l;
  unsigned port = 0;

  colon2 = colon1 ? strchr (colon1 + 1, ':') : NULL;
  if (!colon1 || colon1 == host || !colon2 || colon2 == colon1 + 1 ||
      colon2[1] == '\0')
    goto bad;
  for (p = colon1 + 1; p < colon2; p++) {
    if (*p < '0' || *p > '9' || port > 65535)
      goto bad;
    port = port * 10 + (*p - '0');
  }
  if (port < 1 || port > 65535)
    goto bad;
  l = curl_slist_append (params.resolve, value);
  if (!l) {
    nbdkit_error ("curl_slist_append: %m");
    return -1;
  }
  params.resolve = l;
  return 0;

 bad:
  nbdkit_error ("resolve: '%s' is not HOST:PORT:ADDRESS[,ADDRESS...] "
                "(PORT 1 to 65535)", value);
  return -1;
}

static int
parse_renew (const char *key, const char *value, unsigned *dst)
{
  return nbdkit_parse_unsigned (key, value, dst);
}

/* The string parameters: the last one given wins (a password= or
 * cookie= is read as nbdkit_read_password reads it), CHECK (if any)
 * first refuses a value this libcurl could not honour, and unload
 * frees them all.
 */
static const struct {
  const char *key;
  char **dst;
  bool password;
  int (*check) (const char *key, const char *value);
} strings[] = {
  { .key = "url", .dst = &params.url },
  { .key = "user", .dst = &params.user },
  { .key = "password", .dst = &params.password, .password = true },
  { .key = "proxy", .dst = &params.proxy },
  { .key = "proxy-user", .dst = &params.proxy_user },
  { .key = "proxy-password", .dst = &params.proxy_password,
    .password = true },
  { .key = "cookie", .dst = &params.cookie, .password = true },
  { .key = "cookiefile", .dst = &params.cookiefile },
  { .key = "cookiejar", .dst = &params.cookiejar },
  { .key = "header-script", .dst = &params.header_script },
  { .key = "cookie-script", .dst = &params.cookie_script },
  { .key = "cainfo", .dst = &params.cainfo },
  { .key = "capath", .dst = &params.capath },
  { .key = "protocols", .dst = &params.protocols,
    .check = check_protocols },
  { .key = "ssl-cipher-list", .dst = &params.ssl_cipher_list,
    .check = check_cipher_choice },
  { .key = "tls13-ciphers", .dst = &params.tls13_ciphers,
    .check = check_cipher_choice },
  { .key = "unix-socket-path", .dst = &params.unix_socket_path },
  { .key = "user-agent", .dst = &params.user_agent },
};

/* The yes/no parameters. */
static const struct {
  const char *key;
  bool *dst;
} bools[] = {
  { .key = "sslverify", .dst = &params.sslverify },
  { .key = "tcp-keepalive", .dst = &params.tcp_keepalive },
  { .key = "tcp-nodelay", .dst = &params.tcp_nodelay },
  { .key = "followlocation", .dst = &params.followlocation },
};

static int
config_string (size_t i, const char *value)
{
  if (strings[i].check && strings[i].check (strings[i].key, value) == -1)
    return -1;
  if (strings[i].password)
    return set_password (strings[i].dst, value);
  return param_string (value, strings[i].dst);
}

static int
curl_config (const char *key, const char *value)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (strings); i++)
    if (strcmp (key, strings[i].key) == 0)
      return config_string (i, value);
  for (i = 0; i < ARRAY_SIZE (bools); i++)
    if (strcmp (key, bools[i].key) == 0)
      return param_bool (value, bools[i].dst);
  if (strcmp (key, "header") == 0) {
    struct curl_slist *l = curl_slist_append (params.headers, value);
    if (!l) {
      nbdkit_error ("curl_slist_append: %m");
      return -1;
    }
    params.headers = l;
  }
  else if (strcmp (key, "header-script-renew") == 0)
    return parse_renew (key, value, &params.header_script_renew);
  else if (strcmp (key, "cookie-script-renew") == 0)
    return parse_renew (key, value, &params.cookie_script_renew);
  else if (strcmp (key, "ssl-version") == 0)
    return parse_ssl_version (value, &params.ssl_version);
  else if (strcmp (key, "ipresolve") == 0)
    return parse_ipresolve (value, &params.ipresolve);
  else if (strcmp (key, "resolve") == 0)
    return add_resolve (value);
  else if (strcmp (key, "timeout") == 0) {
    int t;
    if (nbdkit_parse_int (key, value, &t) == -1)
      return -1;
    if (t < 0) {
      nbdkit_error ("timeout: must be 0 or more seconds");
      return -1;
    }
    params.timeout = t;
  }
  else if (strcmp (key, "connections") == 0) {
    if (nbdkit_parse_unsigned (key, value, &params.connections) == -1)
      return -1;
    if (params.connections < 1 || params.connections > MAX_CONNECTIONS) {
      nbdkit_error ("connections: must be between 1 and %d",
                    MAX_CONNECTIONS);
      return -1;
    }
  }
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

static void
curl_unload (void)
{
  size_t i;

  async_stop ();
  times_report ();
  pool_free ();
  scripts_free ();
  for (i = 0; i < ARRAY_SIZE (strings); i++) {
    free (*strings[i].dst);
    *strings[i].dst = NULL;
  }
  curl_slist_free_all (params.headers);
  curl_slist_free_all (params.resolve);
  if (global_init)
    curl_global_cleanup ();
}

static int
curl_config_complete (void)
{
  if (!params.url) {
    nbdkit_error ("the url parameter is required (url=URL)");
    return -1;
  }
  if (params.header_script && params.headers) {
    nbdkit_error ("header-script and header cannot be used together");
    return -1;
  }
  if (params.cookie_script && params.cookie) {
    nbdkit_error ("cookie-script and cookie cannot be used together");
    return -1;
  }
  return 0;
}

#define curl_config_help \
  "[url=]URL                 The disk image's URL (required).\n" \
  "connections=N             Transfers in flight at once (default 4).\n" \
  "ipresolve=any|v4|v6       Address family of host names (default any).\n" \
  "resolve=HOST:PORT:ADDR    Use ADDR for HOST:PORT, not DNS (repeatable).\n" \
  "header=, cookie=, user=, password=, proxy=, sslverify=, timeout=, ...\n" \
  "                          See nbdkit-curl-plugin(1)."

/* --dump-plugin: which libcurl, and what it can do. */
static void
curl_dump_plugin (void)
{
  const curl_version_info_data *info = curl_version_info (CURLVERSION_NOW);
  const char *const *p;

  printf ("curl_version=%s\n", info->version);
  printf ("curl_version_num=0x%x\n", info->version_num);
  printf ("curl_ssl_version=%s\n", info->ssl_version ? info->ssl_version : "");
  for (p = info->protocols; *p; p++)
    printf ("curl_protocol_%s=yes\n", *p);
}

/* One request for the size: body-less (HEAD on HTTP), or a GET given
 * up at the first byte of the body.  Returns curl's code (a GET given
 * up that way counts as CURLE_OK) and sets *STATUS.
 */
static CURLcode
size_request (struct handle *h, bool get, long *status)
{
  h->rbuf = NULL;
  h->accept_ranges = false;
  h->headers_only = get;
  curl_easy_setopt (h->c, CURLOPT_NOBODY, get ? 0L : 1L);
  CURLcode r = curl_easy_perform (h->c);
  times_add (h->c);
  curl_easy_setopt (h->c, CURLOPT_NOBODY, 0L);
  curl_easy_setopt (h->c, CURLOPT_HTTPGET, 1L);
  h->headers_only = false;
  *status = 0;
  curl_easy_getinfo (h->c, CURLINFO_RESPONSE_CODE, status);
  if (get && r == CURLE_WRITE_ERROR)
    r = CURLE_OK;
  return r;
}

/* Ask for the size with a body-less request (HEAD on HTTP); a web
 * server that refuses HEAD (405, 501) or answers it without a length
 * is asked again with a GET whose body is not read (as nbdkit 1.36).
 */
static int
fetch_size (void)
{
  struct handle *h;
  CURLcode r;
  long status = 0;
  curl_off_t len = -1;
  const char *scheme = NULL;
  uint64_t t0 = now_ns ();
  int ret = -1;

  h = pool_get ();
  if (!h)
    return -1;
  r = size_request (h, false, &status);
  if (r != CURLE_OK) {
    nbdkit_error ("%s: %s", params.url, handle_error (h, r));
    goto out;
  }
  curl_easy_getinfo (h->c, CURLINFO_SCHEME, &scheme);
  is_http = scheme && (strcasecmp (scheme, "http") == 0 ||
                       strcasecmp (scheme, "https") == 0);
  count_response (0, status);
  if (is_http) {
    curl_easy_getinfo (h->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    if (status == 405 || status == 501 ||
        (status >= 200 && status <= 299 && len < 0)) {
      nbdkit_debug ("curl: %s: HEAD answered %ld%s: asking with GET",
                    params.url, status, len < 0 ? " without a length" : "");
      r = size_request (h, true, &status);
      count_response (0, status);
      if (r != CURLE_OK) {
        nbdkit_error ("%s: %s", params.url, handle_error (h, r));
        goto out;
      }
    }
  }
  if (is_http && (status < 200 || status > 299)) {
    if (status == 401 || status == 407)
      nbdkit_error ("%s: HTTP status %ld: wrong or missing credentials",
                    params.url, status);
    else if (status >= 300 && status <= 399)
      nbdkit_error ("%s: HTTP status %ld: a redirect (followlocation=false?)",
                    params.url, status);
    else
      nbdkit_error ("%s: HTTP status %ld", params.url, status);
    goto out;
  }
  curl_easy_getinfo (h->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
  if (len < 0) {
    nbdkit_error ("%s: the server did not say how large the file is "
                  "(no Content-Length)", params.url);
    goto out;
  }
  if (is_http && !h->accept_ranges) {
    nbdkit_error ("%s: the server does not support byte range requests "
                  "(no \"Accept-Ranges: bytes\" in its reply)", params.url);
    goto out;
  }
  size = len;
  nbdkit_debug ("curl: %s: %" PRIi64 " bytes, %s", params.url, size,
                scheme ? scheme : "?");
  ret = 0;
 out:
  NBDKIT_PROBE (curl_size, params.url, status, (int64_t) len,
                now_ns () - t0);
  pool_put (h);
  return ret;
}

static int
curl_get_ready (void)
{
  CURLcode r = curl_global_init (CURL_GLOBAL_DEFAULT);
  if (r != CURLE_OK) {
    nbdkit_error ("curl_global_init: %s", curl_easy_strerror (r));
    return -1;
  }
  global_init = true;
  responses = nbdkit_metric_counter ("http_responses", "HTTP replies from "
                                     "the web server, by status.",
                                     "status");
  if (pool_init () == -1)
    return -1;
  return fetch_size ();
}

static int64_t
curl_get_size (void *handle)
{
  (void) handle;
  return size;
}

/* Writes are PUT requests with a Content-Range, which only HTTP has. */
static int
curl_can_write (void *handle)
{
  (void) handle;
  return is_http;
}

/* curl_slist_append, freeing the list if it fails. */
static struct curl_slist *
append (struct curl_slist *list, const char *line)
{
  struct curl_slist *l = curl_slist_append (list, line);
  if (!l) {
    nbdkit_error ("curl_slist_append: %m");
    curl_slist_free_all (list);
  }
  return l;
}

/* Set h up for the transfer of [offset, offset+count): after this,
 * curl_easy_perform or the event loop runs it, then transfer_end.
 */
int
transfer_begin (struct handle *h, bool write, uint64_t offset,
                uint32_t count)
{
  char range[64];
  struct curl_slist *base = h->own_headers ? h->own_headers : params.headers;

  snprintf (range, sizeof range, "%" PRIu64 "-%" PRIu64,
            offset, offset + count - 1);
  h->write = write;
  h->offset = offset;
  h->count = count;
  h->done = 0;
  h->overrun = false;
  h->extra = NULL;
  if (write) {
    /* The handle's headers plus "Content-Range: bytes A-B/SIZE" (what
     * libcurl would add from CURLOPT_RANGE gives a wrong total).
     */
    struct curl_slist *l;
    char cr[128];
    snprintf (cr, sizeof cr, "Content-Range: bytes %s/%" PRIi64, range, size);
    for (l = base; l; l = l->next) {
      if (!(h->extra = append (h->extra, l->data)))
        return -1;
    }
    if (!(h->extra = append (h->extra, cr)))
      return -1;
    curl_easy_setopt (h->c, CURLOPT_HTTPHEADER, h->extra);
    curl_easy_setopt (h->c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt (h->c, CURLOPT_INFILESIZE_LARGE, (curl_off_t) count);
  }
  else {
    curl_easy_setopt (h->c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt (h->c, CURLOPT_RANGE, range);
  }
  NBDKIT_PROBE (curl_range_start, h->conn_id, h->cookie,
                write ? "PUT" : "GET", offset, count);
  h->t0 = now_ns ();
  return 0;
}

/* The transfer set up by transfer_begin ended with R: put the handle's
 * options back and check what came.
 */
int
transfer_end (struct handle *h, CURLcode r)
{
  const bool write = h->write;
  const uint64_t offset = h->offset;
  const size_t count = h->count;
  long status = 0;

  if (write) {
    curl_easy_setopt (h->c, CURLOPT_UPLOAD, 0L);
    curl_easy_setopt (h->c, CURLOPT_HTTPHEADER,
                      h->own_headers ? h->own_headers : params.headers);
    curl_slist_free_all (h->extra);
    h->extra = NULL;
  }
  else
    curl_easy_setopt (h->c, CURLOPT_RANGE, NULL);
  curl_easy_getinfo (h->c, CURLINFO_RESPONSE_CODE, &status);
  times_add (h->c);
  count_response (h->conn_id, status);
  if (NBDKIT_PROBE_ENABLED (curl_range_done))
    NBDKIT_PROBE (curl_range_done, h->conn_id, h->cookie, status,
                  (uint64_t) h->done, now_ns () - h->t0, (int) r);

  if (h->overrun) {
    nbdkit_error ("%s: the server sent more than the %zu"
                  " bytes asked for at offset %" PRIu64
                  " (it ignored the Range header)", params.url, count, offset);
    return -1;
  }
  if (r != CURLE_OK) {
    nbdkit_error ("%s: %s at offset %" PRIu64 ": %s", params.url,
                  write ? "write" : "read", offset, handle_error (h, r));
    return -1;
  }
  if (is_http) {
    bool ok = write ? (status >= 200 && status <= 299)
      : (status == 206 || (status == 200 && offset == 0));
    if (!ok) {
      nbdkit_error ("%s: %s at offset %" PRIu64 ": HTTP status %ld",
                    params.url, write ? "write" : "read", offset, status);
      return -1;
    }
    /* A partial reply must carry exactly the bytes asked for: a server
     * that answers another range (or none it names) would have its
     * bytes put in the wrong place, and the client would never know.
     */
    if (!write && status == 206 &&
        (!h->have_range || h->range_first != offset ||
         h->range_last != offset + count - 1)) {
      if (NBDKIT_PROBE_ENABLED (curl_bad_range))
        NBDKIT_PROBE (curl_bad_range, h->conn_id, h->cookie, offset,
                      (uint64_t) count,
                      h->have_range ? (int64_t) h->range_first : -1,
                      h->have_range ? (int64_t) h->range_last : -1);
      if (h->have_range)
        nbdkit_error ("%s: read at offset %" PRIu64 ": asked for bytes %"
                      PRIu64 "-%" PRIu64 ", the server sent %" PRIu64 "-%"
                      PRIu64, params.url, offset, offset,
                      offset + count - 1, h->range_first, h->range_last);
      else
        nbdkit_error ("%s: read at offset %" PRIu64 ": a partial reply "
                      "without a Content-Range of bytes", params.url,
                      offset);
      return -1;
    }
  }
  if (h->done != count) {
    nbdkit_error ("%s: %s at offset %" PRIu64 ": %zu of %zu"
                  " bytes", params.url, write ? "short write" : "short read",
                  offset, h->done, count);
    return -1;
  }
  return 0;
}

/* One read or write on a handle from the pool, on this thread; a
 * failure is EIO.
 */
int
curl_sync_transfer (bool write, void *rbuf, const void *wbuf, uint32_t count,
                    uint64_t offset)
{
  struct handle *h;
  int r;

  if (count == 0)
    return 0;
  h = pool_get ();
  if (!h)
    return -1;
  h->conn_id = nbdkit_connection_id ();
  h->cookie = nbdkit_request_cookie ();
  h->rbuf = rbuf;
  h->wbuf = wbuf;
  r = transfer_begin (h, write, offset, count);
  if (r == 0)
    r = transfer_end (h, curl_easy_perform (h->c));
  h->rbuf = NULL;
  h->wbuf = NULL;
  pool_put (h);
  /* A request of the event loop's may be waiting for this handle. */
  async_handle_back ();
  if (r == -1)
    errno = EIO;
  return r;
}

static int
curl_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  return curl_sync_transfer (false, buf, NULL, count, offset);
}

static int
curl_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  return curl_sync_transfer (true, NULL, buf, count, offset);
}

static struct nbdkit_plugin plugin = {
  .name              = "curl",
  .longname          = "nbdkit curl plugin",
  .version           = PACKAGE_VERSION,
  .description       = "A disk image on a web server (HTTP, HTTPS, file)",
  .unload            = curl_unload,
  .config            = curl_config,
  .config_complete   = curl_config_complete,
  .config_help       = curl_config_help,
  .magic_config_key  = "url",
  .dump_plugin       = curl_dump_plugin,
  .get_ready         = curl_get_ready,
  .open              = answer_no_handle,
  .get_size          = curl_get_size,
  .can_write         = curl_can_write,
  /* Every connection reads the same remote file, with no cache here. */
  .can_multi_conn    = answer_yes,
  .pread             = curl_pread,
  .pwrite            = curl_pwrite,
};

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
NBDKIT_REGISTER_PLUGIN (plugin)
