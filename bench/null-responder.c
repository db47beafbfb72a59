/* bench/null-responder.c: the least an NBD server can cost a client, to
 * measure the client's own ceiling (bench/client-ceiling.sh).
 *
 *   null-responder SOCKET SIZE
 *
 * Listens on the Unix socket SOCKET and serves one connection at a
 * time: an export of SIZE bytes that reads as zeroes and forgets what
 * is written.  It speaks fixed newstyle with structured replies (as
 * libnbd asks), answers NBD_OPT_GO and NBD_OPT_INFO, and refuses every
 * other option.  Its reader never sleeps while a connection is open: it
 * asks the socket for input without waiting, yielding the CPU between
 * tries, so a client never pays to wake it.  It answers every request
 * in its buffer at once and sends the answers together.  Nothing is
 * checked beyond what keeps it framed: a benchmark tool, not a server.
 */

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LEN   (32u * 1024 * 1024)   /* longest read or write served */
#define IN_SIZE   (256 * 1024)
#define MAX_IOV   64

static uint64_t export_size;

static uint16_t
get16 (const unsigned char *p)
{
  uint16_t v;
  memcpy (&v, p, sizeof v);
  return be16toh (v);
}

static uint32_t
get32 (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, sizeof v);
  return be32toh (v);
}

static void
put16 (char *p, uint16_t v)
{
  v = htobe16 (v);
  memcpy (p, &v, sizeof v);
}

static void
put32 (char *p, uint32_t v)
{
  v = htobe32 (v);
  memcpy (p, &v, sizeof v);
}
static const char *zeroes;              /* MAX_LEN bytes */

/* Blocking I/O for the handshake and for sending. */
static int
send_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t r = send (fd, p, len, MSG_NOSIGNAL);
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
recv_all (int fd, void *buf, size_t len)
{
  char *p = buf;
  while (len > 0) {
    ssize_t r = recv (fd, p, len, 0);
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
option_reply (int fd, uint32_t opt, uint32_t type, const void *data,
              uint32_t len)
{
  struct {
    uint64_t magic;
    uint32_t opt, type, len;
  } __attribute__ ((packed)) h = {
    htobe64 (0x3e889045565a9ULL), htobe32 (opt), htobe32 (type),
    htobe32 (len)
  };
  if (send_all (fd, &h, sizeof h) == -1)
    return -1;
  return len ? send_all (fd, data, len) : 0;
}

/* The handshake: 1 when the client is ready for requests (*SR set if
 * it asked for structured replies), 0 when it went away, -1 on
 * nonsense.
 */
static int
handshake (int fd, int *sr)
{
  struct {
    uint64_t magic, opt_magic;
    uint16_t flags;
  } __attribute__ ((packed)) hello = {
    htobe64 (0x4e42444d41474943ULL), htobe64 (0x49484156454f5054ULL),
    htobe16 (3)                         /* fixed newstyle, no zeroes */
  };
  uint32_t cflags;

  if (send_all (fd, &hello, sizeof hello) == -1 ||
      recv_all (fd, &cflags, sizeof cflags) == -1)
    return 0;
  for (;;) {
    struct {
      uint64_t magic;
      uint32_t opt, len;
    } __attribute__ ((packed)) h;
    char data[4096];

    if (recv_all (fd, &h, sizeof h) == -1)
      return 0;
    uint32_t opt = be32toh (h.opt), len = be32toh (h.len);
    if (be64toh (h.magic) != 0x49484156454f5054ULL || len > sizeof data ||
        recv_all (fd, data, len) == -1)
      return -1;
    switch (opt) {
    case 2:                             /* NBD_OPT_ABORT */
      option_reply (fd, opt, 1, NULL, 0);
      return 0;
    case 8:                             /* NBD_OPT_STRUCTURED_REPLY */
      if (option_reply (fd, opt, 1, NULL, 0) == -1)
        return 0;
      *sr = 1;
      break;
    case 6:                             /* NBD_OPT_INFO */
    case 7: {                           /* NBD_OPT_GO */
      struct {
        uint16_t type;
        uint64_t size;
        uint16_t flags;
      } __attribute__ ((packed)) info = {
        0, htobe64 (export_size), htobe16 (1 | 4)  /* has flags, flush */
      };
      if (option_reply (fd, opt, 3, &info, sizeof info) == -1 ||
          option_reply (fd, opt, 1, NULL, 0) == -1)
        return 0;
      if (opt == 7)
        return 1;
      break;
    }
    default:                            /* NBD_REP_ERR_UNSUP */
      if (option_reply (fd, opt, 0x80000001, NULL, 0) == -1)
        return 0;
    }
  }
}

/* Reply headers of the requests answered together, and the pieces
 * that send them.
 */
struct out {
  char hdr[MAX_IOV * 28];
  size_t hlen;
  struct iovec iov[MAX_IOV];
  int n;
};

static void
out_piece (struct out *o, const void *p, size_t len)
{
  struct iovec *last = o->n > 0 ? &o->iov[o->n - 1] : NULL;
  if (last && (char *) last->iov_base + last->iov_len == (const char *) p)
    last->iov_len += len;
  else
    o->iov[o->n++] = (struct iovec) { (void *) p, len };
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
  o->n = 0;
  o->hlen = 0;
  return 0;
}

/* Answer the request in H: a header (and zeroes for a read) into O. */
static void
answer (struct out *o, const unsigned char *h, int structured)
{
  uint16_t type = get16 (h + 6);
  uint32_t len = get32 (h + 24);
  char *p = o->hdr + o->hlen;

  if (type == 0 && structured) {        /* one OFFSET_DATA chunk, DONE */
    put32 (p, 0x668e33ef);
    put16 (p + 4, 1);
    put16 (p + 6, 1);
    memcpy (p + 8, h + 8, 8);           /* cookie */
    put32 (p + 16, 8 + len);
    memcpy (p + 20, h + 16, 8);         /* offset */
    o->hlen += 28;
    out_piece (o, p, 28);
  }
  else {                                /* a simple reply, no error */
    put32 (p, 0x67446698);
    put32 (p + 4, 0);
    memcpy (p + 8, h + 8, 8);
    o->hlen += 16;
    out_piece (o, p, 16);
  }
  if (type == 0 && len > 0)
    out_piece (o, zeroes, len);
}

/* Serve requests until the client disconnects or breaks framing.  All
 * the complete requests in the buffer are answered before the next
 * read, so the buffer always has room for it.
 */
static void
serve (int fd, int structured)
{
  static unsigned char in[IN_SIZE];
  size_t have = 0, skip = 0;            /* SKIP: write payload still due */
  unsigned char write_hdr[28];          /* that write's request, answered
                                           once its payload is in */
  struct out o = { .n = 0 };

  for (;;) {
    ssize_t r = recv (fd, in + have, sizeof in - have, MSG_DONTWAIT);
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
      if ((o.n + 2 > MAX_IOV || o.hlen + 28 > sizeof o.hdr) &&
          out_flush (fd, &o) == -1)
        return;
      if (skip > 0) {
        size_t k = have - at < skip ? have - at : skip;
        at += k;
        skip -= k;
        if (skip > 0)
          break;
        answer (&o, write_hdr, structured);
      }
      if (have - at < 28)
        break;
      const unsigned char *h = in + at;
      uint16_t type = get16 (h + 6);
      if (get32 (h) != 0x25609513 || get32 (h + 24) > MAX_LEN ||
          type == 2)                    /* bad framing, or NBD_CMD_DISC */
        return;
      at += 28;
      if (type == 1 && get32 (h + 24) > 0) {  /* a write: drop its payload */
        skip = get32 (h + 24);
        memcpy (write_hdr, h, sizeof write_hdr);
      }
      else
        answer (&o, h, structured);
    }
    if (o.n > 0 && out_flush (fd, &o) == -1)
      return;
    memmove (in, in + at, have - at);
    have -= at;
  }
}

int
main (int argc, char *argv[])
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int lfd;

  if (argc != 3 || strlen (argv[1]) >= sizeof sun.sun_path) {
    fprintf (stderr, "usage: null-responder SOCKET SIZE\n");
    return 2;
  }
  export_size = strtoull (argv[2], NULL, 0);
  zeroes = calloc (1, MAX_LEN);
  if (!zeroes)
    return 1;
  signal (SIGPIPE, SIG_IGN);
  strcpy (sun.sun_path, argv[1]);
  unlink (argv[1]);
  lfd = socket (AF_UNIX, SOCK_STREAM, 0);
  if (lfd == -1 || bind (lfd, (struct sockaddr *) &sun, sizeof sun) == -1 ||
      listen (lfd, 4) == -1) {
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
    int sr = 0;
    if (handshake (fd, &sr) == 1)
      serve (fd, sr);
    close (fd);
  }
}
