/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: option negotiation (fixed newstyle).  hs_negotiate
 * sends the greeting, then reads options one at a time, checks each
 * length against what the option carries before using it, and answers
 * it, until the client picks an export (NBD_OPT_GO or
 * NBD_OPT_EXPORT_NAME) or leaves.  On success the connection has an
 * open export (conn->nego.top) and its negotiated flags.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "conn-io.h"
#include "protocol.h"

/* What one negotiation may cost, besides --handshake-timeout: options
 * answered with an error (an honest client gets few: listing 5000
 * exports takes 5000 options that all succeed), and option data in
 * all (that listing sends well under 1 MiB).
 */
#define MAX_FAILED_OPTIONS 1024
#define MAX_OPTION_BYTES (16 * 1024 * 1024)

#define BASE_ALLOCATION "base:allocation"
#define BASE_ALLOCATION_ID 1    /* the context id we hand out */

const char *
hs_option_name (uint32_t option)
{
  switch (option) {
  case NBD_OPT_EXPORT_NAME: return "export_name";
  case NBD_OPT_ABORT: return "abort";
  case NBD_OPT_LIST: return "list";
  case NBD_OPT_STARTTLS: return "starttls";
  case NBD_OPT_INFO: return "info";
  case NBD_OPT_GO: return "go";
  case NBD_OPT_STRUCTURED_REPLY: return "structured_reply";
  case NBD_OPT_LIST_META_CONTEXT: return "list_meta_context";
  case NBD_OPT_SET_META_CONTEXT: return "set_meta_context";
  case NBD_OPT_EXTENDED_HEADERS: return "extended_headers";
  default: return "unknown";
  }
}

/* Send one option reply with an optional payload in two pieces. */
static int
send_reply2 (struct connection *conn, uint32_t option, uint32_t reply,
             const void *p1, size_t len1, const void *p2, size_t len2)
{
  struct nbd_fixed_new_option_reply hdr = {
    .magic = htobe64 (NBD_REP_MAGIC),
    .option = htobe32 (option),
    .reply = htobe32 (reply),
    .replylen = htobe32 (len1 + len2),
  };
  struct iovec iov[3] = {
    { .iov_base = &hdr, .iov_len = sizeof hdr },
    { .iov_base = (void *) p1, .iov_len = len1 },
    { .iov_base = (void *) p2, .iov_len = len2 },
  };
  NBDKIT_HANDSHAKE_OPTION_REPLY (conn->id, (uint64_t) option,
                                 (uint64_t) reply,
                                 (int64_t) ((reply & 0x80000000) != 0));
  if (reply & 0x80000000)
    conn->nego.hs_errors++;
  return conn_sendv (conn, iov, 3);
}

static int
send_reply (struct connection *conn, uint32_t option, uint32_t reply)
{
  return send_reply2 (conn, option, reply, NULL, 0, NULL, 0);
}

/* An error reply carrying a message for the client. */
static int
send_error (struct connection *conn, uint32_t option, uint32_t reply,
            const char *msg)
{
  size_t len = msg ? strnlen (msg, NBD_MAX_STRING) : 0;
  return send_reply2 (conn, option, reply, msg, len, NULL, 0);
}

/* The negotiation ends here for REASON: the client broke the protocol
 * or went past a limit.  One line in the log says so, as the probe
 * does for tracers.
 */
static void
drop (struct connection *conn, const char *reason)
{
  nbdkit_error ("client %s: negotiation ended: %s", conn->peer, reason);
  conn_handshake_failed (conn, reason);
}

/* ---- exports ---- */

static void
close_export (struct connection *conn)
{
  if (conn->nego.top) {
    layer_close_all (conn->nego.top);
    conn->nego.top = NULL;
  }
}


/* Ask the chain for the export's size, capabilities and block size,
 * and compute the transmission flags.
 */
static int
describe_export (struct connection *conn)
{
  struct context *c = conn->nego.top;
  int64_t size = layer_get_size (c);
  if (size < 0) {
    if (!log_last_error ())
      nbdkit_error ("could not get the size of the export");
    return -1;
  }
  conn->nego.exportsize = size;

  int r;
#define ASK(var, call)                          \
  if ((r = (call)) == -1) return -1;            \
  var = r;
  int can_write, can_zero, can_fua, can_cache, rotational;
  ASK (can_write, layer_can_write (c));
  conn->nego.can_write = can_write && !conn->cfg->readonly;
  ASK (conn->nego.can_flush, layer_can_flush (c));
  ASK (rotational, layer_is_rotational (c));
  ASK (conn->nego.can_multi_conn, layer_can_multi_conn (c));
  /* Under SERIALIZE_CONNECTIONS a second connection waits for the first
   * to end, so a client that opens several would deadlock itself.
   */
  if (conn->cfg->thread_model <= NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS)
    conn->nego.can_multi_conn = false;
  ASK (can_cache, layer_can_cache (c));
  conn->nego.can_cache = can_cache != NBDKIT_CACHE_NONE;
  ASK (conn->nego.can_extents, layer_can_extents (c));
  conn->nego.can_trim = conn->nego.can_zero = conn->nego.can_fast_zero = false;
  conn->nego.can_fua = false;
  if (conn->nego.can_write) {
    ASK (conn->nego.can_trim, layer_can_trim (c));
    ASK (can_zero, layer_can_zero (c));
    conn->nego.can_zero = can_zero != NBDKIT_ZERO_NONE;
    if (conn->nego.can_zero) {
      ASK (conn->nego.can_fast_zero, layer_can_fast_zero (c));
    }
    ASK (can_fua, layer_can_fua (c));
    conn->nego.can_fua = can_fua != NBDKIT_FUA_NONE;
  }
#undef ASK

  uint16_t f = NBD_FLAG_HAS_FLAGS;
  if (!conn->nego.can_write) f |= NBD_FLAG_READ_ONLY;
  if (conn->nego.can_flush) f |= NBD_FLAG_SEND_FLUSH;
  if (conn->nego.can_fua) f |= NBD_FLAG_SEND_FUA;
  if (rotational) f |= NBD_FLAG_ROTATIONAL;
  if (conn->nego.can_trim) f |= NBD_FLAG_SEND_TRIM;
  if (conn->nego.can_zero) f |= NBD_FLAG_SEND_WRITE_ZEROES;
  if (conn->nego.can_fast_zero) f |= NBD_FLAG_SEND_FAST_ZERO;
  if (conn->nego.structured) f |= NBD_FLAG_SEND_DF;
  if (conn->nego.can_multi_conn) f |= NBD_FLAG_CAN_MULTI_CONN;
  if (conn->nego.can_cache) f |= NBD_FLAG_SEND_CACHE;
  conn->nego.eflags = f;

  /* Block sizes are advertised only when some layer gives them (all
   * zero means none does), and then exactly as given: the maximum is a
   * promise about what the layers accept, not about the server's own
   * payload limit (MAX_REQUEST_SIZE), which applies either way.
   */
  uint32_t min, pref, max;
  if (layer_block_size (c, &min, &pref, &max) == -1)
    return -1;
  conn->nego.block_sizes = min != 0 || pref != 0 || max != 0;
  if (conn->nego.block_sizes &&
      (!is_power_of_2 (min) || min > 65536 || !is_power_of_2 (pref) ||
       pref < 512 || pref > 32 * 1024 * 1024 || pref < min ||
       (max != 0xffffffff && (max < pref || max % min != 0)))) {
    nbdkit_error ("the plugin's block size constraints (%" PRIu32 ", %"
                  PRIu32 ", %" PRIu32 ") are not valid", min, pref, max);
    return -1;
  }
  conn->nego.block_min = min;
  conn->nego.block_pref = pref;
  conn->nego.block_max = max;
  return 0;
}

/* Open the export NAME (the default export for ""), fill in the
 * connection's export state.  On failure, nothing stays open.
 */
static int
open_export (struct connection *conn, const char *name)
{
  const struct config *cfg = conn->cfg;

  close_export (conn);
  log_clear_last_error ();
  if (name[0] == '\0') {
    name = layer_default_export (cfg->top, cfg->readonly,
                                 conn->tls_active);
    if (!name) {
      if (!log_last_error ())
        nbdkit_error ("there is no default export");
      return -1;
    }
  }
  char *copy = strdup (name);
  if (!copy) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  free (conn->nego.exportname);
  conn->nego.exportname = copy;

  conn->nego.top = layer_open (conn, cfg->top, cfg->readonly, copy,
                          conn->tls_active);
  if (!conn->nego.top)
    return -1;
  if (layer_prepare_all (conn->nego.top, cfg->readonly) == -1 ||
      describe_export (conn) == -1) {
    close_export (conn);
    return -1;
  }
  if (NBDKIT_EXPORT_SELECT_ENABLED ())
    NBDKIT_EXPORT_SELECT (conn->id, conn->nego.exportname,
                          conn->nego.exportsize,
                          (uint64_t) conn->nego.eflags);
  return 0;
}

static const char *
failure_text (void)
{
  const char *e = log_last_error ();
  return e ? e : "the export could not be opened";
}

/* ---- options ---- */

static uint32_t
get32 (const char *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return be32toh (v);
}

static uint16_t
get16 (const char *p)
{
  uint16_t v;
  memcpy (&v, p, 2);
  return be16toh (v);
}

/* What an option's handler tells the negotiation loop.  The reply
 * helpers (send_reply, send_error) return 0 or -1, which are
 * OPT_NEXT and OPT_CLOSE, so a handler may return what they return.
 */
enum opt_next {
  OPT_CLOSE = -1,               /* the connection ends */
  OPT_NEXT = 0,                 /* read the next option */
  OPT_SERVE = 1,                /* negotiation is over: serve */
};

static enum opt_next
opt_list (struct connection *conn, uint32_t option, uint32_t len)
{
  const struct config *cfg = conn->cfg;
  if (len != 0)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "NBD_OPT_LIST takes no payload");
  /* As nbdkit: the list once per connection, so that list_exports is
   * asked at most once (a client that loops on LIST gets nowhere).
   */
  if (conn->nego.exports_listed)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "the export list was already sent");

  struct nbdkit_exports *exports = nbdkit_exports_new ();
  if (!exports)
    return send_error (conn, option, NBD_REP_ERR_PLATFORM, "out of memory");
  log_clear_last_error ();
  if (layer_list_exports (cfg->top, cfg->readonly, conn->tls_active,
                          exports) == -1) {
    nbdkit_exports_free (exports);
    return send_error (conn, option, NBD_REP_ERR_PLATFORM,
                       log_last_error ());
  }
  if (exports_has_default (exports)) {
    const char *def = layer_default_export (cfg->top, cfg->readonly,
                                 conn->tls_active);
    if (def && nbdkit_add_export (exports, def, NULL) == -1) {
      nbdkit_exports_free (exports);
      return send_error (conn, option, NBD_REP_ERR_PLATFORM,
                         "out of memory");
    }
  }
  for (size_t i = 0; i < nbdkit_exports_count (exports); i++) {
    struct nbdkit_export e = nbdkit_get_export (exports, i);
    size_t nlen = strlen (e.name);
    size_t dlen = e.description ? strlen (e.description) : 0;
    uint32_t be = htobe32 (nlen);
    char buf[4 + NBD_MAX_STRING];
    memcpy (buf, &be, 4);
    memcpy (buf + 4, e.name, nlen);
    if (send_reply2 (conn, option, NBD_REP_SERVER, buf, 4 + nlen,
                     e.description, dlen) == -1) {
      nbdkit_exports_free (exports);
      return OPT_CLOSE;
    }
  }
  nbdkit_exports_free (exports);
  conn->nego.exports_listed = true;
  return send_reply (conn, option, NBD_REP_ACK);
}

/* NBD_INFO_* replies for INFO and GO, once the export is open. */
static int
send_infos (struct connection *conn, uint32_t option, const char *payload,
            uint16_t nrinfos)
{
  struct nbd_info_export ie = {
    .info = htobe16 (NBD_INFO_EXPORT),
    .exportsize = htobe64 (conn->nego.exportsize),
    .eflags = htobe16 (conn->nego.eflags),
  };
  if (send_reply2 (conn, option, NBD_REP_INFO, &ie, sizeof ie,
                   NULL, 0) == -1)
    return -1;

  /* Each requested item once, in the order asked; NBD_INFO_EXPORT
   * went first whether asked or not, and unknown items are ignored.
   */
  bool sent_name = false, sent_desc = false, sent_bs = false;
  for (uint16_t i = 0; i < nrinfos; i++) {
    uint16_t what = get16 (payload + 2 * i);
    if (what == NBD_INFO_NAME && !sent_name) {
      uint16_t be = htobe16 (NBD_INFO_NAME);
      sent_name = true;
      if (send_reply2 (conn, option, NBD_REP_INFO, &be, 2,
                       conn->nego.exportname,
                       strlen (conn->nego.exportname)) == -1)
        return -1;
    }
    else if (what == NBD_INFO_DESCRIPTION && !sent_desc) {
      const char *d = layer_export_description (conn->nego.top);
      uint16_t be = htobe16 (NBD_INFO_DESCRIPTION);
      sent_desc = true;
      if (d && send_reply2 (conn, option, NBD_REP_INFO, &be, 2,
                            d, strnlen (d, NBD_MAX_STRING)) == -1)
        return -1;
    }
    else if (what == NBD_INFO_BLOCK_SIZE && !sent_bs) {
      /* Only when asked, and only when the layers have sizes: without
       * them a client assumes the protocol's defaults, as with nbdkit.
       */
      struct nbd_info_block_size bs = {
        .info = htobe16 (NBD_INFO_BLOCK_SIZE),
        .minimum = htobe32 (conn->nego.block_min),
        .preferred = htobe32 (conn->nego.block_pref),
        .maximum = htobe32 (conn->nego.block_max),
      };
      sent_bs = true;
      if (conn->nego.block_sizes &&
          send_reply2 (conn, option, NBD_REP_INFO, &bs, sizeof bs,
                       NULL, 0) == -1)
        return -1;
    }
  }
  return 0;
}

/* NBD_OPT_INFO and NBD_OPT_GO: OPT_SERVE when GO succeeded. */
static enum opt_next
opt_info_go (struct connection *conn, uint32_t option, const char *data,
             uint32_t len)
{
  if (len < 6)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "option too short");
  uint32_t namelen = get32 (data);
  if (namelen > NBD_MAX_STRING || namelen > len - 6)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "export name length is wrong");
  uint16_t nrinfos = get16 (data + 4 + namelen);
  if (len != 4 + namelen + 2 + 2 * (uint32_t) nrinfos)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "option length does not match its contents");

  char name[NBD_MAX_STRING + 1];
  memcpy (name, data + 4, namelen);
  name[namelen] = '\0';
  if (strlen (name) != namelen)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "export name contains NUL");

  if (open_export (conn, name) == -1) {
    int r = send_error (conn, option, NBD_REP_ERR_UNKNOWN, failure_text ());
    return r;
  }
  if (send_infos (conn, option, data + 4 + namelen + 2, nrinfos) == -1)
    return OPT_CLOSE;

  /* Meta contexts chosen for another export do not carry over. */
  if (conn->nego.meta_base_allocation &&
      (!conn->nego.meta_export || strcmp (conn->nego.meta_export, name) != 0))
    conn->nego.meta_base_allocation = false;

  if (send_reply (conn, option, NBD_REP_ACK) == -1)
    return OPT_CLOSE;
  if (option == NBD_OPT_INFO) {
    close_export (conn);
    return OPT_NEXT;
  }
  return OPT_SERVE;
}

/* LIST_META_CONTEXT and SET_META_CONTEXT. */
static enum opt_next
opt_meta (struct connection *conn, uint32_t option, const char *data,
          uint32_t len)
{
  bool set = option == NBD_OPT_SET_META_CONTEXT;

  /* A SET that fails, for whatever reason, leaves nothing selected: the
   * client cannot tell which of its earlier choices would survive.
   */
  if (set)
    conn->nego.meta_base_allocation = false;
  if (!conn->nego.structured)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "structured replies must be negotiated first");
  if (len < 8)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "option too short");
  uint32_t namelen = get32 (data);
  if (namelen > NBD_MAX_STRING || namelen > len - 8)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "export name length is wrong");
  const char *name = data + 4;
  /* A NUL would cut the name short when it is kept as a C string, and
   * the contexts would then seem chosen for another export.
   */
  if (memchr (name, '\0', namelen))
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "export name contains NUL");
  uint32_t nrqueries = get32 (data + 4 + namelen);
  if (nrqueries > MAX_META_QUERIES)
    return send_error (conn, option, NBD_REP_ERR_TOO_BIG,
                       "too many queries");

  /* Walk the queries once to check every length before using any. */
  uint32_t pos = 8 + namelen;
  for (uint32_t i = 0; i < nrqueries; i++) {
    if (len - pos < 4)
      return send_error (conn, option, NBD_REP_ERR_INVALID,
                         "query list is truncated");
    uint32_t qlen = get32 (data + pos);
    if (qlen > len - pos - 4)
      return send_error (conn, option, NBD_REP_ERR_INVALID,
                         "query length is wrong");
    pos += 4 + qlen;
  }
  if (pos != len)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "option length does not match its contents");

  if (set) {
    conn->nego.meta_base_allocation = false;
    free (conn->nego.meta_export);
    conn->nego.meta_export = strndup (name, namelen);
    if (!conn->nego.meta_export)
      return send_error (conn, option, NBD_REP_ERR_PLATFORM,
                         "out of memory");
  }

  uint32_t id = htobe32 (set ? BASE_ALLOCATION_ID : 0);
  bool matched = false;
  if (nrqueries == 0 && !set) {
    matched = true;             /* list everything */
    NBDKIT_META_CONTEXT (conn->id, BASE_ALLOCATION, probe_u64 (0),
                         (int64_t) probe_u64 (1));
  }
  pos = 8 + namelen;
  for (uint32_t i = 0; i < nrqueries; i++) {
    uint32_t qlen = get32 (data + pos);
    const char *q = data + pos + 4;
    pos += 4 + qlen;
    bool hit =
      (qlen == strlen (BASE_ALLOCATION) &&
       memcmp (q, BASE_ALLOCATION, qlen) == 0) ||
      (!set && qlen == 5 && memcmp (q, "base:", 5) == 0);
    if (NBDKIT_META_CONTEXT_ENABLED ()) {
      char *qname = strndup (q, qlen);
      NBDKIT_META_CONTEXT (conn->id, qname ? qname : "",
                           (uint64_t) (hit && set ? BASE_ALLOCATION_ID : 0),
                           (int64_t) hit);
      free (qname);
    }
    if (hit && !matched)
      matched = true;
  }
  if (matched) {
    if (set)
      conn->nego.meta_base_allocation = true;
    if (send_reply2 (conn, option, NBD_REP_META_CONTEXT, &id, 4,
                     BASE_ALLOCATION, strlen (BASE_ALLOCATION)) == -1)
      return OPT_CLOSE;
  }
  return send_reply (conn, option, NBD_REP_ACK);
}

/* NBD_OPT_EXPORT_NAME: no error reply is possible, so a failure ends
 * the connection.  OPT_SERVE to start transmission, OPT_CLOSE to close.
 */
static enum opt_next
opt_export_name (struct connection *conn, const char *data, uint32_t len,
                 bool no_zeroes, const char **why)
{
  char name[NBD_MAX_STRING + 1];
  if (len > NBD_MAX_STRING) {
    *why = "export name too long";
    return OPT_CLOSE;
  }
  memcpy (name, data, len);
  name[len] = '\0';
  if (strlen (name) != len || open_export (conn, name) == -1) {
    *why = "export could not be opened";
    return OPT_CLOSE;
  }
  /* As for GO: meta contexts chosen for another export do not apply. */
  if (conn->nego.meta_base_allocation &&
      (!conn->nego.meta_export || strcmp (conn->nego.meta_export, name) != 0))
    conn->nego.meta_base_allocation = false;
  struct nbd_export_name_reply r = {
    .exportsize = htobe64 (conn->nego.exportsize),
    .eflags = htobe16 (conn->nego.eflags),
  };
  if (conn_send (conn, &r, no_zeroes ? 10 : sizeof r) == -1)
    return OPT_CLOSE;
  return OPT_SERVE;
}

/* NBD_OPT_STARTTLS: acknowledge, then run the TLS handshake on the
 * socket.  OPT_NEXT to go on negotiating (now encrypted), OPT_CLOSE to
 * close.
 */
static enum opt_next
opt_starttls (struct connection *conn, uint32_t option, uint32_t len,
              const char **why)
{
  if (conn->cfg->tls == TLS_OFF)
    return send_error (conn, option, NBD_REP_ERR_POLICY,
                       "TLS is not enabled on this server");
  if (len != 0)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "NBD_OPT_STARTTLS takes no payload");
  if (conn->tls_active)
    return send_error (conn, option, NBD_REP_ERR_INVALID,
                       "TLS is already negotiated");
  if (send_reply (conn, option, NBD_REP_ACK) == -1)
    return OPT_CLOSE;

  /* The client may send nothing between STARTTLS and its TLS hello.
   * Bytes already buffered were sent in the clear before the ACK, and
   * must never be taken as if they came through TLS: hang up.
   */
  if (conn_buffered_input (conn) > 0) {
    NBDKIT_PROTOCOL_VIOLATION (conn->id, "data after STARTTLS");
    *why = "data after STARTTLS";
    return OPT_CLOSE;
  }
  if (tls_start (conn) == -1) {
    *why = "TLS handshake failed";
    return OPT_CLOSE;
  }

  /* Nothing negotiated in the clear survives into the TLS session: a
   * man in the middle could have chosen it.
   */
  close_export (conn);
  free (conn->nego.exportname);
  conn->nego.exportname = NULL;
  free (conn->nego.meta_export);
  conn->nego.meta_export = NULL;
  conn->nego.meta_base_allocation = false;
  conn->nego.structured = false;
  conn->nego.extended = false;
  /* The layers may name other exports to a TLS client. */
  layer_forget_default_exports (conn);
  conn->nego.exports_listed = false;
  return OPT_NEXT;
}

/* Oldstyle (-o): no options, just the default export's details. */
static int
negotiate_oldstyle (struct connection *conn)
{
  struct {
    uint64_t magic;
    uint64_t version;
    uint64_t size;
    uint16_t gflags;
    uint16_t eflags;
    char zeroes[124];
  } __attribute__ ((packed)) hello = { 0 };
  const char *name = conn->cfg->exportname ? conn->cfg->exportname : "";

  NBDKIT_HANDSHAKE_START (conn->id);
  if (open_export (conn, name) == -1) {
    conn_handshake_failed (conn, "export could not be opened");
    return -1;
  }
  hello.magic = htobe64 (NBD_MAGIC);
  hello.version = htobe64 (NBD_OLD_VERSION);
  hello.size = htobe64 (conn->nego.exportsize);
  hello.eflags = htobe16 (conn->nego.eflags);
  if (conn_send (conn, &hello, sizeof hello) == -1) {
    conn_handshake_failed (conn, "client went away");
    return -1;
  }
  NBDKIT_HANDSHAKE_DONE (conn->id, conn->nego.exportname,
                         (int64_t) probe_u64 (0), (int64_t) probe_u64 (0));
  return 0;
}

int
hs_negotiate (struct connection *conn)
{
  struct {
    uint64_t magic;
    uint64_t version;
    uint16_t gflags;
  } __attribute__ ((packed)) greeting = {
    htobe64 (NBD_MAGIC), htobe64 (NBD_NEW_VERSION), 0,
  };
  /* --mask-handshake takes global flags away (to test clients). */
  uint16_t gflags = (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES) &
    conn->cfg->mask_handshake;
  uint32_t cflags;
  char *data = NULL;
  int ret = -1;

  if (conn->cfg->oldstyle)
    return negotiate_oldstyle (conn);

  NBDKIT_HANDSHAKE_START (conn->id);
  greeting.gflags = htobe16 (gflags);
  if (conn_send (conn, &greeting, sizeof greeting) == -1 ||
      conn_recv (conn, &cflags, 4) == -1) {
    conn_handshake_failed (conn, "client went away");
    return -1;
  }
  cflags = be32toh (cflags);
  /* The client flags mirror the global ones: a client may only set
   * what the server offered.
   */
  if (cflags & ~(uint32_t) gflags) {
    NBDKIT_PROTOCOL_VIOLATION (conn->id, "unknown client flags");
    drop (conn, "unknown client flags");
    nbdkit_debug ("client sent unknown flags 0x%" PRIx32, cflags);
    return -1;
  }
  bool no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

  data = malloc (MAX_OPTION_LENGTH);
  if (!data) {
    nbdkit_error ("malloc: %m");
    conn_handshake_failed (conn, "out of memory");
    return -1;
  }

  uint64_t option_bytes = 0;
  for (;;) {
    struct nbd_new_option opt;
    if (conn_recv (conn, &opt, sizeof opt) == -1) {
      conn_handshake_failed (conn, "client went away");
      goto out;
    }
    if (be64toh (opt.version) != NBD_NEW_VERSION) {
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "bad option magic");
      drop (conn, "bad option magic");
      goto out;
    }
    uint32_t option = be32toh (opt.option);
    uint32_t len = be32toh (opt.optlen);
    NBDKIT_HANDSHAKE_OPTION (conn->id, (uint64_t) option,
                             hs_option_name (option), (uint64_t) len);
    if (len > MAX_OPTION_LENGTH) {
      NBDKIT_LIMIT_HIT (conn->id, "option_length");
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "option too long");
      drop (conn, "option too long");
      goto out;
    }
    if (conn->nego.hs_errors >= MAX_FAILED_OPTIONS) {
      NBDKIT_LIMIT_HIT (conn->id, "failed_options");
      drop (conn, "too many failed options");
      goto out;
    }
    option_bytes += sizeof opt + len;
    if (option_bytes > MAX_OPTION_BYTES) {
      NBDKIT_LIMIT_HIT (conn->id, "option_bytes");
      drop (conn, "too much option data");
      goto out;
    }
    if (conn_recv (conn, data, len) == -1) {
      conn_handshake_failed (conn, "client went away");
      goto out;
    }

    enum opt_next r;
    const char *why = "could not reply";

    /* A client that is not fixed newstyle knows only EXPORT_NAME, and
     * no error reply can be sent to it.
     */
    if (!(cflags & NBD_FLAG_C_FIXED_NEWSTYLE) &&
        option != NBD_OPT_EXPORT_NAME) {
      NBDKIT_PROTOCOL_VIOLATION (conn->id, "option without fixed newstyle");
      drop (conn, "option without fixed newstyle");
      goto out;
    }

    /* --tls=require: nothing but STARTTLS and ABORT in the clear. */
    if (conn->cfg->tls == TLS_REQUIRE && !conn->tls_active &&
        option != NBD_OPT_STARTTLS && option != NBD_OPT_ABORT) {
      if (option == NBD_OPT_EXPORT_NAME) {
        /* No error reply exists for EXPORT_NAME: hang up. */
        drop (conn, "TLS required");
        goto out;
      }
      if (send_error (conn, option, NBD_REP_ERR_TLS_REQD,
                      "this server requires TLS (STARTTLS)") == -1) {
        conn_handshake_failed (conn, why);
        goto out;
      }
      continue;
    }

    switch (option) {
    case NBD_OPT_EXPORT_NAME:
      r = opt_export_name (conn, data, len, no_zeroes, &why);
      break;
    case NBD_OPT_ABORT:
      send_reply (conn, option, NBD_REP_ACK);
      conn_handshake_failed (conn, "client aborted");
      conn_set_closing (conn, "abort");
      goto out;
    case NBD_OPT_LIST:
      r = opt_list (conn, option, len);
      break;
    case NBD_OPT_STARTTLS:
      r = opt_starttls (conn, option, len, &why);
      break;
    case NBD_OPT_INFO:
    case NBD_OPT_GO:
      r = opt_info_go (conn, option, data, len);
      break;
    case NBD_OPT_STRUCTURED_REPLY:
      if (len != 0)
        r = send_error (conn, option, NBD_REP_ERR_INVALID,
                        "option takes no payload");
      else if (conn->cfg->no_sr)
        r = send_error (conn, option, NBD_REP_ERR_UNSUP,
                        "structured replies are disabled");
      else if (conn->nego.structured)
        r = send_error (conn, option, NBD_REP_ERR_INVALID,
                        "structured replies already negotiated");
      else {
        conn->nego.structured = true;
        r = send_reply (conn, option, NBD_REP_ACK);
      }
      break;
    case NBD_OPT_EXTENDED_HEADERS:
      if (len != 0)
        r = send_error (conn, option, NBD_REP_ERR_INVALID,
                        "option takes no payload");
      else if (conn->cfg->no_sr)
        r = send_error (conn, option, NBD_REP_ERR_UNSUP,
                        "extended headers are disabled");
      else if (conn->nego.extended)
        r = send_error (conn, option, NBD_REP_ERR_INVALID,
                        "extended headers already negotiated");
      else {
        conn->nego.extended = conn->nego.structured = true;
        r = send_reply (conn, option, NBD_REP_ACK);
      }
      break;
    case NBD_OPT_LIST_META_CONTEXT:
    case NBD_OPT_SET_META_CONTEXT:
      /* --no-mc: as a server that has never heard of meta contexts,
       * so clients fall back to treating the whole disk as data.
       */
      if (conn->cfg->no_mc)
        r = send_error (conn, option, NBD_REP_ERR_UNSUP,
                        "meta contexts are disabled");
      else
        r = opt_meta (conn, option, data, len);
      break;
    default:
      r = send_error (conn, option, NBD_REP_ERR_UNSUP, "unknown option");
    }
    if (r == OPT_CLOSE) {
      conn_handshake_failed (conn, why);
      goto out;
    }
    if (r == OPT_SERVE)
      break;
  }

  /* The DF flag depends on structured replies, which may have been
   * negotiated after the export was described for INFO: recompute.
   */
  if (conn->nego.structured)
    conn->nego.eflags |= NBD_FLAG_SEND_DF;
  NBDKIT_HANDSHAKE_DONE (conn->id, conn->nego.exportname,
                         (int64_t) conn->nego.structured,
                         (int64_t) conn->nego.extended);
  nbdkit_debug ("handshake done: export \"%s\", size %" PRIu64
                ", structured %d, extended %d", conn->nego.exportname,
                conn->nego.exportsize, conn->nego.structured,
                conn->nego.extended);
  ret = 0;

 out:
  free (data);
  return ret;
}
