/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: answering requests.  tx_send_reply encodes the reply
 * to one request (simple, structured or extended, as negotiated) and
 * sends it with one sendmsg under the connection's write lock, or holds
 * it back in the worker's out buffer to go with the next replies while
 * the client is still sending.  Two reads go out without a copy through
 * the worker's buffer: one the plugin mapped in place (send_mapped, the
 * write lock already taken by run()), and one it pointed at in a file
 * (send_fd, with sendfile).  The reply_send probe fires here, before
 * each write, and reply_written after it; the count of replies written
 * (request_dispatch's in_flight) is kept here too.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/sendfile.h>

#include "internal.h"
#include "protocol.h"
#include "tx.h"

static int
nbd_errno (int err)
{
  switch (err) {
  case 0: return NBD_SUCCESS;
  case EROFS:
  case EPERM: return NBD_EPERM;
  case EIO: return NBD_EIO;
  case ENOMEM: return NBD_ENOMEM;
  case EINVAL: return NBD_EINVAL;
#ifdef EDQUOT
  case EDQUOT:
#endif
  case EFBIG:
  case ENOSPC: return NBD_ENOSPC;
  case EOVERFLOW: return NBD_EOVERFLOW;
#if EOPNOTSUPP != ENOTSUP
  case EOPNOTSUPP:
#endif
  case ENOTSUP: return NBD_ENOTSUP;
  case ESHUTDOWN: return NBD_ESHUTDOWN;
  default: return NBD_EINVAL;   /* no NBD word for it: as nbdkit does */
  }
}

/* A layer's errno as the reply may carry it: the spec reserves
 * EOVERFLOW for reads with DF and ENOTSUP for fast zeroes, so a plugin
 * failing with either elsewhere gets EINVAL, as in nbdkit.  (Errors the
 * edge chooses itself, from validate, go out as they are.)
 */
int
tx_layer_error_for_reply (int err, uint16_t nbd_flags)
{
  if (err == EOVERFLOW && !(nbd_flags & NBD_CMD_FLAG_DF))
    return EINVAL;
  if ((err == ENOTSUP || err == EOPNOTSUPP) &&
      !(nbd_flags & NBD_CMD_FLAG_FAST_ZERO))
    return EINVAL;
  return err;
}

/* reply_send fires under the connection's write lock, just before the
 * write that carries the reply (a held reply's, before the write that
 * carries the batch it waits in), so that tracers see replies in wire
 * order and before anything the client sends in answer (probes.d).
 * One call site, so that every firing passes its arguments alike.
 */
static void __attribute__ ((noinline))
fire_reply_send (struct connection *conn, uint64_t cookie, const char *kind,
                 uint64_t bytes)
{
  NBDKIT_REPLY_SEND (conn->id, cookie, kind, bytes, probe_u64 (1));
}

/* The kind of the reply whose first piece is IOV[0], for reply_send.
 * SIMPLE is where send_reply built a simple reply's header.
 */
static const char *
reply_kind (const struct connection *conn, const struct iovec *iov,
            const void *simple)
{
  return conn->nego.extended ? "extended"
    : iov[0].iov_base == simple ? "simple" : "structured";
}

/* Fire reply_send for the reply to REQ whose N pieces are IOV. */
static void
fire_reply (struct connection *conn, const struct request *req,
            const struct iovec *iov, int n, const void *simple)
{
  uint64_t bytes = 0;
  for (int i = 0; i < n; i++)
    bytes += iov[i].iov_len;
  fire_reply_send (conn, req->cookie, reply_kind (conn, iov, simple), bytes);
}

/* With the write lock held, before w->out goes out: reply_send for the
 * replies held in it (those held while it was traced).  The list lives
 * on until the next batch begins (hold_reply), for reply_written.
 */
static void
fire_held (struct connection *conn, struct worker *w)
{
  if (w->held.len && NBDKIT_REPLY_SEND_ENABLED ())
    for (size_t i = 0; i < w->held.len; i++)
      fire_reply_send (conn, w->held.ptr[i].cookie, w->held.ptr[i].kind,
                       w->held.ptr[i].bytes);
}

/* With the write lock held, as a write that carries N replies begins
 * (before it, so that the write stays a tail call on the path of every
 * reply): from then on they are answered, for in_flight.
 */
static inline void
count_replies (struct connection *conn, uint64_t n)
{
  conn->replies += n;
}

/* reply_written, like reply_send, has one call site. */
static void __attribute__ ((noinline))
fire_reply_written (struct connection *conn, uint64_t cookie, uint64_t bytes,
                    uint64_t ns, int64_t ok)
{
  NBDKIT_REPLY_WRITTEN (conn->id, cookie, bytes, ns, ok);
}

/* After the write (RET its result, begun at T0) that carried the
 * replies held in w->out (if HELD) and the reply to REQ (if not NULL)
 * whose N pieces IOV held: reply_written for each.
 */
static void __attribute__ ((noinline))
fire_written (struct connection *conn, struct worker *w, bool held,
              const struct request *req, const struct iovec *iov, int n,
              int ret, uint64_t t0)
{
  uint64_t ns = now_ns () - t0;
  int64_t ok = ret == 0;
  if (held)
    for (size_t i = 0; i < w->held.len; i++)
      fire_reply_written (conn, w->held.ptr[i].cookie, w->held.ptr[i].bytes,
                          ns, ok);
  if (req) {
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++)
      bytes += iov[i].iov_len;
    fire_reply_written (conn, req->cookie, bytes, ns, ok);
  }
}

/* reply_written's path of flush_locked: V (K pieces) carries the
 * replies held (if HELD, counted already) and REQ's in IOV (if not
 * NULL: NREQ is 1).
 */
static int __attribute__ ((noinline))
write_traced (struct connection *conn, struct worker *w, bool held,
              const struct request *req, const struct iovec *iov, int n,
              const struct iovec *v, int k, uint64_t nreq)
{
  uint64_t t0 = now_ns ();
  count_replies (conn, nreq);
  int r = conn_sendv (conn, v, k);
  fire_written (conn, w, held, req, iov, n, r, t0);
  return r;
}

/* With the write lock held: send the replies held back in w->out, then
 * (with REQ; NREQ is 1 then, else 0: a constant where it is inlined)
 * the reply to REQ in IOV, in one sendmsg.  Inlined into both callers:
 * on the path of every reply.
 */
static inline __attribute__ ((always_inline)) int
flush_locked (struct connection *conn, struct worker *w, uint64_t nreq,
              const struct request *req, const struct iovec *iov, int n,
              const void *simple)
{
  struct iovec v[8];
  int k = 0;
  bool held = w->out.len;
  if (held) {
    fire_held (conn, w);
    v[k++] = (struct iovec) { w->out.ptr, w->out.len };
    count_replies (conn, w->out_n);
    w->out_n = 0;
  }
  if (req && NBDKIT_REPLY_SEND_ENABLED ())
    fire_reply (conn, req, iov, n, simple);
  for (int i = 0; i < n; i++)
    v[k++] = iov[i];
  w->out.len = 0;
  if (k == 0)
    return 0;
  if (NBDKIT_REPLY_WRITTEN_ENABLED ())
    return write_traced (conn, w, held, req, iov, n, v, k, nreq);
  count_replies (conn, nreq);
  return conn_sendv (conn, v, k);
}

/* Send the replies held back in w->out. */
int
tx_flush_replies (struct connection *conn, struct worker *w)
{
  if (w->out.len == 0)
    return 0;
  /* Held replies of several requests: cookie 0. */
  WAIT_LOCK_FOR_SCOPE (&conn->write_lock, conn->id, 0, "write");
  return flush_locked (conn, w, 0, NULL, NULL, 0, NULL);
}

/* Copy the reply to REQ (IOV, N pieces; SIMPLE as for reply_kind) into
 * w->out, and while reply_send is traced, note what it is to report
 * when the reply goes out.  Returns false if it does not fit.
 */
static bool
hold_reply (struct connection *conn, struct worker *w,
            const struct request *req, const struct iovec *iov, int n,
            const void *simple)
{
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += iov[i].iov_len;
  if (w->out.len == 0)
    w->held.len = 0;            /* a new batch: the last one is out */
  if (len > MAX_HELD_REPLY || w->out.len + len > MAX_HELD_REPLIES)
    return false;
  /* Start at 64 KiB: most batches of replies then fit at once. */
  if ((w->out.cap == 0 && byte_vector_reserve (&w->out, 65536) == -1) ||
      byte_vector_reserve (&w->out, len) == -1)
    return false;
  if ((NBDKIT_REPLY_SEND_ENABLED () || NBDKIT_REPLY_WRITTEN_ENABLED ()) &&
      held_reply_list_append (&w->held, (struct held_reply) {
          .cookie = req->cookie,
          .bytes = len,
          .kind = reply_kind (conn, iov, simple),
        }) == -1)
    return false;
  for (int i = 0; i < n; i++) {
    memcpy (w->out.ptr + w->out.len, iov[i].iov_base, iov[i].iov_len);
    w->out.len += iov[i].iov_len;
  }
  w->out_n++;
  return true;
}

/* Send the reply to a read mapped in place: the held replies, the
 * header HDR (NH pieces) and, with DATA, the mapped pieces, with the
 * write lock run() took.  Whatever the socket does not take at once is
 * copied into the worker's buffer (run() made sure it has room), so
 * the plugin's memory is let go before anything waits on the client;
 * then the rest goes out and the write lock is let go.
 */
static int
send_mapped (struct connection *conn, struct worker *w,
             const struct request *req, const struct iovec *hdr, int nh,
             bool data, const void *simple)
{
  struct iovec *v = w->zc_iov + ZC_HEAD - nh;
  int cnt = nh + (data ? w->zc_n : 0);
  size_t left = 0;
  int ret = 0;
  bool held = w->out.len;
  uint64_t count = 1 + w->out_n;
  uint64_t t0 = NBDKIT_REPLY_WRITTEN_ENABLED () ? now_ns () : 0;
  uint64_t bytes = 0;           /* the reply's, for reply_written */

  memcpy (v, hdr, nh * sizeof *v);
  if (held)
    fire_held (conn, w);
  if (NBDKIT_REPLY_SEND_ENABLED ())
    fire_reply (conn, req, v, cnt, simple);
  if (t0)
    for (int i = 0; i < cnt; i++)
      bytes += v[i].iov_len;
  if (held) {
    *--v = (struct iovec) { w->out.ptr, w->out.len };
    cnt++;
  }
  w->out_n = 0;
  for (int i = 0; i < cnt; i++)
    left += v[i].iov_len;

  count_replies (conn, count);
  while (left > 0) {
    ssize_t r = conn_sendv_nowait (conn, v, cnt > IOV_MAX ? IOV_MAX : cnt);
    if (r <= 0) {
      ret = r;
      break;
    }
    left -= r;
    conn_iov_advance (&v, &cnt, r);
  }

  if (ret == 0 && left > w->cap) {
    errno = ENOMEM;             /* cannot happen: run() made room */
    ret = -1;
  }
  if (ret == 0) {
    char *p = w->buf;
    for (int i = 0; i < cnt; i++) {
      memcpy (p, v[i].iov_base, v[i].iov_len);
      p += v[i].iov_len;
    }
  }
  layer_unmap_read (conn->nego.top);
  w->zc_mapped = false;
  w->out.len = 0;
  if (ret == 0 && left > 0)
    ret = conn_send (conn, w->buf, left);
  if (t0) {
    struct iovec whole = { NULL, bytes };
    fire_written (conn, w, held, req, &whole, 1, ret, t0);
  }
  pthread_mutex_unlock (&conn->write_lock);
  return ret;
}

static int send_fd_data (struct connection *conn, struct worker *w,
                         const struct request *req, const struct iovec *v,
                         int k);

/* Send the reply to a read the plugin pointed at in a file: the held
 * replies and the header HDR (NH pieces), then the file's bytes with
 * sendfile, which hands the page cache's pages to the socket with no
 * copy through this process.  After the header, any failure leaves the
 * connection's framing broken: -1, and the caller closes it.
 */
static int
send_fd (struct connection *conn, struct worker *w,
         const struct request *req, const struct iovec *hdr, int nh,
         const void *simple)
{
  struct iovec v[8];
  int k = 0;
  bool held = w->out.len;
  uint64_t count = 1 + w->out_n;

  w->fd_pending = false;
  WAIT_LOCK_FOR_SCOPE (&conn->write_lock, conn->id, req->cookie, "write");
  uint64_t t0 = NBDKIT_REPLY_WRITTEN_ENABLED () ? now_ns () : 0;
  w->out_n = 0;
  if (held)
    fire_held (conn, w);
  if (NBDKIT_REPLY_SEND_ENABLED ()) {
    memcpy (v, hdr, nh * sizeof *v);
    v[nh] = (struct iovec) { NULL, req->count };
    fire_reply (conn, req, v, nh + 1, simple);
  }
  if (w->out.len)
    v[k++] = (struct iovec) { w->out.ptr, w->out.len };
  for (int i = 0; i < nh; i++)
    v[k++] = hdr[i];
  w->out.len = 0;
  count_replies (conn, count);
  int r = send_fd_data (conn, w, req, v, k);
  if (t0) {
    struct iovec whole = { NULL, req->count };
    for (int i = 0; i < nh; i++)
      whole.iov_len += hdr[i].iov_len;
    fire_written (conn, w, held, req, &whole, 1, r, t0);
  }
  return r;
}

/* send_fd's writes, V (K pieces) then the file's bytes. */
static int
send_fd_data (struct connection *conn, struct worker *w,
              const struct request *req, const struct iovec *v, int k)
{
  if (conn_sendv (conn, v, k) == -1)
    return -1;
  off_t off = w->fd_offset;
  size_t left = req->count;
  while (left > 0) {
    ssize_t r = sendfile (conn->sockout, w->fd, &off, left);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1 && left == req->count &&
        (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
      /* This file cannot be spliced: the plugin reads it, now and from
       * now on.  The header is out, so a failure can only close.
       */
      int err;
      w->fd_read = false;
      if (!tx_grow (w, left) ||
          layer_pread (conn->nego.top, w->buf, left, req->offset, 0,
                       &err) == -1)
        return -1;
      return conn_send (conn, w->buf, left);
    }
    if (r == -1)
      return -1;
    if (r == 0)
      goto short_file;
    conn->bytes_out += r;
    left -= r;
  }
  return 0;

 short_file:
  nbdkit_error ("read at %" PRIu64 ": the file ended %zu bytes early "
                "(did it shrink?); closing the connection",
                req->offset + (req->count - left), left);
  errno = EIO;
  return -1;
}

/* The length of the longest prefix of S that is whole UTF-8 without
 * control characters: what of a plugin's error message can go to the
 * client in a structured error (the protocol wants UTF-8 text there;
 * the message may have been cut in the middle of a character).
 */
static size_t
utf8_prefix (const char *s)
{
  const unsigned char *p = (const unsigned char *) s;
  size_t i = 0, ok = 0;
  while (p[i]) {
    unsigned c = p[i], more;
    if (c < 0x20 || c == 0x7f)
      break;
    else if (c < 0x80)
      more = 0;
    else if (c >= 0xc2 && c <= 0xdf)
      more = 1;
    else if (c >= 0xe0 && c <= 0xef)
      more = 2;
    else if (c >= 0xf0 && c <= 0xf4)
      more = 3;
    else
      break;
    size_t j = 1;
    for (; j <= more; j++)
      if ((p[i + j] & 0xc0) != 0x80)
        break;
    if (j <= more)
      break;
    i += 1 + more;
    ok = i;
  }
  return ok;
}

/* Send the reply to REQ, or hold it back, as HOW says. */
static int
send_reply (struct connection *conn, struct worker *w,
            const struct request *req, int err, int ndesc,
            enum reply_how how)
{
  struct iovec iov[4];
  int n = 0;
  uint32_t nerr = nbd_errno (err);
  bool data = err == 0 && req->type == NBD_CMD_READ;
  /* Read data goes out from w->buf unless it is mapped or in a file. */
  bool data_in_buf = data && !w->zc_mapped && !w->fd_pending;
  bool bs = err == 0 && req->type == NBD_CMD_BLOCK_STATUS;

  struct nbd_simple_reply simple;
  struct nbd_structured_reply sr;
  struct nbd_extended_reply er;
  uint64_t be_offset;
  struct nbd_structured_error se;
  size_t msglen = 0;
  uint32_t bs_head[2];

  /* Simple reply: no structured replies, or a non-data reply. */
  if (!conn->nego.extended &&
      (!conn->nego.structured || (req->type != NBD_CMD_READ &&
                             req->type != NBD_CMD_BLOCK_STATUS))) {
    simple.magic = htobe32 (NBD_SIMPLE_REPLY_MAGIC);
    simple.error = htobe32 (nerr);
    simple.cookie = htobe64 (req->cookie);
    iov[n++] = (struct iovec) { &simple, sizeof simple };
    if (data_in_buf)
      iov[n++] = (struct iovec) { w->buf, req->count };
  }
  else {
    uint16_t type;
    uint64_t len;
    if (err) {
      type = NBD_REPLY_TYPE_ERROR;
      se.error = htobe32 (nerr);
      msglen = w->errmsg ? utf8_prefix (w->errmsg) : 0;
      se.len = htobe16 (msglen);
      len = sizeof se + msglen;
    }
    else if (data) {
      type = NBD_REPLY_TYPE_OFFSET_DATA;
      be_offset = htobe64 (req->offset);
      len = 8 + req->count;
    }
    else if (bs) {
      type = conn->nego.extended ? NBD_REPLY_TYPE_BLOCK_STATUS_EXT
                            : NBD_REPLY_TYPE_BLOCK_STATUS;
      len = conn->nego.extended ? 8 + 16 * (uint64_t) ndesc
                           : 4 + 8 * (uint64_t) ndesc;
    }
    else {
      type = NBD_REPLY_TYPE_NONE;
      len = 0;
    }
    if (conn->nego.extended) {
      er.magic = htobe32 (NBD_EXTENDED_REPLY_MAGIC);
      er.flags = htobe16 (NBD_REPLY_FLAG_DONE);
      er.type = htobe16 (type);
      er.cookie = htobe64 (req->cookie);
      er.offset = htobe64 (req->offset);
      er.length = htobe64 (len);
      iov[n++] = (struct iovec) { &er, sizeof er };
    }
    else {
      sr.magic = htobe32 (NBD_STRUCTURED_REPLY_MAGIC);
      sr.flags = htobe16 (NBD_REPLY_FLAG_DONE);
      sr.type = htobe16 (type);
      sr.cookie = htobe64 (req->cookie);
      sr.length = htobe32 (len);
      iov[n++] = (struct iovec) { &sr, sizeof sr };
    }
    if (err) {
      iov[n++] = (struct iovec) { &se, sizeof se };
      if (msglen)
        iov[n++] = (struct iovec) { (void *) w->errmsg, msglen };
    }
    else if (data) {
      iov[n++] = (struct iovec) { &be_offset, 8 };
      if (data_in_buf)
        iov[n++] = (struct iovec) { w->buf, req->count };
    }
    else if (bs) {
      /* Descriptors go out in place, converted to big-endian. */
      bs_head[0] = htobe32 (1);         /* base:allocation's id */
      bs_head[1] = htobe32 (ndesc);
      if (conn->nego.extended) {
        for (int i = 0; i < ndesc; i++) {
          w->desc[i].length = htobe64 (w->desc[i].length);
          w->desc[i].status_flags = htobe64 (w->desc[i].status_flags);
        }
        iov[n++] = (struct iovec) { bs_head, 8 };
        iov[n++] = (struct iovec) { w->desc, 16 * (size_t) ndesc };
      }
      else {
        /* Pack to 32-bit descriptors inside the same scratch space. */
        struct nbd_block_descriptor_32 *d32 = (void *) w->desc;
        for (int i = 0; i < ndesc; i++) {
          uint32_t l = w->desc[i].length, s = w->desc[i].status_flags;
          d32[i].length = htobe32 (l);
          d32[i].status_flags = htobe32 (s);
        }
        iov[n++] = (struct iovec) { bs_head, 4 };
        iov[n++] = (struct iovec) { d32, 8 * (size_t) ndesc };
      }
    }
  }

  if (w->zc_mapped)
    return send_mapped (conn, w, req, iov, n, data, &simple);
  if (w->fd_pending)
    return send_fd (conn, w, req, iov, n, &simple);

  if (how == REPLY_LOCKED)
    return flush_locked (conn, w, 1, req, iov, n, &simple);
  if (how == REPLY_HOLD && hold_reply (conn, w, req, iov, n, &simple))
    return 0;
  WAIT_LOCK_FOR_SCOPE (&conn->write_lock, conn->id, req->cookie, "write");
  return flush_locked (conn, w, 1, req, iov, n, &simple);
}

int
tx_send_reply_from (struct connection *conn, struct worker *w,
                    const struct request *req, int err, char *buf,
                    enum reply_how how)
{
  char *own = w->buf;
  w->buf = buf;
  int r = send_reply (conn, w, req, err, 0, how);
  w->buf = own;
  return r;
}

int
tx_send_reply (struct connection *conn, struct worker *w,
               const struct request *req, int err, int ndesc, bool hold)
{
  int r = send_reply (conn, w, req, err, ndesc,
                      hold ? REPLY_HOLD : REPLY_NOW);
  /* The data is out (or copied into w->out, or lost with the client):
   * a large buffer is given back now, not kept for the next request.
   */
  tx_return_payload (conn, w);
  return r;
}
