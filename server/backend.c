/* nbdkit server: the layer interface.  Every call into a plugin or a
 * filter, from the server or from the filter above, goes through the
 * layer_* functions here, so this is the one place that sees a
 * request's trip down the chain.  It also owns the per-connection
 * contexts: opening them top-down, preparing them bottom-up, closing
 * them top-down.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- tracing every call ---- */

/* The cookie of the request this thread is running, 0 outside one. */
static __thread uint64_t call_cookie;

void
layer_set_cookie (uint64_t cookie)
{
  call_cookie = cookie;
}

static inline uint64_t
conn_id (const struct connection *conn)
{
  return conn ? conn->id : 0;
}

static inline void
call_start (const struct connection *conn, const struct layer *l,
            const char *cb, uint64_t offset, uint64_t count)
{
  log_layer_call (conn, l, cb, offset, count);
  if (NBDKIT_LAYER_CALL_START_ENABLED ())
    NBDKIT_LAYER_CALL_START (conn_id (conn), probe_u64 (call_cookie),
                             (uint64_t) l->depth, l->name, cb, offset,
                             count);
}

static inline void
call_done (const struct connection *conn, const struct layer *l,
           const char *cb, int64_t err)
{
  if (NBDKIT_LAYER_CALL_DONE_ENABLED ())
    NBDKIT_LAYER_CALL_DONE (conn_id (conn), probe_u64 (call_cookie),
                            (uint64_t) l->depth, l->name, cb, err);
}

/* Control calls answer -1 for failure with no errno of their own. */
static inline int64_t
ctl_err (int64_t r)
{
  return r == -1 ? EIO : 0;
}

/* ---- configuration-time calls ---- */

int
layer_config (struct layer *l, const char *key, const char *value)
{
  call_start (NULL, l, "config", 0, 0);
  log_set_layer_name (l->name);
  int r = l->ops->config (l, key, value);
  call_done (NULL, l, "config", ctl_err (r));
  return r;
}

int
layer_config_complete (struct layer *l)
{
  call_start (NULL, l, "config_complete", 0, 0);
  log_set_layer_name (l->name);
  int r = l->ops->config_complete (l);
  call_done (NULL, l, "config_complete", ctl_err (r));
  return r;
}

int
layer_get_ready (struct layer *l, int thread_model)
{
  call_start (NULL, l, "get_ready", 0, 0);
  log_set_layer_name (l->name);
  int r = l->ops->get_ready (l, thread_model);
  call_done (NULL, l, "get_ready", ctl_err (r));
  return r;
}

int
layer_after_fork (struct layer *l)
{
  call_start (NULL, l, "after_fork", 0, 0);
  log_set_layer_name (l->name);
  int r = l->ops->after_fork (l);
  call_done (NULL, l, "after_fork", ctl_err (r));
  return r;
}

int
layer_preconnect (struct layer *l, int readonly)
{
  struct connection *conn = conn_current ();
  call_start (conn, l, "preconnect", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  int r = l->ops->preconnect (l, readonly);
  log_swap_layer_name (outer);
  call_done (conn, l, "preconnect", ctl_err (r));
  return r;
}

int
layer_list_exports (struct layer *l, int readonly, int is_tls,
                    struct nbdkit_exports *exports)
{
  struct connection *conn = conn_current ();
  call_start (conn, l, "list_exports", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  int r = l->ops->list_exports (l, readonly, is_tls, exports);
  log_swap_layer_name (outer);
  call_done (conn, l, "list_exports", ctl_err (r));
  return r;
}

const char *
layer_default_export (struct layer *l, int readonly, int is_tls)
{
  struct connection *conn = conn_current ();
  call_start (conn, l, "default_export", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  const char *r = l->ops->default_export (l, readonly, is_tls);
  log_swap_layer_name (outer);
  call_done (conn, l, "default_export", r ? 0 : EIO);
  return r;
}

/* ---- calls through the chain ---- */

int64_t
layer_get_size (struct context *c)
{
  call_start (c->conn, c->layer, "get_size", 0, 0);
  int64_t r = c->layer->ops->get_size (c);
  call_done (c->conn, c->layer, "get_size", ctl_err (r));
  return r;
}

const char *
layer_export_description (struct context *c)
{
  call_start (c->conn, c->layer, "export_description", 0, 0);
  const char *r = c->layer->ops->export_description (c);
  call_done (c->conn, c->layer, "export_description", 0);
  return r;
}

int
layer_block_size (struct context *c, uint32_t *minimum, uint32_t *preferred,
                  uint32_t *maximum)
{
  *minimum = *preferred = *maximum = 0;
  call_start (c->conn, c->layer, "block_size", 0, 0);
  int r = c->layer->ops->block_size (c, minimum, preferred, maximum);
  call_done (c->conn, c->layer, "block_size", ctl_err (r));
  return r;
}

#define DEFINE_CAN(fn)                                                  \
  int                                                                   \
  layer_##fn (struct context *c)                                        \
  {                                                                     \
    call_start (c->conn, c->layer, #fn, 0, 0);                          \
    int r = c->layer->ops->fn (c);                                      \
    call_done (c->conn, c->layer, #fn, ctl_err (r));                    \
    return r;                                                           \
  }
DEFINE_CAN (can_write)
DEFINE_CAN (can_flush)
DEFINE_CAN (is_rotational)
DEFINE_CAN (can_trim)
DEFINE_CAN (can_zero)
DEFINE_CAN (can_fast_zero)
DEFINE_CAN (can_extents)
DEFINE_CAN (can_fua)
DEFINE_CAN (can_multi_conn)
DEFINE_CAN (can_cache)

/* Run one data call, traced, making sure a failure carries an errno. */
#define DATA_CALL(c, cb, offset, count, call)                         \
  do {                                                                  \
    *err = 0;                                                           \
    call_start ((c)->conn, (c)->layer, cb, (offset), (count));          \
    const char *outer_ = log_swap_layer_name ((c)->layer->name);        \
    int r_ = (call);                                                    \
    log_swap_layer_name (outer_);                                       \
    if (r_ == -1 && *err == 0)                                          \
      *err = EIO;                                                       \
    call_done ((c)->conn, (c)->layer, cb, r_ == -1 ? *err : 0);         \
    return r_;                                                          \
  } while (0)

int
layer_pread (struct context *c, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  DATA_CALL (c, "pread", offset, count,
             c->layer->ops->pread (c, buf, count, offset, flags, err));
}

/* A read the top layer can describe in place (common/zerocopy.h)?
 * The same probes fire as for pread; the copy happens in the send.
 */
bool
layer_has_map_read (struct context *c)
{
  return c->layer->ops->has_map_read && c->layer->ops->has_map_read (c);
}

int
layer_map_read (struct context *c, uint32_t count, uint64_t offset,
                struct iovec *iov, int *niov, int *err)
{
  DATA_CALL (c, "pread", offset, count,
             c->layer->ops->map_read (c, count, offset, iov, niov, err));
}

void
layer_unmap_read (struct context *c)
{
  c->layer->ops->unmap_read (c);
}

/* A write whose payload the top layer takes into memory of its own
 * (common/zerocopy.h)?  Mapping is only a loan of memory, untraced;
 * keeping the bytes is the write, traced as pwrite.
 */
bool
layer_has_map_write (struct context *c)
{
  return c->layer->ops->has_map_write && c->layer->ops->has_map_write (c);
}

int
layer_map_write (struct context *c, uint32_t count, uint64_t offset,
                 struct iovec *iov, int *niov)
{
  return c->layer->ops->map_write (c, count, offset, iov, niov);
}

int
layer_unmap_write (struct context *c, uint32_t count, uint64_t offset,
                   const struct iovec *iov, int keep, int *err)
{
  if (!keep) {
    *err = 0;
    return c->layer->ops->unmap_write (c, count, offset, iov, 0, err);
  }
  DATA_CALL (c, "pwrite", offset, count,
             c->layer->ops->unmap_write (c, count, offset, iov, 1, err));
}

/* A read the top layer can point at in a file (common/zerocopy.h)?
 * The same probes fire as for pread; the file is read in the send.
 */
bool
layer_has_read_fd (struct context *c)
{
  return c->layer->ops->has_read_fd && c->layer->ops->has_read_fd (c);
}

int
layer_read_fd (struct context *c, uint32_t count, uint64_t offset,
               int *fd, uint64_t *fd_offset, int *err)
{
  DATA_CALL (c, "pread", offset, count,
             c->layer->ops->read_fd (c, count, offset, fd, fd_offset, err));
}

int
layer_pwrite (struct context *c, const void *buf, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  DATA_CALL (c, "pwrite", offset, count,
             c->layer->ops->pwrite (c, buf, count, offset, flags, err));
}

int
layer_flush (struct context *c, uint32_t flags, int *err)
{
  DATA_CALL (c, "flush", 0, 0, c->layer->ops->flush (c, flags, err));
}

int
layer_trim (struct context *c, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  DATA_CALL (c, "trim", offset, count,
             c->layer->ops->trim (c, count, offset, flags, err));
}

int
layer_zero (struct context *c, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  DATA_CALL (c, "zero", offset, count,
             c->layer->ops->zero (c, count, offset, flags, err));
}

int
layer_extents (struct context *c, uint32_t count, uint64_t offset,
               uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  DATA_CALL (c, "extents", offset, count,
             c->layer->ops->extents (c, count, offset, flags, extents, err));
}

int
layer_cache (struct context *c, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  DATA_CALL (c, "cache", offset, count,
             c->layer->ops->cache (c, count, offset, flags, err));
}

/* ---- the same calls as a filter sees them (nbdkit_next) ---- */

static struct context *
ctx (nbdkit_next *next)
{
  return container_of (next, struct context, next_ops);
}

static int
next_prepare (nbdkit_next *next)
{
  return 0;
}

static int
next_finalize (nbdkit_next *next)
{
  return 0;
}

static int64_t
next_get_size (nbdkit_next *next)
{
  return layer_get_size (ctx (next));
}

static const char *
next_export_description (nbdkit_next *next)
{
  return layer_export_description (ctx (next));
}

static int
next_block_size (nbdkit_next *next, uint32_t *minimum, uint32_t *preferred,
                 uint32_t *maximum)
{
  return layer_block_size (ctx (next), minimum, preferred, maximum);
}

#define DEFINE_NEXT_CAN(fn)                                             \
  static int                                                            \
  next_##fn (nbdkit_next *next)                                         \
  {                                                                     \
    return layer_##fn (ctx (next));                                     \
  }
DEFINE_NEXT_CAN (can_write)
DEFINE_NEXT_CAN (can_flush)
DEFINE_NEXT_CAN (is_rotational)
DEFINE_NEXT_CAN (can_trim)
DEFINE_NEXT_CAN (can_zero)
DEFINE_NEXT_CAN (can_fast_zero)
DEFINE_NEXT_CAN (can_extents)
DEFINE_NEXT_CAN (can_fua)
DEFINE_NEXT_CAN (can_multi_conn)
DEFINE_NEXT_CAN (can_cache)

static int
next_pread (nbdkit_next *next, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  return layer_pread (ctx (next), buf, count, offset, flags, err);
}

static int
next_pwrite (nbdkit_next *next, const void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  return layer_pwrite (ctx (next), buf, count, offset, flags, err);
}

static int
next_flush (nbdkit_next *next, uint32_t flags, int *err)
{
  return layer_flush (ctx (next), flags, err);
}

static int
next_trim (nbdkit_next *next, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  return layer_trim (ctx (next), count, offset, flags, err);
}

static int
next_zero (nbdkit_next *next, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  return layer_zero (ctx (next), count, offset, flags, err);
}

static int
next_extents (nbdkit_next *next, uint32_t count, uint64_t offset,
              uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  return layer_extents (ctx (next), count, offset, flags, extents, err);
}

static int
next_cache (nbdkit_next *next, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  return layer_cache (ctx (next), count, offset, flags, err);
}

const struct nbdkit_next_ops layer_next_ops = {
  .prepare = next_prepare,
  .finalize = next_finalize,
  .get_size = next_get_size,
  .export_description = next_export_description,
  .block_size = next_block_size,
  .can_write = next_can_write,
  .can_flush = next_can_flush,
  .is_rotational = next_is_rotational,
  .can_trim = next_can_trim,
  .can_zero = next_can_zero,
  .can_fast_zero = next_can_fast_zero,
  .can_extents = next_can_extents,
  .can_fua = next_can_fua,
  .can_multi_conn = next_can_multi_conn,
  .can_cache = next_can_cache,
  .pread = next_pread,
  .pwrite = next_pwrite,
  .flush = next_flush,
  .trim = next_trim,
  .zero = next_zero,
  .extents = next_extents,
  .cache = next_cache,
};

/* ---- contexts ---- */

/* A plugin or filter that crashes in open (SIGSEGV, SIGBUS, SIGFPE or
 * SIGILL in the thread running the open) fails that connection, not the
 * server: the handler jumps back to the open in progress.  Anywhere else
 * the signal keeps its default action: the handler restores it and
 * raises it again, so the process dies (and dumps core) as it would
 * have.  What the crashed open held (a lock, memory) stays held; the
 * server says so in its log.
 */
static __thread sigjmp_buf *open_escape;

static void
on_crash (int sig)
{
  sigjmp_buf *escape = open_escape;
  if (escape) {
    open_escape = NULL;
    siglongjmp (*escape, sig);
  }
  signal (sig, SIG_DFL);
  raise (sig);
}

void
layer_contain_open_crashes (void)
{
  static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
  struct sigaction sa = { .sa_handler = on_crash, .sa_flags = SA_NODEFER };
  sigemptyset (&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction (sigs[i], &sa, NULL);
}

/* The layer's open, with a crash inside it turned into a failure. */
static int
guarded_open (struct context *c, int readonly, const char *exportname,
              int is_tls)
{
  sigjmp_buf escape, *outer = open_escape;
  volatile int r = -1;
  int sig = sigsetjmp (escape, 1);
  if (sig == 0) {
    open_escape = &escape;
    r = c->layer->ops->open (c, readonly, exportname, is_tls);
  }
  else
    nbdkit_error ("%s \"%s\" crashed in open (signal %d: %s): this "
                  "connection fails; what the %s held stays held",
                  c->layer->type, c->layer->name, sig, strsignal (sig),
                  c->layer->type);
  open_escape = outer;
  return r;
}

struct context *
layer_open (struct connection *conn, struct layer *layer, int readonly,
            const char *exportname, int is_tls)
{
  struct context *c = calloc (1, sizeof *c);
  if (!c) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  c->next_ops = layer_next_ops;
  c->layer = layer;
  c->conn = conn;
  const char *outer = log_swap_layer_name (layer->name);
  call_start (conn, layer, "open", 0, 0);
  int r = guarded_open (c, readonly, exportname, is_tls);
  call_done (conn, layer, "open", ctl_err (r));
  log_swap_layer_name (outer);
  if (r == -1) {
    /* A filter's open may have opened the layers below already. */
    if (c->below)
      layer_close_all (c->below);
    free (c);
    return NULL;
  }
  return c;
}

/* Prepare runs bottom-up, so each filter sees a ready layer below. */
int
layer_prepare_all (struct context *c, int readonly)
{
  if (c->below && layer_prepare_all (c->below, readonly) == -1)
    return -1;
  const char *outer = log_swap_layer_name (c->layer->name);
  call_start (c->conn, c->layer, "prepare", 0, 0);
  int r = c->layer->ops->prepare (c, readonly);
  call_done (c->conn, c->layer, "prepare", ctl_err (r));
  log_swap_layer_name (outer);
  return r;
}

/* Finalize and close run top-down, mirroring open. */
void
layer_close_all (struct context *c)
{
  const char *outer = log_swap_layer_name (NULL);
  while (c) {
    struct context *below = c->below;
    log_set_layer_name (c->layer->name);
    call_start (c->conn, c->layer, "finalize", 0, 0);
    int r = c->layer->ops->finalize (c);
    call_done (c->conn, c->layer, "finalize", ctl_err (r));
    call_start (c->conn, c->layer, "close", 0, 0);
    c->layer->ops->close (c);
    call_done (c->conn, c->layer, "close", 0);
    free (c);
    c = below;
  }
  log_swap_layer_name (outer);
}

/* Under valgrind (./nbdkit with NBDKIT_VALGRIND set) and in
 * AddressSanitizer builds the .so files stay mapped at exit: what a
 * plugin still holds in its globals then stays reachable (unmapping
 * them would turn it into a "leak" at exit, as with Debian's prebuilt
 * plugins, which allocate in constructors), and real leaks inside a
 * plugin keep readable stacks.
 */
static bool
keep_mapped (void)
{
#if defined (__SANITIZE_ADDRESS__)
  return true;
#elif defined (__has_feature)
#if __has_feature (address_sanitizer)
  return true;
#endif
#endif
  return getenv ("NBDKIT_VALGRIND") != NULL;
}

void
layer_unload_all (struct layer *top)
{
  while (top) {
    struct layer *next = top->next;
    log_set_layer_name (top->name);
    call_start (NULL, top, "cleanup", 0, 0);
    top->ops->cleanup (top);
    call_done (NULL, top, "cleanup", 0);
    call_start (NULL, top, "unload", 0, 0);
    top->ops->unload (top);
    call_done (NULL, top, "unload", 0);
    if (top->dl && !keep_mapped ())
      dlclose (top->dl);
    free (top->name);
    free (top->filename);
    free (top);
    top = next;
  }
  log_set_layer_name (NULL);
}

/* -D NAME.FLAG=N: set the int variable NAME_debug_FLAG in the .so of
 * layer NAME (dots and dashes in FLAG become underscores).
 */
int
layer_set_debug_flag (struct layer *top, const char *arg)
{
  const char *dot = strchr (arg, '.');
  const char *eq = strchr (arg, '=');
  if (!dot || !eq || eq < dot || dot == arg || eq == dot + 1) {
    nbdkit_error ("-D: expected NAME.FLAG=N, got \"%s\"", arg);
    return -1;
  }
  int value;
  if (nbdkit_parse_int ("-D", eq + 1, &value) == -1)
    return -1;

  size_t namelen = dot - arg;
  for (struct layer *l = top; l; l = l->next) {
    if (strlen (l->name) != namelen || strncmp (l->name, arg, namelen))
      continue;
    char sym[256];
    int n = snprintf (sym, sizeof sym, "%.*s_debug_%.*s", (int) namelen, arg,
                      (int) (eq - dot - 1), dot + 1);
    if (n < 0 || (size_t) n >= sizeof sym) {
      nbdkit_error ("-D: flag name too long");
      return -1;
    }
    for (char *p = sym; *p; p++)
      if (*p == '.' || *p == '-')
        *p = '_';
    /* A flag the plugin lacks is a warning, as the flag set differs
     * between versions of a plugin.
     */
    int *var = dlsym (l->dl, sym);
    if (!var)
      fprintf (stderr, "nbdkit: warning: -D: %s %s has no debug flag %s\n",
               l->type, l->name, sym);
    else
      *var = value;
    return 0;
  }
  nbdkit_error ("-D: no plugin or filter named \"%.*s\"", (int) namelen, arg);
  return -1;
}
