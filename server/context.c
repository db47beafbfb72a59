/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: contexts, one layer opened for one connection (or
 * shared).  It owns their life: open from the outside in (each filter
 * opens the layer below from its own open), prepare from the inside out,
 * finalize then close from the outside in, each step only after the one
 * before it succeeded (enum context_state), and a crash in open turned
 * into a failed connection.  It also implements the filter API for
 * opening contexts by hand (nbdkit_next_context_open and friends).
 * The calls themselves go through backend.c; the server (handshake.c,
 * connection.c) and filters.c call in here.
 */
#include <config.h>

#include <assert.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layer-call.h"
#include "include/array-size.h"

/* With -D nbdkit.open.contain_crashes=1 (off by default, as nbdkit
 * has no such thing), a plugin or filter that crashes in open
 * (SIGSEGV, SIGBUS, SIGFPE or SIGILL in the thread running the open)
 * fails that connection, not the server: the handler jumps back to the
 * open in progress.  Anywhere else the signal keeps its default action:
 * the handler restores it and raises it again, so the process dies (and
 * dumps core) as it would have.  What the crashed open held (a lock,
 * memory, malloc's own lock) stays held, which is why it is opt-in; the
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
  for (size_t i = 0; i < ARRAY_SIZE (sigs); i++)
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

static void
context_free (struct context *c)
{
  pthread_mutex_destroy (&c->answer_lock);
  free (c);
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
  c->readonly = readonly;
  c->state = CTX_NEW;
  layer_answers_init (&c->answers);
  /* A context opened read-only cannot be written, whatever the layer
   * would say (as in nbdkit): filters that open the layer below
   * read-only get 0 from next->can_write without asking it.
   */
  if (readonly)
    c->answers.can_write = 0;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init (&attr);
  pthread_mutexattr_settype (&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init (&c->answer_lock, &attr);
  pthread_mutexattr_destroy (&attr);

  struct call_scope s = enter (layer);
  log_layer_open (layer, readonly, exportname ? exportname : "", is_tls);
  layer_trace_start (conn, layer, "open", 0, 0);
  int r = guarded_open (c, readonly, exportname, is_tls);
  layer_trace_done (conn, layer, "open", ctl_err (r));
  if (r == 0)
    log_layer_open_done (layer, c->handle);
  leave (s);
  if (r == -1) {
    /* A filter's open may have opened the layers below already: they
     * are closed, and finalized only if the filter prepared them by
     * hand (the server never prepared them).
     */
    if (c->below)
      layer_close_all (c->below);
    context_free (c);
    return NULL;
  }
  c->state = CTX_OPENED;
  return c;
}

/* Prepare runs bottom-up, so each filter sees a ready layer below.  A
 * context already prepared (by hand, through next->prepare) is left
 * alone.
 */
int
layer_prepare (struct context *c)
{
  assert (c->state != CTX_NEW);
  if (c->state != CTX_OPENED)
    return c->state == CTX_PREPARED ? 0 : -1;
  if (c->below && layer_prepare (c->below) == -1)
    return -1;
  struct call_scope s = enter (c->layer);
  layer_trace_start (c->conn, c->layer, "prepare", 0, 0);
  int r = c->layer->ops->prepare (c, c->readonly);
  layer_trace_done (c->conn, c->layer, "prepare", ctl_err (r));
  leave (s);
  if (r == -1)
    return -1;
  c->state = CTX_PREPARED;
  return 0;
}

int
layer_prepare_all (struct context *c, int readonly)
{
  assert (c->readonly == readonly);
  return layer_prepare (c);
}

/* Finalize runs top-down, mirroring prepare, and only on contexts that
 * were prepared.  Every prepared layer is finalized even if one above
 * it fails.
 */
int
layer_finalize (struct context *c)
{
  int r = 0;
  if (c->state == CTX_PREPARED) {
    struct call_scope s = enter (c->layer);
    layer_trace_start (c->conn, c->layer, "finalize", 0, 0);
    r = c->layer->ops->finalize (c);
    layer_trace_done (c->conn, c->layer, "finalize", ctl_err (r));
    leave (s);
    c->state = CTX_FINALIZED;
  }
  if (c->below && layer_finalize (c->below) == -1)
    r = -1;
  return r;
}

/* Close runs top-down too, after finalize, and frees the contexts. */
void
layer_close (struct context *c)
{
  while (c) {
    struct context *below = c->below;
    assert (c->state != CTX_NEW);
    assert (c->state != CTX_PREPARED);  /* finalize first */
    struct call_scope s = enter (c->layer);
    layer_trace_start (c->conn, c->layer, "close", 0, 0);
    c->layer->ops->close (c);
    layer_trace_done (c->conn, c->layer, "close", 0);
    leave (s);
    context_free (c);
    c = below;
  }
}

void
layer_close_all (struct context *c)
{
  layer_finalize (c);
  layer_close (c);
}

/* ---- opening contexts by hand (nbdkit-filter(3)) ---- */

static struct context *
ctx (nbdkit_next *next)
{
  return container_of (next, struct context, next_ops);
}

nbdkit_backend *
nbdkit_context_get_backend (nbdkit_context *context)
{
  struct context *c = (struct context *) context;
  assert (c && c->layer->next);
  return (nbdkit_backend *) c->layer->next;
}

nbdkit_next *
nbdkit_next_context_open (nbdkit_backend *backend, int readonly,
                          const char *exportname, int shared)
{
  struct layer *l = (struct layer *) backend;
  struct connection *conn = conn_current ();
  int is_tls;

  if (!l) {
    nbdkit_error ("nbdkit_next_context_open: no backend");
    return NULL;
  }
  if (shared) {
    /* Not tied to any client: TLS only if every client must use it. */
    const struct config *cfg = server_config ();
    conn = NULL;
    is_tls = cfg && cfg->tls == TLS_REQUIRE;
  }
  else if (!conn) {
    nbdkit_error ("nbdkit_next_context_open: a context that is not "
                  "shared can only be opened while serving a client");
    return NULL;
  }
  else
    is_tls = conn->tls_active;
  if (!exportname)
    exportname = "";

  struct context *c = layer_open (conn, l, readonly, exportname, is_tls);
  return c ? &c->next_ops : NULL;
}

void
nbdkit_next_context_close (nbdkit_next *next)
{
  if (next) {
    struct context *c = ctx (next);
    /* A context still prepared is finalized first, as close needs. */
    layer_finalize (c);
    layer_close (c);
  }
}

nbdkit_next *
nbdkit_context_set_next (nbdkit_context *context, nbdkit_next *next)
{
  struct context *c = (struct context *) context;
  struct context *old = c->below;
  assert (!next || ctx (next)->layer == c->layer->next);
  c->below = next ? ctx (next) : NULL;
  return old ? &old->next_ops : NULL;
}

/* ---- the same calls as a filter sees them (nbdkit_next) ---- */

static int
next_prepare (nbdkit_next *next)
{
  return layer_prepare (ctx (next));
}

static int
next_finalize (nbdkit_next *next)
{
  return layer_finalize (ctx (next));
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

#define X(name, type, kind)                     \
  static type                                   \
  next_##name (nbdkit_next *next)               \
  {                                             \
    return layer_##name (ctx (next));           \
  }
LAYER_QUERIES (X)
#undef X

#define X(name, params, args)                                   \
  static int                                                    \
  next_##name (nbdkit_next *next, LAYER_UNPAREN params)         \
  {                                                             \
    return layer_##name (ctx (next), LAYER_UNPAREN args);       \
  }
LAYER_DATA_CALLS (X)
#undef X

const struct nbdkit_next_ops layer_next_ops = {
  .prepare = next_prepare,
  .finalize = next_finalize,
  .export_description = next_export_description,
  .block_size = next_block_size,
#define X(name, ...) .name = next_##name,
  LAYER_QUERIES (X)
  LAYER_DATA_CALLS (X)
#undef X
};

