/* nbdkit server: the transmission phase.  tx_serve starts the
 * connection's workers.  Each worker takes the read lock, reads one
 * request and its payload, checks every field against the export and
 * the negotiated limits (the edge: layers below trust what they get),
 * releases the lock, runs the request down the chain, and sends the
 * reply under the write lock as one sendmsg.  A worker keeps its own
 * buffer, so the data path allocates nothing per request.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>
#include <sys/sendfile.h>

#include "internal.h"
#include "protocol.h"

/* Block status replies carry at most this many descriptors. */
#define MAX_DESCRIPTORS 65536

/* Trim, zero and cache with 64-bit lengths go down in pieces. */
#define MAX_EFFECT_CHUNK (UINT32_C (1) << 30)

struct request {
  uint16_t flags;
  uint16_t type;
  uint64_t cookie;
  uint64_t offset;
  uint64_t count;
  int error;                    /* found by validation: reply, don't run */
  uint64_t start_ns;            /* only when request_done is traced */
};

struct pool;

struct worker {
  struct connection *conn;
  struct pool *pool;
  unsigned index;               /* in the pool */
  char *buf;                    /* payload in, data out */
  size_t cap;
  struct nbd_block_descriptor_64 *desc;   /* block status scratch */
  char *out;                    /* replies held back to go out together */
  size_t out_len, out_cap;
  /* A read mapped in place (common/zerocopy.h): ZC_HEAD free slots for
   * the held replies and the reply header, then zc_n data pieces.
   * While zc_mapped, this worker holds the connection's write lock.
   */
  bool zerocopy;                /* the top layer can map reads */
  bool zc_write;                /* and take write payloads */
  int zc_wn;                    /* pieces of a mapped write, or 0 */
  struct iovec *zc_iov;
  int zc_n;
  bool zc_mapped;
  /* A read the plugin pointed at in a file, to go out with sendfile. */
  bool fd_read;                 /* the top layer can do that */
  bool fd_pending;
  int fd;
  uint64_t fd_offset;
};

/* Reads larger than MAX_HELD_REPLY (smaller replies are worth more
 * held back and sent together) and up to ZC_MAX_BYTES go out straight
 * from a plugin that can map them: 1 MiB is 258 pieces at worst for
 * 4 KiB pages, well inside ZC_MAX_IOV (and the kernel's IOV_MAX of
 * 1024, with the header).
 */
#define ZC_HEAD 4
#define ZC_MAX_IOV 1020
#define ZC_MAX_BYTES (1024 * 1024)

/* The most a read reply's header pieces take (an extended structured
 * reply chunk's header and offset: 40 bytes).
 */
#define MAX_REPLY_HEAD 64

/* Write payloads larger than this, up to ZC_MAX_BYTES, are received
 * straight into memory the plugin lends, if it will (the memory plugin
 * lends pages that then replace the stored ones).  For a small write
 * the plugin's bookkeeping would cost about what the copy saves.
 */
#define ZC_MIN_WRITE (64 * 1024)

/* Replies are held back (and sent together) up to this many bytes;
 * a reply larger than MAX_HELD_REPLY is worth its own sendmsg rather
 * than an extra copy.
 */
#define MAX_HELD_REPLIES (1024 * 1024)
#define MAX_HELD_REPLY (64 * 1024)

const char *
tx_command_name (uint16_t cmd)
{
  switch (cmd) {
  case NBD_CMD_READ: return "read";
  case NBD_CMD_WRITE: return "write";
  case NBD_CMD_DISC: return "disc";
  case NBD_CMD_FLUSH: return "flush";
  case NBD_CMD_TRIM: return "trim";
  case NBD_CMD_CACHE: return "cache";
  case NBD_CMD_WRITE_ZEROES: return "write_zeroes";
  case NBD_CMD_BLOCK_STATUS: return "block_status";
  default: return "unknown";
  }
}

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
static int
layer_error_for_reply (int err, uint16_t nbd_flags)
{
  if (err == EOVERFLOW && !(nbd_flags & NBD_CMD_FLAG_DF))
    return EINVAL;
  if ((err == ENOTSUP || err == EOPNOTSUPP) &&
      !(nbd_flags & NBD_CMD_FLAG_FAST_ZERO))
    return EINVAL;
  return err;
}

/* Make the worker's buffer hold NEED bytes; what it held is lost.  It
 * starts on a page: where it happened to sit decided how fast the
 * kernel copied a payload from it into the file plugin's page cache
 * (three times the CPU per 1 MiB write with the buffer 16 bytes short
 * of a page, on the machine measured: bench/RESULTS.md).
 */
static bool
grow (struct worker *w, size_t need)
{
  void *b;
  if (need <= w->cap)
    return true;
  if (posix_memalign (&b, 4096, need) != 0)
    return false;
  free (w->buf);
  w->buf = b;
  w->cap = need;
  return true;
}

/* Throw away LEN payload bytes we will not use, keeping the framing. */
static int
discard (struct connection *conn, struct worker *w, uint64_t len)
{
  while (len > 0) {
    size_t n = len < w->cap ? len : w->cap;
    if (n == 0) {
      if (!grow (w, 65536))
        return -1;
      continue;
    }
    if (conn_recv (conn, w->buf, n) == -1)
      return -1;
    len -= n;
  }
  return 0;
}

/* Check a request that has been read, against the export and the
 * negotiated state.  Returns the errno to reply with, or 0.
 */
static int
validate (struct connection *conn, const struct request *req)
{
  uint16_t allowed;
  switch (req->type) {
  case NBD_CMD_READ: allowed = NBD_CMD_FLAG_DF; break;
  case NBD_CMD_WRITE: allowed = 0; break;
  case NBD_CMD_TRIM: allowed = 0; break;
  case NBD_CMD_WRITE_ZEROES:
    allowed = NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO;
    break;
  case NBD_CMD_BLOCK_STATUS: allowed = NBD_CMD_FLAG_REQ_ONE; break;
  case NBD_CMD_FLUSH:
  case NBD_CMD_CACHE: allowed = 0; break;
  default:
    return EINVAL;              /* unknown command */
  }
  /* FUA is valid on every command once advertised (it may do nothing). */
  allowed |= NBD_CMD_FLAG_FUA;
  if (conn->extended && req->type == NBD_CMD_WRITE)
    allowed |= NBD_CMD_FLAG_PAYLOAD_LEN;
  if (req->flags & ~allowed)
    return EINVAL;
  if ((req->flags & NBD_CMD_FLAG_FUA) && !conn->can_fua)
    return EINVAL;
  if ((req->flags & NBD_CMD_FLAG_DF) && !conn->structured)
    return EINVAL;
  if ((req->flags & NBD_CMD_FLAG_FAST_ZERO) && !conn->can_fast_zero)
    return EINVAL;

  bool is_write = req->type == NBD_CMD_WRITE || req->type == NBD_CMD_TRIM ||
    req->type == NBD_CMD_WRITE_ZEROES;
  if (is_write && !conn->can_write)
    return EPERM;
  switch (req->type) {
  case NBD_CMD_FLUSH:
    return conn->can_flush ? 0 : EINVAL;
  case NBD_CMD_TRIM:
    if (!conn->can_trim) return EINVAL;
    break;
  case NBD_CMD_WRITE_ZEROES:
    if (!conn->can_zero) return EINVAL;
    break;
  case NBD_CMD_CACHE:
    if (!conn->can_cache) return EINVAL;
    break;
  case NBD_CMD_BLOCK_STATUS:
    if (!conn->meta_base_allocation) return EINVAL;
    break;
  }

  /* Range: never compute offset + count before knowing it fits. */
  if (req->count == 0)
    return EINVAL;
  /* The protocol asks for ENOSPC from writes past the end (WRITE and
   * WRITE_ZEROES) but EINVAL from reads and trims.
   */
  if (req->offset > conn->exportsize ||
      req->count > conn->exportsize - req->offset)
    return is_write && req->type != NBD_CMD_TRIM ? ENOSPC : EINVAL;
  if ((req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE) &&
      req->count > conn->block_max)
    return EOVERFLOW;
  return 0;
}

/* The worker's piece list for mapped reads and writes, made on first
 * use.  False if out of memory.
 */
static bool
have_zc_iov (struct worker *w)
{
  if (!w->zc_iov)
    w->zc_iov = malloc ((ZC_HEAD + ZC_MAX_IOV) * sizeof *w->zc_iov);
  return w->zc_iov != NULL;
}

/* Receive a write's payload straight into memory the plugin lends
 * (zc_iov), for run() to hand back as the write.  Returns 0 when it
 * is all in, 1 if the plugin would rather not (nothing read: take the
 * copying path), -1 when the connection is over (the memory given
 * back, nothing written).
 */
static int
recv_mapped (struct connection *conn, struct worker *w, struct request *req)
{
  struct context *c = conn->top;
  int n = ZC_MAX_IOV, err;

  if (!have_zc_iov (w) ||
      layer_map_write (c, req->count, req->offset, w->zc_iov, &n) == -1)
    return 1;
  if (conn_recvv (conn, w->zc_iov, n) == -1) {
    layer_unmap_write (c, req->count, req->offset, w->zc_iov, 0, &err);
    NBDKIT_PROTOCOL_VIOLATION (conn->id, "write payload cut short");
    conn_set_closing (conn, "read error");
    return -1;
  }
  w->zc_wn = n;
  return 0;
}

/* Read one request.  Returns 0 with *req filled in (req->error set if
 * it must not run), 1 for NBD_CMD_DISC, 2 when the reply to *req must
 * be the last thing on this connection, -1 when the connection is over.
 */
static int
recv_request (struct connection *conn, struct worker *w, struct request *req)
{
  union {
    struct nbd_request compact;
    struct nbd_extended_request ext;
  } h;
  size_t hlen = conn->extended ? sizeof h.ext : sizeof h.compact;

  if (conn_recv (conn, &h, hlen) == -1) {
    if (errno == 0)
      conn_set_closing (conn, "eof");
    else {
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "short request header");
      conn_set_closing (conn, "read error");
    }
    return -1;
  }
  if (conn->extended) {
    if (be32toh (h.ext.magic) != NBD_EXTENDED_REQUEST_MAGIC)
      goto bad_magic;
    req->flags = be16toh (h.ext.flags);
    req->type = be16toh (h.ext.type);
    req->cookie = be64toh (h.ext.cookie);
    req->offset = be64toh (h.ext.offset);
    req->count = be64toh (h.ext.count);
  }
  else {
    if (be32toh (h.compact.magic) != NBD_REQUEST_MAGIC)
      goto bad_magic;
    req->flags = be16toh (h.compact.flags);
    req->type = be16toh (h.compact.type);
    req->cookie = be64toh (h.compact.cookie);
    req->offset = be64toh (h.compact.offset);
    req->count = be32toh (h.compact.count);
  }
  req->error = 0;
  req->start_ns = NBDKIT_REQUEST_DONE_ENABLED () ||
    NBDKIT_REQUEST_DISPATCH_ENABLED () ? now_ns () : 0;
  if (NBDKIT_REQUEST_START_ENABLED ())
    NBDKIT_REQUEST_START (conn->id, req->cookie, (uint64_t) req->type,
                          tx_command_name (req->type), (uint64_t) req->flags,
                          req->offset, req->count);

  if (req->type == NBD_CMD_DISC) {
    /* No reply, but the request is complete: pair its start. */
    conn_set_closing (conn, "disconnect");
    if (req->start_ns && NBDKIT_REQUEST_DONE_ENABLED ())
      NBDKIT_REQUEST_DONE (conn->id, req->cookie, probe_u64 (req->type),
                           (int64_t) probe_u64 (0), probe_u64 (0),
                           now_ns () - req->start_ns);
    return 1;
  }

  /* Only a write, or an extended request that says so, has a payload. */
  uint64_t payload = 0;
  if (req->type == NBD_CMD_WRITE)
    payload = req->count;
  else if (conn->extended && (req->flags & NBD_CMD_FLAG_PAYLOAD_LEN))
    payload = req->count;

  if (payload > MAX_REQUEST_SIZE) {
    /* Refused from the header alone: reading it could take forever. */
    NBDKIT_PROTOCOL_VIOLATION (conn->id, "payload too large");
    NBDKIT_LIMIT_HIT (conn->id, "payload");
    /* Mark closing while we still hold the read lock, so no other
     * worker reads the unread payload as a request header.
     */
    conn_set_closing (conn, "request too large");
    req->error = EOVERFLOW;
    return 2;
  }
  if (req->type == NBD_CMD_WRITE) {
    req->error = validate (conn, req);
    if (req->error == 0 && w->zc_write && payload > ZC_MIN_WRITE &&
        payload <= ZC_MAX_BYTES && !(req->flags & NBD_CMD_FLAG_FUA)) {
      int r = recv_mapped (conn, w, req);
      if (r <= 0)
        return r;
    }
    if (!grow (w, payload)) {
      req->error = ENOMEM;
      return discard (conn, w, payload) == -1 ? -1 : 0;
    }
    if (conn_recv (conn, w->buf, payload) == -1) {
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "write payload cut short");
      conn_set_closing (conn, "read error");
      return -1;
    }
    return 0;
  }
  else if (payload > 0) {
    if (discard (conn, w, payload) == -1) {
      conn_set_closing (conn, "read error");
      return -1;
    }
    req->error = EINVAL;        /* no command here takes a payload */
    return 0;
  }

  req->error = validate (conn, req);
  return 0;

 bad_magic:
  NBDKIT_PROTOCOL_VIOLATION (conn->id, "bad request magic");
  conn_set_closing (conn, "bad request magic");
  return -1;
}

/* ---- running a request ---- */

static uint32_t
layer_flags (uint16_t nbd_flags, uint16_t type)
{
  uint32_t f = 0;
  bool writes = type == NBD_CMD_WRITE || type == NBD_CMD_TRIM ||
    type == NBD_CMD_WRITE_ZEROES;
  if ((nbd_flags & NBD_CMD_FLAG_FUA) && writes)
    f |= NBDKIT_FLAG_FUA;
  if (type == NBD_CMD_WRITE_ZEROES && !(nbd_flags & NBD_CMD_FLAG_NO_HOLE))
    f |= NBDKIT_FLAG_MAY_TRIM;
  if (nbd_flags & NBD_CMD_FLAG_FAST_ZERO)
    f |= NBDKIT_FLAG_FAST_ZERO;
  if (nbd_flags & NBD_CMD_FLAG_REQ_ONE)
    f |= NBDKIT_FLAG_REQ_ONE;
  return f;
}

/* For trim, zero and cache: split a 64-bit length into layer calls. */
typedef int (*effect_fn) (struct context *, uint32_t, uint64_t, uint32_t,
                          int *);

static int
in_chunks (struct context *c, effect_fn fn, uint64_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  while (count > 0) {
    uint32_t n = count > MAX_EFFECT_CHUNK ? MAX_EFFECT_CHUNK : count;
    /* FUA applies to the last piece, after which all are durable. */
    uint32_t f = n == count ? flags : flags & ~NBDKIT_FLAG_FUA;
    if (fn (c, n, offset, f, err) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

/* Block status: fill w->desc, return the descriptor count or -1. */
static int
block_status (struct connection *conn, struct worker *w,
              const struct request *req, uint32_t flags, int *err)
{
  uint64_t count = req->count;
  if (count > MAX_EFFECT_CHUNK)
    count = MAX_EFFECT_CHUNK;   /* the length is a hint */

  struct nbdkit_extents *e =
    nbdkit_extents_new (req->offset, req->offset + count);
  if (!e) {
    *err = ENOMEM;
    return -1;
  }
  if (layer_extents (conn->top, count, req->offset, flags, e, err) == -1) {
    nbdkit_extents_free (e);
    return -1;
  }
  size_t n = nbdkit_extents_count (e);
  if (n == 0) {
    nbdkit_error ("extents callback returned no extents");
    nbdkit_extents_free (e);
    *err = EIO;
    return -1;
  }
  if (flags & NBDKIT_FLAG_REQ_ONE)
    n = 1;
  if (n > MAX_DESCRIPTORS) {
    NBDKIT_LIMIT_HIT (conn->id, "descriptors");
    n = MAX_DESCRIPTORS;
  }
  if (!w->desc) {
    w->desc = malloc (MAX_DESCRIPTORS * sizeof *w->desc);
    if (!w->desc) {
      nbdkit_extents_free (e);
      *err = ENOMEM;
      return -1;
    }
  }
  for (size_t i = 0; i < n; i++) {
    struct nbdkit_extent x = nbdkit_get_extent (e, i);
    w->desc[i].length = x.length;
    w->desc[i].status_flags = x.type & (NBD_STATE_HOLE | NBD_STATE_ZERO);
  }
  nbdkit_extents_free (e);
  return n;
}

/* Run one validated request.  Returns the errno for the reply; for
 * block status, *ndesc is set.
 */
static int
run (struct connection *conn, struct worker *w, const struct request *req,
     int *ndesc)
{
  struct context *c = conn->top;
  uint32_t f = layer_flags (req->flags, req->type);
  int err = 0;

  switch (req->type) {
  case NBD_CMD_READ:
    /* From the plugin's file, if it can say where: send_fd reads it in
     * the send.  (Small replies are worth more held back together.)
     */
    if (w->fd_read && req->count > MAX_HELD_REPLY) {
      if (layer_read_fd (c, req->count, req->offset, &w->fd, &w->fd_offset,
                         &err) == 0) {
        w->fd_pending = true;
        break;
      }
      err = 0;                  /* it cannot: copy instead */
    }
    /* Straight from the plugin's memory, if it can, this worker can
     * have the write lock at once (so the plugin's memory is never
     * held while another reply waits on the client), and the worker
     * has its piece list and room to copy out whatever of the reply
     * the socket will not take at once.
     */
    if (w->zerocopy && req->count > MAX_HELD_REPLY &&
        req->count <= ZC_MAX_BYTES && have_zc_iov (w) &&
        grow (w, w->out_len + MAX_REPLY_HEAD + req->count) &&
        pthread_mutex_trylock (&conn->write_lock) == 0) {
      int n = ZC_MAX_IOV;
      if (layer_map_read (c, req->count, req->offset, w->zc_iov + ZC_HEAD,
                          &n, &err) == 0) {
        w->zc_n = n;
        w->zc_mapped = true;    /* send_mapped lets go of both */
        break;
      }
      pthread_mutex_unlock (&conn->write_lock);
      if (err != E2BIG)
        break;
      err = 0;                  /* too many pieces: copy instead */
    }
    if (!grow (w, req->count))
      return ENOMEM;
    layer_pread (c, w->buf, req->count, req->offset, 0, &err);
    break;
  case NBD_CMD_WRITE:
    if (w->zc_wn) {             /* received into the plugin's memory */
      w->zc_wn = 0;
      layer_unmap_write (c, req->count, req->offset, w->zc_iov, 1, &err);
    }
    else
      layer_pwrite (c, w->buf, req->count, req->offset, f, &err);
    break;
  case NBD_CMD_FLUSH:
    layer_flush (c, 0, &err);
    break;
  case NBD_CMD_TRIM:
    in_chunks (c, layer_trim, req->count, req->offset, f, &err);
    break;
  case NBD_CMD_WRITE_ZEROES:
    in_chunks (c, layer_zero, req->count, req->offset, f, &err);
    break;
  case NBD_CMD_CACHE:
    in_chunks (c, layer_cache, req->count, req->offset, 0, &err);
    break;
  case NBD_CMD_BLOCK_STATUS:
    *ndesc = block_status (conn, w, req, f, &err);
    break;
  }
  return err;
}

/* ---- replies ---- */

static void
fire_reply_send (struct connection *conn, const struct request *req,
                 const struct iovec *iov, int n, const void *simple)
{
  uint64_t bytes = 0;
  for (int i = 0; i < n; i++)
    bytes += iov[i].iov_len;
  NBDKIT_REPLY_SEND (conn->id, req->cookie,
                     conn->extended ? "extended"
                     : iov[0].iov_base == simple ? "simple"
                     : "structured", bytes, probe_u64 (1));
}

/* Send the replies held back in w->out, then IOV, in one sendmsg. */
static int
flush_replies (struct connection *conn, struct worker *w,
               const struct iovec *iov, int n)
{
  struct iovec v[8];
  int k = 0;
  if (w->out_len)
    v[k++] = (struct iovec) { w->out, w->out_len };
  for (int i = 0; i < n; i++)
    v[k++] = iov[i];
  w->out_len = 0;
  if (k == 0)
    return 0;
  LOCK_FOR_SCOPE (&conn->write_lock);
  return conn_sendv (conn, v, k);
}

/* Copy a reply into w->out.  Returns false if it does not fit. */
static bool
hold_reply (struct worker *w, const struct iovec *iov, int n)
{
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += iov[i].iov_len;
  if (len > MAX_HELD_REPLY || w->out_len + len > MAX_HELD_REPLIES)
    return false;
  if (w->out_len + len > w->out_cap) {
    size_t cap = w->out_cap ? w->out_cap : 65536;
    while (cap < w->out_len + len)
      cap *= 2;
    char *o = realloc (w->out, cap);
    if (!o)
      return false;
    w->out = o;
    w->out_cap = cap;
  }
  for (int i = 0; i < n; i++) {
    memcpy (w->out + w->out_len, iov[i].iov_base, iov[i].iov_len);
    w->out_len += iov[i].iov_len;
  }
  return true;
}

/* Is the start of another request already in the input buffer?  Then
 * the client is still sending and will not wait for our replies, so
 * they can be held back and sent together.  Only meaningful while this
 * is the connection's only worker.
 */
static bool
request_buffered (const struct connection *conn)
{
  return conn->in_len >= (conn->extended ? sizeof (struct nbd_extended_request)
                                         : sizeof (struct nbd_request));
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

  memcpy (v, hdr, nh * sizeof *v);
  if (NBDKIT_REPLY_SEND_ENABLED ())
    fire_reply_send (conn, req, v, cnt, simple);
  if (w->out_len) {
    *--v = (struct iovec) { w->out, w->out_len };
    cnt++;
  }
  for (int i = 0; i < cnt; i++)
    left += v[i].iov_len;

  while (left > 0) {
    ssize_t r = conn_sendv_nowait (conn, v, cnt > IOV_MAX ? IOV_MAX : cnt);
    if (r <= 0) {
      ret = r;
      break;
    }
    left -= r;
    iov_advance (&v, &cnt, r);
  }

  if (ret == 0 && left > w->cap) {
    errno = ENOMEM;             /* cannot happen: see run() */
    ret = -1;
  }
  if (ret == 0) {
    char *p = w->buf;
    for (int i = 0; i < cnt; i++) {
      memcpy (p, v[i].iov_base, v[i].iov_len);
      p += v[i].iov_len;
    }
  }
  layer_unmap_read (conn->top);
  w->zc_mapped = false;
  w->out_len = 0;
  if (ret == 0 && left > 0)
    ret = conn_send (conn, w->buf, left);
  pthread_mutex_unlock (&conn->write_lock);
  return ret;
}

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

  w->fd_pending = false;
  LOCK_FOR_SCOPE (&conn->write_lock);
  /* Under the write lock, so that the probe fires in wire order. */
  if (NBDKIT_REPLY_SEND_ENABLED ()) {
    memcpy (v, hdr, nh * sizeof *v);
    v[nh] = (struct iovec) { NULL, req->count };
    fire_reply_send (conn, req, v, nh + 1, simple);
  }
  if (w->out_len)
    v[k++] = (struct iovec) { w->out, w->out_len };
  for (int i = 0; i < nh; i++)
    v[k++] = hdr[i];
  w->out_len = 0;
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
      if (!grow (w, left) ||
          layer_pread (conn->top, w->buf, left, req->offset, 0, &err) == -1)
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

/* Send (or, with HOLD, hold back) the reply to REQ. */
static int
send_reply (struct connection *conn, struct worker *w,
            const struct request *req, int err, int ndesc, bool hold)
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
  uint32_t bs_head[2];

  /* Simple reply: no structured replies, or a non-data reply. */
  if (!conn->extended &&
      (!conn->structured || (req->type != NBD_CMD_READ &&
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
      se.len = 0;
      len = sizeof se;
    }
    else if (data) {
      type = NBD_REPLY_TYPE_OFFSET_DATA;
      be_offset = htobe64 (req->offset);
      len = 8 + req->count;
    }
    else if (bs) {
      type = conn->extended ? NBD_REPLY_TYPE_BLOCK_STATUS_EXT
                            : NBD_REPLY_TYPE_BLOCK_STATUS;
      len = conn->extended ? 8 + 16 * (uint64_t) ndesc
                           : 4 + 8 * (uint64_t) ndesc;
    }
    else {
      type = NBD_REPLY_TYPE_NONE;
      len = 0;
    }
    if (conn->extended) {
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
    if (err)
      iov[n++] = (struct iovec) { &se, sizeof se };
    else if (data) {
      iov[n++] = (struct iovec) { &be_offset, 8 };
      if (data_in_buf)
        iov[n++] = (struct iovec) { w->buf, req->count };
    }
    else if (bs) {
      /* Descriptors go out in place, converted to big-endian. */
      bs_head[0] = htobe32 (1);         /* base:allocation's id */
      bs_head[1] = htobe32 (ndesc);
      if (conn->extended) {
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

  /* The probe fires before the reply is written or held back: in wire
   * order (held replies come from the connection's only worker, other
   * replies fire under the write lock), and before anything the client
   * sends in answer to this reply.
   */
  if (hold) {
    if (NBDKIT_REPLY_SEND_ENABLED ())
      fire_reply_send (conn, req, iov, n, &simple);
    if (hold_reply (w, iov, n))
      return 0;
  }
  {
    LOCK_FOR_SCOPE (&conn->write_lock);
    if (!hold && NBDKIT_REPLY_SEND_ENABLED ())
      fire_reply_send (conn, req, iov, n, &simple);
  }
  return flush_replies (conn, w, iov, n);
}

/* ---- workers ---- */

/* A connection starts with one worker, which reads, runs and answers
 * requests in turn: for a plugin that answers in microseconds this
 * costs no thread hand-offs at all (one read per batch of requests, one
 * sendmsg per batch of replies).  The pool grows, one worker at a time
 * up to -t, only while running requests side by side pays, and parks
 * workers again when it stops paying.  After each request the worker
 * classes it:
 *
 *  - fast: under SLOW_REQUEST_NS in the layers.  One worker is best.
 *  - waiting: slower, and mostly off the CPU (a disk, a remote server,
 *    a sleep).  More workers overlap the waits: up to -t.
 *  - busy: slower, but mostly on the CPU (copying a 1 MiB read).  More
 *    workers than half the CPUs only fight the client and each other
 *    for them: measured on 2 CPUs, 1 MiB reads ran at 2400 MiB/s with
 *    one worker and 1900 MiB/s with sixteen.
 *
 * A worker's CPU time costs a system call, so it is read only while
 * requests are slow.  The pool grows when GROW_AFTER requests in a row
 * want more workers, and parks one when at least half of a window of
 * SHRINK_WINDOW requests wanted fewer.  A single slow request proves
 * nothing: on a busy machine the scheduler can stretch any request by
 * a whole time slice, and the more workers there are the more often
 * it does, so shrinking must not wait for a perfect run of fast ones.
 */
#define SLOW_REQUEST_NS 20000
#define GROW_AFTER 4
#define SHRINK_WINDOW 1024

struct pool {
  struct connection *conn;
  pthread_mutex_t lock;         /* protects started, threads, done */
  pthread_cond_t wake;          /* parked workers wait here */
  unsigned max, started;
  unsigned busy_max;            /* the most workers for busy requests */
  _Atomic unsigned active;      /* workers 0 .. active-1 take requests */
  bool done;                    /* the connection is over: exit */
  struct worker *workers;       /* max of them */
  pthread_t *threads;
  _Atomic unsigned grow_run;    /* requests in a row that want more */
  _Atomic unsigned window, fewer; /* requests, and those that want fewer */
  _Atomic bool shrink;          /* the highest worker is to park */
  _Atomic bool slow;            /* the last request was slow */
};

static void *worker_loop (void *arg);

static void
pool_grow (struct pool *pool)
{
  LOCK_FOR_SCOPE (&pool->lock);
  if (pool->done || conn_is_closing (pool->conn))
    return;
  if (pool->active < pool->started) {
    pool->active++;             /* unpark one */
    pthread_cond_broadcast (&pool->wake);
  }
  else if (pool->started < pool->max) {
    unsigned i = pool->started;
    int e = pthread_create (&pool->threads[i], NULL, worker_loop,
                            &pool->workers[i]);
    if (e != 0) {
      pool->max = pool->started;        /* stop trying */
      return;
    }
    pool->started++;
    pool->active++;
  }
  else
    return;
  nbdkit_debug ("slow requests: %u workers", (unsigned) pool->active);
}

static uint64_t
thread_cpu_ns (void)
{
  struct timespec ts;
  if (clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts) == -1)
    return 0;
  return ts.tv_sec * UINT64_C (1000000000) + ts.tv_nsec;
}

/* Called by worker W after each request, which took WALL ns in the
 * layers and CPU ns of W's CPU time (UINT64_MAX: not measured).
 * Returns true if W is to park.  Only the highest active worker ever
 * lowers ACTIVE, and only for itself, so worker 0 may trust that with
 * ACTIVE at 1 nobody else is reading requests.
 */
static bool
pool_account (struct pool *pool, struct worker *w, uint64_t wall,
              uint64_t cpu)
{
  unsigned target;
  bool slow = wall >= SLOW_REQUEST_NS;

  if (!slow)
    target = 1;
  else if (cpu != UINT64_MAX && cpu >= wall / 2)
    target = pool->busy_max;
  else
    target = pool->max;
  if (pool->slow != slow)
    pool->slow = slow;

  unsigned active = pool->active;
  if (target > active) {
    if (atomic_fetch_add (&pool->grow_run, 1) + 1 >= GROW_AFTER) {
      pool->grow_run = 0;
      pool->shrink = false;
      pool_grow (pool);
    }
    return false;
  }
  if (pool->grow_run)
    pool->grow_run = 0;
  if (active == 1)
    return false;

  if (target < active)
    pool->fewer++;
  if (atomic_fetch_add (&pool->window, 1) + 1 >= SHRINK_WINDOW) {
    if (pool->fewer >= SHRINK_WINDOW / 2)
      pool->shrink = true;
    pool->window = 0;
    pool->fewer = 0;
  }
  if (!pool->shrink || w->index + 1 != active || w->index == 0 ||
      !atomic_compare_exchange_strong (&pool->active, &active, w->index))
    return false;
  pool->shrink = false;
  nbdkit_debug ("%s requests: %u workers", slow ? "busy" : "fast", w->index);
  return true;
}

/* Wait while W is above the active count.  Returns false if the
 * connection ended meanwhile.
 */
static bool
park (struct pool *pool, struct worker *w)
{
  LOCK_FOR_SCOPE (&pool->lock);
  while (w->index >= pool->active && !pool->done)
    pthread_cond_wait (&pool->wake, &pool->lock);
  return !pool->done;
}

static void *
worker_loop (void *arg)
{
  struct worker *w = arg;
  struct pool *pool = w->pool;
  struct connection *conn = w->conn;
  conn_set_current (conn);
  for (;;) {
    struct request req;
    int r;
    bool parking = false;

    /* Held-back replies go out before we might wait for the client. */
    if (w->out_len && (pool->active > 1 || !request_buffered (conn)) &&
        flush_replies (conn, w, NULL, 0) == -1) {
      conn_set_closing (conn, "write error");
      break;
    }
    if (w->index >= pool->active && !park (pool, w))
      break;

    pthread_mutex_lock (&conn->read_lock);
    if (conn_is_closing (conn)) {
      pthread_mutex_unlock (&conn->read_lock);
      break;
    }
    r = recv_request (conn, w, &req);
    conn_poll_feedback (conn, request_buffered (conn));
    pthread_mutex_unlock (&conn->read_lock);
    if (r == -1 || r == 1) {
      conn_set_closing (conn, "read error");  /* keeps an earlier reason */
      break;
    }

    conn->requests++;
    int err = req.error, ndesc = 0;
    if (err == 0) {
      /* SERIALIZE_ALL_REQUESTS: one request at a time, server-wide. */
      layer_requests_lock ();
      if (NBDKIT_REQUEST_DISPATCH_ENABLED ())
        NBDKIT_REQUEST_DISPATCH (conn->id, req.cookie,
                                 req.start_ns ? now_ns () - req.start_ns : 0);
      uint64_t t0 = 0, c0 = UINT64_MAX;
      if (pool->max > 1) {
        t0 = now_ns ();
        if (pool->slow)
          c0 = thread_cpu_ns ();
      }
      layer_set_cookie (req.cookie);
      err = layer_error_for_reply (run (conn, w, &req, &ndesc), req.flags);
      layer_set_cookie (0);
      layer_requests_unlock ();
      if (t0) {
        uint64_t cpu = c0 == UINT64_MAX ? c0 : thread_cpu_ns () - c0;
        parking = pool_account (pool, w, now_ns () - t0, cpu);
      }
    }
    if (req.start_ns && NBDKIT_REQUEST_DONE_ENABLED ()) {
      uint64_t bytes = err ? 0 : (req.type == NBD_CMD_READ ||
                                  req.type == NBD_CMD_WRITE) ? req.count : 0;
      NBDKIT_REQUEST_DONE (conn->id, req.cookie, (uint64_t) req.type,
                           (int64_t) err, bytes, now_ns () - req.start_ns);
    }
    /* Hold the reply back while more requests wait in the buffer, if
     * this is the connection's only worker.
     */
    bool hold = r == 0 && !parking && w->index == 0 && pool->active == 1 &&
      request_buffered (conn);
    if (send_reply (conn, w, &req, err, ndesc, hold) == -1) {
      conn_set_closing (conn, "write error");
      break;
    }
    if (r == 2)
      break;
  }
  if (w->out_len && flush_replies (conn, w, NULL, 0) == -1)
    conn_set_closing (conn, "write error");
  /* Wake a worker blocked in read so it sees we are closing. */
  if (conn_is_closing (conn))
    shutdown (conn->sockin, SHUT_RD);
  free (w->buf);
  free (w->desc);
  free (w->out);
  free (w->zc_iov);
  return NULL;
}

void
tx_serve (struct connection *conn)
{
  struct pool pool = { .conn = conn, .max = conn->cfg->threads };
  if (conn->cfg->thread_model < NBDKIT_THREAD_MODEL_PARALLEL ||
      pool.max < 1)
    pool.max = 1;

  pool.workers = calloc (pool.max, sizeof *pool.workers);
  pool.threads = calloc (pool.max, sizeof *pool.threads);
  if (!pool.workers || !pool.threads) {
    nbdkit_error ("calloc: %m");
    free (pool.workers);
    free (pool.threads);
    conn_set_closing (conn, "out of memory");
    return;
  }
  /* Reads straight from the plugin's memory need a plugin that can map
   * them with no filter above it, and a plain socket (not TLS, whose
   * records are built from a copy anyway).
   */
  bool zerocopy = layer_has_map_read (conn->top) &&
    conn_can_send_nowait (conn);
  /* Write payloads straight into its memory: any transport will do
   * (TLS decrypts into it).
   */
  bool zc_write = layer_has_map_write (conn->top);
  /* Reads sent from the plugin's file: not through TLS, which must
   * encrypt a copy anyway.
   */
  bool fd_read = layer_has_read_fd (conn->top) &&
    conn_can_send_nowait (conn);
  pthread_mutex_init (&pool.lock, NULL);
  pthread_cond_init (&pool.wake, NULL);
  for (unsigned i = 0; i < pool.max; i++) {
    pool.workers[i].conn = conn;
    pool.workers[i].pool = &pool;
    pool.workers[i].index = i;
    pool.workers[i].zerocopy = zerocopy;
    pool.workers[i].zc_write = zc_write;
    pool.workers[i].fd_read = fd_read;
  }
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  pool.busy_max = cpus >= 4 ? cpus / 2 : 1;
  if (pool.busy_max > pool.max)
    pool.busy_max = pool.max;
  pool.started = 1;             /* worker 0 is this thread */
  pool.active = 1;
  worker_loop (&pool.workers[0]);

  /* Worker 0 never parks, so it returns only when the connection is
   * over.  No worker starts after DONE (pool_grow checks under the
   * lock), so the set to join is final; parked workers wake and exit.
   */
  pthread_mutex_lock (&pool.lock);
  pool.done = true;
  pthread_cond_broadcast (&pool.wake);
  unsigned started = pool.started;
  pthread_mutex_unlock (&pool.lock);
  for (unsigned i = 1; i < started; i++)
    pthread_join (pool.threads[i], NULL);
  pthread_cond_destroy (&pool.wake);
  pthread_mutex_destroy (&pool.lock);
  free (pool.workers);
  free (pool.threads);
}
