/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: reading one request off the wire.  A worker that
 * holds the connection's read lock calls tx_recv_request: it reads the
 * header (compact or extended), fires request_start, reads the payload
 * (into the worker's buffer, or straight into memory the plugin lends),
 * and checks every field against the export and the negotiated limits.
 * A large read or write also holds its share of what the connection's
 * requests in flight may allocate (hold_payload), until its reply is
 * out (tx_return_payload, from reply.c).
 * This is the edge: the layers below trust what passes.  A request
 * that fails the checks leaves with req->error set, to be answered and
 * not run; one whose framing cannot be trusted ends the connection.
 */
#include <config.h>

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>

#include "internal.h"
#include "protocol.h"
#include "tx.h"

/* The command's name, the word the tracing tools print for its code
 * (tools/probes-check.py holds their tables to this switch).
 */
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

/* Throw away LEN payload bytes we will not use, keeping the framing. */
static int
discard (struct connection *conn, struct worker *w, uint64_t len)
{
  while (len > 0) {
    size_t n = len < w->cap ? len : w->cap;
    if (n == 0) {
      if (!tx_grow (w, 65536))
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
  if (conn->refuse_requests)
    return ESHUTDOWN;           /* after nbdkit_disconnect (0) */
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
  if (conn->nego.extended && req->type == NBD_CMD_WRITE)
    allowed |= NBD_CMD_FLAG_PAYLOAD_LEN;
  if (req->flags & ~allowed)
    return EINVAL;
  if ((req->flags & NBD_CMD_FLAG_FUA) && !conn->nego.can_fua)
    return EINVAL;
  if ((req->flags & NBD_CMD_FLAG_DF) && !conn->nego.structured)
    return EINVAL;
  if ((req->flags & NBD_CMD_FLAG_FAST_ZERO) && !conn->nego.can_fast_zero)
    return EINVAL;

  bool is_write = req->type == NBD_CMD_WRITE || req->type == NBD_CMD_TRIM ||
    req->type == NBD_CMD_WRITE_ZEROES;
  if (is_write && !conn->nego.can_write)
    return EPERM;
  switch (req->type) {
  case NBD_CMD_FLUSH:
    return conn->nego.can_flush ? 0 : EINVAL;
  case NBD_CMD_TRIM:
    if (!conn->nego.can_trim) return EINVAL;
    break;
  case NBD_CMD_WRITE_ZEROES:
    if (!conn->nego.can_zero) return EINVAL;
    break;
  case NBD_CMD_CACHE:
    if (!conn->nego.can_cache) return EINVAL;
    break;
  case NBD_CMD_BLOCK_STATUS:
    if (!conn->nego.meta_base_allocation) return EINVAL;
    break;
  }

  /* Range: never compute offset + count before knowing it fits. */
  if (req->count == 0)
    return EINVAL;
  /* The protocol asks for ENOSPC from writes past the end (WRITE and
   * WRITE_ZEROES) but EINVAL from reads and trims.
   */
  if (req->offset > conn->nego.exportsize ||
      req->count > conn->nego.exportsize - req->offset)
    return is_write && req->type != NBD_CMD_TRIM ? ENOSPC : EINVAL;
  /* The server's own limit on reads and writes, after the range as in
   * nbdkit, and with nbdkit's answer.  A maximum block size that the
   * layers advertise is not enforced here: a request above it reaches
   * them, and they decide (the blocksize-policy filter may refuse it).
   */
  if ((req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE) &&
      req->count > MAX_REQUEST_SIZE) {
    NBDKIT_LIMIT_HIT (conn->id, "payload");
    return ENOMEM;
  }
  return 0;
}

/* Hold N bytes of the connection's MAX_PAYLOAD_IN_FLIGHT for the
 * request in hand, until tx_return_payload.  A request that fits the
 * buffer a worker keeps holds nothing.  When the connection's reads
 * and writes in flight already hold too much, wait for some to be
 * answered: under the read lock, so the connection reads no more
 * requests meanwhile, which is what bounds the memory of a client that
 * sends large reads and never reads the replies.  The workers that
 * hold the bytes give them back after their reply without taking any
 * lock of the connection but payload_lock, so the wait ends.
 */
static void
hold_payload (struct connection *conn, struct worker *w, uint64_t cookie,
              uint64_t n)
{
  if (n <= KEPT_BUFFER)
    return;
  assert (w->holding == 0 && n <= MAX_PAYLOAD_IN_FLIGHT);
  LOCK_FOR_SCOPE (&conn->payload_lock);
  if (conn->payload_held + n > MAX_PAYLOAD_IN_FLIGHT) {
    uint64_t t0 = wait_begin (conn->id, cookie, "payload");
    while (conn->payload_held + n > MAX_PAYLOAD_IN_FLIGHT)
      pthread_cond_wait (&conn->payload_back, &conn->payload_lock);
    wait_end (conn->id, cookie, "payload", t0);
  }
  conn->payload_held += n;
  w->holding = n;
}

void
tx_return_payload (struct connection *conn, struct worker *w)
{
  if (w->cap > KEPT_BUFFER) {
    free (w->buf);
    w->buf = NULL;
    w->cap = 0;
  }
  if (w->holding) {
    LOCK_FOR_SCOPE (&conn->payload_lock);
    conn->payload_held -= w->holding;
    w->holding = 0;
    pthread_cond_broadcast (&conn->payload_back);
  }
}

/* What receiving a write payload into the plugin's memory came to. */
enum mapped_outcome {
  MAPPED_IN,                    /* all in: run() hands it back as the write */
  MAPPED_DECLINED,              /* the plugin would rather not: nothing
                                 * read, take the copying path */
  MAPPED_CLOSED,                /* the connection is over: the memory
                                 * given back, nothing written */
};

/* Receive a write's payload straight into memory the plugin lends
 * (zc_iov), for run() to hand back as the write.
 */
static enum mapped_outcome
recv_mapped (struct connection *conn, struct worker *w, struct request *req)
{
  struct context *c = conn->nego.top;
  int n = ZC_MAX_IOV, err;

  if (!tx_have_zc_iov (w) ||
      layer_map_write (c, req->count, req->offset, w->zc_iov, &n) == -1)
    return MAPPED_DECLINED;
  if (conn_recvv (conn, w->zc_iov, n) == -1) {
    layer_unmap_write (c, req->count, req->offset, w->zc_iov, 0, &err);
    NBDKIT_PROTOCOL_VIOLATION (conn->id, "write payload cut short");
    conn_set_closing (conn, "read error");
    return MAPPED_CLOSED;
  }
  w->zc_wn = n;
  return MAPPED_IN;
}

/* Read one request into *req: see enum recv_outcome for what comes of
 * it.  Every outcome but RECV_REQUEST has marked the connection closing
 * (before the read lock is let go, so no other worker reads on).
 */
enum recv_outcome
tx_recv_request (struct connection *conn, struct worker *w,
                 struct request *req)
{
  union {
    struct nbd_request compact;
    struct nbd_extended_request ext;
  } h;
  size_t hlen = conn->nego.extended ? sizeof h.ext : sizeof h.compact;

  if (conn_recv (conn, &h, hlen) == -1) {
    if (errno == 0)
      conn_set_closing (conn, "eof");
    else {
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "short request header");
      conn_set_closing (conn, "read error");
    }
    return RECV_CLOSED;
  }
  if (conn->nego.extended) {
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
  req->start_ns = conn->metrics || NBDKIT_REQUEST_DONE_ENABLED () ||
    NBDKIT_REQUEST_DISPATCH_ENABLED () ? now_ns () : 0;
  if (NBDKIT_REQUEST_START_ENABLED ())
    NBDKIT_REQUEST_START (conn->id, req->cookie, (uint64_t) req->type,
                          req->offset, (uint64_t) req->count,
                          (uint64_t) req->flags);

  if (req->type == NBD_CMD_DISC) {
    /* No reply, but the request is complete: pair its start. */
    conn_set_closing (conn, "disconnect");
    if (req->start_ns && NBDKIT_REQUEST_DONE_ENABLED ())
      NBDKIT_REQUEST_DONE (conn->id, req->cookie, probe_u64 (req->type),
                           (int64_t) probe_u64 (0), probe_u64 (0),
                           now_ns () - req->start_ns);
    return RECV_DISCONNECT;
  }

  /* Only a write, or an extended request that says so, has a payload. */
  uint64_t payload = 0;
  if (req->type == NBD_CMD_WRITE)
    payload = req->count;
  else if (conn->nego.extended && (req->flags & NBD_CMD_FLAG_PAYLOAD_LEN))
    payload = req->count;

  if (payload > MAX_SKIPPED_PAYLOAD) {
    /* Refused from the header alone: reading the payload would tie the
     * connection up for too long.  nbdkit hangs up without a reply
     * (the protocol allows it for a payload this size), and so do we;
     * marked closing while we hold the read lock, so that no other
     * worker reads the payload as a request header.
     */
    NBDKIT_PROTOCOL_VIOLATION (conn->id, "payload too large");
    NBDKIT_LIMIT_HIT (conn->id, "payload");
    conn_set_closing (conn, "request too large");
    return RECV_CLOSED;
  }
  if (req->type == NBD_CMD_WRITE) {
    req->error = validate (conn, req);
    if (req->error) {
      /* Refused (too long, past the end, ...): the payload is read and
       * thrown away, and the connection goes on.
       */
      if (discard (conn, w, payload) == -1) {
        conn_set_closing (conn, "read error");
        return RECV_CLOSED;
      }
      return RECV_REQUEST;
    }
    if (w->zc_write && payload > ZC_MIN_WRITE &&
        payload <= ZC_MAX_BYTES && !(req->flags & NBD_CMD_FLAG_FUA)) {
      switch (recv_mapped (conn, w, req)) {
      case MAPPED_IN: return RECV_REQUEST;
      case MAPPED_CLOSED: return RECV_CLOSED;
      case MAPPED_DECLINED: break;
      }
    }
    hold_payload (conn, w, req->cookie, payload);
    if (!tx_grow (w, payload)) {
      req->error = ENOMEM;
      if (discard (conn, w, payload) == -1) {
        conn_set_closing (conn, "read error");
        tx_return_payload (conn, w);
        return RECV_CLOSED;
      }
      return RECV_REQUEST;
    }
    if (conn_recv (conn, w->buf, payload) == -1) {
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "write payload cut short");
      conn_set_closing (conn, "read error");
      tx_return_payload (conn, w);      /* no reply will do it */
      return RECV_CLOSED;
    }
    return RECV_REQUEST;
  }
  else if (payload > 0) {
    if (discard (conn, w, payload) == -1) {
      conn_set_closing (conn, "read error");
      return RECV_CLOSED;
    }
    req->error = EINVAL;        /* no command here takes a payload */
    return RECV_REQUEST;
  }

  req->error = validate (conn, req);
  if (req->error == 0 && req->type == NBD_CMD_READ)
    hold_payload (conn, w, req->cookie, req->count);
  return RECV_REQUEST;

 bad_magic:
  NBDKIT_PROTOCOL_VIOLATION (conn->id, "bad request magic");
  conn_set_closing (conn, "bad request magic");
  return RECV_CLOSED;
}
