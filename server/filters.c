/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: loading a filter .so and adapting its callbacks to the
 * layer interface.  A callback the filter leaves out passes straight
 * through to the layer below.  Filters see the layer below as an
 * nbdkit_next (the context below's next_ops) during requests, and as
 * an nbdkit_backend (the struct layer below) at configuration time.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nbdkit-async.h"

/* The asynchronous commands are numbered alike on both sides. */
static_assert (NBDKIT_ASYNC_CMD_PREAD == LAYER_ASYNC_PREAD &&
               NBDKIT_ASYNC_CMD_PWRITE == LAYER_ASYNC_PWRITE &&
               NBDKIT_ASYNC_CMD_FLUSH == LAYER_ASYNC_FLUSH &&
               NBDKIT_ASYNC_CMD_TRIM == LAYER_ASYNC_TRIM &&
               NBDKIT_ASYNC_CMD_ZERO == LAYER_ASYNC_ZERO,
               "asynchronous command numbers");

struct filter_priv {
  struct nbdkit_filter f;       /* first: F() is a cast */
  const struct nbdkit_async_filter_ops *async;  /* or NULL */
};

static struct nbdkit_filter *
F (struct layer *l)
{
  return l->priv;
}

static const struct nbdkit_async_filter_ops *
async_filter_ops (struct layer *l)
{
  return ((struct filter_priv *) l->priv)->async;
}

static nbdkit_backend *
as_backend (struct layer *l)
{
  return (nbdkit_backend *) l;
}

static struct layer *
from_backend (nbdkit_backend *b)
{
  return (struct layer *) b;
}

/* ---- configuration time ---- */

static void
filter_unload (struct layer *l)
{
  if (F (l)->unload)
    F (l)->unload ();
  free (l->priv);
}

static void
filter_usage (struct layer *l)
{
  struct nbdkit_filter *f = F (l);
  printf ("filter: %s", f->name);
  if (f->longname)
    printf (" (%s)", f->longname);
  printf ("\n%s", l->filename);
  if (f->description)
    printf ("\n%s", f->description);
  printf ("\n");
  if (f->config_help)
    printf ("%s\n", f->config_help);
}

static void
filter_dump_fields (struct layer *l)
{
  l->next->ops->dump_fields (l->next);
}

static int
next_config (nbdkit_backend *b, const char *key, const char *value)
{
  return layer_config (from_backend (b), key, value);
}

static int
filter_config (struct layer *l, const char *key, const char *value)
{
  if (F (l)->config)
    return F (l)->config (next_config, as_backend (l->next), key, value);
  return next_config (as_backend (l->next), key, value);
}

static int
next_config_complete (nbdkit_backend *b)
{
  return layer_config_complete (from_backend (b));
}

static int
filter_config_complete (struct layer *l)
{
  if (F (l)->config_complete)
    return F (l)->config_complete (next_config_complete,
                                   as_backend (l->next));
  return next_config_complete (as_backend (l->next));
}

static const char *
filter_magic_config_key (struct layer *l)
{
  return l->next->ops->magic_config_key (l->next);
}

static int
filter_thread_model (struct layer *l)
{
  return F (l)->thread_model ? F (l)->thread_model ()
                             : NBDKIT_THREAD_MODEL_PARALLEL;
}

static int
filter_get_ready (struct layer *l, int thread_model)
{
  /* The chain's thread model is decided by then; filters are told it. */
  if (F (l)->get_ready)
    return F (l)->get_ready (thread_model);
  return 0;
}

static int
filter_after_fork (struct layer *l)
{
  return F (l)->after_fork ? F (l)->after_fork (as_backend (l->next)) : 0;
}

static void
filter_cleanup (struct layer *l)
{
  if (F (l)->cleanup)
    F (l)->cleanup (as_backend (l->next));
}

static int
next_preconnect (nbdkit_backend *b, int readonly)
{
  return layer_preconnect (from_backend (b), readonly);
}

static int
filter_preconnect (struct layer *l, int readonly)
{
  if (F (l)->preconnect)
    return F (l)->preconnect (next_preconnect, as_backend (l->next),
                              readonly);
  return next_preconnect (as_backend (l->next), readonly);
}

/* A filter's next_list_exports and next_default_export carry no is_tls:
 * the layer below gets the connection's, as the filter itself did.
 */
static int
conn_is_tls (void)
{
  struct connection *conn = conn_current ();
  return conn ? conn->tls_active : 0;
}

static int
next_list_exports (nbdkit_backend *b, int readonly,
                   struct nbdkit_exports *exports)
{
  return layer_list_exports (from_backend (b), readonly, conn_is_tls (),
                             exports);
}

static int
filter_list_exports (struct layer *l, int readonly, int is_tls,
                     struct nbdkit_exports *exports)
{
  if (F (l)->list_exports)
    return F (l)->list_exports (next_list_exports, as_backend (l->next),
                                readonly, is_tls, exports);
  return layer_list_exports (l->next, readonly, is_tls, exports);
}

static const char *
next_default_export (nbdkit_backend *b, int readonly)
{
  return layer_default_export (from_backend (b), readonly, conn_is_tls ());
}

static const char *
filter_default_export (struct layer *l, int readonly, int is_tls)
{
  if (F (l)->default_export)
    return F (l)->default_export (next_default_export, as_backend (l->next),
                                  readonly, is_tls);
  return layer_default_export (l->next, readonly, is_tls);
}

/* ---- per connection ---- */

/* The is_tls of the open in progress, for next_open. */
static __thread int opening_tls;

static int
next_open (nbdkit_context *nc, int readonly, const char *exportname)
{
  struct context *c = (struct context *) nc;
  if (c->below) {
    nbdkit_error ("filter %s opened the next layer twice", c->layer->name);
    return -1;
  }
  c->below = layer_open (c->conn, c->layer->next, readonly, exportname,
                         opening_tls);
  return c->below ? 0 : -1;
}

/* A filter may leave the layer below closed (tls-fallback does, for
 * clients it will not let through), or open it later by hand.  Then
 * its next is NULL, and a callback it leaves out has nothing to pass
 * through to.
 */
static int
filter_open (struct context *c, int readonly, const char *exportname,
             int is_tls)
{
  struct nbdkit_filter *f = F (c->layer);
  opening_tls = is_tls;
  if (f->open) {
    c->handle = f->open (next_open, (nbdkit_context *) c, readonly,
                         exportname, is_tls);
    return c->handle ? 0 : -1;
  }
  if (next_open ((nbdkit_context *) c, readonly, exportname) == -1)
    return -1;
  c->handle = NBDKIT_HANDLE_NOT_NEEDED;
  return 0;
}

static nbdkit_next *
below (struct context *c)
{
  return c->below ? &c->below->next_ops : NULL;
}

static int
filter_prepare (struct context *c, int readonly)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->prepare ? f->prepare (below (c), c->handle, readonly) : 0;
}

static int
filter_finalize (struct context *c)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->finalize ? f->finalize (below (c), c->handle) : 0;
}

static void
filter_close (struct context *c)
{
  struct nbdkit_filter *f = F (c->layer);
  if (f->close)
    f->close (c->handle);
}

/* What a left-out callback answers when nothing is open below. */
static int64_t
no_below (struct context *c, const char *cb)
{
  nbdkit_error ("filter %s has no %s and did not open the layer below",
                c->layer->name, cb);
  return -1;
}

static const char *
filter_export_description (struct context *c)
{
  struct nbdkit_filter *f = F (c->layer);
  if (f->export_description)
    return f->export_description (below (c), c->handle);
  return c->below ? layer_export_description (c->below) : NULL;
}

static int
filter_block_size (struct context *c, uint32_t *minimum, uint32_t *preferred,
                   uint32_t *maximum)
{
  struct nbdkit_filter *f = F (c->layer);
  if (f->block_size)
    return f->block_size (below (c), c->handle, minimum, preferred, maximum);
  if (!c->below)
    return 0;                   /* no constraints */
  return layer_block_size (c->below, minimum, preferred, maximum);
}

/* The questions: the filter's answer, or else the layer below's. */
#define X(name, type, kind)                                             \
  static type                                                           \
  filter_##name (struct context *c)                                     \
  {                                                                     \
    struct nbdkit_filter *f = F (c->layer);                             \
    if (f->name)                                                        \
      return f->name (below (c), c->handle);                            \
    if (!c->below)                                                      \
      return no_below (c, #name);                                       \
    return layer_##name (c->below);                                     \
  }
LAYER_QUERIES (X)
#undef X

/* The data calls: the filter's callback, or else straight through. */
#define X(name, params, args)                                           \
  static int                                                            \
  filter_##name (struct context *c, LAYER_UNPAREN params)               \
  {                                                                     \
    struct nbdkit_filter *f = F (c->layer);                             \
    if (f->name)                                                        \
      return f->name (below (c), c->handle, LAYER_UNPAREN args);        \
    if (!c->below) {                                                    \
      no_below (c, #name);                                              \
      *err = EIO;                                                       \
      return -1;                                                        \
    }                                                                   \
    return layer_##name (c->below, LAYER_UNPAREN args);                 \
  }
LAYER_DATA_CALLS (X)
#undef X

/* The zero-copy paths (common/zerocopy.h) through a filter that leaves
 * the data alone: one with no pread (and no get_size) of its own hands
 * reads straight to the layer below, so map_read and read_fd pass
 * through it too; one with no pwrite (and no get_size or can_write),
 * map_write.  nozero, nocache, fua, limit, ip and the like then cost a
 * plugin's zero-copy nothing; a filter that reads or writes the data
 * itself (shifts it, caches it, logs it) keeps the copy it needs.
 */
static bool
passes_reads (struct context *c)
{
  const struct nbdkit_filter *f = F (c->layer);
  return !f->pread && !f->get_size && c->below;
}

static bool
passes_writes (struct context *c)
{
  const struct nbdkit_filter *f = F (c->layer);
  return !f->pwrite && !f->get_size && !f->can_write && c->below;
}

static bool
filter_has_map_read (struct context *c)
{
  return passes_reads (c) && layer_has_map_read (c->below);
}

static int
filter_map_read (struct context *c, uint32_t count, uint64_t offset,
                 struct iovec *iov, int *niov, int *err)
{
  return layer_map_read (c->below, count, offset, iov, niov, err);
}

static void
filter_unmap_read (struct context *c)
{
  layer_unmap_read (c->below);
}

static bool
filter_has_map_write (struct context *c)
{
  return passes_writes (c) && layer_has_map_write (c->below);
}

static int
filter_map_write (struct context *c, uint32_t count, uint64_t offset,
                  struct iovec *iov, int *niov)
{
  return layer_map_write (c->below, count, offset, iov, niov);
}

static int
filter_unmap_write (struct context *c, uint32_t count, uint64_t offset,
                    const struct iovec *iov, int keep, int *err)
{
  return layer_unmap_write (c->below, count, offset, iov, keep, err);
}

static bool
filter_has_read_fd (struct context *c)
{
  return passes_reads (c) && layer_has_read_fd (c->below);
}

static int
filter_read_fd (struct context *c, uint32_t count, uint64_t offset,
                int *fd, uint64_t *fd_offset, int *err)
{
  return layer_read_fd (c->below, count, offset, fd, fd_offset, err);
}

/* Asynchronous requests (include/nbdkit-async.h) through a filter:
 * all of them with a prepare callback; otherwise each command the
 * filter has nothing to do with, which it would pass through
 * untouched on the synchronous path as well: no callback of its own
 * for the call, nor for the size or the capabilities that bear on it.
 */
static unsigned
filter_async_passes (struct context *c)
{
  const struct nbdkit_async_filter_ops *a = async_filter_ops (c->layer);
  const struct nbdkit_filter *f = F (c->layer);
  if (a && a->prepare)
    return (1u << LAYER_ASYNC_PREAD) | (1u << LAYER_ASYNC_PWRITE) |
      (1u << LAYER_ASYNC_FLUSH) | (1u << LAYER_ASYNC_TRIM) |
      (1u << LAYER_ASYNC_ZERO);
  if (f->get_size)
    return 0;
  unsigned m = 0;
  bool writes = !f->can_write && !f->can_fua;
  if (!f->pread)
    m |= 1u << LAYER_ASYNC_PREAD;
  if (writes && !f->pwrite)
    m |= 1u << LAYER_ASYNC_PWRITE;
  if (!f->flush && !f->can_flush)
    m |= 1u << LAYER_ASYNC_FLUSH;
  if (writes && !f->trim && !f->can_trim)
    m |= 1u << LAYER_ASYNC_TRIM;
  if (writes && !f->zero && !f->can_zero && !f->can_fast_zero)
    m |= 1u << LAYER_ASYNC_ZERO;
  return m;
}

static int
filter_async_prepare (struct context *c, enum layer_async_cmd cmd,
                      uint32_t *count, uint64_t *offset, uint32_t *flags,
                      int *err)
{
  const struct nbdkit_async_filter_ops *a = async_filter_ops (c->layer);
  if (!a || !a->prepare)
    return NBDKIT_ASYNC_PASS;   /* untouched (filter_async_passes) */
  return a->prepare (below (c), c->handle, cmd, count, offset, flags, err);
}

static const struct layer_ops filter_ops = {
  .unload = filter_unload,
  .usage = filter_usage,
  .dump_fields = filter_dump_fields,
  .config = filter_config,
  .config_complete = filter_config_complete,
  .magic_config_key = filter_magic_config_key,
  .thread_model = filter_thread_model,
  .get_ready = filter_get_ready,
  .after_fork = filter_after_fork,
  .cleanup = filter_cleanup,
  .preconnect = filter_preconnect,
  .list_exports = filter_list_exports,
  .default_export = filter_default_export,
  .open = filter_open,
  .prepare = filter_prepare,
  .finalize = filter_finalize,
  .close = filter_close,
  .export_description = filter_export_description,
  .block_size = filter_block_size,
#define X(name, ...) .name = filter_##name,
  LAYER_QUERIES (X)
  LAYER_DATA_CALLS (X)
#undef X
  .has_map_read = filter_has_map_read,
  .map_read = filter_map_read,
  .unmap_read = filter_unmap_read,
  .has_map_write = filter_has_map_write,
  .map_write = filter_map_write,
  .unmap_write = filter_unmap_write,
  .has_read_fd = filter_has_read_fd,
  .read_fd = filter_read_fd,
  .async_passes = filter_async_passes,
  .async_prepare = filter_async_prepare,
};

/* The filter struct has no size field and may grow between nbdkit
 * releases, so a filter is loaded only if it was built against the
 * headers of a release series whose filter struct we implement: filter
 * API 6 and a _version of MAJOR.MINOR.anything (the micro version only
 * fixes bugs), the series being 1.32 (Debian 12's prebuilt filters)
 * and the one this server reports (its own filters, built against its
 * headers, whose struct is 1.32's).
 */
static bool
in_series (const char *version, int major, int minor)
{
  char series[32];
  int n = snprintf (series, sizeof series, "%d.%d.", major, minor);
  if (n < 0 || (size_t) n >= sizeof series ||
      strncmp (version, series, n) != 0)
    return false;
  const char *micro = version + n;
  if (!*micro)
    return false;
  for (const char *p = micro; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  return true;
}

static bool
abi_matches (const struct nbdkit_filter *f)
{
  if (f->_api_version != NBDKIT_FILTER_API_VERSION || !f->_version)
    return false;
  return in_series (f->_version, 1, 32) ||
    in_series (f->_version, NBDKIT_VERSION_MAJOR, NBDKIT_VERSION_MINOR);
}

struct layer *
filter_load (const char *name, struct layer *next)
{
  bool by_path;
  struct layer *l = calloc (1, sizeof *l);
  if (!l) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  l->ops = &filter_ops;
  l->type = "filter";
  /* Until it has a name, what goes wrong is the server's to say. */
  log_set_layer_name (NULL);
  l->next = next;
  l->filename = layer_find_so ("filter", name, &by_path);
  if (!l->filename)
    goto err;
  l->dl = layer_dlopen (l->filename);
  if (!l->dl) {
    nbdkit_error ("cannot open filter \"%s\": %s", name, dlerror ());
    goto err;
  }
  struct nbdkit_filter *(*init) (void) = dlsym (l->dl, "filter_init");
  if (!init) {
    nbdkit_error ("%s: not an nbdkit filter (no filter_init)", l->filename);
    goto err;
  }
  resident_object ((const void *) init);
  struct nbdkit_filter *src = init ();
  if (!src) {
    nbdkit_error ("%s: filter_init returned NULL", l->filename);
    goto err;
  }
  if (!abi_matches (src)) {
    nbdkit_error ("%s: filter was built for nbdkit %s (filter API %d), "
                  "this server implements the filter ABI of nbdkit 1.32.x "
                  "and %d.%d.x (filter API %d): rebuild the filter against "
                  "it", l->filename,
                  src->_version ? src->_version : "unknown",
                  src->_api_version, NBDKIT_VERSION_MAJOR,
                  NBDKIT_VERSION_MINOR, NBDKIT_FILTER_API_VERSION);
    goto err;
  }
  if (!src->name) {
    nbdkit_error ("%s: filter has no name", l->filename);
    goto err;
  }
  struct filter_priv *fp = calloc (1, sizeof *fp);
  l->priv = fp;
  l->name = strdup (src->name);
  if (!l->priv || !l->name) {
    nbdkit_error ("malloc: %m");
    goto err;
  }
  memcpy (&fp->f, src, sizeof *src);
  /* Asynchronous pass-through: a version this server knows, or none. */
  const struct nbdkit_async_filter_ops *ao =
    dlsym (l->dl, "nbdkit_async_filter_ops");
  if (ao && ao->version >= 1 && ao->version <= NBDKIT_ASYNC_VERSION)
    fp->async = ao;
  else if (ao)
    nbdkit_debug ("%s: nbdkit_async_filter_ops version %" PRIu32 " is not "
                  "supported: requests take the synchronous path",
                  l->filename, ao->version);
  log_set_layer_name (l->name);
  if (src->load)
    src->load ();
  /* A filter's model is known only after config (-1) unless it has no
   * thread_model callback, which means parallel.
   */
  NBDKIT_FILTER_LOAD (l->name, l->filename, (int64_t) src->_api_version,
                      (int64_t) (src->thread_model ? -1
                                 : NBDKIT_THREAD_MODEL_PARALLEL));
  return l;

 err:
  if (l->dl)
    dlclose (l->dl);
  free (l->priv);
  free (l->name);
  free (l->filename);
  free (l);
  return NULL;
}
