/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzzing: a strict client-side parser of everything the server sends.
 *
 * The checker knows the client's whole byte stream before the server
 * answers, and follows the conversation as a strict client would:
 *
 *  - the greeting; then, for each complete option the client sent, in
 *    order, that option's replies: each names the option, has a known
 *    type and a length that matches its contents, and the sequence ends
 *    with an ACK or an error (NBD_OPT_EXPORT_NAME: the bare export
 *    reply).  INFO and GO must describe the export before their ACK.
 *  - transmission, once GO is acknowledged: the client's requests are
 *    framed from where the handshake stopped, in the header size that
 *    was negotiated, up to NBD_CMD_DISC.  Every reply must answer one
 *    of those requests that is still open (so a reply to an unknown
 *    cookie, to a request after NBD_CMD_DISC, or a second final reply,
 *    all fail); simple replies carry data only for a successful read;
 *    structured and extended chunks are the ones negotiated, of known
 *    types, with lengths that match (an error chunk is exactly its
 *    message), inside the request's range; a successful read is covered
 *    exactly; a success is never given to a request the server cannot
 *    have run (out of range, a write to a read-only export, an unknown
 *    command, a payload that never arrived).
 *  - the end: nothing after the conversation is over, no reply cut
 *    short, and after NBD_CMD_DISC every earlier request answered.
 *
 * Server bytes are parsed incrementally: read data is skipped as it
 * streams past, so memory stays bounded whatever the client asked for.
 * Any breach prints what was wrong and calls abort().
 */
#include <config.h>

#include <endian.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "reply-checker.h"

/* Larger than anything this server sends in one reply header plus the
 * part of its payload we look at (a block status chunk of 65536
 * extended descriptors is 1 MiB).
 */
#define MAX_INSPECTED (2 * 1024 * 1024)

/* Larger payloads are refused by every server (and by this one at 32 MiB). */
#define MAX_PAYLOAD (64 * 1024 * 1024)

enum state {
  ST_GREETING,                  /* waiting for the greeting */
  ST_OPTION,                    /* replies to the current option */
  ST_EXPORT_NAME,               /* the bare reply to NBD_OPT_EXPORT_NAME */
  ST_TX,                        /* transmission replies */
  ST_END,                       /* the server must send nothing more */
};

struct req {
  uint64_t cookie, offset, count;
  uint16_t type, flags;
  bool cut_short;               /* its payload never (fully) arrived */
  bool done;                    /* its final reply has been seen */
  bool failed;                  /* an error reply or chunk was seen */
  bool got_status;              /* a block status chunk was seen */
  unsigned chunks;              /* data and hole chunks */
  uint64_t covered;             /* bytes those chunks covered */
};

struct checker {
  const uint8_t *in;            /* the client's stream */
  size_t in_len, in_pos;
  enum state st;
  const char *end_why;          /* why ST_END */

  /* Handshake. */
  bool no_zeroes, structured, extended;
  uint32_t opt;                 /* the option being answered */
  const uint8_t *opt_data;
  uint32_t opt_len;
  unsigned opt_replies;         /* replies so far to this option */
  bool opt_info_export;         /* NBD_INFO_EXPORT seen for it */
  bool meta_set;                /* base:allocation chosen by SET_META */
  uint32_t meta_id;
  const uint8_t *meta_export;   /* ... for this export name */
  uint32_t meta_export_len;
  uint64_t exportsize;
  uint16_t eflags;

  /* Transmission. */
  bool meta_active;
  struct req *reqs;
  size_t nreqs;
  size_t first_open;            /* reqs before this are all done */
  bool disc;                    /* the stream reached NBD_CMD_DISC */

  /* Server bytes not parsed yet: buf[pos, len). */
  uint8_t *buf;
  size_t pos, len, cap;
  uint64_t skip;                /* payload bytes to drop unseen */
  uint64_t out_total;           /* offset of buf[pos] in the stream */
};

static void __attribute__ ((noreturn, format (printf, 2, 3)))
violation (const struct checker *c, const char *fs, ...)
{
  va_list args;
  fprintf (stderr, "reply-checker: protocol violation at server byte %"
           PRIu64 ": ", c->out_total);
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
  fprintf (stderr, "\n");
  abort ();
}

static uint16_t
get16 (const uint8_t *p)
{
  uint16_t v;
  memcpy (&v, p, 2);
  return be16toh (v);
}

static uint32_t
get32 (const uint8_t *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return be32toh (v);
}

static uint64_t
get64 (const uint8_t *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return be64toh (v);
}

static bool
is_power_of_2 (uint32_t v)
{
  return v && (v & (v - 1)) == 0;
}

static bool
known_error (uint32_t e)
{
  switch (e) {
  case NBD_EPERM: case NBD_EIO: case NBD_ENOMEM: case NBD_EINVAL:
  case NBD_ENOSPC: case NBD_EOVERFLOW: case NBD_ENOTSUP: case NBD_ESHUTDOWN:
    return true;
  default:
    return false;
  }
}

static void
end_conversation (struct checker *c, const char *why)
{
  c->st = ST_END;
  c->end_why = why;
}

/* ---- the client's side ---- */

/* Frame the client's next option.  Without a complete one the server
 * cannot answer anything more.
 */
static void
next_option (struct checker *c)
{
  size_t left = c->in_len - c->in_pos;
  const uint8_t *p = c->in + c->in_pos;

  c->opt_replies = 0;
  c->opt_info_export = false;
  if (left < sizeof (struct nbd_new_option)) {
    end_conversation (c, "the client sent no further option");
    return;
  }
  if (get64 (p) != NBD_NEW_VERSION) {
    end_conversation (c, "the client sent a bad option magic");
    return;
  }
  uint32_t len = get32 (p + 12);
  if (len > left - sizeof (struct nbd_new_option)) {
    end_conversation (c, "the client's last option is cut short");
    return;
  }
  c->opt = get32 (p + 8);
  c->opt_len = len;
  c->opt_data = p + sizeof (struct nbd_new_option);
  c->in_pos += sizeof (struct nbd_new_option) + len;
  c->st = c->opt == NBD_OPT_EXPORT_NAME ? ST_EXPORT_NAME : ST_OPTION;
}

static void
add_request (struct checker *c, const struct req *r)
{
  struct req *n = realloc (c->reqs, (c->nreqs + 1) * sizeof *n);
  if (!n) {
    perror ("reply-checker: realloc");
    abort ();
  }
  c->reqs = n;
  c->reqs[c->nreqs++] = *r;
}

/* Transmission starts: frame the client's requests from here, up to
 * NBD_CMD_DISC, a bad magic or a request whose payload is missing.
 */
static void
start_transmission (struct checker *c, const uint8_t *name, uint32_t namelen)
{
  c->st = ST_TX;
  c->meta_active = c->meta_set && c->meta_export_len == namelen &&
    memcmp (c->meta_export, name, namelen) == 0;

  size_t hlen = c->extended ? sizeof (struct nbd_extended_request)
                            : sizeof (struct nbd_request);
  while (c->in_len - c->in_pos >= hlen) {
    const uint8_t *p = c->in + c->in_pos;
    struct req r = { 0 };
    if (get32 (p) != (c->extended ? NBD_EXTENDED_REQUEST_MAGIC
                                  : NBD_REQUEST_MAGIC))
      return;
    r.flags = get16 (p + 4);
    r.type = get16 (p + 6);
    r.cookie = get64 (p + 8);
    r.offset = get64 (p + 16);
    r.count = c->extended ? get64 (p + 24) : get32 (p + 24);
    c->in_pos += hlen;
    if (r.type == NBD_CMD_DISC) {
      c->disc = true;
      return;
    }
    uint64_t payload = 0;
    if (r.type == NBD_CMD_WRITE ||
        (c->extended && (r.flags & NBD_CMD_FLAG_PAYLOAD_LEN)))
      payload = r.count;
    if (payload > c->in_len - c->in_pos) {
      r.cut_short = true;
      add_request (c, &r);
      return;
    }
    c->in_pos += payload;
    add_request (c, &r);
  }
}

/* ---- the server's side: handshake ---- */

static size_t
parse_greeting (struct checker *c, const uint8_t *p, size_t avail)
{
  if (avail < 18)
    return 0;
  if (get64 (p) != NBD_MAGIC || get64 (p + 8) != NBD_NEW_VERSION)
    violation (c, "bad greeting magic");
  uint16_t gflags = get16 (p + 16);
  if (!(gflags & NBD_FLAG_FIXED_NEWSTYLE) ||
      (gflags & ~(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES)))
    violation (c, "greeting flags 0x%x", gflags);

  if (c->in_len < 4) {
    end_conversation (c, "the client sent no flags");
    return 18;
  }
  uint32_t cflags = get32 (c->in);
  c->in_pos = 4;
  if (cflags & ~(uint32_t) (NBD_FLAG_C_FIXED_NEWSTYLE |
                            NBD_FLAG_C_NO_ZEROES)) {
    end_conversation (c, "the client sent unknown flags");
    return 18;
  }
  if ((cflags & NBD_FLAG_C_NO_ZEROES) && !(gflags & NBD_FLAG_NO_ZEROES))
    end_conversation (c, "the client sent a flag the server did not offer");
  else {
    c->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;
    next_option (c);
  }
  return 18;
}

/* NBD_OPT_INFO / NBD_OPT_GO payload: the export name, or false if the
 * client's payload is malformed (then it must not be acknowledged).
 */
static bool
info_go_name (const struct checker *c, const uint8_t **name, uint32_t *len)
{
  if (c->opt_len < 6)
    return false;
  uint32_t namelen = get32 (c->opt_data);
  if (namelen > c->opt_len - 6)
    return false;
  uint16_t nrinfos = get16 (c->opt_data + 4 + namelen);
  if (c->opt_len != 4 + namelen + 2 + 2 * (uint32_t) nrinfos)
    return false;
  *name = c->opt_data + 4;
  *len = namelen;
  return true;
}

static void
check_info (struct checker *c, const uint8_t *p, uint32_t len)
{
  if (c->opt != NBD_OPT_INFO && c->opt != NBD_OPT_GO)
    violation (c, "NBD_REP_INFO to option %" PRIu32, c->opt);
  if (len < 2)
    violation (c, "NBD_REP_INFO of %" PRIu32 " bytes", len);
  switch (get16 (p)) {
  case NBD_INFO_EXPORT:
    if (len != sizeof (struct nbd_info_export))
      violation (c, "NBD_INFO_EXPORT of %" PRIu32 " bytes", len);
    c->exportsize = get64 (p + 2);
    c->eflags = get16 (p + 10);
    if (!(c->eflags & NBD_FLAG_HAS_FLAGS))
      violation (c, "export flags 0x%x lack NBD_FLAG_HAS_FLAGS", c->eflags);
    if ((c->eflags & NBD_FLAG_SEND_DF) && !c->structured)
      violation (c, "NBD_FLAG_SEND_DF without structured replies");
    c->opt_info_export = true;
    break;
  case NBD_INFO_NAME:
  case NBD_INFO_DESCRIPTION:
    if (len - 2 > NBD_MAX_STRING)
      violation (c, "NBD_INFO name or description of %" PRIu32 " bytes",
                 len - 2);
    break;
  case NBD_INFO_BLOCK_SIZE: {
    if (len != sizeof (struct nbd_info_block_size))
      violation (c, "NBD_INFO_BLOCK_SIZE of %" PRIu32 " bytes", len);
    uint32_t min = get32 (p + 2), pref = get32 (p + 6), max = get32 (p + 10);
    if (!is_power_of_2 (min) || min > 65536 || !is_power_of_2 (pref) ||
        pref < min || (max != 0xffffffff && (max < pref || max % min)))
      violation (c, "block sizes %" PRIu32 "/%" PRIu32 "/%" PRIu32,
                 min, pref, max);
    break;
  }
  default:
    violation (c, "unknown NBD_INFO type %u", get16 (p));
  }
}

static void
check_meta_context (struct checker *c, const uint8_t *p, uint32_t len)
{
  if (c->opt != NBD_OPT_LIST_META_CONTEXT &&
      c->opt != NBD_OPT_SET_META_CONTEXT)
    violation (c, "NBD_REP_META_CONTEXT to option %" PRIu32, c->opt);
  if (len < 5 || len - 4 > NBD_MAX_STRING)
    violation (c, "NBD_REP_META_CONTEXT of %" PRIu32 " bytes", len);
  if (c->opt != NBD_OPT_SET_META_CONTEXT)
    return;
  uint32_t id = get32 (p);
  const char *ba = "base:allocation";
  if (len - 4 == strlen (ba) && memcmp (p + 4, ba, len - 4) == 0) {
    /* The client's payload: export name length, then the name. */
    if (c->opt_len < 8 || get32 (c->opt_data) > c->opt_len - 8)
      violation (c, "meta context chosen for a malformed request");
    c->meta_set = true;
    c->meta_id = id;
    c->meta_export = c->opt_data + 4;
    c->meta_export_len = get32 (c->opt_data);
  }
}

/* The final reply to an option. */
static void
option_done (struct checker *c, uint32_t reply)
{
  const uint8_t *name;
  uint32_t namelen;

  if (reply & 0x80000000) {
    if (c->opt == NBD_OPT_SET_META_CONTEXT)
      c->meta_set = false;
    next_option (c);
    return;
  }
  switch (c->opt) {
  case NBD_OPT_ABORT:
    end_conversation (c, "the client aborted");
    return;
  case NBD_OPT_STRUCTURED_REPLY:
    if (c->opt_len != 0)
      violation (c, "STRUCTURED_REPLY with a payload acknowledged");
    c->structured = true;
    break;
  case NBD_OPT_EXTENDED_HEADERS:
    if (c->opt_len != 0)
      violation (c, "EXTENDED_HEADERS with a payload acknowledged");
    c->structured = c->extended = true;
    break;
  case NBD_OPT_LIST:
  case NBD_OPT_LIST_META_CONTEXT:
    break;
  case NBD_OPT_SET_META_CONTEXT:
    if (!c->structured)
      violation (c, "SET_META_CONTEXT acknowledged without structured "
                 "replies");
    break;
  case NBD_OPT_INFO:
  case NBD_OPT_GO:
    if (!info_go_name (c, &name, &namelen))
      violation (c, "INFO/GO with a malformed payload acknowledged");
    if (!c->opt_info_export)
      violation (c, "INFO/GO acknowledged without NBD_INFO_EXPORT");
    if (c->opt == NBD_OPT_GO) {
      start_transmission (c, name, namelen);
      return;
    }
    break;
  default:
    /* STARTTLS too: this harness configures no TLS. */
    violation (c, "option %" PRIu32 " acknowledged", c->opt);
  }
  next_option (c);
}

static size_t
parse_option_reply (struct checker *c, const uint8_t *p, size_t avail)
{
  const size_t hlen = sizeof (struct nbd_fixed_new_option_reply);
  if (avail < hlen)
    return 0;
  if (get64 (p) != NBD_REP_MAGIC)
    violation (c, "bad option reply magic");
  uint32_t opt = get32 (p + 8), reply = get32 (p + 12), len = get32 (p + 16);
  if (opt != c->opt)
    violation (c, "reply to option %" PRIu32 " while answering %" PRIu32,
               opt, c->opt);
  if (len > MAX_INSPECTED)
    violation (c, "option reply of %" PRIu32 " bytes", len);
  if (avail < hlen + len)
    return 0;
  const uint8_t *d = p + hlen;
  c->opt_replies++;

  if (reply & 0x80000000) {
    if (len > NBD_MAX_STRING)
      violation (c, "error message of %" PRIu32 " bytes", len);
    option_done (c, reply);
    return hlen + len;
  }
  switch (reply) {
  case NBD_REP_ACK:
    if (len != 0)
      violation (c, "NBD_REP_ACK with %" PRIu32 " bytes", len);
    option_done (c, reply);
    break;
  case NBD_REP_SERVER:
    if (c->opt != NBD_OPT_LIST)
      violation (c, "NBD_REP_SERVER to option %" PRIu32, c->opt);
    if (len < 4 || get32 (d) > len - 4)
      violation (c, "malformed NBD_REP_SERVER");
    break;
  case NBD_REP_INFO:
    check_info (c, d, len);
    break;
  case NBD_REP_META_CONTEXT:
    check_meta_context (c, d, len);
    break;
  default:
    violation (c, "unknown option reply type %" PRIu32, reply);
  }
  return hlen + len;
}

static size_t
parse_export_name_reply (struct checker *c, const uint8_t *p, size_t avail)
{
  size_t want = c->no_zeroes ? 10 : sizeof (struct nbd_export_name_reply);
  if (avail < want)
    return 0;
  c->exportsize = get64 (p);
  c->eflags = get16 (p + 8);
  for (size_t i = 10; i < want; i++)
    if (p[i])
      violation (c, "non-zero padding in the EXPORT_NAME reply");
  if (!(c->eflags & NBD_FLAG_HAS_FLAGS))
    violation (c, "export flags 0x%x lack NBD_FLAG_HAS_FLAGS", c->eflags);
  start_transmission (c, c->opt_data, c->opt_len);
  return want;
}

/* ---- the server's side: transmission ---- */

static struct req *
find_open (struct checker *c, uint64_t cookie)
{
  for (size_t i = c->first_open; i < c->nreqs; i++)
    if (!c->reqs[i].done && c->reqs[i].cookie == cookie)
      return &c->reqs[i];
  violation (c, "reply to cookie 0x%" PRIx64 ", which has no open request "
             "(never sent, sent after NBD_CMD_DISC, or already answered)",
             cookie);
}

static bool
in_range (const struct checker *c, uint64_t offset, uint64_t count)
{
  return offset <= c->exportsize && count <= c->exportsize - offset;
}

/* The final reply to R has been seen. */
static void
request_done (struct checker *c, struct req *r)
{
  r->done = true;
  while (c->first_open < c->nreqs && c->reqs[c->first_open].done)
    c->first_open++;
  if (r->failed)
    return;

  /* A success: the server must have been able to run the request. */
  if (r->cut_short)
    violation (c, "success for cookie 0x%" PRIx64 ", whose payload never "
               "arrived", r->cookie);
  switch (r->type) {
  case NBD_CMD_FLUSH:
    return;
  case NBD_CMD_WRITE:
  case NBD_CMD_TRIM:
  case NBD_CMD_WRITE_ZEROES:
    if (c->eflags & NBD_FLAG_READ_ONLY)
      violation (c, "success for a write to a read-only export");
    break;
  case NBD_CMD_READ:
  case NBD_CMD_CACHE:
  case NBD_CMD_BLOCK_STATUS:
    break;
  default:
    violation (c, "success for unknown command %u", r->type);
  }
  if (!in_range (c, r->offset, r->count))
    violation (c, "success for %u at offset %" PRIu64 " count %" PRIu64
               " past the end (%" PRIu64 ")", r->type, r->offset, r->count,
               c->exportsize);
  if (r->type == NBD_CMD_READ && c->structured && r->covered != r->count)
    violation (c, "read of %" PRIu64 " bytes answered with %" PRIu64,
               r->count, r->covered);
  if (r->type == NBD_CMD_READ && (r->flags & NBD_CMD_FLAG_DF) &&
      r->chunks > 1)
    violation (c, "NBD_CMD_FLAG_DF read answered in %u chunks", r->chunks);
  if (r->type == NBD_CMD_BLOCK_STATUS && !r->got_status)
    violation (c, "block status success without a status chunk");
}

static size_t
parse_simple (struct checker *c, const uint8_t *p, size_t avail)
{
  if (c->extended)
    violation (c, "simple reply after extended headers were negotiated");
  if (avail < sizeof (struct nbd_simple_reply))
    return 0;
  uint32_t error = get32 (p + 4);
  struct req *r = find_open (c, get64 (p + 8));
  if (c->structured && r->type == NBD_CMD_READ)
    violation (c, "simple reply to a read after structured replies were "
               "negotiated");
  if (error) {
    if (!known_error (error))
      violation (c, "unknown error %" PRIu32, error);
    r->failed = true;
  }
  else if (r->type == NBD_CMD_READ) {
    if (r->count > MAX_PAYLOAD)
      violation (c, "read data of %" PRIu64 " bytes", r->count);
    c->skip = r->count;         /* the data */
    r->covered = r->count;
  }
  request_done (c, r);
  return sizeof (struct nbd_simple_reply);
}

/* One structured or extended chunk for R: header fields and the
 * payload, of which AVAIL bytes at D are here (all of it, except for
 * NBD_REPLY_TYPE_OFFSET_DATA where the first 8 are enough).
 */
static void
check_chunk (struct checker *c, struct req *r, uint16_t flags, uint16_t type,
             uint64_t len, const uint8_t *d)
{
  if (flags & ~NBD_REPLY_FLAG_DONE)
    violation (c, "unknown reply flags 0x%x", flags);

  switch (type) {
  case NBD_REPLY_TYPE_NONE:
    if (len != 0)
      violation (c, "NBD_REPLY_TYPE_NONE with %" PRIu64 " bytes", len);
    if (!(flags & NBD_REPLY_FLAG_DONE))
      violation (c, "NBD_REPLY_TYPE_NONE without NBD_REPLY_FLAG_DONE");
    break;

  case NBD_REPLY_TYPE_OFFSET_DATA:
  case NBD_REPLY_TYPE_OFFSET_HOLE: {
    if (r->type != NBD_CMD_READ)
      violation (c, "data chunk for command %u", r->type);
    uint64_t n;
    if (type == NBD_REPLY_TYPE_OFFSET_DATA) {
      if (len <= 8)
        violation (c, "data chunk of %" PRIu64 " bytes", len);
      n = len - 8;
    }
    else {
      if (len != 12)
        violation (c, "hole chunk of %" PRIu64 " bytes", len);
      n = get32 (d + 8);
      if (n == 0)
        violation (c, "empty hole chunk");
    }
    uint64_t off = get64 (d);
    if (off < r->offset || off - r->offset > r->count ||
        n > r->count - (off - r->offset))
      violation (c, "chunk at %" PRIu64 "+%" PRIu64 " outside the read "
                 "%" PRIu64 "+%" PRIu64, off, n, r->offset, r->count);
    r->covered += n;
    r->chunks++;
    break;
  }

  case NBD_REPLY_TYPE_BLOCK_STATUS:
  case NBD_REPLY_TYPE_BLOCK_STATUS_EXT: {
    bool ext = type == NBD_REPLY_TYPE_BLOCK_STATUS_EXT;
    uint64_t head = ext ? 8 : 4, dlen = ext ? 16 : 8;
    if (ext != c->extended)
      violation (c, "block status chunk type %u does not match the headers "
                 "negotiated", type);
    if (r->type != NBD_CMD_BLOCK_STATUS)
      violation (c, "block status chunk for command %u", r->type);
    if (!c->meta_active)
      violation (c, "block status chunk without a meta context");
    if (len < head + dlen || (len - head) % dlen)
      violation (c, "block status chunk of %" PRIu64 " bytes", len);
    if (r->got_status)
      violation (c, "a second block status chunk for one context");
    r->got_status = true;
    if (get32 (d) != c->meta_id)
      violation (c, "block status for context %" PRIu32 ", not %" PRIu32,
                 get32 (d), c->meta_id);
    uint64_t n = (len - head) / dlen;
    if (ext && get32 (d + 4) != n)
      violation (c, "block status count %" PRIu32 " for %" PRIu64
                 " descriptors", get32 (d + 4), n);
    if ((r->flags & NBD_CMD_FLAG_REQ_ONE) && n != 1)
      violation (c, "NBD_CMD_FLAG_REQ_ONE answered with %" PRIu64
                 " descriptors", n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
      const uint8_t *e = d + head + i * dlen;
      uint64_t l = ext ? get64 (e) : get32 (e);
      uint64_t s = ext ? get64 (e + 8) : get32 (e + 4);
      if (l == 0)
        violation (c, "zero-length block status descriptor");
      if (s & ~(uint64_t) (NBD_STATE_HOLE | NBD_STATE_ZERO))
        violation (c, "unknown base:allocation flags 0x%" PRIx64, s);
      total += l;
      if (total > c->exportsize - r->offset)
        violation (c, "block status past the end of the export");
    }
    break;
  }

  case NBD_REPLY_TYPE_ERROR:
  case NBD_REPLY_TYPE_ERROR_OFFSET: {
    if (len < 6)
      violation (c, "error chunk of %" PRIu64 " bytes", len);
    uint32_t error = get32 (d);
    uint16_t msglen = get16 (d + 4);
    uint64_t want = 6 + (uint64_t) msglen +
      (type == NBD_REPLY_TYPE_ERROR_OFFSET ? 8 : 0);
    if (len != want)
      violation (c, "error chunk of %" PRIu64 " bytes for a message of %u",
                 len, msglen);
    if (error == 0 || !known_error (error))
      violation (c, "error chunk with error %" PRIu32, error);
    if (type == NBD_REPLY_TYPE_ERROR_OFFSET) {
      uint64_t off = get64 (d + 6 + msglen);
      if (off < r->offset || off - r->offset >= r->count)
        violation (c, "error offset %" PRIu64 " outside the request", off);
    }
    r->failed = true;
    break;
  }

  default:
    violation (c, "unknown chunk type %u", type);
  }

  if (flags & NBD_REPLY_FLAG_DONE)
    request_done (c, r);
}

static size_t
parse_chunk (struct checker *c, const uint8_t *p, size_t avail, bool ext)
{
  size_t hlen = ext ? sizeof (struct nbd_extended_reply)
                    : sizeof (struct nbd_structured_reply);
  if (ext && !c->extended)
    violation (c, "extended reply without extended headers");
  if (!ext && (!c->structured || c->extended))
    violation (c, "structured reply %s", c->extended
               ? "after extended headers were negotiated"
               : "without structured replies");
  if (avail < hlen)
    return 0;
  uint16_t flags = get16 (p + 4), type = get16 (p + 6);
  uint64_t cookie = get64 (p + 8);
  uint64_t len = ext ? get64 (p + 24) : get32 (p + 16);
  struct req *r = find_open (c, cookie);
  if (ext && get64 (p + 16) != r->offset)
    violation (c, "extended reply offset %" PRIu64 " for a request at %"
               PRIu64, get64 (p + 16), r->offset);
  if (len > MAX_PAYLOAD)
    violation (c, "chunk of %" PRIu64 " bytes", len);

  /* For data, only the offset is looked at; the rest streams past. */
  uint64_t inspect = type == NBD_REPLY_TYPE_OFFSET_DATA && len > 8 ? 8 : len;
  if (inspect > MAX_INSPECTED)
    violation (c, "chunk of type %u with %" PRIu64 " bytes", type, len);
  if (avail < hlen + inspect)
    return 0;
  check_chunk (c, r, flags, type, len, p + hlen);
  c->skip = len - inspect;
  return hlen + inspect;
}

static size_t
parse_reply (struct checker *c, const uint8_t *p, size_t avail)
{
  if (avail < 4)
    return 0;
  switch (get32 (p)) {
  case NBD_SIMPLE_REPLY_MAGIC: return parse_simple (c, p, avail);
  case NBD_STRUCTURED_REPLY_MAGIC: return parse_chunk (c, p, avail, false);
  case NBD_EXTENDED_REPLY_MAGIC: return parse_chunk (c, p, avail, true);
  default:
    violation (c, "bad reply magic 0x%08" PRIx32
               " (data after an error, or a reply of the wrong length?)",
               get32 (p));
  }
}

/* Parse one unit from buf[pos, len).  Returns the bytes it took, or 0
 * if more are needed.
 */
static size_t
step (struct checker *c)
{
  const uint8_t *p = c->buf + c->pos;
  size_t avail = c->len - c->pos;

  switch (c->st) {
  case ST_GREETING: return parse_greeting (c, p, avail);
  case ST_OPTION: return parse_option_reply (c, p, avail);
  case ST_EXPORT_NAME: return parse_export_name_reply (c, p, avail);
  case ST_TX: return parse_reply (c, p, avail);
  case ST_END:
    violation (c, "%zu bytes after the conversation ended (%s)", avail,
               c->end_why);
  }
  abort ();
}

/* Drop payload bytes to be skipped from what is buffered. */
static void
skip_buffered (struct checker *c)
{
  size_t avail = c->len - c->pos;
  size_t n = c->skip < avail ? c->skip : avail;
  c->pos += n;
  c->skip -= n;
  c->out_total += n;
}

void
checker_feed (struct checker *c, const uint8_t *buf, size_t len)
{
  /* Skipped payload need not be copied at all. */
  if (c->skip && c->pos == c->len) {
    size_t n = c->skip < len ? c->skip : len;
    c->skip -= n;
    c->out_total += n;
    buf += n;
    len -= n;
  }
  if (len == 0)
    return;

  /* Compact, then append. */
  if (c->pos > 0) {
    memmove (c->buf, c->buf + c->pos, c->len - c->pos);
    c->len -= c->pos;
    c->pos = 0;
  }
  if (c->len + len > c->cap) {
    size_t cap = c->cap ? c->cap : 65536;
    while (cap < c->len + len)
      cap *= 2;
    uint8_t *b = realloc (c->buf, cap);
    if (!b) {
      perror ("reply-checker: realloc");
      abort ();
    }
    c->buf = b;
    c->cap = cap;
  }
  memcpy (c->buf + c->len, buf, len);
  c->len += len;

  for (;;) {
    skip_buffered (c);
    if (c->skip || c->pos == c->len)
      break;
    size_t n = step (c);
    if (n == 0)
      break;
    c->pos += n;
    c->out_total += n;
  }
}

void
checker_finish (struct checker *c)
{
  if (c->skip || c->pos < c->len)
    violation (c, "the server closed in the middle of a reply (%" PRIu64
               " payload bytes missing, %zu bytes of a header)", c->skip,
               c->len - c->pos);
  switch (c->st) {
  case ST_GREETING:
    violation (c, "the server closed without a greeting");
  case ST_OPTION:
    if (c->opt_replies > 0)
      violation (c, "the server closed before its final reply to option %"
                 PRIu32, c->opt);
    break;
  case ST_EXPORT_NAME:
  case ST_END:
    break;
  case ST_TX:
    /* After NBD_CMD_DISC every earlier request must be answered. */
    if (c->disc)
      for (size_t i = c->first_open; i < c->nreqs; i++)
        if (!c->reqs[i].done)
          violation (c, "no reply to cookie 0x%" PRIx64 " before the "
                     "server closed after NBD_CMD_DISC", c->reqs[i].cookie);
    break;
  }
}

struct checker *
checker_new (const uint8_t *client, size_t len)
{
  struct checker *c = calloc (1, sizeof *c);
  if (!c) {
    perror ("reply-checker: calloc");
    abort ();
  }
  c->in = client;
  c->in_len = len;
  c->st = ST_GREETING;
  return c;
}

bool
checker_in_transmission (const struct checker *c)
{
  return c->st == ST_TX;
}

void
checker_free (struct checker *c)
{
  free (c->reqs);
  free (c->buf);
  free (c);
}
