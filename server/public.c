/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the helper functions exported to plugins and filters
 * (everything named nbdkit_* that is not about messages, extents or
 * export lists).  They read the calling thread's connection through
 * conn_current().
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "internal.h"

/* The errno a plugin asked for with nbdkit_set_error, per thread. */
static __thread int saved_error;

void
nbdkit_set_error (int err)
{
  saved_error = err;
}

int
public_take_error (void)
{
  int e = saved_error;
  saved_error = 0;
  return e;
}

/* ---- parsing ---- */

/* The parameter being configured in this thread (layer_config sets
 * it), so that a parse error names it: "size: could not parse size
 * string (foo)" rather than leaving the user to guess which of several
 * parameters was meant.
 */
static __thread const char *config_key, *config_value;

void
public_set_config_param (const char *key, const char *value,
                         const char **old_key, const char **old_value)
{
  *old_key = config_key;
  *old_value = config_value;
  config_key = key;
  config_value = value;
}

/* "KEY: " when STR is the value of the parameter being configured. */
static const char *
param_of (const char *str)
{
  static __thread char buf[128];
  if (!config_key || !config_value || !str || strcmp (str, config_value))
    return "";
  snprintf (buf, sizeof buf, "%s: ", config_key);
  return buf;
}

int64_t
nbdkit_parse_size (const char *str)
{
  const char *p = str;
  char *end;
  unsigned long long n;
  int shift = 0;

  while (isspace ((unsigned char) *p))
    p++;
  if (!isdigit ((unsigned char) *p)) {
    nbdkit_error ("%scould not parse size string (%s)", param_of (str), str);
    return -1;
  }
  errno = 0;
  n = strtoull (p, &end, 10);
  if (errno == ERANGE || n > INT64_MAX) {
    nbdkit_error ("%ssize %s is too large", param_of (str), str);
    return -1;
  }

  /* Suffixes: b/B bytes, s/S 512-byte sectors, then powers of 1024
   * spelt K, KB, KiB (any case for the letter).
   */
  switch (*end) {
  case '\0': break;
  case 'b': case 'B': end++; break;
  case 's': case 'S': shift = 9; end++; break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  case 'p': case 'P': shift = 50; end++; break;
  case 'e': case 'E': shift = 60; end++; break;
  default:
    nbdkit_error ("%scould not parse size string (%s)", param_of (str), str);
    return -1;
  }
  if (shift >= 10 && (strcmp (end, "B") == 0 || strcmp (end, "iB") == 0))
    end += strlen (end);
  if (*end != '\0') {
    nbdkit_error ("%scould not parse size string (%s)", param_of (str), str);
    return -1;
  }
  if (shift && n > ((uint64_t) INT64_MAX >> shift)) {
    nbdkit_error ("%ssize %s is too large", param_of (str), str);
    return -1;
  }
  return (int64_t) (n << shift);
}

int
nbdkit_parse_bool (const char *str)
{
  if (!strcmp (str, "1") || !strcasecmp (str, "true") ||
      !strcasecmp (str, "t") || !strcasecmp (str, "yes") ||
      !strcasecmp (str, "y") || !strcasecmp (str, "on"))
    return 1;
  if (!strcmp (str, "0") || !strcasecmp (str, "false") ||
      !strcasecmp (str, "f") || !strcasecmp (str, "no") ||
      !strcasecmp (str, "n") || !strcasecmp (str, "off"))
    return 0;
  nbdkit_error ("%scould not decipher boolean (%s)", param_of (str), str);
  return -1;
}

/* Parse a signed integer in [min, max]. */
static int
parse_signed (const char *what, const char *str, intmax_t min, intmax_t max,
              intmax_t *r)
{
  char *end;
  errno = 0;
  intmax_t v = strtoimax (str, &end, 0);
  if (str[0] == '\0' || isspace ((unsigned char) str[0]) || *end != '\0') {
    nbdkit_error ("%s: could not parse number: \"%s\"", what, str);
    return -1;
  }
  if (errno == ERANGE || v < min || v > max) {
    nbdkit_error ("%s: number out of range: \"%s\"", what, str);
    return -1;
  }
  *r = v;
  return 0;
}

/* Parse an unsigned integer in [0, max]; a leading '-' is refused
 * rather than wrapped as strtoumax would.
 */
static int
parse_unsigned (const char *what, const char *str, uintmax_t max,
                uintmax_t *r)
{
  char *end;
  const char *p = str;
  while (isspace ((unsigned char) *p))
    p++;
  if (*p == '-' || *p == '\0' || p != str) {
    nbdkit_error ("%s: could not parse number: \"%s\"", what, str);
    return -1;
  }
  errno = 0;
  uintmax_t v = strtoumax (str, &end, 0);
  if (*end != '\0') {
    nbdkit_error ("%s: could not parse number: \"%s\"", what, str);
    return -1;
  }
  if (errno == ERANGE || v > max) {
    nbdkit_error ("%s: number out of range: \"%s\"", what, str);
    return -1;
  }
  *r = v;
  return 0;
}

#define DEFINE_PARSE_SIGNED(name, type, min, max)                       \
  int                                                                   \
  name (const char *what, const char *str, type *rp)                    \
  {                                                                     \
    intmax_t v;                                                         \
    if (parse_signed (what, str, (min), (max), &v) == -1)               \
      return -1;                                                        \
    if (rp)                                                             \
      *rp = (type) v;                                                   \
    return 0;                                                           \
  }
#define DEFINE_PARSE_UNSIGNED(name, type, max)                          \
  int                                                                   \
  name (const char *what, const char *str, type *rp)                    \
  {                                                                     \
    uintmax_t v;                                                        \
    if (parse_unsigned (what, str, (max), &v) == -1)                    \
      return -1;                                                        \
    if (rp)                                                             \
      *rp = (type) v;                                                   \
    return 0;                                                           \
  }

DEFINE_PARSE_SIGNED (nbdkit_parse_int, int, INT_MIN, INT_MAX)
DEFINE_PARSE_SIGNED (nbdkit_parse_int8_t, int8_t, INT8_MIN, INT8_MAX)
DEFINE_PARSE_SIGNED (nbdkit_parse_int16_t, int16_t, INT16_MIN, INT16_MAX)
DEFINE_PARSE_SIGNED (nbdkit_parse_int32_t, int32_t, INT32_MIN, INT32_MAX)
DEFINE_PARSE_SIGNED (nbdkit_parse_int64_t, int64_t, INT64_MIN, INT64_MAX)
DEFINE_PARSE_UNSIGNED (nbdkit_parse_unsigned, unsigned, UINT_MAX)
DEFINE_PARSE_UNSIGNED (nbdkit_parse_uint8_t, uint8_t, UINT8_MAX)
DEFINE_PARSE_UNSIGNED (nbdkit_parse_uint16_t, uint16_t, UINT16_MAX)
DEFINE_PARSE_UNSIGNED (nbdkit_parse_uint32_t, uint32_t, UINT32_MAX)
DEFINE_PARSE_UNSIGNED (nbdkit_parse_uint64_t, uint64_t, UINT64_MAX)

/* A probability: "0.1", "1e-1", "10%", "1:10" or "1/10" (one in ten).
 * Finite and not negative; more than 1 is allowed ("200%"), the caller
 * clamps if it must.
 */
int
nbdkit_parse_probability (const char *what, const char *str, double *ret)
{
  char *end;
  errno = 0;
  double v = strtod (str, &end);
  if (end == str || isspace ((unsigned char) str[0]))
    goto bad;
  if (*end == '%') {
    v /= 100;
    end++;
  }
  else if (*end == ':' || *end == '/') {
    const char *q = end + 1;
    if (*q == '\0' || isspace ((unsigned char) *q))
      goto bad;
    double d = strtod (q, &end);
    if (end == q)
      goto bad;
    if (!(d > 0)) {
      nbdkit_error ("%s: probability has a divisor that is not above "
                    "zero: \"%s\"", what, str);
      return -1;
    }
    v /= d;
  }
  if (*end != '\0')
    goto bad;
  if (errno == ERANGE || !isfinite (v) || v < 0 || signbit (v)) {
    nbdkit_error ("%s: probability out of range (it must be a finite "
                  "number not below zero): \"%s\"", what, str);
    return -1;
  }
  if (ret)
    *ret = v;
  return 0;
 bad:
  nbdkit_error ("%s: could not parse probability: \"%s\"", what, str);
  return -1;
}

/* A delay: a decimal number of seconds, or of the unit that follows it
 * (s, ms, us or μs, ns).  Worked out in integer nanoseconds, digit by
 * digit, so that "0.1" is exactly 100000000 ns; digits finer than a
 * nanosecond are dropped.  At most UINT_MAX seconds.
 */
int
nbdkit_parse_delay (const char *what, const char *str, unsigned *sec,
                    unsigned *nsec)
{
  static const struct { const char *suffix; uint64_t ns; } units[] = {
    { "", 1000000000 }, { "s", 1000000000 }, { "ms", 1000000 },
    { "us", 1000 }, { "\xce\xbcs", 1000 }, { "ns", 1 },
  };
  const char *p = str;
  const char *int_start = p, *frac_start = NULL;
  while (*p >= '0' && *p <= '9')
    p++;
  const char *int_end = p;
  if (*p == '.') {
    frac_start = ++p;
    while (*p >= '0' && *p <= '9')
      p++;
  }
  if (int_end == int_start && (!frac_start || p == frac_start))
    goto bad;                   /* no digit at all */
  uint64_t unit = 0;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcmp (p, units[i].suffix) == 0)
      unit = units[i].ns;
  if (unit == 0)
    goto bad;

  const uint64_t max_ns = (uint64_t) UINT_MAX * 1000000000 + 999999999;
  uint64_t ns = 0;
  for (const char *d = int_start; d < int_end; d++)
    if (__builtin_mul_overflow (ns, 10, &ns) ||
        __builtin_add_overflow (ns, (uint64_t) (*d - '0'), &ns) ||
        ns > max_ns)
      goto range;
  if (__builtin_mul_overflow (ns, unit, &ns) || ns > max_ns)
    goto range;
  if (frac_start) {
    uint64_t place = unit;
    for (const char *d = frac_start; *d >= '0' && *d <= '9'; d++) {
      place /= 10;
      if (place == 0)
        break;
      ns += (uint64_t) (*d - '0') * place;
    }
    if (ns > max_ns)
      goto range;
  }
  if (sec)
    *sec = ns / 1000000000;
  if (nsec)
    *nsec = ns % 1000000000;
  return 0;
 bad:
  nbdkit_error ("%s: could not parse delay (a number, then s, ms, us or "
                "ns): \"%s\"", what, str);
  return -1;
 range:
  nbdkit_error ("%s: delay out of range: \"%s\"", what, str);
  return -1;
}

/* ---- paths and passwords ---- */

char *
nbdkit_absolute_path (const char *path)
{
  char *ret;

  if (path == NULL || *path == '\0') {
    nbdkit_error ("cannot convert null or empty path to an absolute path");
    return NULL;
  }
  if (*path == '/') {
    ret = strdup (path);
    if (!ret)
      nbdkit_error ("strdup: %m");
    return ret;
  }
  char *cwd = getcwd (NULL, 0);
  if (!cwd) {
    nbdkit_error ("getcwd: %m");
    return NULL;
  }
  if (asprintf (&ret, "%s/%s", cwd, path) == -1) {
    nbdkit_error ("asprintf: %m");
    ret = NULL;
  }
  free (cwd);
  return ret;
}

char *
nbdkit_realpath (const char *path)
{
  if (path == NULL || *path == '\0') {
    nbdkit_error ("cannot resolve a null or empty path");
    return NULL;
  }
  char *ret = realpath (path, NULL);
  if (!ret && errno == EACCES)
    /* realpath needs to search every directory on the way. */
    nbdkit_error ("realpath: %s: %m (a directory on the path is not "
                  "searchable by uid %ld)", path, (long) geteuid ());
  else if (!ret)
    nbdkit_error ("realpath: %s: %m", path);
  return ret;
}

int
nbdkit_stdio_safe (void)
{
  /* With -s, stdin and stdout carry the protocol. */
  const struct config *cfg = server_config ();
  return !(cfg && cfg->single);
}

/* Read a whole small file (used for password=+FILE and -FD). */
static int
read_password_fd (int fd, char **password)
{
  char buf[4096];
  size_t len = 0;
  ssize_t r;

  while (len < sizeof buf - 1 &&
         (r = read (fd, buf + len, sizeof buf - 1 - len)) != 0) {
    if (r == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("reading password: %m");
      return -1;
    }
    len += r;
  }
  buf[len] = '\0';
  if (len > 0 && buf[len - 1] == '\n')
    buf[--len] = '\0';
  *password = strdup (buf);
  if (!*password) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

int
nbdkit_read_password (const char *value, char **password)
{
  *password = NULL;

  if (strcmp (value, "-") == 0) {
    /* Prompt on the terminal without echo. */
    struct termios old, noecho;
    bool tty = isatty (STDIN_FILENO) &&
      tcgetattr (STDIN_FILENO, &old) == 0;
    if (tty) {
      noecho = old;
      noecho.c_lflag &= ~ECHO;
      tcsetattr (STDIN_FILENO, TCSAFLUSH, &noecho);
      fprintf (stderr, "password: ");
    }
    char *line = NULL;
    size_t n = 0;
    ssize_t r = getline (&line, &n, stdin);
    if (tty) {
      tcsetattr (STDIN_FILENO, TCSAFLUSH, &old);
      fprintf (stderr, "\n");
    }
    if (r == -1) {
      nbdkit_error ("%scould not read password from stdin",
                    param_of (value));
      free (line);
      return -1;
    }
    if (r > 0 && line[r - 1] == '\n')
      line[r - 1] = '\0';
    *password = line;
    return 0;
  }
  if (value[0] == '-' && value[1] != '\0') {
    int fd;
    if (nbdkit_parse_int ("password file descriptor", &value[1], &fd) == -1)
      return -1;
    if (fd <= 2) {
      nbdkit_error ("%s-FD: cannot use stdin, stdout or stderr",
                    param_of (value));
      return -1;
    }
    int r = read_password_fd (fd, password);
    close (fd);
    return r;
  }
  if (value[0] == '+') {
    int fd = open (&value[1], O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
      nbdkit_error ("%sopen: %s: %m", param_of (value), &value[1]);
      return -1;
    }
    int r = read_password_fd (fd, password);
    close (fd);
    return r;
  }
  *password = strdup (value);
  if (!*password) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

/* Sleeps, but gives up (-1, ESHUTDOWN) as soon as there is no point
 * in going on: a stopping server's time for requests in flight is up,
 * the current connection has been cut off, or its client has gone
 * (closed its end of the socket), as in nbdkit, whose clients rely on
 * a request left sleeping by a client that went away not holding up
 * the next one under a serialising thread model.  A client that sent
 * NBD_CMD_DISC is still waited for while it waits for the server to
 * close, so the delay filter's delay-close applies to it alone; so is
 * one whose server has begun to stop, until the drain is over
 * (conn_shutdown_all).  The end of the drain and the client hanging up
 * wake the sleep at once; a connection cut off for another reason is
 * noticed within 100 ms.
 */
int
nbdkit_nanosleep (unsigned sec, unsigned nsec)
{
  if (sec > INT_MAX) {
    nbdkit_error ("nbdkit_nanosleep: cannot sleep for %u seconds", sec);
    errno = EINVAL;
    return -1;
  }
  struct connection *conn = conn_current ();
  int sock = conn ? conn->sockin : -1;    /* watched for the client's end */
  uint64_t end = now_ns () + sec * UINT64_C (1000000000) + nsec;
  for (;;) {
    if (server_drain_over ()) {
      nbdkit_error ("nbdkit_nanosleep: the server is shutting down");
      errno = ESHUTDOWN;
      return -1;
    }
    if (conn && conn_is_aborted (conn)) {
      nbdkit_error ("nbdkit_nanosleep: the connection has ended");
      errno = ESHUTDOWN;
      return -1;
    }
    uint64_t now = now_ns ();
    if (now >= end)
      return 0;
    uint64_t slice = MIN (end - now, UINT64_C (100000000));
    struct timespec ts = { .tv_sec = slice / 1000000000,
                           .tv_nsec = slice % 1000000000 };
    /* poll ignores a negative fd: without a quit pipe or a connection
     * this is a plain sleep.
     */
    struct pollfd p[2] = {
      { .fd = server_drain_fd (), .events = POLLIN },
      { .fd = sock, .events = POLLRDHUP },
    };
    if (ppoll (p, 2, &ts, NULL) > 0 &&  /* EINTR: just look again */
        (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      /* After NBD_CMD_DISC the server shuts its own reading side,
       * which looks the same: that client is still there, and the
       * socket, which would now wake every poll, is no longer watched.
       */
      if (conn_is_closing (conn) && !conn_is_aborted (conn)) {
        sock = -1;
        continue;
      }
      nbdkit_error ("nbdkit_nanosleep: the client has gone");
      errno = ESHUTDOWN;
      return -1;
    }
  }
}

/* ---- the current connection ---- */

/* The ids that the server's own probes carry, so that a plugin's or
 * filter's probes can be joined to them: 0 outside a connection (at
 * configuration time, in a thread of the plugin's own) and outside a
 * request (open, close, the handshake's questions).
 */
uint64_t
nbdkit_connection_id (void)
{
  struct connection *conn = conn_current ();
  return conn ? conn->id : 0;
}

uint64_t
nbdkit_request_cookie (void)
{
  return layer_current_cookie ();
}

/* The generic probe, for authors who cannot place USDT probes of their
 * own (scripts, language bindings).  Untraced, it costs a call and a
 * test of the semaphore; the ids are read only while traced.
 */
void
nbdkit_probe (const char *name, int64_t arg1, int64_t arg2, const char *text)
{
  if (NBDKIT_USER_ENABLED ())
    NBDKIT_USER (probe_u64 (nbdkit_connection_id ()),
                 probe_u64 (layer_current_cookie ()), name ? name : "",
                 arg1, arg2, text ? text : "");
}

const char *
nbdkit_export_name (void)
{
  struct connection *conn = conn_current ();
  if (!conn) {
    nbdkit_error ("no connection in this thread");
    return NULL;
  }
  return conn->nego.exportname ? conn->nego.exportname : "";
}

int
nbdkit_is_tls (void)
{
  struct connection *conn = conn_current ();
  if (!conn) {
    nbdkit_error ("no connection in this thread");
    return -1;
  }
  return conn->tls_active;
}

static char *
tls_identity (int which)
{
  struct connection *conn = conn_current ();
  if (!conn) {
    nbdkit_error ("no connection in this thread");
    return NULL;
  }
  char *r = which == 2 ? tls_peer_username (conn)
                       : tls_peer_dn (conn, which == 1);
  if (!r)
    nbdkit_error ("strdup: %m");
  return r;
}

char *
nbdkit_peer_tls_dn (void)
{
  return tls_identity (0);
}

char *
nbdkit_peer_tls_issuer_dn (void)
{
  return tls_identity (1);
}

char *
nbdkit_peer_tls_username (void)
{
  return tls_identity (2);
}

int
nbdkit_peer_name (struct sockaddr *addr, socklen_t *addrlen)
{
  struct connection *conn = conn_current ();
  if (!conn) {
    nbdkit_error ("no connection in this thread");
    return -1;
  }
  if (conn->peer_addrlen == 0) {
    nbdkit_error ("peer name is not available on this transport");
    return -1;
  }
  socklen_t len = conn->peer_addrlen < *addrlen ? conn->peer_addrlen
                                                : *addrlen;
  memcpy (addr, &conn->peer_addr, len);
  *addrlen = conn->peer_addrlen;
  return 0;
}

static int
peer_cred (struct ucred *cred)
{
  struct connection *conn = conn_current ();
  socklen_t len = sizeof *cred;
  if (!conn) {
    nbdkit_error ("no connection in this thread");
    return -1;
  }
  if (getsockopt (conn->sockin, SOL_SOCKET, SO_PEERCRED, cred, &len) == -1) {
    nbdkit_error ("getsockopt: SO_PEERCRED: %m");
    return -1;
  }
  return 0;
}

int64_t
nbdkit_peer_pid (void)
{
  struct ucred c;
  return peer_cred (&c) == -1 ? -1 : c.pid;
}

int64_t
nbdkit_peer_uid (void)
{
  struct ucred c;
  return peer_cred (&c) == -1 ? -1 : (int64_t) c.uid;
}

int64_t
nbdkit_peer_gid (void)
{
  struct ucred c;
  return peer_cred (&c) == -1 ? -1 : (int64_t) c.gid;
}

char *
nbdkit_peer_security_context (void)
{
  struct connection *conn = conn_current ();
  if (!conn) {
    nbdkit_error ("no connection in this thread");
    return NULL;
  }
  /* Labels are short; the kernel says how long if the guess is not. */
  socklen_t len = 256;
  for (int tries = 0; tries < 3; tries++) {
    char *label = malloc (len + 1);
    if (!label) {
      nbdkit_error ("malloc: %m");
      return NULL;
    }
    socklen_t got = len;
    if (getsockopt (conn->sockin, SOL_SOCKET, SO_PEERSEC, label,
                    &got) == 0) {
      label[got < len ? got : len] = '\0';
      return label;
    }
    int err = errno;
    free (label);
    if (err != ERANGE || got <= len) {
      errno = err;
      nbdkit_error ("getsockopt: SO_PEERSEC: %m");
      errno = err;
      return NULL;
    }
    len = got;
  }
  nbdkit_error ("getsockopt: SO_PEERSEC: label keeps growing");
  errno = ERANGE;
  return NULL;
}

void
nbdkit_shutdown (void)
{
  server_request_shutdown ("nbdkit_shutdown");
}

/* Ends the calling thread's connection alone.  Forced: the socket is
 * shut at once, so neither the request being served nor any other in
 * flight gets a reply.  Gentle: requests already read finish and are
 * answered, and every request read after this is refused with
 * ESHUTDOWN (request.c) until the client sends NBD_CMD_DISC or hangs
 * up.  Either way close is the connection's next callback.
 */
void
nbdkit_disconnect (int force)
{
  struct connection *conn = conn_current ();
  if (!conn) {
    nbdkit_debug ("nbdkit_disconnect: not in a connection: ignored");
    return;
  }
  if (!force) {
    nbdkit_debug ("nbdkit_disconnect: refusing further requests");
    conn->refuse_requests = true;
    return;
  }
  nbdkit_debug ("nbdkit_disconnect: cutting the connection");
  conn_set_closing (conn, "nbdkit_disconnect");
  shutdown (conn->sockin, SHUT_RDWR);
  if (conn->sockout != conn->sockin && conn->sockout_is_socket)
    shutdown (conn->sockout, SHUT_RDWR);
}

/* ---- interned strings ---- */

/* Strings interned outside a connection live until exit: they are
 * few (config time only) and plugins may keep pointers to them.
 */
static const char *
intern (char *s)
{
  struct connection *conn = conn_current ();
  if (!s) {
    nbdkit_error ("strdup: %m");
    return NULL;
  }
  if (!conn)
    return s;                   /* deliberately kept for the process */
  pthread_mutex_lock (&conn->intern_lock);
  if (string_vector_append (&conn->interned, s) == -1) {
    pthread_mutex_unlock (&conn->intern_lock);
    nbdkit_error ("realloc: %m");
    free (s);
    return NULL;
  }
  pthread_mutex_unlock (&conn->intern_lock);
  return s;
}

void
public_free_interned (struct connection *conn)
{
  string_vector_free_all (&conn->interned);
}

const char *
nbdkit_strdup_intern (const char *str)
{
  return intern (strdup (str));
}

const char *
nbdkit_strndup_intern (const char *str, size_t n)
{
  return intern (strndup (str, n));
}

const char *
nbdkit_vprintf_intern (const char *fs, va_list args)
{
  char *s;
  if (vasprintf (&s, fs, args) == -1)
    s = NULL;
  return intern (s);
}

const char *
nbdkit_printf_intern (const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  const char *r = nbdkit_vprintf_intern (fs, args);
  va_end (args);
  return r;
}

