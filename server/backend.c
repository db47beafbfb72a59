/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the layer boundary.  Every call into a plugin or a
 * filter, from the server or from the filter above, goes through the
 * layer_* functions here, so this is the one place that sees a
 * request's trip down the chain.  At this boundary each call
 *   - asserts what the layer may rely on (the context is prepared, the
 *     range lies within the size it reported, the flags are ones it
 *     advertised),
 *   - switches the log's layer name and fires layer_call_start/done,
 *   - takes the all-requests lock when the thread model asks for it,
 *   - and emulates what the layer asked the server to emulate (zero
 *     by writing zeroes, FUA by flushing, cache by reading, block
 *     status as all data), for plugins and filters alike.
 * A layer's answers (size, can_*, block size, description) are asked
 * once per context and cached.  Filters reach the same functions
 * through layer_next_ops (their nbdkit_next).  The lives of contexts
 * are in context.c, loading and unloading in load.c.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layer-call.h"
#include "include/array-size.h"

/* ---- tracing every call ---- */

static inline uint64_t
conn_id (const struct connection *conn)
{
  return conn ? conn->id : 0;
}

__attribute__ ((noinline)) void
layer_trace_start (const struct connection *conn, const struct layer *l,
                   const char *cb, uint64_t offset, uint64_t count)
{
  /* The probe first, so that the log call is a tail call: the other
   * order keeps the five arguments alive across it, which cost about
   * 20 instructions a layer call with nobody tracing.
   */
  if (NBDKIT_LAYER_CALL_START_ENABLED ())
    NBDKIT_LAYER_CALL_START (conn_id (conn),
                             probe_u64 (layer_current_cookie ()),
                             l->name, cb, offset, count);
  log_layer_call (conn, l, cb, offset, count);
}

__attribute__ ((noinline)) void
layer_trace_done (const struct connection *conn, const struct layer *l,
                  const char *cb, int64_t err)
{
  if (NBDKIT_LAYER_CALL_DONE_ENABLED ())
    NBDKIT_LAYER_CALL_DONE (conn_id (conn),
                            probe_u64 (layer_current_cookie ()),
                            (uint64_t) l->depth, l->name, cb, err);
}

/* ---- configuration-time calls ---- */

/* Each names its layer in the log only while it runs: a filter's
 * next_config lands here, and the filter's own messages after it are
 * the filter's, not the plugin's.
 */

/* Does a parameter named KEY hold a secret?  The config probe shows
 * such a value as "<hidden>", whatever its form (nbdkit_read_password
 * takes the password itself, "-", "-FD" or "+FILE").
 */
static bool
secret_key (const char *key)
{
  static const char *const words[] = { "password", "passwd", "passphrase",
                                         "secret" };
  for (size_t i = 0; i < ARRAY_SIZE (words); i++)
    if (strcasestr (key, words[i]))
      return true;
  return false;
}

int
layer_config (struct layer *l, const char *key, const char *value)
{
  const char *old_key, *old_value;
  if (NBDKIT_CONFIG_ENABLED ())
    NBDKIT_CONFIG (l->name, key, secret_key (key) ? "<hidden>" : value);
  layer_trace_start (NULL, l, "config", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  public_set_config_param (key, value, &old_key, &old_value);
  int r = l->ops->config (l, key, value);
  public_set_config_param (old_key, old_value, &old_key, &old_value);
  log_swap_layer_name (outer);
  layer_trace_done (NULL, l, "config", ctl_err (r));
  return r;
}

int
layer_config_complete (struct layer *l)
{
  layer_trace_start (NULL, l, "config_complete", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  int r = l->ops->config_complete (l);
  log_swap_layer_name (outer);
  layer_trace_done (NULL, l, "config_complete", ctl_err (r));
  return r;
}

int
layer_get_ready (struct layer *l, int thread_model)
{
  layer_trace_start (NULL, l, "get_ready", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  int r = l->ops->get_ready (l, thread_model);
  log_swap_layer_name (outer);
  layer_trace_done (NULL, l, "get_ready", ctl_err (r));
  return r;
}

int
layer_after_fork (struct layer *l)
{
  layer_trace_start (NULL, l, "after_fork", 0, 0);
  const char *outer = log_swap_layer_name (l->name);
  int r = l->ops->after_fork (l);
  log_swap_layer_name (outer);
  layer_trace_done (NULL, l, "after_fork", ctl_err (r));
  return r;
}

int
layer_preconnect (struct layer *l, int readonly)
{
  struct connection *conn = conn_current ();
  struct call_scope s = enter (l);
  layer_trace_start (conn, l, "preconnect", 0, 0);
  int r = l->ops->preconnect (l, readonly);
  layer_trace_done (conn, l, "preconnect", ctl_err (r));
  leave (s);
  return r;
}

/* Turn a nbdkit_use_default_export mark into the default export's name
 * as layer L gives it, so that the layer above (a filter looking at the
 * list, such as log or exportname) sees a real name, as in nbdkit.
 */
static int
resolve_default_export (struct nbdkit_exports *e, struct layer *l,
                        int readonly, int is_tls)
{
  if (!exports_take_default (e))
    return 0;
  const char *def = layer_default_export (l, readonly, is_tls);
  return def ? nbdkit_add_export (e, def, NULL) : 0;
}

int
layer_list_exports (struct layer *l, int readonly, int is_tls,
                    struct nbdkit_exports *exports)
{
  struct connection *conn = conn_current ();
  struct call_scope s = enter (l);
  layer_trace_start (conn, l, "list_exports", 0, 0);
  int r = l->ops->list_exports (l, readonly, is_tls, exports);
  layer_trace_done (conn, l, "list_exports", ctl_err (r));
  leave (s);
  if (r == 0)
    r = resolve_default_export (exports, l, readonly, is_tls);
  return r;
}

/* A layer's default export is asked at most once per connection, as
 * the other negotiation answers are (nbdkit-plugin(3)): the answer is
 * kept in conn->default_exports, by the layer's depth, until the
 * connection ends or TLS starts (layer_forget_default_exports).  Only
 * the connection's own thread asks, while it negotiates, so no lock.
 * Outside a connection (a filter's own thread) nothing is kept.
 */
const char *
layer_default_export (struct layer *l, int readonly, int is_tls)
{
  struct connection *conn = conn_current ();
  string_vector *kept = conn ? &conn->default_exports : NULL;
  if (kept && l->depth < kept->len && kept->ptr[l->depth])
    return kept->ptr[l->depth];

  struct call_scope s = enter (l);
  layer_trace_start (conn, l, "default_export", 0, 0);
  const char *r = l->ops->default_export (l, readonly, is_tls);
  layer_trace_done (conn, l, "default_export", r ? 0 : EIO);
  leave (s);
  if (!r || !kept)
    return r;               /* an error is not kept: the next call asks */

  /* Keep a copy: the layer's string need not outlive this call.  If
   * there is no memory for it, the answer is still good, just not kept.
   */
  char *copy = strdup (r);
  if (!copy)
    return r;
  while (kept->len <= l->depth)
    if (string_vector_append (kept, NULL) == -1) {
      free (copy);
      return r;
    }
  kept->ptr[l->depth] = copy;
  return copy;
}

void
layer_forget_default_exports (struct connection *conn)
{
  string_vector_free_all (&conn->default_exports);
}

/* ---- answers, asked once per context ---- */

#define ANSWER(c, field) \
  __atomic_load_n (&(c)->answers.field, __ATOMIC_ACQUIRE)
#define SET_ANSWER(c, field, v) \
  __atomic_store_n (&(c)->answers.field, (v), __ATOMIC_RELEASE)

/* export_description before it is asked (NULL is a valid answer). */
static const char not_asked[] = "";

void
layer_answers_init (struct layer_answers *a)
{
#define X(name, type, kind) a->name = -1;
  LAYER_QUERIES (X)
#undef X
  a->export_description = not_asked;
  a->block_size_known = 0;
}

/* How an answer of each kind is kept (layer-ops.h). */
static inline int64_t
normalise_BOOL (int64_t r)
{
  return r < 0 ? -1 : r > 0;
}

static inline int64_t
normalise_MODE (int64_t r)
{
  return r < 0 ? -1 : r;
}

static inline int64_t
normalise_SIZE (int64_t r)
{
  return r < 0 ? -1 : r;
}

/* A question or a call goes to a prepared context (filters ask in
 * their own prepare, after the layers below theirs were prepared), or
 * to a finalized one that is not yet closed: every finalize runs before
 * the first close, and a filter may still write in its close (Debian's
 * ext2 filter flushes its filesystem there).
 */
static inline void
assert_usable (const struct context *c)
{
  assert (c != NULL);
  assert (c->state == CTX_PREPARED || c->state == CTX_FINALIZED);
}

/* nbdkit asks can_trim, can_zero and can_fua only of a layer that can
 * be written, and can_fast_zero only of one that can zero: a context
 * opened read-only (cow opens the plugin so) answers "no" whatever its
 * layer would say.  Each question's gate, by name (layer-ops.h lists
 * the questions): run once per context and question, under its
 * answer_lock.
 */
enum gate { GATE_NONE, GATE_WRITABLE, GATE_ZEROABLE };
#define GATE_get_size      GATE_NONE
#define GATE_can_write     GATE_NONE
#define GATE_can_flush     GATE_NONE
#define GATE_is_rotational GATE_NONE
#define GATE_can_trim      GATE_WRITABLE
#define GATE_can_zero      GATE_WRITABLE
#define GATE_can_fast_zero GATE_ZEROABLE
#define GATE_can_extents   GATE_NONE
#define GATE_can_fua       GATE_WRITABLE
#define GATE_can_multi_conn GATE_NONE
#define GATE_can_cache     GATE_NONE

/* True when the layer is to be asked; otherwise *ANSWER is the answer
 * (0, or -1 when the question the gate depends on failed).
 */
static bool
gate_open (struct context *c, enum gate g, int64_t *answer)
{
  int r;
  switch (g) {
  case GATE_NONE:
    return true;
  case GATE_WRITABLE:
    r = layer_can_write (c);
    if (r == 1)
      return true;
    break;
  case GATE_ZEROABLE:
    r = layer_can_zero (c);
    if (r > NBDKIT_ZERO_NONE)
      return true;
    break;
  default:
    abort ();
  }
  *answer = r == -1 ? -1 : 0;
  return false;
}

#define X(name, type, kind)                                             \
  type                                                                  \
  layer_##name (struct context *c)                                      \
  {                                                                     \
    assert_usable (c);                                                  \
    type r = ANSWER (c, name);                                          \
    if (r != -1)                                                        \
      return r;                                                         \
    struct call_scope s = enter (c->layer);                             \
    pthread_mutex_lock (&c->answer_lock);                               \
    r = ANSWER (c, name);                                               \
    int64_t gated;                                                      \
    if (r == -1 && !gate_open (c, GATE_##name, &gated))                 \
      r = gated;                                                        \
    else if (r == -1) {                                                 \
      layer_trace_start (c->conn, c->layer, #name, 0, 0);               \
      r = normalise_##kind (c->layer->ops->name (c));                   \
      layer_trace_done (c->conn, c->layer, #name, ctl_err (r));         \
    }                                                                   \
    if (r != -1)                                                        \
      SET_ANSWER (c, name, r);                                          \
    pthread_mutex_unlock (&c->answer_lock);                             \
    leave (s);                                                          \
    return r;                                                           \
  }
LAYER_QUERIES (X)
#undef X

const char *
layer_export_description (struct context *c)
{
  assert_usable (c);
  const char *r = ANSWER (c, export_description);
  if (r != not_asked)
    return r;
  struct call_scope s = enter (c->layer);
  pthread_mutex_lock (&c->answer_lock);
  r = ANSWER (c, export_description);
  if (r == not_asked) {
    layer_trace_start (c->conn, c->layer, "export_description", 0, 0);
    r = c->layer->ops->export_description (c);
    layer_trace_done (c->conn, c->layer, "export_description", 0);
    SET_ANSWER (c, export_description, r);
  }
  pthread_mutex_unlock (&c->answer_lock);
  leave (s);
  return r;
}

int
layer_block_size (struct context *c, uint32_t *minimum, uint32_t *preferred,
                  uint32_t *maximum)
{
  assert_usable (c);
  int r = 0;
  struct call_scope s = { NULL, false };
  bool asking = !ANSWER (c, block_size_known);
  if (asking) {
    s = enter (c->layer);
    pthread_mutex_lock (&c->answer_lock);
  }
  if (!c->answers.block_size_known) {
    uint32_t min = 0, pref = 0, max = 0;
    layer_trace_start (c->conn, c->layer, "block_size", 0, 0);
    r = c->layer->ops->block_size (c, &min, &pref, &max);
    layer_trace_done (c->conn, c->layer, "block_size", ctl_err (r));
    if (r != -1) {
      c->answers.block_min = min;
      c->answers.block_pref = pref;
      c->answers.block_max = max;
      SET_ANSWER (c, block_size_known, 1);
    }
  }
  *minimum = c->answers.block_min;
  *preferred = c->answers.block_pref;
  *maximum = c->answers.block_max;
  if (asking) {
    pthread_mutex_unlock (&c->answer_lock);
    leave (s);
  }
  return r == -1 ? -1 : 0;
}

/* ---- data calls ---- */

/* Is [offset, offset+count) a non-empty range within the size this
 * context reports?  Asked here if nobody asked yet: a filter may read
 * from the layer below without ever asking its size (as nbdkit allows).
 */
static bool
in_range (struct context *c, uint64_t offset, uint32_t count)
{
  int64_t size = ANSWER (c, get_size);
  if (size < 0)
    size = layer_get_size (c);
  if (size < 0)
    return false;
  return count > 0 && offset <= (uint64_t) size &&
    count <= (uint64_t) size - offset;
}

/* A data call from the layer above (a filter) must lie within the size
 * of this context's layer.  One outside it is that filter's mistake: it
 * is refused with EINVAL and a message naming both, not passed on and
 * not allowed to stop the server.
 */
static bool
range_ok (struct context *c, const char *what, uint64_t offset,
          uint32_t count, int *err)
{
  if (in_range (c, offset, count))
    return true;
  nbdkit_error ("%s of %" PRIu32 " bytes at %" PRIu64 " refused: outside "
                "the %" PRIi64 " bytes of the layer below (%s)", what, count,
                offset, ANSWER (c, get_size), c->layer->name);
  *err = EINVAL;
  return false;
}

/* One data call, traced, making sure a failure carries an errno; its
 * value is the call's.
 */
#define DATA_CALL(c, cb, offset, count, call)                           \
  ({                                                                    \
    *err = 0;                                                           \
    struct call_scope s_ = enter ((c)->layer);                          \
    layer_trace_start ((c)->conn, (c)->layer, cb, (offset), (count));   \
    int r_ = (call);                                                    \
    if (r_ == -1 && *err == 0)                                          \
      *err = EIO;                                                       \
    layer_trace_done ((c)->conn, (c)->layer, cb, r_ == -1 ? *err : 0);  \
    leave (s_);                                                         \
    r_;                                                                 \
  })

/* nbdkit lets a filter pass NULL for err: the error is then dropped. */
#define ERR_OR_SCRATCH(err)                     \
  int scratch_err_;                             \
  if (!(err))                                   \
    (err) = &scratch_err_

static int
call_pread (struct context *c, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  return DATA_CALL (c, "pread", offset, count,
             c->layer->ops->pread (c, buf, count, offset, flags, err));
}

int
layer_pread (struct context *c, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  if (!range_ok (c, "pread", offset, count, err))
    return -1;
  assert (flags == 0);
  return call_pread (c, buf, count, offset, flags, err);
}

int
layer_flush (struct context *c, uint32_t flags, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  assert (ANSWER (c, can_flush) == 1);
  assert (flags == 0);
  return DATA_CALL (c, "flush", 0, 0, c->layer->ops->flush (c, flags, err));
}

/* FUA on a write to a layer that asked for it to be emulated: the
 * write goes down without the flag and a flush follows.
 */
static bool
fua_emulated (struct context *c, uint32_t *flags)
{
  if (!(*flags & NBDKIT_FLAG_FUA))
    return false;
  assert (ANSWER (c, can_fua) > NBDKIT_FUA_NONE);
  if (ANSWER (c, can_fua) != NBDKIT_FUA_EMULATE)
    return false;
  *flags &= ~NBDKIT_FLAG_FUA;
  return true;
}

static int
emulated_fua_flush (struct context *c, int *err)
{
  if (layer_can_flush (c) != 1) {
    nbdkit_error ("%s %s asks for FUA to be emulated but cannot flush",
                  c->layer->type, c->layer->name);
    *err = EIO;
    return -1;
  }
  return layer_flush (c, 0, err);
}

static int
call_pwrite (struct context *c, const void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  return DATA_CALL (c, "pwrite", offset, count,
             c->layer->ops->pwrite (c, buf, count, offset, flags, err));
}

int
layer_pwrite (struct context *c, const void *buf, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  assert (ANSWER (c, can_write) == 1);
  if (!range_ok (c, "pwrite", offset, count, err))
    return -1;
  assert (!(flags & ~NBDKIT_FLAG_FUA));
  bool flush = fua_emulated (c, &flags);
  if (call_pwrite (c, buf, count, offset, flags, err) == -1)
    return -1;
  return flush ? emulated_fua_flush (c, err) : 0;
}

static int
call_trim (struct context *c, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  return DATA_CALL (c, "trim", offset, count,
             c->layer->ops->trim (c, count, offset, flags, err));
}

int
layer_trim (struct context *c, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  assert (ANSWER (c, can_write) == 1);
  assert (ANSWER (c, can_trim) == 1);
  if (!range_ok (c, "trim", offset, count, err))
    return -1;
  assert (!(flags & ~NBDKIT_FLAG_FUA));
  bool flush = fua_emulated (c, &flags);
  if (call_trim (c, count, offset, flags, err) == -1)
    return -1;
  return flush ? emulated_fua_flush (c, err) : 0;
}

/* Zero by writing zeroes through the layer's own pwrite. */
static int
emulate_zero (struct context *c, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  static const char zeroes[256 * 1024];
  while (count > 0) {
    uint32_t n = count < sizeof zeroes ? count : sizeof zeroes;
    /* FUA (if any) on the last piece makes all of them durable. */
    uint32_t f = n == count ? flags & NBDKIT_FLAG_FUA : 0;
    if (layer_pwrite (c, zeroes, n, offset, f, err) == -1)
      return -1;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
call_zero (struct context *c, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  return DATA_CALL (c, "zero", offset, count,
             c->layer->ops->zero (c, count, offset, flags, err));
}

int
layer_zero (struct context *c, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  assert (ANSWER (c, can_write) == 1);
  assert (ANSWER (c, can_zero) > NBDKIT_ZERO_NONE);
  if (!range_ok (c, "zero", offset, count, err))
    return -1;
  assert (!(flags & ~(NBDKIT_FLAG_MAY_TRIM | NBDKIT_FLAG_FUA |
                      NBDKIT_FLAG_FAST_ZERO)));
  if (flags & NBDKIT_FLAG_FUA)
    assert (ANSWER (c, can_fua) > NBDKIT_FUA_NONE);
  bool fast = flags & NBDKIT_FLAG_FAST_ZERO;
  if (fast)
    assert (ANSWER (c, can_fast_zero) == 1);

  if (ANSWER (c, can_zero) == NBDKIT_ZERO_NATIVE) {
    uint32_t f = flags;
    bool flush = fua_emulated (c, &f);
    if (call_zero (c, count, offset, f, err) == 0)
      return flush ? emulated_fua_flush (c, err) : 0;
    /* "Not like this" falls back to writing zeroes, unless the client
     * asked for a fast zero.  Any other error is real.
     */
    if (*err != ENOTSUP && *err != EOPNOTSUPP)
      return -1;
  }
  if (fast) {
    *err = ENOTSUP;
    return -1;
  }
  *err = 0;
  return emulate_zero (c, count, offset, flags, err);
}

static int
call_extents (struct context *c, uint32_t count, uint64_t offset,
              uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  return DATA_CALL (c, "extents", offset, count,
             c->layer->ops->extents (c, count, offset, flags, extents,
                                     err));
}

int
layer_extents (struct context *c, uint32_t count, uint64_t offset,
               uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  assert (ANSWER (c, can_extents) >= 0);
  if (!range_ok (c, "extents", offset, count, err))
    return -1;
  assert (!(flags & ~NBDKIT_FLAG_REQ_ONE));
  /* A layer that says it has no block status is not asked: the range
   * is all data, whatever the layers below would say.
   */
  if (ANSWER (c, can_extents) == 0) {
    *err = 0;
    if (nbdkit_add_extent (extents, offset, count, 0) == -1) {
      *err = errno ? errno : EIO;
      return -1;
    }
    return 0;
  }
  return call_extents (c, count, offset, flags, extents, err);
}

static int
call_cache (struct context *c, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  return DATA_CALL (c, "cache", offset, count,
             c->layer->ops->cache (c, count, offset, flags, err));
}

int
layer_cache (struct context *c, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  ERR_OR_SCRATCH (err);
  assert_usable (c);
  assert (ANSWER (c, can_cache) > NBDKIT_CACHE_NONE);
  if (!range_ok (c, "cache", offset, count, err))
    return -1;
  assert (flags == 0);
  if (ANSWER (c, can_cache) == NBDKIT_CACHE_NATIVE)
    return call_cache (c, count, offset, flags, err);

  /* Emulated: read and discard, so the layer pulls the data in. */
  const uint32_t chunk = 1024 * 1024;
  char *buf = malloc (count < chunk ? count : chunk);
  if (!buf) {
    *err = ENOMEM;
    return -1;
  }
  int r = 0;
  while (r == 0 && count > 0) {
    uint32_t n = count < chunk ? count : chunk;
    r = call_pread (c, buf, n, offset, 0, err);
    count -= n;
    offset += n;
  }
  free (buf);
  return r;
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
  assert_usable (c);
  assert (in_range (c, offset, count));
  return DATA_CALL (c, "pread", offset, count,
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
  assert_usable (c);
  assert (ANSWER (c, can_write) == 1);
  assert (in_range (c, offset, count));
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
  return DATA_CALL (c, "pwrite", offset, count,
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
  assert_usable (c);
  assert (in_range (c, offset, count));
  return DATA_CALL (c, "pread", offset, count,
             c->layer->ops->read_fd (c, count, offset, fd, fd_offset, err));
}

/* Requests the top layer takes and completes later
 * (include/nbdkit-async.h)?  Only a plugin's: a filter has none, and
 * its stack takes the synchronous path.  The submission is traced as
 * the synchronous call would be (it returns when the layer has taken
 * the request); request_submit and request_complete (async.c) time
 * the rest.  The caller (async.c) has made sure that nothing the layer
 * asked to have emulated is asked of it.
 */
const struct nbdkit_async_ops *
layer_async_ops (struct context *c)
{
  return c->layer->ops->async_ops ? c->layer->ops->async_ops (c) : NULL;
}

static const char *const async_cb_names[] = {
  [LAYER_ASYNC_PREAD] = "pread",
  [LAYER_ASYNC_PWRITE] = "pwrite",
  [LAYER_ASYNC_FLUSH] = "flush",
  [LAYER_ASYNC_TRIM] = "trim",
  [LAYER_ASYNC_ZERO] = "zero",
};

int
layer_async_submit (struct context *c, struct nbdkit_async_request *req,
                    enum layer_async_cmd cmd, void *buf, uint32_t count,
                    uint64_t offset, uint32_t flags, int *err)
{
  assert_usable (c);
  assert (c->layer->ops->async_submit);
  assert (cmd < ARRAY_SIZE (async_cb_names));
  switch (cmd) {
  case LAYER_ASYNC_PREAD:
    assert (flags == 0);
    break;
  case LAYER_ASYNC_FLUSH:
    assert (ANSWER (c, can_flush) == 1);
    assert (flags == 0);
    break;
  case LAYER_ASYNC_PWRITE:
  case LAYER_ASYNC_TRIM:
  case LAYER_ASYNC_ZERO:
    assert (ANSWER (c, can_write) == 1);
    if (flags & NBDKIT_FLAG_FUA)
      assert (ANSWER (c, can_fua) == NBDKIT_FUA_NATIVE);
    if (cmd == LAYER_ASYNC_TRIM)
      assert (ANSWER (c, can_trim) == 1);
    if (cmd == LAYER_ASYNC_ZERO) {
      assert (ANSWER (c, can_zero) == NBDKIT_ZERO_NATIVE);
      if (flags & NBDKIT_FLAG_FAST_ZERO)
        assert (ANSWER (c, can_fast_zero) == 1);
    }
    break;
  }
  if (cmd != LAYER_ASYNC_FLUSH)
    assert (in_range (c, offset, count));
  return DATA_CALL (c, async_cb_names[cmd], offset, count,
             c->layer->ops->async_submit (c, req, cmd, buf, count, offset,
                                          flags, err));
}

/* A filter passing asynchronous requests on: which commands it can
 * pass (0 for any layer that is not such a filter), and for one
 * request, what it decides.  prepare is not traced as a call: the
 * request is traced at each layer it passes once the plugin has it
 * (async.c), or else through the synchronous calls that follow.
 */
unsigned
layer_async_passes (struct context *c)
{
  return c->below && c->layer->ops->async_passes
    ? c->layer->ops->async_passes (c) : 0;
}

int
layer_async_prepare (struct context *c, enum layer_async_cmd cmd,
                     uint32_t *count, uint64_t *offset, uint32_t *flags,
                     int *err)
{
  assert_usable (c);
  *err = 0;
  struct call_scope s = enter (c->layer);
  int r = c->layer->ops->async_prepare (c, cmd, count, offset, flags, err);
  leave (s);
  if (r == -1 && *err == 0)
    *err = EIO;
  return r;
}

/* The trace of a request the plugin took, at a filter that passed it
 * on: what the synchronous call would have shown, with the
 * coordinates that filter saw, around the plugin's own.
 */
void
layer_async_trace_start (struct context *c, enum layer_async_cmd cmd,
                         uint64_t offset, uint32_t count)
{
  layer_trace_start (c->conn, c->layer, async_cb_names[cmd], offset, count);
}

void
layer_async_trace_done (struct context *c, enum layer_async_cmd cmd, int err)
{
  layer_trace_done (c->conn, c->layer, async_cb_names[cmd], err);
}

void
layer_async_cancel (struct context *c)
{
  if (c->layer->ops->async_cancel) {
    const char *outer = log_swap_layer_name (c->layer->name);
    c->layer->ops->async_cancel (c);
    log_swap_layer_name (outer);
  }
}
