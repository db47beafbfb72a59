/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* bench/null-responder.c: the least an NBD server can cost a client, to
 * measure the client's own ceiling (bench/client-ceiling.sh).
 *
 *   null-responder [--sleep] SOCKET|PORT SIZE
 *
 * Listens on the Unix socket SOCKET, or on TCP port PORT (all digits)
 * of 127.0.0.1, and serves one connection at a time: an export of SIZE bytes that reads as zeroes and forgets what
 * is written.  It speaks fixed newstyle with structured replies (as
 * libnbd asks), answers NBD_OPT_GO and NBD_OPT_INFO, and refuses every
 * other option.  It answers every request in its buffer at once and
 * sends the answers together.  Nothing is checked beyond what keeps it
 * framed: a benchmark tool, not a server.
 *
 * By default its reader never sleeps while a connection is open: it
 * asks the socket for input without waiting, yielding the CPU between
 * tries, so a client never pays to wake it (the client's ceiling).
 * With --sleep it waits in read like any server that does not spin:
 * what it costs per request is the least a server that waits in read
 * for each batch can cost, nearly all of it the kernel's (the floor).
 *
 * Built by the bench with cc -I common (for protocol.h).
 */

#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol.h"

#define MAX_LEN   (32u * 1024 * 1024)   /* longest read or write served */
#define IN_SIZE   (256 * 1024)
#define MAX_IOV   64

static uint64_t export_size;
static bool sleeping;                   /* --sleep */
static char *zeroes;                    /* MAX_LEN bytes */

/* Write (OUT) or read all LEN bytes, blocking: 0, or -1. */
static int
xfer (int fd, void *buf, size_t len, bool out)
{
  char *p = buf;
  while (len > 0) {
    ssize_t r = out ? write (fd, p, len) : read (fd, p, len);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    p += r;
    len -= r;
  }
  return 0;
}

static int
option_reply (int fd, uint32_t opt, uint32_t type, void *data, uint32_t len)
{
  struct nbd_fixed_new_option_reply h = {
    htobe64 (NBD_REP_MAGIC), htobe32 (opt), htobe32 (type), htobe32 (len)
  };
  if (xfer (fd, &h, sizeof h, true) == -1)
    return -1;
  return len ? xfer (fd, data, len, true) : 0;
}

/* The handshake: true when the client is ready for requests (*SR set
 * if it asked for structured replies), false when it went away or
 * made no sense.
 */
static bool
handshake (int fd, bool *sr)
{
  struct {
    uint64_t magic, version;
    uint16_t flags;
  } NBD_PACKED hello = {
    htobe64 (NBD_MAGIC), htobe64 (NBD_NEW_VERSION),
    htobe16 (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES)
  };
  uint32_t cflags;

  if (xfer (fd, &hello, sizeof hello, true) == -1 ||
      xfer (fd, &cflags, sizeof cflags, false) == -1)
    return false;
  for (;;) {
    struct nbd_new_option h;
    char data[NBD_MAX_STRING + 64];

    if (xfer (fd, &h, sizeof h, false) == -1)
      return false;
    uint32_t opt = be32toh (h.option), len = be32toh (h.optlen);
    if (be64toh (h.version) != NBD_NEW_VERSION || len > sizeof data ||
        xfer (fd, data, len, false) == -1)
      return false;
    switch (opt) {
    case NBD_OPT_ABORT:
      option_reply (fd, opt, NBD_REP_ACK, NULL, 0);
      return false;
    case NBD_OPT_STRUCTURED_REPLY:
      if (option_reply (fd, opt, NBD_REP_ACK, NULL, 0) == -1)
        return false;
      *sr = true;
      break;
    case NBD_OPT_INFO:
    case NBD_OPT_GO: {
      struct nbd_info_export info = {
        htobe16 (NBD_INFO_EXPORT), htobe64 (export_size),
        htobe16 (NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH)
      };
      if (option_reply (fd, opt, NBD_REP_INFO, &info, sizeof info) == -1 ||
          option_reply (fd, opt, NBD_REP_ACK, NULL, 0) == -1)
        return false;
      if (opt == NBD_OPT_GO)
        return true;
      break;
    }
    default:
      if (option_reply (fd, opt, NBD_REP_ERR_UNSUP, NULL, 0) == -1)
        return false;
    }
  }
}

/* The replies to the requests answered together: their headers, and
 * the pieces that send them (headers and the zeroes of reads).
 */
struct reply {                          /* the largest header */
  struct nbd_structured_reply h;
  uint64_t offset;
} NBD_PACKED;

struct out {
  struct reply hdr[MAX_IOV];            /* one per reply, fewer than iov */
  int nhdr;
  struct iovec iov[MAX_IOV];
  int n;
};

static void
out_piece (struct out *o, void *p, size_t len)
{
  o->iov[o->n++] = (struct iovec) { p, len };
}

static int
out_flush (int fd, struct out *o)
{
  struct iovec *v = o->iov;
  int n = o->n;
  while (n > 0) {
    struct msghdr m = { .msg_iov = v, .msg_iovlen = n };
    ssize_t r = sendmsg (fd, &m, MSG_NOSIGNAL);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    while (n > 0 && (size_t) r >= v->iov_len) {
      r -= v->iov_len;
      v++;
      n--;
    }
    if (n > 0) {
      v->iov_base = (char *) v->iov_base + r;
      v->iov_len -= r;
    }
  }
  o->n = o->nhdr = 0;
  return 0;
}

/* Answer REQ (in host order but for the cookie, as it came): a header,
 * and zeroes for a read, into O.
 */
static void
answer (struct out *o, const struct nbd_request *req, bool structured)
{
  struct reply *r = &o->hdr[o->nhdr++];
  bool is_read = req->type == NBD_CMD_READ;

  if (is_read && structured) {             /* one OFFSET_DATA chunk, DONE */
    r->h = (struct nbd_structured_reply) {
      htobe32 (NBD_STRUCTURED_REPLY_MAGIC), htobe16 (NBD_REPLY_FLAG_DONE),
      htobe16 (NBD_REPLY_TYPE_OFFSET_DATA), req->cookie,
      htobe32 (sizeof r->offset + req->count)
    };
    r->offset = htobe64 (req->offset);
    out_piece (o, r, sizeof *r);
  }
  else {                                /* a simple reply, no error */
    struct nbd_simple_reply s = {
      htobe32 (NBD_SIMPLE_REPLY_MAGIC), 0, req->cookie
    };
    memcpy (r, &s, sizeof s);
    out_piece (o, r, sizeof s);
  }
  if (is_read && req->count > 0)
    out_piece (o, zeroes, req->count);
}

/* Serve requests until the client disconnects or breaks framing.  All
 * the complete requests in the buffer are answered before the next
 * read, so the buffer always has room for it.
 */
static void
serve (int fd, bool structured)
{
  static unsigned char in[IN_SIZE];
  size_t have = 0, skip = 0;            /* SKIP: write payload still due */
  struct nbd_request write_req;         /* that write, answered once its
                                           payload is in */
  struct out o = { .n = 0 };

  for (;;) {
    ssize_t r = recv (fd, in + have, sizeof in - have,
                      sleeping ? 0 : MSG_DONTWAIT);
    if (r == 0)
      return;
    if (r == -1) {
      if (errno != EAGAIN && errno != EINTR)
        return;
      sched_yield ();
      continue;
    }
    have += r;

    size_t at = 0;
    for (;;) {
      if (o.n + 2 > MAX_IOV &&
          out_flush (fd, &o) == -1)
        return;
      if (skip > 0) {
        size_t k = have - at < skip ? have - at : skip;
        at += k;
        skip -= k;
        if (skip > 0)
          break;
        answer (&o, &write_req, structured);
      }
      struct nbd_request req;
      if (have - at < sizeof req)
        break;
      memcpy (&req, in + at, sizeof req);
      at += sizeof req;
      req.type = be16toh (req.type);
      req.offset = be64toh (req.offset);
      req.count = be32toh (req.count);
      if (be32toh (req.magic) != NBD_REQUEST_MAGIC || req.count > MAX_LEN ||
          req.type == NBD_CMD_DISC)
        return;
      if (req.type == NBD_CMD_WRITE && req.count > 0) {
        skip = req.count;               /* drop the payload, then answer */
        write_req = req;
      }
      else
        answer (&o, &req, structured);
    }
    if (o.n > 0 && out_flush (fd, &o) == -1)
      return;
    memmove (in, in + at, have - at);
    have -= at;
  }
}

/* Listen on WHERE: a TCP port of 127.0.0.1 if it is all digits, else
 * a Unix socket path.  Returns the listening socket, or -1.
 */
static int
listen_on (const char *where)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  struct sockaddr_in sin = { .sin_family = AF_INET };
  struct sockaddr *addr = (struct sockaddr *) &sun;
  socklen_t len = sizeof sun;
  int one = 1, fd;

  if (where[strspn (where, "0123456789")] == '\0') {
    unsigned long port = strtoul (where, NULL, 10);
    if (port == 0 || port > 65535) {
      errno = EINVAL;
      return -1;
    }
    sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    sin.sin_port = htons (port);
    addr = (struct sockaddr *) &sin;
    len = sizeof sin;
  }
  else {
    if (strlen (where) >= sizeof sun.sun_path) {
      errno = ENAMETOOLONG;
      return -1;
    }
    strcpy (sun.sun_path, where);
    unlink (where);
  }
  fd = socket (addr->sa_family, SOCK_STREAM, 0);
  if (fd == -1 ||
      setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1 ||
      bind (fd, addr, len) == -1 || listen (fd, 4) == -1)
    return -1;
  return fd;
}

int
main (int argc, char *argv[])
{
  int lfd, one = 1;

  if (argc > 1 && strcmp (argv[1], "--sleep") == 0) {
    sleeping = true;
    argc--;
    argv++;
  }
  if (argc != 3) {
    fprintf (stderr, "usage: null-responder [--sleep] SOCKET|PORT SIZE\n");
    return 2;
  }
  export_size = strtoull (argv[2], NULL, 0);
  zeroes = calloc (1, MAX_LEN);
  if (!zeroes)
    return 1;
  signal (SIGPIPE, SIG_IGN);
  lfd = listen_on (argv[1]);
  if (lfd == -1) {
    perror ("null-responder");
    return 1;
  }
  for (;;) {
    int fd = accept (lfd, NULL, NULL);
    if (fd == -1) {
      if (errno == EINTR)
        continue;
      perror ("null-responder: accept");
      return 1;
    }
    /* As servers do over TCP; a Unix socket refuses it, harmlessly. */
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bool sr = false;
    if (handshake (fd, &sr))
      serve (fd, sr);
    close (fd);
  }
}
