/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the --metrics endpoint.  A listening socket bound at
 * start-up (before -u drops privileges), served by one thread of its
 * own, one scrape at a time: GET /metrics answers the page metrics.c
 * writes, anything else a 4xx, then the connection closes.  A scraper
 * gets REQUEST_TIMEOUT_MS for the whole exchange and MAX_REQUEST bytes
 * of request, so a hostile one delays the next scrape by at most that
 * and never reaches the NBD side, which does not wait for this thread.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "metrics.h"
#include "metrics-int.h"

#define MAX_REQUEST 8192
#define REQUEST_TIMEOUT_MS 3000

static const char om_type[] =
  "application/openmetrics-text; version=1.0.0; charset=utf-8";
static const char prom_type[] = "text/plain; version=0.0.4; charset=utf-8";

/* The endpoint's state: set up by metrics_bind/metrics_start in the
 * main thread, then the endpoint thread's alone until metrics_stop.
 */
static int listen_fd = -1;
static int stop_pipe[2] = { -1, -1 };
static char *unix_path;                 /* to remove at exit */
static pthread_t thread;
static bool started;

/* Bind SPEC: unix:PATH, or [ADDR]:PORT where ADDR is a literal IPv4
 * address, a bracketed IPv6 one, or nothing for 127.0.0.1.  Only
 * literal addresses: the endpoint is meant for loopback or a chosen
 * interface, and a name that resolved to a public address would
 * surprise.
 */
int
metrics_bind (const char *spec)
{
  if (strncmp (spec, "unix:", 5) == 0) {
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    const char *path = spec + 5;
    if (*path == '\0' || strlen (path) >= sizeof sun.sun_path) {
      nbdkit_error ("--metrics=%s: the socket path is empty or too long",
                    spec);
      return -1;
    }
    strcpy (sun.sun_path, path);
    listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd == -1 ||
        bind (listen_fd, (struct sockaddr *) &sun, sizeof sun) == -1) {
      nbdkit_error ("--metrics: %s: %m", path);
      return -1;
    }
    unix_path = strdup (path);
  }
  else {
    const char *colon = strrchr (spec, ':');
    char *end;
    errno = 0;
    unsigned long port = colon ? strtoul (colon + 1, &end, 10) : 0;
    if (!colon || colon[1] < '0' || colon[1] > '9' || *end || errno ||
        port == 0 || port > 65535) {
      nbdkit_error ("--metrics=%s: expected unix:PATH or [ADDR]:PORT "
                    "(PORT from 1 to 65535)", spec);
      return -1;
    }
    char host[64];
    size_t hlen = colon - spec;
    const char *h = spec;
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
      h++;
      hlen -= 2;
    }
    if (hlen >= sizeof host) {
      nbdkit_error ("--metrics=%s: the address is too long", spec);
      return -1;
    }
    memcpy (host, h, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {
      .ai_socktype = SOCK_STREAM,
      .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
    }, *ai;
    int r = getaddrinfo (hlen ? host : "127.0.0.1", colon + 1, &hints, &ai);
    if (r != 0) {
      nbdkit_error ("--metrics=%s: %s", spec, gai_strerror (r));
      return -1;
    }
    int one = 1;
    listen_fd = socket (ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd >= 0)
      setsockopt (listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    r = listen_fd == -1 ? -1 : bind (listen_fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo (ai);
    if (r == -1) {
      nbdkit_error ("--metrics=%s: %m", spec);
      return -1;
    }
  }
  if (listen (listen_fd, 16) == -1) {
    nbdkit_error ("--metrics: listen: %m");
    return -1;
  }
  metrics_enable ();
  return 0;
}

/* Wait for FD to be ready for EVENTS, until DEADLINE (now_ns). */
static bool
wait_fd (int fd, short events, uint64_t deadline)
{
  for (;;) {
    uint64_t now = now_ns ();
    if (now >= deadline)
      return false;
    struct pollfd p = { .fd = fd, .events = events };
    int r = poll (&p, 1, (int) ((deadline - now) / 1000000) + 1);
    if (r > 0)
      return true;
    if (r == -1 && errno != EINTR)
      return false;
  }
}

static void
send_all (int fd, const char *buf, size_t len, uint64_t deadline)
{
  while (len > 0) {
    ssize_t r = send (fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      buf += r;
      len -= r;
    }
    else if (r == -1 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd (fd, POLLOUT, deadline))
        return;
    }
    else
      return;
  }
}

static void
respond (int fd, const char *status, const char *type, const char *body,
         size_t len, bool head, uint64_t deadline)
{
  char hdr[256];
  int n = snprintf (hdr, sizeof hdr,
                    "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                    status, type, len);
  send_all (fd, hdr, n, deadline);
  if (!head)
    send_all (fd, body, len, deadline);
}

/* Whether the headers in REQ (NUL-terminated) ask for OpenMetrics, as
 * Prometheus does in its Accept header.  Any other scraper (curl, a
 * browser, promtool) gets the Prometheus text format.
 */
static bool
wants_openmetrics (const char *req)
{
  for (const char *line = strstr (req, "\n"); line; ) {
    line++;
    if (strncasecmp (line, "accept:", 7) == 0) {
      const char *end = strchr (line, '\n');
      const char *hit = strstr (line, "application/openmetrics-text");
      return hit && (!end || hit < end);
    }
    line = strchr (line, '\n');
  }
  return false;
}

/* One scrape on FD: read the request (up to MAX_REQUEST bytes, within
 * the deadline), answer it.  The caller closes FD.
 */
static void
serve_one (int fd)
{
  uint64_t deadline = now_ns () + REQUEST_TIMEOUT_MS * UINT64_C (1000000);
  char req[MAX_REQUEST + 1];
  size_t len = 0;

  for (;;) {
    if (!wait_fd (fd, POLLIN, deadline))
      return;                           /* too slow: just close */
    ssize_t r = recv (fd, req + len, MAX_REQUEST - len, MSG_DONTWAIT);
    if (r == -1 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (r <= 0)
      return;
    len += r;
    req[len] = '\0';
    if (strstr (req, "\r\n\r\n") || strstr (req, "\n\n"))
      break;
    if (len == MAX_REQUEST || memchr (req, '\0', len)) {
      static const char msg[] = "request too large or not text\n";
      respond (fd, "431 Request Header Fields Too Large", "text/plain",
               msg, sizeof msg - 1, false, deadline);
      return;
    }
  }

  /* The request line: METHOD SP TARGET SP HTTP/1.x */
  char method[8], target[256], version[16];
  static const char bad[] = "bad request\n";
  if (sscanf (req, "%7s %255s %15s", method, target, version) != 3 ||
      strncmp (version, "HTTP/1.", 7) != 0) {
    respond (fd, "400 Bad Request", "text/plain", bad, sizeof bad - 1,
             false, deadline);
    return;
  }
  bool head = strcmp (method, "HEAD") == 0;
  if (!head && strcmp (method, "GET") != 0) {
    static const char msg[] = "only GET\n";
    respond (fd, "405 Method Not Allowed", "text/plain", msg,
             sizeof msg - 1, false, deadline);
    return;
  }
  size_t plen = strcspn (target, "?");
  if (plen != 8 || strncmp (target, "/metrics", 8) != 0) {
    static const char msg[] = "not found: try /metrics\n";
    respond (fd, "404 Not Found", "text/plain", msg, sizeof msg - 1,
             head, deadline);
    return;
  }

  bool om = wants_openmetrics (req);
  size_t blen;
  char *body = metrics_text (om, &blen);
  if (!body) {
    static const char msg[] = "out of memory\n";
    respond (fd, "500 Internal Server Error", "text/plain", msg,
             sizeof msg - 1, head, deadline);
    return;
  }
  respond (fd, "200 OK", om ? om_type : prom_type, body, blen, head,
           deadline);
  free (body);
}

static void *
endpoint (void *arg)
{
  for (;;) {
    struct pollfd p[2] = {
      { .fd = listen_fd, .events = POLLIN },
      { .fd = stop_pipe[0], .events = POLLIN },
    };
    if (poll (p, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("--metrics: poll: %m");
      return NULL;
    }
    if (p[1].revents)
      return NULL;
    int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1)
      continue;                         /* EMFILE, ECONNABORTED: retry */
    serve_one (fd);
    /* Read what is left so close sends FIN rather than RST, which
     * could discard the reply before the client reads it.
     */
    shutdown (fd, SHUT_WR);
    char drain[4096];
    for (int i = 0; i < 64; i++)
      if (recv (fd, drain, sizeof drain, MSG_DONTWAIT) <= 0)
        break;
    close (fd);
  }
}

int
metrics_start (void)
{
  if (listen_fd == -1)
    return 0;
  if (pipe2 (stop_pipe, O_CLOEXEC) == -1) {
    nbdkit_error ("--metrics: pipe2: %m");
    return -1;
  }
  int err = pthread_create (&thread, NULL, endpoint, NULL);
  if (err) {
    errno = err;
    nbdkit_error ("--metrics: pthread_create: %m");
    return -1;
  }
  started = true;
  return 0;
}

void
metrics_stop (void)
{
  if (started) {
    char c = 0;
    if (write (stop_pipe[1], &c, 1) == -1)
      nbdkit_debug ("--metrics: write: %m");
    pthread_join (thread, NULL);
    started = false;
  }
  if (listen_fd >= 0)
    close (listen_fd);
  listen_fd = -1;
  if (unix_path)
    unlink (unix_path);
  free (unix_path);
  unix_path = NULL;
}
