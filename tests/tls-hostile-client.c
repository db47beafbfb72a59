/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 *
 * tests/tls-hostile-client SOCKET CREDS CASE [BASE]: a TLS client that
 * misbehaves at the record level after NBD_OPT_STARTTLS, for the
 * test-tls-hostile-*.sh tests.  GnuTLS makes the real records; our own
 * push function sees every byte it sends, so a case can capture,
 * split, cut, repeat or damage records before they reach the socket.
 *
 * CREDS is psk:FILE:USER or x509:DIR (DIR holds ca-cert.pem,
 * client-cert.pem, client-key.pem as tests/make-tls-files.sh makes
 * them).  BASE is the byte offset of the export region a transmission
 * case may write to (two 64 KiB blocks from there).
 *
 * Prints one line "CASE: what the server did" and exits 0 when the
 * server did something safe; exits 1 with "FAIL: ..." otherwise (a
 * hang is caught by the bounded waits here and by the test's timeout).
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

#define OPTS_MAGIC 0x49484156454F5054ULL
#define REP_MAGIC 0x3E889045565A9ULL
#define OPT_STARTTLS 5
#define OPT_GO 7
#define REP_ACK 1
#define REP_INFO 3
#define REQ_MAGIC 0x25609513
#define SIMPLE_REPLY_MAGIC 0x67446698
#define CMD_READ 0
#define CMD_WRITE 1
#define BLOCK (64 * 1024)

static const char *case_name = "";

static void __attribute__ ((noreturn, format (printf, 1, 2)))
fail (const char *fmt, ...)
{
  va_list ap;
  printf ("FAIL: %s: ", case_name);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  printf ("\n");
  exit (1);
}

static void __attribute__ ((format (printf, 1, 2)))
result (const char *fmt, ...)
{
  va_list ap;
  printf ("%s: ", case_name);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  printf ("\n");
  fflush (stdout);
}

/* ---- the socket and what the push function does with records ---- */

enum push_mode {
  PUSH_PASS,   /* send as GnuTLS made them */
  PUSH_HOLD,   /* keep them in held[], send nothing */
  PUSH_SPLIT1, /* handshake records: 1 payload byte each */
  PUSH_COPY,   /* send them and keep a copy in held[] */
  PUSH_FLIP,   /* flip a byte in the middle, send */
};

struct peer {
  int fd;
  enum push_mode mode;
  unsigned char held[64 * 1024 + 1024];
  size_t held_len;
  unsigned records;             /* records split or damaged so far */
  bool pull_blocked; /* pull says EAGAIN: stop after a flight */
};

static void
write_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t r = send (fd, p, len, MSG_NOSIGNAL);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      fail ("send: %m");
    p += r;
    len -= r;
  }
}

/* Like write_all, but a server that has hung up is an answer, not an
 * error: returns false then.
 */
static bool
try_write_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t r = send (fd, p, len, MSG_NOSIGNAL);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      return false;
    p += r;
    len -= r;
  }
  return true;
}

static void
hold (struct peer *p, const void *data, size_t len)
{
  if (p->held_len + len > sizeof p->held)
    fail ("captured more than %zu bytes", sizeof p->held);
  memcpy (p->held + p->held_len, data, len);
  p->held_len += len;
}

/* Resend handshake records (type 22) as records of one payload byte;
 * GnuTLS pushes whole records, which this relies on (checked).
 */
static void
send_split (struct peer *p, const unsigned char *d, size_t len)
{
  int fd = p->fd;
  while (len > 0) {
    if (len < 5)
      fail ("push: a partial record header");
    size_t rlen = (d[3] << 8) | d[4];
    if (len < 5 + rlen)
      fail ("push: a partial record");
    if (d[0] != 22)
      write_all (fd, d, 5 + rlen);
    else
      for (size_t i = 0; i < rlen; i++) {
        unsigned char rec[6] = { d[0], d[1], d[2], 0, 1, d[5 + i] };
        write_all (fd, rec, sizeof rec);
        p->records++;
      }
    d += 5 + rlen;
    len -= 5 + rlen;
  }
}

static ssize_t
push (gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
  struct peer *p = ptr;
  switch (p->mode) {
  case PUSH_HOLD:
    hold (p, data, len);
    return len;
  case PUSH_SPLIT1:
    send_split (p, data, len);
    return len;
  case PUSH_COPY:
    hold (p, data, len);
    break;
  case PUSH_FLIP: {
    static unsigned char copy[sizeof p->held];
    if (len > sizeof copy)
      fail ("push: %zu bytes at once", len);
    memcpy (copy, data, len);
    copy[len / 2] ^= 0x40;
    p->records++;
    if (!try_write_all (p->fd, copy, len)) {
      errno = EPIPE;
      return -1;
    }
    return len;
  }
  case PUSH_PASS:
    break;
  }
  ssize_t r = send (p->fd, data, len, MSG_NOSIGNAL);
  return r;
}

static ssize_t
pull (gnutls_transport_ptr_t ptr, void *data, size_t len)
{
  struct peer *p = ptr;
  if (p->pull_blocked) {
    errno = EAGAIN;
    return -1;
  }
  return recv (p->fd, data, len, 0);
}

static int
pull_timeout (gnutls_transport_ptr_t ptr, unsigned int ms)
{
  struct peer *p = ptr;
  if (p->pull_blocked)
    return 1; /* let pull say EAGAIN */
  struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
  return poll (&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

/* ---- NBD newstyle in the clear, up to STARTTLS ---- */

static bool
recv_exact (int fd, void *buf, size_t len)
{
  char *p = buf;
  while (len > 0) {
    ssize_t r = recv (fd, p, len, 0);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    len -= r;
  }
  return true;
}

static int
connect_and_starttls (const char *path)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (fd == -1 || strlen (path) >= sizeof sun.sun_path)
    fail ("socket: %m");
  strcpy (sun.sun_path, path);
  if (connect (fd, (struct sockaddr *)&sun, sizeof sun) == -1)
    fail ("connect %s: %m", path);
  /* Every wait on this socket is bounded, so nothing here can hang. */
  struct timeval tv = { .tv_sec = 20 };
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  unsigned char greet[18];
  if (!recv_exact (fd, greet, sizeof greet)
      || be64toh (*(uint64_t *)(greet + 8)) != OPTS_MAGIC)
    fail ("no newstyle greeting");
  uint32_t cflags = htobe32 (3); /* FIXED_NEWSTYLE | NO_ZEROES */
  write_all (fd, &cflags, 4);
  struct __attribute__ ((packed)) {
    uint64_t magic;
    uint32_t opt, len;
  } opt = { htobe64 (OPTS_MAGIC), htobe32 (OPT_STARTTLS), 0 };
  write_all (fd, &opt, sizeof opt);
  struct __attribute__ ((packed)) {
    uint64_t magic;
    uint32_t opt, type, len;
  } rep;
  if (!recv_exact (fd, &rep, sizeof rep) || be64toh (rep.magic) != REP_MAGIC
      || be32toh (rep.opt) != OPT_STARTTLS || be32toh (rep.type) != REP_ACK
      || rep.len != 0)
    fail ("STARTTLS not acknowledged");
  return fd;
}

/* Wait up to SECS for the server to hang up; returns the seconds it
 * took, or -1 if it did not.  Bytes the server sends first (an alert)
 * are read and dropped.
 */
static double
wait_closed (int fd, int secs)
{
  struct timespec t0, t1;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime (CLOCK_MONOTONIC, &t1);
    double took = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (took >= secs)
      return -1;
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    if (poll (&pfd, 1, 100) <= 0)
      continue;
    char buf[4096];
    ssize_t r = recv (fd, buf, sizeof buf, 0);
    if (r == 0 || (r == -1 && errno == ECONNRESET))
      return took;
  }
}

/* ---- the TLS session ---- */

struct tls {
  struct peer peer;
  gnutls_session_t s;
  gnutls_psk_client_credentials_t psk;
  gnutls_certificate_credentials_t x509;
};

static void
tls_setup (struct tls *t, int fd, const char *creds, const char *priority)
{
  memset (t, 0, sizeof *t);
  t->peer.fd = fd;
  if (gnutls_init (&t->s, GNUTLS_CLIENT) < 0)
    fail ("gnutls_init");
  if (gnutls_priority_set_direct (t->s, priority, NULL) < 0)
    fail ("priority %s", priority);
  if (strncmp (creds, "psk:", 4) == 0) {
    char file[4096], *user;
    snprintf (file, sizeof file, "%s", creds + 4);
    user = strrchr (file, ':');
    if (!user)
      fail ("psk:FILE:USER");
    *user++ = '\0';
    /* psktool's file: "user:hexkey" lines. */
    FILE *f = fopen (file, "r");
    char line[1024];
    gnutls_datum_t key = { 0 };
    size_t ulen = strlen (user);
    while (f && fgets (line, sizeof line, f))
      if (strncmp (line, user, ulen) == 0 && line[ulen] == ':') {
        line[strcspn (line, "\r\n")] = '\0';
        key.data = (unsigned char *)line + ulen + 1;
        key.size = strlen ((char *)key.data);
        break;
      }
    if (f)
      fclose (f);
    if (!key.data)
      fail ("no key for %s in %s", user, file);
    gnutls_psk_allocate_client_credentials (&t->psk);
    if (gnutls_psk_set_client_credentials (t->psk, user, &key,
                                           GNUTLS_PSK_KEY_HEX)
        < 0)
      fail ("psk credentials");
    gnutls_credentials_set (t->s, GNUTLS_CRD_PSK, t->psk);
  }
  else if (strncmp (creds, "x509:", 5) == 0) {
    char ca[4096], cert[4096], key[4096];
    snprintf (ca, sizeof ca, "%s/ca-cert.pem", creds + 5);
    snprintf (cert, sizeof cert, "%s/client-cert.pem", creds + 5);
    snprintf (key, sizeof key, "%s/client-key.pem", creds + 5);
    gnutls_certificate_allocate_credentials (&t->x509);
    if (gnutls_certificate_set_x509_trust_file (t->x509, ca,
                                                GNUTLS_X509_FMT_PEM)
            < 0
        || gnutls_certificate_set_x509_key_file (t->x509, cert, key,
                                                 GNUTLS_X509_FMT_PEM)
               < 0)
      fail ("x509 credentials from %s", creds + 5);
    gnutls_credentials_set (t->s, GNUTLS_CRD_CERTIFICATE, t->x509);
    gnutls_server_name_set (t->s, GNUTLS_NAME_DNS, "localhost", 9);
    gnutls_session_set_verify_cert (t->s, "localhost", 0);
  }
  else
    fail ("CREDS is psk:FILE:USER or x509:DIR");
  gnutls_transport_set_ptr (t->s, &t->peer);
  gnutls_transport_set_push_function (t->s, push);
  gnutls_transport_set_pull_function (t->s, pull);
  gnutls_transport_set_pull_timeout_function (t->s, pull_timeout);
  gnutls_handshake_set_timeout (t->s, 20000);
}

static void
tls_free (struct tls *t)
{
  gnutls_deinit (t->s);
  if (t->psk)
    gnutls_psk_free_client_credentials (t->psk);
  if (t->x509)
    gnutls_certificate_free_credentials (t->x509);
  close (t->peer.fd);
}

static int
handshake (struct tls *t)
{
  int r;
  do
    r = gnutls_handshake (t->s);
  while (r < 0 && !gnutls_error_is_fatal (r) && !t->peer.pull_blocked);
  return r;
}

/* The ClientHello GnuTLS would send, captured, nothing sent. */
static void
capture_hello (struct tls *t)
{
  t->peer.mode = PUSH_HOLD;
  t->peer.pull_blocked = true;
  int r = handshake (t);
  if (r != GNUTLS_E_AGAIN || t->peer.held_len < 50 || t->peer.held[0] != 22)
    fail ("no ClientHello captured (%s, %zu bytes)", gnutls_strerror (r),
          t->peer.held_len);
}

static void
tls_send (struct tls *t, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t r = gnutls_record_send (t->s, p, len);
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      continue;
    if (r < 0)
      fail ("record send: %s", gnutls_strerror (r));
    p += r;
    len -= r;
  }
}

/* Returns the bytes read (len), or a GnuTLS error / 0 at EOF. */
static ssize_t
tls_recv_exact (struct tls *t, void *buf, size_t len)
{
  char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t r = gnutls_record_recv (t->s, p + got, len - got);
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      continue;
    if (r <= 0)
      return r;
    got += r;
  }
  return got;
}

static void
go (struct tls *t)
{
  struct __attribute__ ((packed)) {
    uint64_t magic;
    uint32_t opt, len;
    uint32_t namelen;
    uint16_t ninfo;
  } opt = { htobe64 (OPTS_MAGIC), htobe32 (OPT_GO), htobe32 (6), 0, 0 };
  tls_send (t, &opt, sizeof opt);
  for (int i = 0; i < 16; i++) {
    struct __attribute__ ((packed)) {
      uint64_t magic;
      uint32_t opt, type, len;
    } rep;
    if (tls_recv_exact (t, &rep, sizeof rep) != sizeof rep
        || be64toh (rep.magic) != REP_MAGIC)
      fail ("GO: no reply");
    uint32_t type = be32toh (rep.type), len = be32toh (rep.len);
    char skip[1024];
    if (len > sizeof skip || (len && tls_recv_exact (t, skip, len) != len))
      fail ("GO: bad reply length %u", len);
    if (type == REP_ACK)
      return;
    if (type != REP_INFO)
      fail ("GO refused: 0x%x", type);
  }
  fail ("GO: no ACK");
}

struct __attribute__ ((packed)) request {
  uint32_t magic;
  uint16_t flags, type;
  uint64_t cookie, offset;
  uint32_t count;
};

static struct request
request (uint16_t type, uint64_t cookie, uint64_t offset, uint32_t count)
{
  struct request r = { htobe32 (REQ_MAGIC), 0,
                       htobe16 (type),      htobe64 (cookie),
                       htobe64 (offset),    htobe32 (count) };
  return r;
}

/* Wait for the simple reply to COOKIE; returns its error, or -1 if the
 * connection ended instead (*why says how).
 */
static int
reply (struct tls *t, uint64_t cookie, ssize_t *why)
{
  struct __attribute__ ((packed)) {
    uint32_t magic, error;
    uint64_t cookie;
  } rep;
  ssize_t r = tls_recv_exact (t, &rep, sizeof rep);
  *why = r;
  if (r != sizeof rep)
    return -1;
  if (be32toh (rep.magic) != SIMPLE_REPLY_MAGIC
      || be64toh (rep.cookie) != cookie)
    fail ("reply: magic 0x%x cookie %" PRIu64, be32toh (rep.magic),
          (uint64_t)be64toh (rep.cookie));
  return be32toh (rep.error);
}

/* A whole write of BLOCK bytes of FILL at OFFSET, acknowledged. */
static void
good_write (struct tls *t, uint64_t cookie, uint64_t offset, int fill)
{
  static unsigned char buf[sizeof (struct request) + BLOCK];
  struct request q = request (CMD_WRITE, cookie, offset, BLOCK);
  memcpy (buf, &q, sizeof q);
  memset (buf + sizeof q, fill, BLOCK);
  tls_send (t, buf, sizeof buf);
  ssize_t why;
  int e = reply (t, cookie, &why);
  if (e != 0)
    fail ("write at %" PRIu64 ": error %d (%s)", offset, e,
          e == -1 ? gnutls_strerror (why) : "");
}

static const char *
ended (ssize_t why)
{
  return why == 0 ? "EOF" : gnutls_strerror (why);
}

/* ---- the cases ---- */

static const char *
describe_close (double took)
{
  static char s[64];
  snprintf (s, sizeof s, "closed the connection after %.1f s", took);
  return s;
}

int
main (int argc, char *argv[])
{
  if (argc < 4)
    fail ("usage: tls-hostile-client SOCKET CREDS CASE [BASE]");
  const char *sock = argv[1], *creds = argv[2];
  case_name = argv[3];
  uint64_t base = argc > 4 ? strtoull (argv[4], NULL, 0) : 0;
  const char *c = case_name;
  char priority[128];
  snprintf (priority, sizeof priority, "NORMAL%s%s",
            strncmp (creds, "psk:", 4) == 0 ? ":+ECDHE-PSK:+DHE-PSK:+PSK" : "",
            strcmp (c, "renegotiate") == 0 ? ":-VERS-ALL:+VERS-TLS1.2" : "");
  struct tls t;
  tls_setup (&t, connect_and_starttls (sock), creds, priority);
  int fd = t.peer.fd;
  double took;

  if (strcmp (c, "garbage") == 0) {
    /* Bytes that are no TLS record at all. */
    unsigned char junk[2048];
    for (size_t i = 0; i < sizeof junk; i++)
      junk[i] = (i * 131 + 7) & 0xff;
    try_write_all (fd, junk, sizeof junk);
    if ((took = wait_closed (fd, 10)) < 0)
      fail ("garbage instead of a ClientHello: still connected after 10 s");
    result ("%s", describe_close (took));
  }
  else if (strcmp (c, "hello-1byte") == 0) {
    /* The real handshake, every handshake record split into records of
     * one byte.  TLS allows it; the server may also refuse.
     */
    t.peer.mode = PUSH_SPLIT1;
    int r = handshake (&t);
    if (t.peer.records < 100)
      fail ("only %u one-byte records sent", t.peer.records);
    if (r < 0) {
      if ((took = wait_closed (fd, 10)) < 0)
        fail ("handshake failed (%s) but the server kept the connection",
              gnutls_strerror (r));
      result ("refused (%s), %s", gnutls_strerror (r), describe_close (took));
    }
    else {
      t.peer.mode = PUSH_PASS;
      go (&t);
      struct request q = request (CMD_READ, 1, base, 512);
      tls_send (&t, &q, sizeof q);
      ssize_t why;
      char buf[512];
      if (reply (&t, 1, &why) != 0 || tls_recv_exact (&t, buf, 512) != 512)
        fail ("read after the split handshake failed");
      char *desc = gnutls_session_get_desc (t.s);
      result ("handshake completed (%s) from %u one-byte records, "
              "export read", desc, t.peer.records);
      gnutls_free (desc);
    }
  }
  else if (strcmp (c, "hello-cut") == 0) {
    /* Half a ClientHello, then silence: --handshake-timeout must end
     * it (the test runs the server with a short one).
     */
    capture_hello (&t);
    write_all (fd, t.peer.held, t.peer.held_len / 2);
    if ((took = wait_closed (fd, 15)) < 0)
      fail ("half a ClientHello: still connected after 15 s");
    result ("%s", describe_close (took));
  }
  else if (strcmp (c, "alert-first") == 0 || strcmp (c, "ccs-first") == 0) {
    /* A fatal alert (handshake_failure) or a ChangeCipherSpec record
     * where the ClientHello belongs, then the real ClientHello.
     */
    static const unsigned char alert[] = { 21, 3, 1, 0, 2, 2, 40 };
    static const unsigned char ccs[] = { 20, 3, 1, 0, 1, 1 };
    bool is_alert = c[0] == 'a';
    capture_hello (&t);
    write_all (fd, is_alert ? alert : ccs,
               is_alert ? sizeof alert : sizeof ccs);
    /* Then the rest of the handshake as GnuTLS goes on with it. */
    if (!try_write_all (fd, t.peer.held, t.peer.held_len)) {
      if ((took = wait_closed (fd, 10)) < 0)
        fail ("ClientHello not taken, but the connection stays open");
      result ("refused at that record, %s", describe_close (took));
      tls_free (&t);
      return 0;
    }
    t.peer.mode = PUSH_PASS;
    t.peer.pull_blocked = false;
    int r = handshake (&t);
    if (r < 0) {
      if ((took = wait_closed (fd, 10)) < 0)
        fail ("handshake failed (%s) but the server kept the connection",
              gnutls_strerror (r));
      result ("refused (%s), %s", gnutls_strerror (r), describe_close (took));
    }
    else {
      go (&t);
      result ("record ignored, handshake completed");
    }
  }
  else {
    /* Transmission cases: a good handshake and GO first. */
    int handshake_r = handshake (&t);
    if (handshake_r < 0)
      fail ("handshake failed: %s", gnutls_strerror (handshake_r));
    go (&t);
    ssize_t why;
    if (strcmp (c, "alert-mid-write") == 0
        || strcmp (c, "close-notify-mid-write") == 0) {
      /* Block 0 written and acknowledged with 0xa5; then a write of
       * 0x5b over blocks 0 and 1 stops half way (with a fatal alert or
       * close_notify).  The test reads back: 0xa5 then zeroes.
       */
      good_write (&t, 1, base, 0xa5);
      static unsigned char half[sizeof (struct request) + BLOCK];
      struct request q = request (CMD_WRITE, 2, base, 2 * BLOCK);
      memcpy (half, &q, sizeof q);
      memset (half + sizeof q, 0x5b, BLOCK);
      tls_send (&t, half, sizeof half);
      if (c[0] == 'a')
        gnutls_alert_send (t.s, GNUTLS_AL_FATAL, GNUTLS_A_INTERNAL_ERROR);
      else
        gnutls_bye (t.s, GNUTLS_SHUT_WR);
      if (reply (&t, 2, &why) != -1)
        fail ("the cut write was answered");
      if ((took = wait_closed (fd, 10)) < 0)
        fail ("still connected 10 s after the cut write");
      result ("no reply to the cut write (%s), %s", ended (why),
              describe_close (took));
    }
    else if (strcmp (c, "replay") == 0) {
      /* Write 0xa5 (its record kept), then 0x3c over it, then the first
       * record again.  Accepted, it would put 0xa5 back: the test
       * reads 0x3c.
       */
      t.peer.mode = PUSH_COPY;
      good_write (&t, 1, base, 0xa5);
      t.peer.mode = PUSH_PASS;
      if (t.peer.held_len < BLOCK)
        fail ("the first write's records were not kept");
      good_write (&t, 2, base, 0x3c);
      try_write_all (fd, t.peer.held, t.peer.held_len);
      /* A reply to this would mean the connection was not closed.  The
       * server may have closed it already on seeing the replay, so the
       * send itself may fail: that is the outcome wanted.
       */
      struct request q = request (CMD_READ, 3, base, 512);
      gnutls_record_send (t.s, &q, sizeof q);
      int e = reply (&t, 1, &why);
      if (e != -1)
        fail ("the replayed write was answered (error %d)", e);
      if ((took = wait_closed (fd, 10)) < 0)
        fail ("still connected 10 s after the replay");
      result ("replayed records refused (%s), %s", ended (why),
              describe_close (took));
    }
    else if (strcmp (c, "tamper") == 0) {
      /* Write 0xa5, then a write of 0x3c whose records have one bit
       * flipped each: the test reads 0xa5.
       */
      good_write (&t, 1, base, 0xa5);
      static unsigned char buf[sizeof (struct request) + BLOCK];
      struct request q = request (CMD_WRITE, 2, base, BLOCK);
      memcpy (buf, &q, sizeof q);
      memset (buf + sizeof q, 0x3c, BLOCK);
      t.peer.mode = PUSH_FLIP;
      gnutls_record_send (t.s, buf, sizeof buf); /* may fail: closed */
      t.peer.mode = PUSH_PASS;
      if (t.peer.records == 0)
        fail ("no record was damaged");
      if (reply (&t, 2, &why) != -1)
        fail ("the tampered write was answered");
      if ((took = wait_closed (fd, 10)) < 0)
        fail ("still connected 10 s after the tampered record");
      result ("tampered record refused (%s), %s", ended (why),
              describe_close (took));
    }
    else if (strcmp (c, "renegotiate") == 0) {
      /* TLS 1.2, block 0 written with 0xa5, then a new handshake on the
       * same session.  Safe outcomes: refused (connection closed or
       * no_renegotiation) or done with the connection intact.
       */
      if (gnutls_protocol_get_version (t.s) != GNUTLS_TLS1_2)
        fail ("not TLS 1.2");
      good_write (&t, 1, base, 0xa5);
      int r = handshake (&t);
      if (r < 0) {
        if ((took = wait_closed (fd, 10)) < 0) {
          /* Refused but still open: the connection must still work. */
          struct request q = request (CMD_READ, 2, base, 512);
          tls_send (&t, &q, sizeof q);
          unsigned char buf[512];
          if (reply (&t, 2, &why) != 0 || tls_recv_exact (&t, buf, 512) != 512
              || buf[0] != 0xa5 || buf[511] != 0xa5)
            fail ("connection broken after a refused renegotiation");
          result ("renegotiation refused (%s), connection intact",
                  gnutls_strerror (r));
        }
        else
          result ("renegotiation refused (%s), %s", gnutls_strerror (r),
                  describe_close (took));
      }
      else {
        struct request q = request (CMD_READ, 2, base, 512);
        tls_send (&t, &q, sizeof q);
        unsigned char buf[512];
        if (reply (&t, 2, &why) != 0 || tls_recv_exact (&t, buf, 512) != 512
            || buf[0] != 0xa5 || buf[511] != 0xa5)
          fail ("renegotiated, but the connection no longer reads block 0");
        result ("renegotiation completed, connection intact");
      }
    }
    else if (strcmp (c, "key-update") == 0) {
      /* Not an attack: TLS 1.3's answer to renegotiation, which any
       * client may send.  Block 0 written with 0xa5, new keys asked
       * for both ways (KeyUpdate, update_requested), then block 1
       * written with 0x3c on the new keys: both acknowledged.
       */
      if (gnutls_protocol_get_version (t.s) != GNUTLS_TLS1_3)
        fail ("not TLS 1.3");
      good_write (&t, 1, base, 0xa5);
      int r;
      do
        r = gnutls_session_key_update (t.s, GNUTLS_KU_PEER);
      while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
      if (r < 0)
        fail ("key update: %s", gnutls_strerror (r));
      good_write (&t, 2, base + BLOCK, 0x3c);
      result ("keys updated, connection intact");
    }
    else
      fail ("unknown case");
  }
  tls_free (&t);
  return 0;
}
