/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: messages.  nbdkit_error and nbdkit_debug (called by
 * plugins, filters and the server) end up here, on stderr or, for a
 * daemonised server, in syslog, or in the --log=FILE (or nowhere,
 * --log=null), each headed by the --name (default "nbdkit").  The last
 * error text of each thread is kept so the handshake can pass it to
 * the client.  The server's own -D nbdkit.* debug flags live here too.
 * Every message fires the log probe, which says where it came from: a
 * file and line of the server (internal.h's macros), or the object and
 * offset a plugin or filter called from.
 */
#include <config.h>

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#define NBDKIT_LOG_DEFINES_FUNCTIONS
#include "internal.h"
#include "include/array-size.h"

/* Set once by log_init before any thread starts; read-only after. */
static const struct config *log_cfg;

/* Switched on once, when the server daemonises. */
static bool to_syslog;

/* --log=FILE: opened by log_init, never closed (threads may log until
 * the process exits).  Until the server starts serving (log_start_syslog)
 * errors also go to stderr, so the person starting it sees why it
 * failed to start.
 */
static int log_fd = -1;
static bool started;

/* -D nbdkit.environ=1 */
static int debug_environ;

static __thread const char *layer_name;

/* -D nbdkit.FLAG=N: exported data symbols, set before any thread
 * starts and read-only after (nbdkit(1), "SERVER DEBUG FLAGS").
 */
int nbdkit_debug_backend_controlpath = 1;
int nbdkit_debug_backend_datapath = 1;
int nbdkit_debug_tls_log = 0;
int nbdkit_debug_tls_session = 0;

static const struct {
  const char *name;
  int *var;
} server_flags[] = {
  { "backend.controlpath", &nbdkit_debug_backend_controlpath },
  { "backend.datapath", &nbdkit_debug_backend_datapath },
  { "tls.log", &nbdkit_debug_tls_log },
  { "tls.session", &nbdkit_debug_tls_session },
  { "async", &runtime_async },
  { "async.direct", &runtime_async_direct },
  { "environ", &debug_environ },
  { "open.contain_crashes", &runtime_contain_open_crashes },
};

/* ARG is "nbdkit.FLAG=N".  An unknown FLAG is a warning, as nbdkit says
 * these flags may come and go between releases.
 */
int
log_set_server_debug_flag (const char *arg)
{
  const char *flag = arg + strlen ("nbdkit.");
  const char *eq = strchr (flag, '=');
  if (!eq || eq == flag) {
    log_error_at (LOG_WHERE, "-D: expected nbdkit.FLAG=N, got \"%s\"", arg);
    return -1;
  }
  int value;
  if (nbdkit_parse_int ("-D", eq + 1, &value) == -1)
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE (server_flags); i++)
    if (strlen (server_flags[i].name) == (size_t) (eq - flag) &&
        strncmp (server_flags[i].name, flag, eq - flag) == 0) {
      *server_flags[i].var = value;
      return 0;
    }
  fprintf (stderr, "nbdkit: warning: -D: the server has no debug flag "
           "nbdkit.%.*s\n", (int) (eq - flag), flag);
  return 0;
}
static __thread char last_error[256];

/* The name heading messages: --name, or the program's. */
static const char *
ident (void)
{
  return log_cfg && log_cfg->name ? log_cfg->name : "nbdkit";
}

/* --log=FILE is created (mode 0644 less the umask) or appended to, so
 * one file can collect the messages of several runs.
 */
int
log_init (const struct config *cfg)
{
  log_cfg = cfg;
  if (cfg->log_to == LOG_TO_FILE) {
    log_fd = open (cfg->log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                   0644);
    if (log_fd == -1) {
      fprintf (stderr, "%s: --log: %s: %s\n", ident (), cfg->log_file,
               strerror (errno));
      return -1;
    }
  }
  return 0;
}

/* Until the server is in the background, messages go to stderr so the
 * person starting it sees them; afterwards to syslog if so configured.
 */
void
log_start_syslog (void)
{
  started = true;
  if (log_cfg && log_cfg->use_syslog) {
    openlog (ident (), LOG_PID, LOG_DAEMON);
    to_syslog = true;
  }
}

/* -D nbdkit.environ=1: the server's environment at start-up, one debug
 * line per variable (seen with -v, or by a tracer on the log probe).
 */
void
log_print_environment (void)
{
  extern char **environ;
  if (!debug_environ)
    return;
  for (char **e = environ; e && *e; e++)
    log_debug_at (LOG_WHERE, "environ: %s", *e);
}

/* One whole line to the --log file, in one write so that lines of
 * concurrent threads (and of other processes appending) never mix.
 */
static void
write_log_line (const char *prefix, const char *kind, const char *msg)
{
  char line[1536];
  int n = snprintf (line, sizeof line, "%s: %s%s%s\n", ident (), prefix,
                    kind, msg);
  if (n < 0)
    return;
  if ((size_t) n >= sizeof line) {
    n = sizeof line - 1;
    line[n - 1] = '\n';
  }
  for (const char *p = line; n > 0; ) {
    ssize_t w = write (log_fd, p, n);
    if (w == -1 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    p += w;
    n -= w;
  }
}

void
log_set_layer_name (const char *name)
{
  layer_name = name;
}

/* Name the layer about to be called, returning the caller's, so
 * messages from a data call carry the right origin.
 */
const char *
log_swap_layer_name (const char *name)
{
  const char *old = layer_name;
  layer_name = name;
  return old;
}

const char *
log_last_error (void)
{
  return last_error[0] ? last_error : NULL;
}

void
log_clear_last_error (void)
{
  last_error[0] = '\0';
}

/* Without -v and without a tracer on the log probe, debug messages
 * cost one test.
 */
static inline bool
debug_wanted (void)
{
  return (log_cfg && log_cfg->verbose) || NBDKIT_LOG_ENABLED ();
}

/* Where a plugin's or filter's call came from: "OBJECT+0xOFFSET" of
 * the return address RA, which addr2line -e OBJECT turns into a file
 * and line.  Only while the log probe is traced (dladdr costs).
 */
static const char *
caller_where (const void *ra, char *buf, size_t len)
{
  Dl_info info;
  if (ra && dladdr (ra, &info) && info.dli_fname) {
    const char *base = strrchr (info.dli_fname, '/');
    snprintf (buf, len, "%s+0x%" PRIxPTR, base ? base + 1 : info.dli_fname,
              (uintptr_t) ra - (uintptr_t) info.dli_fbase);
  }
  else
    snprintf (buf, len, "%p", ra);
  return buf;
}

/* The layers' names and load addresses, for layer_at.  A plugin's own
 * thread may log while the layers are being unloaded and freed, so
 * layer_at reads this copy, made once they are all loaded and never
 * freed, and not the layers themselves.
 */
#define LOG_MAX_LAYERS 64
static struct {
  const void *base;
  const char *name;
} known[LOG_MAX_LAYERS];
static _Atomic size_t n_known;

void
log_remember_layers (const struct layer *top)
{
  size_t n = 0;
  for (const struct layer *l = top; l && n < LOG_MAX_LAYERS; l = l->next) {
    struct link_map *lm;
    if (l->dl && dlinfo (l->dl, RTLD_DI_LINKMAP, &lm) == 0) {
      const char *name = strdup (l->name);
      if (!name)
        break;
      known[n].base = (const void *) lm->l_addr;
      known[n].name = name;
      n++;
    }
  }
  n_known = n;
}

/* The name of the layer whose code is at RA: for a message from a
 * thread of a plugin's own (a completion thread, a library's callback),
 * where no layer is being called.  NULL if RA is in none of them.
 */
static const char *
layer_at (const void *ra)
{
  Dl_info info;
  size_t n = n_known;
  if (!ra || n == 0 || !dladdr (ra, &info))
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (known[i].base == info.dli_fbase)
      return known[i].name;
  return NULL;
}

/* The layer a plugin's or filter's call is from: the one being called
 * on this thread, else the one whose code is at RA (a thread of its
 * own); NULL if neither.
 */
const char *
log_layer_of_caller (const void *ra)
{
  return layer_name ? layer_name : layer_at (ra);
}

/* Format a message into a buffer, keeping errno for %m.  WHERE is the
 * server's file and line, or NULL for a call from RA.
 */
static void
emit (int priority, const char *kind, const char *where, const void *ra,
      const char *fs, va_list args)
{
  int saved_errno = errno;
  char msg[1024];

  if (priority == LOG_DEBUG && !debug_wanted ())
    return;
  struct connection *conn = conn_current ();
  const char *name = layer_name;
  if (!name && !where)
    name = layer_at (ra);

  errno = saved_errno;
  vsnprintf (msg, sizeof msg, fs, args);
  /* Strip trailing newlines: every message is one line. */
  size_t len = strlen (msg);
  while (len > 0 && msg[len - 1] == '\n')
    msg[--len] = '\0';

  if (priority == LOG_ERR) {
    /* Kept for the client, truncated if long. */
    size_t n = strnlen (msg, sizeof last_error - 1);
    memcpy (last_error, msg, n);
    last_error[n] = '\0';
  }

  if (NBDKIT_LOG_ENABLED ()) {
    char wbuf[128];
    if (!where)
      where = caller_where (ra, wbuf, sizeof wbuf);
    NBDKIT_LOG (priority == LOG_ERR ? "error" : "debug",
                name ? name : "nbdkit", msg,
                conn ? conn->id : probe_u64 (0),
                probe_u64 (layer_current_cookie ()), where);
  }
  if (log_cfg && log_cfg->log_to == LOG_TO_NULL) {
    errno = saved_errno;
    return;
  }
  /* Debug messages are formatted for the probe even without -v. */
  if (priority == LOG_DEBUG && !(log_cfg && log_cfg->verbose))
    return;

  char prefix[96] = "";
  if (name && conn)
    snprintf (prefix, sizeof prefix, "%s[%" PRIu64 "]: ", name, conn->id);
  else if (name)
    snprintf (prefix, sizeof prefix, "%s: ", name);

  bool to_stderr = !to_syslog;
  if (to_syslog)
    syslog (priority, "%s%s%s", prefix, kind, msg);
  else if (log_fd >= 0) {
    write_log_line (prefix, kind, msg);
    to_stderr = priority == LOG_ERR && !started;
  }
  if (to_stderr) {
    flockfile (stderr);
    fprintf (stderr, "%s: %s%s%s\n", ident (), prefix, kind, msg);
    funlockfile (stderr);
  }
  errno = saved_errno;
}

/* A debug line said for the caller at RA. */
static void ATTRIBUTE_FORMAT_PRINTF (2, 3)
emit_fmt (const void *ra, const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  emit (LOG_DEBUG, "debug: ", NULL, ra, fs, args);
  va_end (args);
}

/* The exported functions, for plugins and filters (and code outside
 * server/ linked into the server).  noinline: the return address must
 * be the caller's.
 */
void __attribute__ ((noinline))
nbdkit_verror (const char *fs, va_list args)
{
  emit (LOG_ERR, "error: ", NULL, __builtin_return_address (0), fs, args);
}

void __attribute__ ((noinline))
nbdkit_error (const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  emit (LOG_ERR, "error: ", NULL, __builtin_return_address (0), fs, args);
  va_end (args);
}

void __attribute__ ((noinline))
nbdkit_vdebug (const char *fs, va_list args)
{
  if (!debug_wanted ())
    return;
  emit (LOG_DEBUG, "debug: ", NULL, __builtin_return_address (0), fs, args);
}

void __attribute__ ((noinline))
nbdkit_debug (const char *fs, ...)
{
  va_list args;
  if (!debug_wanted ())
    return;
  va_start (args, fs);
  emit (LOG_DEBUG, "debug: ", NULL, __builtin_return_address (0), fs, args);
  va_end (args);
}

/* Hex dumps for -v: each row of 16 bytes is one debug line, headed by
 * the offset the caller gives (START is the offset of BUF[0]), so a
 * plugin can dump a block where it sits in the disk.  Rows are aligned
 * to 16 like hexdump -C, the first and last padded with blanks.  The
 * lines are said under the caller's layer, as nbdkit_debug's are.
 */
static void
emit_row (const void *ra, const char *prefix, char mark, uint64_t row,
          const unsigned char *b, const unsigned char *other,
          size_t lo, size_t hi)
{
  char hex[16 * 3 + 2], text[17];
  size_t h = 0;
  for (size_t i = 0; i < 16; i++) {
    /* A diff's second row shows only the bytes that differ. */
    bool show = i >= lo && i < hi && (!other || b[i] != other[i]);
    if (i == 8)
      hex[h++] = ' ';
    if (show)
      snprintf (&hex[h], 4, "%02x ", b[i]);
    else
      memcpy (&hex[h], "   ", 4);
    h += 3;
    text[i] = !show ? ' ' : (b[i] >= 32 && b[i] < 127) ? (char) b[i] : '.';
  }
  hex[h] = '\0';
  text[16] = '\0';
  /* MARK: '\0' in a dump; ' ', '-' or '+' in a diff, so rows align. */
  char m[2] = { mark, '\0' };
  emit_fmt (ra, "%s%s%08" PRIx64 ": %s |%s|", prefix, m, row, hex, text);
}

static void
hexdump (const void *ra, const unsigned char *a, const unsigned char *b,
         size_t len, const char *prefix, uint64_t start)
{
  if (!debug_wanted () || len == 0)
    return;
  if (!prefix)
    prefix = "";
  if (len > UINT64_MAX - start)
    len = UINT64_MAX - start;
  uint64_t end = start + len;
  for (uint64_t row = start & ~UINT64_C (15); row < end; row += 16) {
    /* The bytes of this row that are in the buffer: [lo, hi). */
    size_t lo = row < start ? start - row : 0;
    size_t hi = end - row >= 16 ? 16 : end - row;
    unsigned char rowa[16] = { 0 }, rowb[16] = { 0 };
    memcpy (&rowa[lo], a + (row + lo - start), hi - lo);
    if (b)
      memcpy (&rowb[lo], b + (row + lo - start), hi - lo);
    if (!b || memcmp (&rowa[lo], &rowb[lo], hi - lo) == 0)
      emit_row (ra, prefix, b ? ' ' : '\0', row, rowa, NULL, lo, hi);
    else {
      emit_row (ra, prefix, '-', row, rowa, NULL, lo, hi);
      emit_row (ra, prefix, '+', row, rowb, rowa, lo, hi);
    }
    if (row > UINT64_MAX - 16)  /* the last row of the 64-bit space */
      break;
  }
}

void __attribute__ ((noinline))
nbdkit_debug_hexdump (const void *buf, size_t len, const char *prefix,
                      uint64_t start)
{
  hexdump (__builtin_return_address (0), buf, NULL, len, prefix, start);
}

void __attribute__ ((noinline))
nbdkit_debug_hexdiff (const void *buf1, const void *buf2, size_t len,
                      const char *prefix, uint64_t start)
{
  hexdump (__builtin_return_address (0), buf1, buf2, len, prefix, start);
}

/* The server's own (internal.h's nbdkit_error and nbdkit_debug). */
void
log_error_at (const char *where, const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  emit (LOG_ERR, "error: ", where, NULL, fs, args);
  va_end (args);
}

void
log_debug_at (const char *where, const char *fs, ...)
{
  va_list args;
  if (!debug_wanted ())
    return;
  va_start (args, fs);
  emit (LOG_DEBUG, "debug: ", where, NULL, fs, args);
  va_end (args);
}

/* The data calls, whose lines -D nbdkit.backend.datapath=0 quiets;
 * every other layer call is control path.
 */
static bool
is_datapath (const char *cb)
{
  static const char *const data[] = {
    "pread", "pwrite", "flush", "trim", "zero", "extents", "cache",
    "map_read", "map_write", "unmap_write", "read_fd",
  };
  for (size_t i = 0; i < ARRAY_SIZE (data); i++)
    if (strcmp (cb, data[i]) == 0)
      return true;
  return false;
}

/* With -v, one debug line per layer call (as nbdkit prints), unless
 * the backend flag for its kind of call is 0.  backend.c calls this as
 * each call starts.  open has lines of its own (log_layer_open).
 */
void
log_layer_call (const struct connection *conn, const struct layer *l,
                const char *cb, uint64_t offset, uint64_t count)
{
  if (!(log_cfg && log_cfg->verbose) || strcmp (cb, "open") == 0)
    return;
  bool data = is_datapath (cb);
  if (data ? !nbdkit_debug_backend_datapath
           : !nbdkit_debug_backend_controlpath)
    return;
  const char *old = log_swap_layer_name (l->name);
  if (data)
    log_debug_at (LOG_WHERE, "%s count=%" PRIu64 " offset=%" PRIu64, cb,
                  count, offset);
  else
    log_debug_at (LOG_WHERE, "%s", cb);
  log_swap_layer_name (old);
}

/* -v's lines around open, with what nbdkit's say: the arguments as the
 * call starts, and the handle it returned.  The export name comes from
 * the client, so bytes that are not printable ASCII (and " and \) are
 * escaped as \xHH: a name cannot forge log lines.
 */
static bool
control_lines_wanted (void)
{
  return log_cfg && log_cfg->verbose && nbdkit_debug_backend_controlpath;
}

void
log_layer_open (const struct layer *l, int readonly, const char *exportname,
                int is_tls)
{
  if (!control_lines_wanted ())
    return;
  /* An export name is at most 4096 bytes: 4 bytes each escaped. */
  char name[4 * 4096 + 1];
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *) exportname;
       *p && n + 5 <= sizeof name; p++) {
    if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
      name[n++] = *p;
    else
      n += snprintf (name + n, sizeof name - n, "\\x%02x", *p);
  }
  name[n] = '\0';
  const char *old = log_swap_layer_name (l->name);
  log_debug_at (LOG_WHERE, "open readonly=%d exportname=\"%s\" tls=%d",
                readonly, name, is_tls);
  log_swap_layer_name (old);
}

void
log_layer_open_done (const struct layer *l, const void *handle)
{
  if (!control_lines_wanted ())
    return;
  const char *old = log_swap_layer_name (l->name);
  log_debug_at (LOG_WHERE, "open returned handle %p", handle);
  log_swap_layer_name (old);
}
