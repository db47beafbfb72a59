/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: a connection's socket I/O.  Everything the server reads
 * from or writes to a client passes here: conn_recv and conn_recvv fill
 * the caller's memory with exactly the bytes asked for (from a per-
 * connection input buffer, busy-polling the socket first when the
 * client waits on us, waiting with the TCP low mark for large
 * payloads), and conn_sendv, conn_send and conn_sendv_nowait write
 * whole replies.  Once TLS is on, bytes go through crypto.c instead of
 * the socket.  The handshake calls these from the connection's thread;
 * in transmission, reads happen under the connection's read lock and
 * writes under its write lock (the callers take them, not this file).
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/sockios.h>        /* SIOCOUTQ */

#include "internal.h"
#include "conn-io.h"

static bool
is_socket (int fd)
{
  int type;
  socklen_t len = sizeof type;
  return getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0;
}

/* Before the deadline, wait for input; -1 with ETIMEDOUT once it has
 * passed, however slowly the client drips bytes.
 */
static int
wait_for_input (struct connection *conn)
{
  int r = conn_poll_input (conn, -1);
  if (r != 0)
    return r > 0 ? 0 : -1;
  NBDKIT_LIMIT_HIT (conn->id, "handshake_timeout");
  nbdkit_error ("client %s: negotiation ended: not done within "
                "--handshake-timeout", conn->peer);
  conn_set_closing (conn, "handshake timeout");
  errno = ETIMEDOUT;
  return -1;
}

/* Busy-polling.  A thread asleep in read is woken by the client's
 * send, and the wake-up costs the client too: an interrupt to the
 * sleeper's CPU, which in a VM is a trip through the host (about 40 µs
 * each way on the machine in bench/HISTORY.md).  When the client waits
 * for each reply before it sends the next request, that trip lies on
 * every request's path.  So once the handshake is over, a reader first
 * asks the socket for input without sleeping, again and again for up
 * to --busy-poll microseconds, and sleeps only when nothing came.
 *
 * Polling pays only while the client waits on us.  A client with many
 * requests in flight does not, and polling would only turn our idle
 * time into CPU time.  So now and then a wait sleeps to look (the
 * POLL_SAMPLE-th at first), as do all waits while the connection
 * rests, and conn_poll_feedback looks at what the sleep brought: a
 * second request already behind the first means the client kept
 * sending while we slept, and the connection rests (sleeps without
 * polling) for its next POLL_REST waits, again and again while that
 * holds.  A look that finds the client waiting doubles the gap to the
 * next, up to POLL_SAMPLE_MAX, so that a client that waits on every
 * reply meets few sleeps (each costs it the wake-up that polling
 * saves); one that keeps sending puts the gap back to POLL_SAMPLE.
 * Also:
 *  - a connection whose windows ran out POLL_MISSES times in a row
 *    rests too: an idle or slow client costs a window now and then;
 *  - each turn of the loop yields the CPU, so a client sharing it runs;
 *  - at most one thread fewer than there are CPUs polls at a time (at
 *    least one); the others sleep at once.
 */
#define POLL_SAMPLE 32
#define POLL_SAMPLE_MAX 256
#define POLL_MISSES 4
#define POLL_REST   64

static unsigned pollers;        /* threads polling now */
static unsigned max_pollers;    /* 0 until the first connection */

/* What a wait that may busy-poll came to. */
enum poll_outcome {
  POLL_GOT,                     /* recv answered: *got is what it returned
                                 * (bytes, 0 at end of file, -1 on error) */
  POLL_SLEEP,                   /* nothing came in the window, or this wait
                                 * is to sleep: read as usual */
};

/* Poll the socket for up to the connection's window. */
static enum poll_outcome
busy_poll (struct connection *conn, void *buf, size_t len, ssize_t *got)
{
  if (conn->in->poll_skip > 0) {
    conn->in->poll_skip--;
    conn->in->poll_slept = true;
    return POLL_SLEEP;
  }
  if (++conn->in->poll_waits >= conn->in->poll_every) {
    conn->in->poll_waits = 0;
    conn->in->poll_slept = conn->in->poll_sampled = true;
    return POLL_SLEEP;
  }
  if (__atomic_add_fetch (&pollers, 1, __ATOMIC_RELAXED) >
      __atomic_load_n (&max_pollers, __ATOMIC_RELAXED)) {
    __atomic_sub_fetch (&pollers, 1, __ATOMIC_RELAXED);
    return POLL_SLEEP;
  }
  uint64_t start = now_ns (), now = start;
  bool came = true;
  ssize_t r;
  for (;;) {
    r = recv (conn->sockin, buf, len, MSG_DONTWAIT);
    if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      break;
    now = now_ns ();
    if (now - start >= conn->in->poll_ns) {
      came = false;
      break;
    }
    sched_yield ();
  }
  __atomic_sub_fetch (&pollers, 1, __ATOMIC_RELAXED);
  /* One site, its second argument a variable: a literal operand in the
   * note is one that perf drops.
   */
  if (NBDKIT_BUSY_POLL_ENABLED ())
    NBDKIT_BUSY_POLL (conn->id, (int64_t) came,
                      (came ? now_ns () : now) - start);
  if (!came) {
    if (++conn->in->poll_misses >= POLL_MISSES) {
      conn->in->poll_misses = 0;
      conn->in->poll_skip = POLL_REST;
    }
    return POLL_SLEEP;
  }
  /* Input, end of file or an error. */
  conn->in->poll_misses = 0;
  *got = r;
  return POLL_GOT;
}

/* After a request was read, under the read lock: MORE if the start of
 * another is already in the input buffer.  If reading the request
 * slept where it could have polled, the client kept sending meanwhile.
 */
void
conn_poll_feedback (struct connection *conn, bool more)
{
  if (conn->in->poll_slept) {
    if (more) {
      conn->in->poll_skip = POLL_REST;
      conn->in->poll_every = POLL_SAMPLE;
    }
    else if (conn->in->poll_sampled && conn->in->poll_every < POLL_SAMPLE_MAX)
      conn->in->poll_every *= 2;
    if (conn->in->poll_sampled)
      NBDKIT_BUSY_POLL_LOOK (conn->id, (int64_t) more,
                             (uint64_t) conn->in->poll_every);
    conn->in->poll_slept = conn->in->poll_sampled = false;
  }
}

/* The sock_read_* and sock_write_* probes fire around each read and
 * write this file makes on the client's behalf.  A request costs a
 * read and a write, so untraced each costs one semaphore test, that of
 * sock_read_done or sock_write_done: the start probes fire only while
 * their done probe is traced too (nbdkit-probes(1) says so).  The
 * traced path, out of line, reads the clock.
 */
#define SOCK_READ_TRACED() NBDKIT_SOCK_READ_DONE_ENABLED ()
#define SOCK_WRITE_TRACED() NBDKIT_SOCK_WRITE_DONE_ENABLED ()

static uint64_t __attribute__ ((noinline))
sock_read_begin (struct connection *conn, size_t want)
{
  if (NBDKIT_SOCK_READ_START_ENABLED ())
    NBDKIT_SOCK_READ_START (conn->id, (uint64_t) want);
  return NBDKIT_SOCK_READ_DONE_ENABLED () ? now_ns () : 0;
}

static void __attribute__ ((noinline))
sock_read_end (struct connection *conn, ssize_t r, uint64_t t0)
{
  int err = r == -1 ? errno : 0;
  if (t0 && NBDKIT_SOCK_READ_DONE_ENABLED ())
    NBDKIT_SOCK_READ_DONE (conn->id, (int64_t) r, (int64_t) err,
                           now_ns () - t0);
  errno = err;
}

static uint64_t __attribute__ ((noinline))
sock_write_begin (struct connection *conn, size_t bytes)
{
  if (NBDKIT_SOCK_WRITE_START_ENABLED ())
    NBDKIT_SOCK_WRITE_START (conn->id, (uint64_t) bytes);
  return NBDKIT_SOCK_WRITE_DONE_ENABLED () ? now_ns () : 0;
}

static void __attribute__ ((noinline))
sock_write_end (struct connection *conn, ssize_t r, uint64_t t0)
{
  int err = r == -1 ? errno : 0;
  if (t0 && NBDKIT_SOCK_WRITE_DONE_ENABLED ())
    NBDKIT_SOCK_WRITE_DONE (conn->id, (int64_t) r, (int64_t) err,
                            now_ns () - t0);
  errno = err;
}

static size_t
iov_total (const struct iovec *iov, int n)
{
  size_t total = 0;
  for (int i = 0; i < n; i++)
    total += iov[i].iov_len;
  return total;
}

/* One read from the socket: bytes, 0 at end of file, -1 on error. */
static inline __attribute__ ((always_inline)) ssize_t
read_once (struct connection *conn, void *buf, size_t len)
{
  if (conn->tls_active)
    return tls_recv (conn, buf, len);  /* it keeps the deadline itself */
  if (conn->deadline_ns) {
    if (wait_for_input (conn) == -1)
      return -1;
  }
  else if (conn->in->poll_ns) {
    ssize_t got;
    if (busy_poll (conn, buf, len, &got) == POLL_GOT)
      return got;
  }
  for (;;) {
    ssize_t r = read (conn->sockin, buf, len);
    if (r >= 0 || errno != EINTR)
      return r;
  }
}

static ssize_t __attribute__ ((noinline))
read_some_traced (struct connection *conn, void *buf, size_t len)
{
  uint64_t t0 = sock_read_begin (conn, len);
  ssize_t r = read_once (conn, buf, len);
  sock_read_end (conn, r, t0);
  return r;
}

/* Out of line, as it was before the probes: the test is then one
 * compare with the semaphore in memory.
 */
static ssize_t __attribute__ ((noinline))
read_some (struct connection *conn, void *buf, size_t len)
{
  if (SOCK_READ_TRACED ())
    return read_some_traced (conn, buf, len);
  return read_once (conn, buf, len);
}

/* Over TCP, a thread blocked in read for a large payload is woken by
 * every segment that arrives, and each wake-up costs the sender too (in
 * a VM, an interrupt to our CPU).  Saying how many bytes we wait for
 * (SO_RCVLOWAT) lets the kernel wake us once, when they are all in or
 * when its buffer or the window runs short.
 *
 * Two rules keep that from hanging.  The low mark never exceeds the
 * bytes the client still owes us, and no read may sleep with it above
 * 1: the kernel counts only bytes not yet copied against the mark, so a
 * read that copied part and then slept would wait for more than will
 * ever come.  So a payload read with the mark set polls first and then
 * takes what is there without waiting; every other read first puts the
 * mark back to 1.
 */
#define LOWAT_MIN (512 * 1024)  /* payloads this big; smaller gained nothing */
#define LOWAT_MAX (1024 * 1024)

static int
set_lowat (struct connection *conn, int v)
{
  if (v == conn->in->lowat)
    return 0;
  if (setsockopt (conn->sockin, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0)
    conn->in->lowat = v;
  else if (conn->in->lowat > 1)
    return -1;                  /* stuck above 1: reads could hang */
  else
    conn->in->lowat = 0;            /* refused from the start: never again */
  return 0;
}

/* Before a read that takes whatever there is: the mark back to 1. */
static int
lowat_off (struct connection *conn)
{
  return conn->in->lowat > 1 ? set_lowat (conn, 1) : 0;
}

/* One read of a payload into the N pieces of IOV, over plain sockets
 * (not TLS, no deadline), the client still owing LEFT bytes; with MARK,
 * waiting with the low mark.  Returns bytes, 0 at end of file, -1 on
 * error (EINTR: nothing read, try again).
 */
static ssize_t
read_payload_once (struct connection *conn, struct iovec *iov, int n,
                   bool mark, size_t left)
{
  if (mark && conn->in->lowat != 0 &&
      set_lowat (conn, left > LOWAT_MAX ? LOWAT_MAX : left) == 0 &&
      conn->in->lowat > 1) {
    struct pollfd p = { .fd = conn->sockin, .events = POLLIN };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
    if (poll (&p, 1, -1) == -1)
      return -1;
    ssize_t r = recvmsg (conn->sockin, &m, MSG_DONTWAIT);
    if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
      errno = EINTR;            /* woken for nothing */
    return r;
  }
  if (lowat_off (conn) == -1)
    return -1;
  return readv (conn->sockin, iov, n);
}

static ssize_t __attribute__ ((noinline))
read_payload_traced (struct connection *conn, struct iovec *iov, int n,
                     bool mark, size_t left)
{
  uint64_t t0 = sock_read_begin (conn, iov_total (iov, n));
  ssize_t r = read_payload_once (conn, iov, n, mark, left);
  sock_read_end (conn, r, t0);
  return r;
}

static inline ssize_t
read_payload (struct connection *conn, struct iovec *iov, int n,
              bool mark, size_t left)
{
  if (SOCK_READ_TRACED ())
    return read_payload_traced (conn, iov, n, mark, left);
  return read_payload_once (conn, iov, n, mark, left);
}

/* Copy up to LEN bytes the input buffer holds to BUF: how many. */
static size_t
from_buffer (struct connection *conn, void *buf, size_t len)
{
  size_t n = conn->in->len < len ? conn->in->len : len;
  if (n > 0) {
    memcpy (buf, conn->in->buf + conn->in->pos, n);
    conn->in->pos += n;
    conn->in->len -= n;
  }
  return n;
}

/* Read exactly LEN bytes.  Returns 0, or -1 with errno set (0 at a
 * clean end of file before the first byte).
 *
 * Input is buffered: one read() takes in whatever the client has sent,
 * so a client with many requests in flight costs one system call for
 * many request headers.  Large payloads bypass the buffer and land in
 * the caller's memory directly, without the low mark: into the
 * worker's buffer, whence the plugin copies on, the file plugin's
 * writes came out slower with it (bench/HISTORY.md).  Only the thread
 * that holds the connection's read lock (or the handshake) calls this.
 */
int
conn_recv (struct connection *conn, void *buf, size_t len)
{
  char *p = buf;
  /* (BUF may be NULL when LEN is 0: a zero-length write payload.) */
  size_t got = len > 0 ? from_buffer (conn, p, len) : 0;

  while (got < len) {
    size_t want = len - got;
    ssize_t r = lowat_off (conn);
    if (r == -1)
      return -1;
    if (want >= CONN_INBUF_SIZE / 2 || !conn->in->buf)
      r = read_some (conn, p + got, want);      /* straight in */
    else {
      r = read_some (conn, conn->in->buf, CONN_INBUF_SIZE);
      if (r > 0) {
        conn->in->pos = 0;
        conn->in->len = r;
        got += from_buffer (conn, p + got, want);
        continue;
      }
    }
    if (r == -1)
      return -1;
    if (r == 0) {
      errno = got == 0 ? 0 : EPIPE;
      return -1;
    }
    got += r;
  }
  conn->bytes_in += len;
  return 0;
}

/* Read exactly the bytes that fill the N pieces of IOV, as conn_recv
 * would one after another: what the input buffer holds, then one readv
 * for up to RECVV_PIECES pieces (1 MiB of 4 KiB pages) at a time, the
 * first of them perhaps begun from the buffer.  These are the plugin's
 * memory, with nothing to copy on, so over TCP the reads wait with the
 * low mark (read_payload).  Returns 0, or -1 with errno set.
 */
#define RECVV_PIECES 256
int
conn_recvv (struct connection *conn, const struct iovec *iov, int n)
{
  int i = 0;
  size_t skip = 0;              /* bytes of iov[i] already filled */

  if (conn->tls_active || conn->deadline_ns) {
    for (; i < n; i++)
      if (conn_recv (conn, iov[i].iov_base, iov[i].iov_len) == -1)
        return -1;
    return 0;
  }

  while (i < n && conn->in->len > 0) {
    size_t k = from_buffer (conn, (char *) iov[i].iov_base + skip,
                            iov[i].iov_len - skip);
    conn->bytes_in += k;
    skip += k;
    if (skip == iov[i].iov_len) {
      i++;
      skip = 0;
    }
  }

  while (i < n) {
    struct iovec v[RECVV_PIECES], *p = v;
    int cnt = n - i < RECVV_PIECES ? n - i : RECVV_PIECES;
    size_t total = 0;

    memcpy (v, iov + i, cnt * sizeof *v);
    v[0].iov_base = (char *) v[0].iov_base + skip;
    v[0].iov_len -= skip;
    skip = 0;
    for (int k = 0; k < cnt; k++)
      total += v[k].iov_len;
    i += cnt;
    size_t left = total;
    while (left > 0) {
      ssize_t r = read_payload (conn, p, cnt, total >= LOWAT_MIN, left);
      if (r == -1 && errno == EINTR)
        continue;
      if (r == -1)
        return -1;
      if (r == 0) {
        errno = EPIPE;
        return -1;
      }
      conn_iov_advance (&p, &cnt, r);
      left -= r;
    }
    conn->bytes_in += total;
  }
  return 0;
}

/* Step past the first LEN bytes of the iovec array *V of *CNT
 * entries (after a short write), modifying the entry it stops in.
 */
void
conn_iov_advance (struct iovec **v, int *cnt, size_t len)
{
  while (*cnt > 0 && len >= (*v)->iov_len) {
    len -= (*v)->iov_len;
    (*v)++;
    (*cnt)--;
  }
  if (*cnt > 0) {
    (*v)->iov_base = (char *) (*v)->iov_base + len;
    (*v)->iov_len -= len;
  }
}

/* Write a whole iovec array, resuming after short writes. */
static inline __attribute__ ((always_inline)) int
sendv_all (struct connection *conn, const struct iovec *iov_in, int iovcnt)
{
  struct iovec iov[16];
  size_t total = 0;

  if (iovcnt > 16) {
    errno = EINVAL;
    return -1;
  }
  if (conn->tls_active) {
    if (tls_sendv (conn, iov_in, iovcnt) == -1)
      return -1;
    for (int i = 0; i < iovcnt; i++)
      conn->bytes_out += iov_in[i].iov_len;
    return 0;
  }
  memcpy (iov, iov_in, iovcnt * sizeof *iov);
  for (int i = 0; i < iovcnt; i++)
    total += iov[i].iov_len;

  struct iovec *v = iov;
  while (iovcnt > 0) {
    ssize_t r;
    if (conn->sockout_is_socket) {
      struct msghdr msg = { .msg_iov = v, .msg_iovlen = iovcnt };
      r = sendmsg (conn->sockout, &msg, MSG_NOSIGNAL);
    }
    else
      r = writev (conn->sockout, v, iovcnt);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    conn_iov_advance (&v, &iovcnt, r);
  }
  conn->bytes_out += total;
  return 0;
}

/* The whole of a conn_sendv is one write for the sock_write probes
 * (one system call, or several after short writes).
 */
static int __attribute__ ((noinline))
sendv_traced (struct connection *conn, const struct iovec *iov, int iovcnt)
{
  size_t total = iov_total (iov, iovcnt);
  uint64_t t0 = sock_write_begin (conn, total);
  int r = sendv_all (conn, iov, iovcnt);
  sock_write_end (conn, r == -1 ? -1 : (ssize_t) total, t0);
  return r;
}

int
conn_sendv (struct connection *conn, const struct iovec *iov, int iovcnt)
{
  if (SOCK_WRITE_TRACED ())
    return sendv_traced (conn, iov, iovcnt);
  return sendv_all (conn, iov, iovcnt);    /* inlined: no second call */
}

/* One sendmsg that does not wait: bytes taken (maybe 0), or -1 with
 * errno set on a real error.  Only for a plain socket (see
 * conn_can_send_nowait).
 */
static ssize_t
sendv_nowait_once (struct connection *conn, const struct iovec *iov,
                   int iovcnt)
{
  struct msghdr msg = { .msg_iov = (struct iovec *) iov,
                        .msg_iovlen = iovcnt };
  for (;;) {
    ssize_t r = sendmsg (conn->sockout, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      conn->bytes_out += r;
      return r;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return 0;
    if (errno != EINTR)
      return -1;
  }
}

ssize_t
conn_sendv_nowait (struct connection *conn, const struct iovec *iov,
                   int iovcnt)
{
  if (SOCK_WRITE_TRACED ()) {
    uint64_t t0 = sock_write_begin (conn, iov_total (iov, iovcnt));
    ssize_t r = sendv_nowait_once (conn, iov, iovcnt);
    sock_write_end (conn, r, t0);
    return r;
  }
  return sendv_nowait_once (conn, iov, iovcnt);
}

/* How many bytes from the client wait to be read, buffered here or in
 * the socket (for TLS, still encrypted), if nobody is reading now;
 * 0 if someone is.  A hint, for the stall watcher (stalls.c).
 */
size_t
conn_pending_input (struct connection *conn)
{
  if (pthread_mutex_trylock (&conn->read_lock) != 0)
    return 0;
  int queued = 0;
  size_t n = conn->in->len;
  if (ioctl (conn->sockin, FIONREAD, &queued) == 0 && queued > 0)
    n += queued;
  pthread_mutex_unlock (&conn->read_lock);
  return n;
}

bool
conn_can_send_nowait (const struct connection *conn)
{
  return conn->sockout_is_socket && !conn->tls_active;
}

/* Would LEN more bytes go into the socket now, without waiting for
 * the client to read?  For a thread that must never wait on a client
 * (a plugin's, answering a request as it completes: async.c), with the
 * write lock held, so that the queue can only shrink meanwhile.  On the
 * safe side: a plain socket whose queued bytes and LEN, twice over
 * (the kernel counts its own overhead against the same buffer), stay
 * inside the send buffer with room to spare.  Costs one ioctl, and a
 * getsockopt when the answer is no (TCP grows its buffer as it goes).
 */
#define SEND_FITS_SLACK 16384
bool
conn_send_fits (struct connection *conn, size_t len)
{
  int queued, sndbuf;
  socklen_t sl = sizeof sndbuf;

  if (!conn_can_send_nowait (conn) ||
      ioctl (conn->sockout, SIOCOUTQ, &queued) == -1 || queued < 0)
    return false;
  size_t need = 2 * ((size_t) queued + len) + SEND_FITS_SLACK;
  if (need <= conn->sndbuf)
    return true;
  if (getsockopt (conn->sockout, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl) == -1 ||
      sndbuf <= 0)
    return false;
  conn->sndbuf = sndbuf;
  return need <= conn->sndbuf;
}

int
conn_send (struct connection *conn, const void *buf, size_t len)
{
  struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
  return conn_sendv (conn, &iov, 1);
}

/* Set up the I/O state of a new connection, whose sockets and
 * transport are filled in.
 */
int
conn_io_init (struct connection *conn)
{
  conn->in = calloc (1, sizeof *conn->in);
  if (!conn->in)
    return -1;
  conn->sockout_is_socket = is_socket (conn->sockout);
  conn->in->lowat = strcmp (conn->transport, "tcp") == 0;
  conn->in->poll_ns = is_socket (conn->sockin) ?
    conn->cfg->busy_poll * UINT64_C (1000) : 0;
  conn->in->poll_every = POLL_SAMPLE;
  if (__atomic_load_n (&max_pollers, __ATOMIC_RELAXED) == 0) {
    long cpus = sysconf (_SC_NPROCESSORS_ONLN);
    __atomic_store_n (&max_pollers, cpus > 2 ? (unsigned) cpus - 1 : 1,
                      __ATOMIC_RELAXED);
  }
  /* Without an input buffer, reads are simply unbuffered. */
  conn->in->buf = malloc (CONN_INBUF_SIZE);
  return 0;
}

void
conn_io_free (struct connection *conn)
{
  if (conn->in)
    free (conn->in->buf);
  free (conn->in);
  conn->in = NULL;
}
