/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbd-raw-client: a tiny NBD client that speaks fixed newstyle over a
 * Unix socket byte by byte, for what libnbd 1.14 cannot test: extended
 * headers (NBD_OPT_EXTENDED_HEADERS, 32-byte requests and replies,
 * 64-bit block status descriptors), the handshake's corner cases and the
 * server's answers to malformed requests.
 *
 *   nbd-raw-client SOCKET handshake   option negotiation checks
 *   nbd-raw-client SOCKET extended    extended headers: write, read, zero,
 *                                     block status (needs a memory disk
 *                                     of at least 8 GiB)
 *   nbd-raw-client SOCKET errors      protocol errors: bad flags, bad
 *                                     requests, past-the-end, bad magic
 *   nbd-raw-client SOCKET status structured|extended OFFSET COUNT [one]
 *                                     one BLOCK_STATUS (with REQ_ONE if
 *                                     "one"), each descriptor printed as
 *                                     "desc LENGTH FLAGS"
 *
 * Each check prints "ok N - what" or "not ok N - what (why)"; the exit
 * status is 1 if any check failed.  Only the C library and POSIX sockets;
 * wire values come from common/protocol.h.  Called by test-raw-*.sh.
 */

#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol.h"

static const char *sockpath;
static int checks, failures;

static void
check (bool ok, const char *fmt, ...)
{
  va_list ap;

  checks++;
  if (!ok)
    failures++;
  printf ("%s %d - ", ok ? "ok" : "not ok", checks);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  putchar ('\n');
  fflush (stdout);
}

/* A fatal problem: the conversation cannot go on. */
static void __attribute__ ((noreturn))
die (const char *fmt, ...)
{
  va_list ap;

  printf ("not ok %d - ", ++checks);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  printf ("\nBail out! %d of %d checks failed before this\n", failures,
          checks - 1);
  exit (1);
}

/* --- Bytes on the socket ----------------------------------------------- */

static int
connect_server (void)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct timeval tv = { .tv_sec = 10 };
  int fd;

  if (strlen (sockpath) >= sizeof addr.sun_path)
    die ("socket path too long: %s", sockpath);
  strcpy (addr.sun_path, sockpath);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    die ("socket: %s", strerror (errno));
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) == -1)
    die ("connect %s: %s", sockpath, strerror (errno));
  /* No check may hang: a silent server becomes a failed read. */
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

/* Returns 0, or -1 on error/EOF (errno 0 for EOF). */
static int
read_full (int fd, void *buf, size_t n)
{
  char *p = buf;

  while (n > 0) {
    ssize_t r = read (fd, p, n);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = 0;
      return -1;
    }
    p += r;
    n -= r;
  }
  return 0;
}

static int
write_full (int fd, const void *buf, size_t n)
{
  const char *p = buf;

  while (n > 0) {
    ssize_t r = send (fd, p, n, MSG_NOSIGNAL);
    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    p += r;
    n -= r;
  }
  return 0;
}

static void
xread (int fd, void *buf, size_t n, const char *what)
{
  if (read_full (fd, buf, n) == -1)
    die ("reading %s: %s", what, errno ? strerror (errno) : "end of file");
}

static void
xwrite (int fd, const void *buf, size_t n, const char *what)
{
  if (write_full (fd, buf, n) == -1)
    die ("writing %s: %s", what, strerror (errno));
}

/* True if the server closes the connection (EOF or reset) within the
 * receive timeout, discarding anything it sends first.
 */
static bool
server_closes (int fd)
{
  char buf[4096];

  for (;;) {
    ssize_t r = read (fd, buf, sizeof buf);
    if (r == 0)
      return true;
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      return errno == ECONNRESET || errno == EPIPE;
  }
}

/* --- Handshake --------------------------------------------------------- */

/* Read the greeting, send CFLAGS; returns the server's handshake flags. */
static uint16_t
greet (int fd, uint32_t cflags)
{
  uint64_t magic, version;
  uint16_t gflags;

  xread (fd, &magic, 8, "greeting magic");
  xread (fd, &version, 8, "greeting version");
  if (be64toh (magic) != NBD_MAGIC || be64toh (version) != NBD_NEW_VERSION)
    die ("not a newstyle greeting: %016" PRIx64 " %016" PRIx64,
         be64toh (magic), be64toh (version));
  xread (fd, &gflags, 2, "handshake flags");
  gflags = be16toh (gflags);
  cflags = htobe32 (cflags);
  xwrite (fd, &cflags, 4, "client flags");
  return gflags;
}

static void
send_option (int fd, uint32_t option, const void *data, uint32_t len)
{
  struct nbd_new_option h = {
    .version = htobe64 (NBD_NEW_VERSION),
    .option = htobe32 (option),
    .optlen = htobe32 (len),
  };

  xwrite (fd, &h, sizeof h, "option header");
  if (len)
    xwrite (fd, data, len, "option data");
}

struct opt_reply {
  uint32_t option, reply, len;
  char data[NBD_MAX_STRING + 64];
};

static void
recv_option_reply (int fd, uint32_t option, struct opt_reply *r)
{
  struct nbd_fixed_new_option_reply h;

  xread (fd, &h, sizeof h, "option reply");
  if (be64toh (h.magic) != NBD_REP_MAGIC)
    die ("option reply magic %016" PRIx64, be64toh (h.magic));
  r->option = be32toh (h.option);
  r->reply = be32toh (h.reply);
  r->len = be32toh (h.replylen);
  if (r->option != option)
    die ("reply to option %u names option %u", option, r->option);
  if (r->len > sizeof r->data)
    die ("option reply too long: %u", r->len);
  xread (fd, r->data, r->len, "option reply data");
}

/* Send a simple option and return its single reply type. */
static uint32_t
simple_option (int fd, uint32_t option, const void *data, uint32_t len)
{
  struct opt_reply r;

  send_option (fd, option, data, len);
  recv_option_reply (fd, option, &r);
  return r.reply;
}

struct export_info {
  uint64_t size;
  uint16_t eflags;
  bool have_block_size;
  uint32_t bs_min, bs_pref, bs_max;
};

/* NBD_OPT_GO (or INFO) on NAME, asking for NBD_INFO_BLOCK_SIZE.  Returns
 * the final reply type (NBD_REP_ACK on success).
 */
static uint32_t
go (int fd, uint32_t option, const char *name, struct export_info *info)
{
  uint32_t namelen = strlen (name);
  char buf[4 + NBD_MAX_STRING + 2 + 2];
  uint32_t n32 = htobe32 (namelen);
  uint16_t one = htobe16 (1), bsreq = htobe16 (NBD_INFO_BLOCK_SIZE);
  struct opt_reply r;
  size_t len = 0;

  memset (info, 0, sizeof *info);
  memcpy (buf + len, &n32, 4); len += 4;
  memcpy (buf + len, name, namelen); len += namelen;
  memcpy (buf + len, &one, 2); len += 2;
  memcpy (buf + len, &bsreq, 2); len += 2;
  send_option (fd, option, buf, len);

  for (;;) {
    recv_option_reply (fd, option, &r);
    if (r.reply != NBD_REP_INFO)
      return r.reply;
    if (r.len < 2)
      die ("short NBD_REP_INFO");
    uint16_t type = be16toh (*(uint16_t *) r.data);
    if (type == NBD_INFO_EXPORT && r.len == sizeof (struct nbd_info_export)) {
      struct nbd_info_export *e = (void *) r.data;
      info->size = be64toh (e->exportsize);
      info->eflags = be16toh (e->eflags);
    }
    else if (type == NBD_INFO_BLOCK_SIZE &&
             r.len == sizeof (struct nbd_info_block_size)) {
      struct nbd_info_block_size *b = (void *) r.data;
      info->have_block_size = true;
      info->bs_min = be32toh (b->minimum);
      info->bs_pref = be32toh (b->preferred);
      info->bs_max = be32toh (b->maximum);
    }
  }
}

/* Connect, agree fixed newstyle without zeroes, optionally negotiate
 * structured replies or extended headers (and base:allocation), then GO.
 * Returns the fd; *ctx_id gets the meta context id.
 */
enum mode { SIMPLE, STRUCTURED, EXTENDED };

static uint32_t
set_base_allocation (int fd)
{
  static const char q[] = "base:allocation";
  char buf[4 + 4 + 4 + sizeof q];
  uint32_t zero = 0, one = htobe32 (1), qlen = htobe32 (strlen (q));
  uint32_t id = 0;
  struct opt_reply r;
  int contexts = 0;

  memcpy (buf, &zero, 4);                 /* export name "" */
  memcpy (buf + 4, &one, 4);              /* one query */
  memcpy (buf + 8, &qlen, 4);
  memcpy (buf + 12, q, strlen (q));
  send_option (fd, NBD_OPT_SET_META_CONTEXT, buf, 12 + strlen (q));
  for (;;) {
    recv_option_reply (fd, NBD_OPT_SET_META_CONTEXT, &r);
    if (r.reply != NBD_REP_META_CONTEXT)
      break;
    contexts++;
    id = be32toh (*(uint32_t *) r.data);
    check (r.len == 4 + strlen (q) && memcmp (r.data + 4, q, strlen (q)) == 0,
           "SET_META_CONTEXT names base:allocation");
  }
  check (r.reply == NBD_REP_ACK && contexts == 1,
         "SET_META_CONTEXT base:allocation: one context then ACK "
         "(got %d, final reply 0x%x)", contexts, r.reply);
  return id;
}

static int
open_export (enum mode mode, struct export_info *info, uint32_t *ctx_id)
{
  int fd = connect_server ();
  uint16_t gflags = greet (fd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
  uint32_t reply;

  if (!(gflags & NBD_FLAG_FIXED_NEWSTYLE))
    die ("server does not offer fixed newstyle (flags 0x%x)", gflags);
  if (mode == STRUCTURED) {
    reply = simple_option (fd, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
    if (reply != NBD_REP_ACK)
      die ("NBD_OPT_STRUCTURED_REPLY refused: 0x%x", reply);
  }
  if (mode == EXTENDED) {
    reply = simple_option (fd, NBD_OPT_EXTENDED_HEADERS, NULL, 0);
    check (reply == NBD_REP_ACK, "NBD_OPT_EXTENDED_HEADERS gets ACK (0x%x)",
           reply);
    if (reply != NBD_REP_ACK)
      die ("cannot go on without extended headers");
  }
  if (mode != SIMPLE && ctx_id)
    *ctx_id = set_base_allocation (fd);
  reply = go (fd, NBD_OPT_GO, "", info);
  if (reply != NBD_REP_ACK)
    die ("NBD_OPT_GO failed: 0x%x", reply);
  return fd;
}

/* --- Transmission ------------------------------------------------------ */

static void
send_request (int fd, enum mode mode, uint16_t flags, uint16_t type,
              uint64_t cookie, uint64_t offset, uint64_t count,
              const void *payload, size_t payload_len)
{
  if (mode == EXTENDED) {
    struct nbd_extended_request r = {
      .magic = htobe32 (NBD_EXTENDED_REQUEST_MAGIC),
      .flags = htobe16 (flags), .type = htobe16 (type),
      .cookie = htobe64 (cookie), .offset = htobe64 (offset),
      .count = htobe64 (count),
    };
    xwrite (fd, &r, sizeof r, "extended request");
  }
  else {
    struct nbd_request r = {
      .magic = htobe32 (NBD_REQUEST_MAGIC),
      .flags = htobe16 (flags), .type = htobe16 (type),
      .cookie = htobe64 (cookie), .offset = htobe64 (offset),
      .count = htobe32 ((uint32_t) count),
    };
    xwrite (fd, &r, sizeof r, "request");
  }
  if (payload_len)
    xwrite (fd, payload, payload_len, "request payload");
}

/* One reply message (simple reply, or one structured/extended chunk). */
struct reply {
  uint32_t magic;
  uint16_t flags, type;
  uint64_t cookie, offset, length;
  uint32_t error;               /* simple reply, or from an error chunk */
  char *payload;                /* chunk payload (malloc'd), or NULL */
};

/* Reads a reply header and, for chunks, its payload.  For a simple reply
 * to a READ the caller reads the data itself.
 */
static void
recv_reply (int fd, struct reply *r)
{
  uint32_t magic;

  memset (r, 0, sizeof *r);
  xread (fd, &magic, 4, "reply magic");
  r->magic = be32toh (magic);
  switch (r->magic) {
  case NBD_SIMPLE_REPLY_MAGIC: {
    struct nbd_simple_reply s;
    xread (fd, (char *) &s + 4, sizeof s - 4, "simple reply");
    r->error = be32toh (s.error);
    r->cookie = be64toh (s.cookie);
    r->flags = NBD_REPLY_FLAG_DONE;
    return;
  }
  case NBD_STRUCTURED_REPLY_MAGIC: {
    struct nbd_structured_reply s;
    xread (fd, (char *) &s + 4, sizeof s - 4, "structured reply");
    r->flags = be16toh (s.flags);
    r->type = be16toh (s.type);
    r->cookie = be64toh (s.cookie);
    r->length = be32toh (s.length);
    break;
  }
  case NBD_EXTENDED_REPLY_MAGIC: {
    struct nbd_extended_reply s;
    xread (fd, (char *) &s + 4, sizeof s - 4, "extended reply");
    r->flags = be16toh (s.flags);
    r->type = be16toh (s.type);
    r->cookie = be64toh (s.cookie);
    r->offset = be64toh (s.offset);
    r->length = be64toh (s.length);
    break;
  }
  default:
    die ("bad reply magic 0x%08x", r->magic);
  }
  if (r->length > 64 * 1024 * 1024 + 64)        /* the largest read, and
                                                 * its chunk header */
    die ("reply chunk payload too large: %" PRIu64, r->length);
  r->payload = malloc (r->length + 1);
  if (r->payload == NULL)
    die ("malloc: %s", strerror (errno));
  xread (fd, r->payload, r->length, "reply payload");
  if (r->type & (1 << 15)) {           /* an error chunk */
    if (r->length < 6)
      die ("error chunk too short");
    r->error = be32toh (*(uint32_t *) r->payload);
  }
}

/* Issue a request without data in the reply and return its error (0 on
 * success), checking the reply's shape for the mode.
 */
static uint32_t
command (int fd, enum mode mode, uint16_t flags, uint16_t type,
         uint64_t cookie, uint64_t offset, uint64_t count,
         const void *payload, size_t payload_len)
{
  struct reply r;
  uint32_t error = 0;

  send_request (fd, mode, flags, type, cookie, offset, count,
                payload, payload_len);
  do {
    recv_reply (fd, &r);
    if (r.cookie != cookie)
      die ("reply cookie %" PRIu64 ", expected %" PRIu64, r.cookie, cookie);
    if (mode == EXTENDED && r.magic != NBD_EXTENDED_REPLY_MAGIC)
      die ("non-extended reply (magic 0x%08x) after extended headers",
           r.magic);
    if (mode != EXTENDED && r.magic == NBD_EXTENDED_REPLY_MAGIC)
      die ("extended reply without extended headers");
    if (r.error)
      error = r.error;
    free (r.payload);
  } while (!(r.flags & NBD_REPLY_FLAG_DONE));
  return error;
}

/* READ into BUF; returns the error (0 on success).  Handles simple replies
 * and structured/extended OFFSET_DATA, OFFSET_HOLE and error chunks.
 */
static uint32_t
read_cmd (int fd, enum mode mode, uint16_t flags, uint64_t cookie,
          uint64_t offset, uint32_t count, char *buf)
{
  struct reply r;
  uint32_t error = 0;
  uint64_t covered = 0;

  send_request (fd, mode, flags, NBD_CMD_READ, cookie, offset, count, NULL, 0);
  do {
    recv_reply (fd, &r);
    if (r.cookie != cookie)
      die ("read reply cookie %" PRIu64 ", expected %" PRIu64,
           r.cookie, cookie);
    if (r.magic == NBD_SIMPLE_REPLY_MAGIC) {
      if (mode != SIMPLE)
        die ("simple reply to NBD_CMD_READ with structured replies on");
      if (r.error == 0)
        xread (fd, buf, count, "read data");
      return r.error;
    }
    if (mode == EXTENDED && r.magic != NBD_EXTENDED_REPLY_MAGIC)
      die ("structured (not extended) reply after extended headers");
    if (r.error)
      error = r.error;
    else if (r.type == NBD_REPLY_TYPE_OFFSET_DATA ||
             r.type == NBD_REPLY_TYPE_OFFSET_HOLE) {
      uint64_t off, len;
      if (r.length < 8)
        die ("short data chunk");
      off = be64toh (*(uint64_t *) r.payload);
      if (r.type == NBD_REPLY_TYPE_OFFSET_DATA)
        len = r.length - 8;
      else {
        if (r.length != 12)
          die ("hole chunk of length %" PRIu64, r.length);
        len = be32toh (*(uint32_t *) (r.payload + 8));
      }
      if (off < offset || off + len > offset + count)
        die ("chunk [%" PRIu64 ", +%" PRIu64 ") outside the request",
             off, len);
      if (r.type == NBD_REPLY_TYPE_OFFSET_DATA)
        memcpy (buf + (off - offset), r.payload + 8, len);
      else
        memset (buf + (off - offset), 0, len);
      covered += len;
    }
    else if (r.type != NBD_REPLY_TYPE_NONE)
      die ("unexpected chunk type %u in a read reply", r.type);
    free (r.payload);
  } while (!(r.flags & NBD_REPLY_FLAG_DONE));
  if (error == 0 && covered != count)
    die ("read chunks covered %" PRIu64 " of %u bytes", covered, count);
  return error;
}

static void
fill (char *buf, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    buf[i] = (char) ((i * 31 + seed * 7 + (i >> 9)) & 0xff);
}

/* --- The checks -------------------------------------------------------- */

static void
test_handshake (void)
{
  struct export_info info;
  uint32_t reply;
  int fd;

  /* Unknown client flags: the server MUST close the connection. */
  fd = connect_server ();
  greet (fd, NBD_FLAG_C_FIXED_NEWSTYLE | 0x80000000);
  check (server_closes (fd), "unknown client flag 0x80000000 closes the "
         "connection");
  close (fd);

  fd = connect_server ();
  uint16_t gflags = greet (fd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
  check (gflags & NBD_FLAG_FIXED_NEWSTYLE, "server offers fixed newstyle");
  check (gflags & NBD_FLAG_NO_ZEROES, "server offers NO_ZEROES");

  reply = simple_option (fd, NBD_OPT_STARTTLS, NULL, 0);
  check (reply == NBD_REP_ERR_UNSUP || reply == NBD_REP_ERR_POLICY,
         "STARTTLS is refused with ERR_UNSUP or ERR_POLICY (0x%x)", reply);

  reply = simple_option (fd, 0x4242, "junk", 4);
  check (reply == NBD_REP_ERR_UNSUP, "unknown option 0x4242 gets ERR_UNSUP "
         "(0x%x)", reply);

  reply = simple_option (fd, NBD_OPT_STRUCTURED_REPLY, "x", 1);
  check (reply == NBD_REP_ERR_INVALID,
         "STRUCTURED_REPLY with a payload gets ERR_INVALID (0x%x)", reply);

  /* NBD_OPT_LIST: at least one NBD_REP_SERVER then ACK. */
  {
    struct opt_reply r;
    int servers = 0;
    send_option (fd, NBD_OPT_LIST, NULL, 0);
    for (;;) {
      recv_option_reply (fd, NBD_OPT_LIST, &r);
      if (r.reply != NBD_REP_SERVER)
        break;
      servers++;
    }
    check (r.reply == NBD_REP_ACK && servers >= 1,
           "NBD_OPT_LIST: %d export(s) then ACK (0x%x)", servers, r.reply);
  }

  reply = go (fd, NBD_OPT_INFO, "", &info);
  check (reply == NBD_REP_ACK, "NBD_OPT_INFO succeeds (0x%x)", reply);
  check (info.size == 1024 * 1024, "INFO_EXPORT size is 1M (%" PRIu64 ")",
         info.size);
  check (info.eflags & NBD_FLAG_HAS_FLAGS, "eflags has HAS_FLAGS (0x%x)",
         info.eflags);
  /* The memory plugin gives no block sizes, so none are advertised,
   * even when asked for (as nbdkit does): the client assumes the
   * protocol's defaults.
   */
  check (!info.have_block_size,
         "no NBD_INFO_BLOCK_SIZE without block sizes from the plugin "
         "(got %u, %u, %u)", info.bs_min, info.bs_pref, info.bs_max);

  /* Still negotiating after INFO: GO works. */
  reply = go (fd, NBD_OPT_GO, "", &info);
  check (reply == NBD_REP_ACK, "NBD_OPT_GO after INFO succeeds (0x%x)", reply);
  char buf[512];
  check (read_cmd (fd, SIMPLE, 0, 1, 0, sizeof buf, buf) == 0,
         "a read works after GO");
  send_request (fd, SIMPLE, 0, NBD_CMD_DISC, 2, 0, 0, NULL, 0);
  check (server_closes (fd), "NBD_CMD_DISC closes the connection");
  close (fd);

  /* NBD_OPT_ABORT: the server acknowledges (or just closes). */
  fd = connect_server ();
  greet (fd, NBD_FLAG_C_FIXED_NEWSTYLE);
  send_option (fd, NBD_OPT_ABORT, NULL, 0);
  check (server_closes (fd), "NBD_OPT_ABORT ends the connection");
  close (fd);

  /* Old NBD_OPT_EXPORT_NAME, with zeroes (no NO_ZEROES flag). */
  fd = connect_server ();
  greet (fd, NBD_FLAG_C_FIXED_NEWSTYLE);
  send_option (fd, NBD_OPT_EXPORT_NAME, NULL, 0);
  {
    struct nbd_export_name_reply r;
    xread (fd, &r, sizeof r, "export name reply");
    check (be64toh (r.exportsize) == 1024 * 1024,
           "NBD_OPT_EXPORT_NAME reply gives the size (%" PRIu64 ")",
           be64toh (r.exportsize));
  }
  check (read_cmd (fd, SIMPLE, 0, 1, 4096, sizeof buf, buf) == 0,
         "a read works after EXPORT_NAME");
  close (fd);
}

static void
test_extended (void)
{
  struct export_info info;
  uint32_t ctx_id = 0, err;
  const uint64_t wroff = 1024 * 1024 + 512;
  const uint32_t wrlen = 65536;
  char *wbuf = malloc (wrlen), *rbuf = malloc (wrlen);
  int fd;

  fd = open_export (EXTENDED, &info, &ctx_id);
  check (info.size >= UINT64_C (8) * 1024 * 1024 * 1024,
         "export is at least 8G (%" PRIu64 ")", info.size);

  fill (wbuf, wrlen, 1);
  err = command (fd, EXTENDED, 0, NBD_CMD_WRITE, 10, wroff, wrlen,
                 wbuf, wrlen);
  check (err == 0, "extended WRITE of 64K succeeds (error %u)", err);
  memset (rbuf, 0, wrlen);
  err = read_cmd (fd, EXTENDED, 0, 11, wroff, wrlen, rbuf);
  check (err == 0 && memcmp (wbuf, rbuf, wrlen) == 0,
         "extended READ returns what was written (error %u)", err);

  /* FUA write, then FLUSH. */
  fill (wbuf, 4096, 2);
  err = command (fd, EXTENDED, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 12,
                 UINT64_C (6) * 1024 * 1024 * 1024, 4096, wbuf, 4096);
  check (err == 0, "extended FUA WRITE at 6G succeeds (error %u)", err);
  err = command (fd, EXTENDED, 0, NBD_CMD_FLUSH, 13, 0, 0, NULL, 0);
  check (err == 0, "extended FLUSH succeeds (error %u)", err);
  err = read_cmd (fd, EXTENDED, 0, 14, UINT64_C (6) * 1024 * 1024 * 1024,
                  4096, rbuf);
  check (err == 0 && memcmp (wbuf, rbuf, 4096) == 0,
         "extended READ at 6G returns what was written");

  /* BLOCK_STATUS over [0, 2M): hole, data, hole in 64-bit descriptors. */
  {
    struct reply r;
    send_request (fd, EXTENDED, 0, NBD_CMD_BLOCK_STATUS, 15, 0,
                  2 * 1024 * 1024, NULL, 0);
    recv_reply (fd, &r);
    check (r.magic == NBD_EXTENDED_REPLY_MAGIC && r.cookie == 15,
           "BLOCK_STATUS reply is an extended reply");
    check (r.type == NBD_REPLY_TYPE_BLOCK_STATUS_EXT,
           "BLOCK_STATUS reply type is BLOCK_STATUS_EXT (6), got %u", r.type);
    if (r.type == NBD_REPLY_TYPE_BLOCK_STATUS_EXT && r.length >= 8 &&
        (r.length - 8) % 16 == 0) {
      uint32_t id = be32toh (*(uint32_t *) r.payload);
      uint32_t n = be32toh (*(uint32_t *) (r.payload + 4));
      struct nbd_block_descriptor_64 *d = (void *) (r.payload + 8);
      uint64_t pos = 0;
      bool hole_first = false, data_at_write = false, ok = true;

      check (id == ctx_id, "context id %u matches SET_META_CONTEXT's %u",
             id, ctx_id);
      check (n == (r.length - 8) / 16, "descriptor count %u matches "
             "the payload (%" PRIu64 " bytes)", n, r.length);
      for (uint32_t i = 0; i < (r.length - 8) / 16; i++) {
        uint64_t len = be64toh (d[i].length);
        uint64_t fl = be64toh (d[i].status_flags);
        printf ("# extent %" PRIu64 " +%" PRIu64 " flags %" PRIu64 "\n",
                pos, len, fl);
        if (len == 0)
          ok = false;
        if (pos == 0 && (fl & NBD_STATE_HOLE) && len <= wroff)
          hole_first = true;
        if (pos <= wroff && pos + len > wroff && (fl & NBD_STATE_HOLE) == 0)
          data_at_write = true;
        pos += len;
      }
      check (ok && pos > 0, "descriptors have non-zero lengths");
      check (hole_first, "the unwritten start of the disk is a hole");
      check (data_at_write || pos <= wroff,
             "the written range is data, not a hole");
    }
    else
      check (false, "BLOCK_STATUS_EXT payload is well formed (length %"
             PRIu64 ")", r.length);
    bool done = r.flags & NBD_REPLY_FLAG_DONE;
    free (r.payload);
    while (!done) {
      recv_reply (fd, &r);
      done = r.flags & NBD_REPLY_FLAG_DONE;
      check (r.error == 0, "no error chunk in the block status reply");
      free (r.payload);
    }
  }

  /* 64-bit effect lengths: BLOCK_STATUS and WRITE_ZEROES beyond 4G. */
  {
    uint64_t big = UINT64_C (5) * 1024 * 1024 * 1024;   /* 5G > 32 bits */
    err = command (fd, EXTENDED, 0, NBD_CMD_BLOCK_STATUS, 16, 0, big,
                   NULL, 0);
    check (err == 0, "BLOCK_STATUS with a 5G (64-bit) length succeeds "
           "(error %u)", err);
    /* [2G, 7G) covers the data written at 6G. */
    err = command (fd, EXTENDED, 0, NBD_CMD_WRITE_ZEROES, 17,
                   UINT64_C (2) * 1024 * 1024 * 1024, big, NULL, 0);
    check (err == 0, "WRITE_ZEROES with a 5G (64-bit) length succeeds "
           "(error %u)", err);
    err = read_cmd (fd, EXTENDED, 0, 18, UINT64_C (6) * 1024 * 1024 * 1024,
                    4096, rbuf);
    memset (wbuf, 0, 4096);
    check (err == 0 && memcmp (rbuf, wbuf, 4096) == 0,
           "the 5G zero cleared the data at 6G");
  }

  /* Errors come back as extended error chunks. */
  err = read_cmd (fd, EXTENDED, 0, 19, info.size, 512, rbuf);
  check (err == NBD_EINVAL, "extended READ past the end gets EINVAL (%u)",
         err);
  err = command (fd, EXTENDED, 0, NBD_CMD_WRITE, 20, info.size - 256, 512,
                 wbuf, 512);
  check (err == NBD_ENOSPC, "extended WRITE past the end gets ENOSPC (%u)",
         err);
  /* A read longer than the server's limit (64M, nbdkit's) is refused
   * with ENOMEM, as nbdkit refuses it, not served and not fatal; with
   * a 64-bit length too.
   */
  {
    char *big = malloc (64 * 1024 * 1024 + 512);
    if (big == NULL)
      die ("malloc: %s", strerror (errno));
    err = read_cmd (fd, EXTENDED, 0, 23, 0, 64 * 1024 * 1024 + 512, big);
    check (err == NBD_ENOMEM,
           "extended READ of 64M+512 (over the 64M limit) gets ENOMEM (%u)",
           err);
    err = command (fd, EXTENDED, 0, NBD_CMD_READ, 24, 0, UINT64_C (1) << 33,
                   NULL, 0);
    check (err == NBD_ENOMEM, "extended READ of 8G gets ENOMEM (%u)", err);
    free (big);
  }
  err = read_cmd (fd, EXTENDED, 0, 21, wroff, 4096, rbuf);
  fill (wbuf, wrlen, 1);
  check (err == 0 && memcmp (rbuf, wbuf, 4096) == 0,
         "the connection still works after the errors");

  send_request (fd, EXTENDED, 0, NBD_CMD_DISC, 22, 0, 0, NULL, 0);
  check (server_closes (fd), "NBD_CMD_DISC closes the connection");
  close (fd);

  /* A compact request after extended headers is a protocol violation:
   * the server reads a 32-byte header, finds the wrong magic and must
   * hang up.  (4 more bytes, as a confused client would send its next
   * request, so that the server has a whole extended header to judge.)
   */
  fd = open_export (EXTENDED, &info, NULL);
  send_request (fd, SIMPLE, 0, NBD_CMD_READ, 30, 0, 512, "\0\0\0\0", 4);
  {
    bool closed = server_closes (fd);
    check (closed, "a compact request after extended headers ends the "
           "connection");
  }
  close (fd);
  free (wbuf);
  free (rbuf);
}

static void
test_errors (void)
{
  struct export_info info;
  char buf[4096], wbuf[4096];
  uint32_t err;
  int fd;

  /* Simple replies. */
  fd = open_export (SIMPLE, &info, NULL);
  uint64_t size = info.size;
  fill (wbuf, sizeof wbuf, 3);
  err = command (fd, SIMPLE, 0, NBD_CMD_WRITE, 1, size - 4096, 4096,
                 wbuf, 4096);
  check (err == 0, "write at the end succeeds");

  err = read_cmd (fd, SIMPLE, 0, 2, size - 512, 1024, buf);
  check (err == NBD_EINVAL, "read past the end: EINVAL (%u)", err);
  err = read_cmd (fd, SIMPLE, 0, 3, size - 4096, 4096, buf);
  check (err == 0 && memcmp (buf, wbuf, 4096) == 0,
         "next read on the same connection works");

  err = read_cmd (fd, SIMPLE, 0, 4, UINT64_MAX - 511, 512, buf);
  check (err == NBD_EINVAL, "read at offset 2^64-512 (wraps): EINVAL (%u)",
         err);

  err = command (fd, SIMPLE, 0, NBD_CMD_WRITE, 5, size - 1024, 4096,
                 wbuf, 4096);
  check (err == NBD_ENOSPC, "write past the end: ENOSPC (%u)", err);
  err = read_cmd (fd, SIMPLE, 0, 6, size - 4096, 4096, buf);
  check (err == 0 && memcmp (buf, wbuf, 4096) == 0,
         "the rejected write's payload was skipped, nothing changed");

  err = command (fd, SIMPLE, 0, NBD_CMD_WRITE_ZEROES, 7, size - 1024, 4096,
                 NULL, 0);
  check (err == NBD_ENOSPC, "write zeroes past the end: ENOSPC (%u)", err);

  err = command (fd, SIMPLE, 0, 0x42, 8, 0, 512, NULL, 0);
  check (err == NBD_EINVAL, "unknown command 0x42: EINVAL (%u)", err);

  err = read_cmd (fd, SIMPLE, 1 << 9, 9, 0, 512, buf);
  check (err == NBD_EINVAL, "READ with unknown flag 0x200: EINVAL (%u)", err);

  err = command (fd, SIMPLE, 1 << 9, NBD_CMD_WRITE, 10, 0, 512, wbuf, 512);
  check (err == NBD_EINVAL, "WRITE with unknown flag 0x200: EINVAL (%u)",
         err);

  err = command (fd, SIMPLE, 0, NBD_CMD_BLOCK_STATUS, 11, 0, 4096, NULL, 0);
  check (err == NBD_EINVAL, "BLOCK_STATUS without a meta context: "
         "EINVAL (%u)", err);

  err = read_cmd (fd, SIMPLE, NBD_CMD_FLAG_DF, 12, 0, 512, buf);
  check (err == NBD_EINVAL, "READ with DF without structured replies: "
         "EINVAL (%u)", err);

  /* Zero-length requests: the spec leaves them unspecified; the server
   * must answer (success or EINVAL) and keep the connection.
   */
  err = read_cmd (fd, SIMPLE, 0, 13, 0, 0, buf);
  check (err == 0 || err == NBD_EINVAL, "zero-length READ answered (%u)",
         err);
  err = command (fd, SIMPLE, 0, NBD_CMD_WRITE, 14, 0, 0, NULL, 0);
  check (err == 0 || err == NBD_EINVAL || err == NBD_ENOSPC,
         "zero-length WRITE answered (%u)", err);

  err = read_cmd (fd, SIMPLE, 0, 15, size - 4096, 4096, buf);
  check (err == 0 && memcmp (buf, wbuf, 4096) == 0,
         "the connection still works after all the bad requests");
  close (fd);

  /* Structured replies: an error chunk with DONE. */
  fd = open_export (STRUCTURED, &info, NULL);
  {
    struct reply r;
    send_request (fd, STRUCTURED, 0, NBD_CMD_READ, 20, size, 512, NULL, 0);
    recv_reply (fd, &r);
    check (r.magic == NBD_STRUCTURED_REPLY_MAGIC,
           "read past the end with structured replies: structured reply");
    check ((r.type == NBD_REPLY_TYPE_ERROR ||
            r.type == NBD_REPLY_TYPE_ERROR_OFFSET) && r.error == NBD_EINVAL,
           "... an error chunk with EINVAL (type 0x%x error %u)",
           r.type, r.error);
    check (r.flags & NBD_REPLY_FLAG_DONE, "... flagged DONE");
    free (r.payload);
  }
  err = read_cmd (fd, STRUCTURED, NBD_CMD_FLAG_DF, 21, size - 4096, 4096, buf);
  check (err == 0 && memcmp (buf, wbuf, 4096) == 0,
         "structured DF read works after the error");
  close (fd);

  /* A request with a bad magic is a protocol violation: hard disconnect. */
  fd = open_export (SIMPLE, &info, NULL);
  {
    struct nbd_request r = {
      .magic = htobe32 (0x12345678), .type = htobe16 (NBD_CMD_READ),
      .cookie = htobe64 (30), .count = htobe32 (512),
    };
    xwrite (fd, &r, sizeof r, "bad request");
    check (server_closes (fd), "a request with a bad magic ends the "
           "connection");
  }
  close (fd);

  /* An extended request without having negotiated extended headers. */
  fd = open_export (SIMPLE, &info, NULL);
  send_request (fd, EXTENDED, 0, NBD_CMD_READ, 31, 0, 512, NULL, 0);
  check (server_closes (fd), "an extended request without extended headers "
         "ends the connection");
  close (fd);
}

/* One BLOCK_STATUS request, its descriptors printed for the caller to
 * judge (their lengths and flags as they came, in either width).
 */
static void
query_status (enum mode mode, uint64_t offset, uint64_t count, bool one)
{
  struct export_info info;
  uint32_t ctx_id = 0;
  struct reply r;
  int fd = open_export (mode, &info, &ctx_id);

  send_request (fd, mode, one ? NBD_CMD_FLAG_REQ_ONE : 0,
                NBD_CMD_BLOCK_STATUS, 1, offset, count, NULL, 0);
  do {
    recv_reply (fd, &r);
    if (r.error)
      printf ("error %u\n", r.error);
    else if (r.type == NBD_REPLY_TYPE_BLOCK_STATUS && r.length >= 4 &&
             (r.length - 4) % 8 == 0) {
      check (mode != EXTENDED || r.magic == NBD_EXTENDED_REPLY_MAGIC,
             "the reply's magic suits the headers");
      for (uint64_t i = 0; i < (r.length - 4) / 8; i++) {
        struct nbd_block_descriptor_32 d;

        memcpy (&d, r.payload + 4 + 8 * i, sizeof d);
        printf ("desc %" PRIu32 " %" PRIu32 "\n",
                be32toh (d.length), be32toh (d.status_flags));
      }
    }
    else if (r.type == NBD_REPLY_TYPE_BLOCK_STATUS_EXT && r.length >= 8 &&
             (r.length - 8) % 16 == 0) {
      check (mode == EXTENDED, "64-bit descriptors only with extended "
             "headers");
      for (uint64_t i = 0; i < (r.length - 8) / 16; i++) {
        struct nbd_block_descriptor_64 d;

        memcpy (&d, r.payload + 8 + 16 * i, sizeof d);
        printf ("desc %" PRIu64 " %" PRIu64 "\n",
                be64toh (d.length), be64toh (d.status_flags));
      }
    }
    else if (r.type != NBD_REPLY_TYPE_NONE)
      check (false, "unexpected chunk type %u, length %" PRIu64,
             r.type, r.length);
    free (r.payload);
  } while (!(r.flags & NBD_REPLY_FLAG_DONE));
  close (fd);
}

int
main (int argc, char *argv[])
{
  if (argc >= 6 && strcmp (argv[2], "status") == 0) {
    sockpath = argv[1];
    query_status (strcmp (argv[3], "extended") == 0 ? EXTENDED : STRUCTURED,
                  strtoull (argv[4], NULL, 0), strtoull (argv[5], NULL, 0),
                  argc > 6 && strcmp (argv[6], "one") == 0);
    printf ("# %d checks, %d failed\n", checks, failures);
    exit (failures ? 1 : 0);
  }
  if (argc != 3) {
    fprintf (stderr, "usage: %s SOCKET handshake|extended|errors\n"
             "       %s SOCKET status structured|extended OFFSET COUNT "
             "[one]\n", argv[0], argv[0]);
    exit (2);
  }
  sockpath = argv[1];
  if (strcmp (argv[2], "handshake") == 0)
    test_handshake ();
  else if (strcmp (argv[2], "extended") == 0)
    test_extended ();
  else if (strcmp (argv[2], "errors") == 0)
    test_errors ();
  else {
    fprintf (stderr, "%s: unknown test %s\n", argv[0], argv[2]);
    exit (2);
  }
  printf ("# %d checks, %d failed\n", checks, failures);
  exit (failures ? 1 : 0);
}
