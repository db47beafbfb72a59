/* nbdkit server: loading a filter .so and adapting its callbacks to the
 * layer interface.  A callback the filter leaves out passes straight
 * through to the layer below.  Filters see the layer below as an
 * nbdkit_next (the context below's next_ops) during requests, and as
 * an nbdkit_backend (the struct layer below) at configuration time.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static struct nbdkit_filter *
F (struct layer *l)
{
  return l->priv;
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

static nbdkit_next *
below (struct context *c)
{
  return &c->below->next_ops;
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

static int
next_list_exports (nbdkit_backend *b, int readonly,
                   struct nbdkit_exports *exports)
{
  return layer_list_exports (from_backend (b), readonly, 0, exports);
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
  return layer_default_export (from_backend (b), readonly, 0);
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
  log_set_layer_name (c->layer->name);
  return c->below ? 0 : -1;
}

static int
filter_open (struct context *c, int readonly, const char *exportname,
             int is_tls)
{
  struct nbdkit_filter *f = F (c->layer);
  opening_tls = is_tls;
  if (f->open) {
    c->handle = f->open (next_open, (nbdkit_context *) c, readonly,
                         exportname, is_tls);
    if (!c->handle)
      return -1;
  }
  else {
    if (next_open ((nbdkit_context *) c, readonly, exportname) == -1)
      return -1;
    c->handle = NBDKIT_HANDLE_NOT_NEEDED;
  }
  if (!c->below) {
    nbdkit_error ("filter %s did not open the next layer", c->layer->name);
    if (f->close)
      f->close (c->handle);
    return -1;
  }
  return 0;
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

static int64_t
filter_get_size (struct context *c)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->get_size ? f->get_size (below (c), c->handle)
                     : layer_get_size (c->below);
}

static const char *
filter_export_description (struct context *c)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->export_description
    ? f->export_description (below (c), c->handle)
    : layer_export_description (c->below);
}

static int
filter_block_size (struct context *c, uint32_t *minimum, uint32_t *preferred,
                   uint32_t *maximum)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->block_size
    ? f->block_size (below (c), c->handle, minimum, preferred, maximum)
    : layer_block_size (c->below, minimum, preferred, maximum);
}

#define DEFINE_FILTER_CAN(fn)                                           \
  static int                                                            \
  filter_##fn (struct context *c)                                       \
  {                                                                     \
    struct nbdkit_filter *f = F (c->layer);                             \
    return f->fn ? f->fn (below (c), c->handle) : layer_##fn (c->below); \
  }
DEFINE_FILTER_CAN (can_write)
DEFINE_FILTER_CAN (can_flush)
DEFINE_FILTER_CAN (is_rotational)
DEFINE_FILTER_CAN (can_trim)
DEFINE_FILTER_CAN (can_zero)
DEFINE_FILTER_CAN (can_fast_zero)
DEFINE_FILTER_CAN (can_extents)
DEFINE_FILTER_CAN (can_fua)
DEFINE_FILTER_CAN (can_multi_conn)
DEFINE_FILTER_CAN (can_cache)

static int
filter_pread (struct context *c, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->pread
    ? f->pread (below (c), c->handle, buf, count, offset, flags, err)
    : layer_pread (c->below, buf, count, offset, flags, err);
}

static int
filter_pwrite (struct context *c, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->pwrite
    ? f->pwrite (below (c), c->handle, buf, count, offset, flags, err)
    : layer_pwrite (c->below, buf, count, offset, flags, err);
}

static int
filter_flush (struct context *c, uint32_t flags, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->flush ? f->flush (below (c), c->handle, flags, err)
                  : layer_flush (c->below, flags, err);
}

static int
filter_trim (struct context *c, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->trim ? f->trim (below (c), c->handle, count, offset, flags, err)
                 : layer_trim (c->below, count, offset, flags, err);
}

static int
filter_zero (struct context *c, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->zero ? f->zero (below (c), c->handle, count, offset, flags, err)
                 : layer_zero (c->below, count, offset, flags, err);
}

static int
filter_extents (struct context *c, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->extents
    ? f->extents (below (c), c->handle, count, offset, flags, extents, err)
    : layer_extents (c->below, count, offset, flags, extents, err);
}

static int
filter_cache (struct context *c, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  struct nbdkit_filter *f = F (c->layer);
  return f->cache
    ? f->cache (below (c), c->handle, count, offset, flags, err)
    : layer_cache (c->below, count, offset, flags, err);
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
  .get_size = filter_get_size,
  .export_description = filter_export_description,
  .block_size = filter_block_size,
  .can_write = filter_can_write,
  .can_flush = filter_can_flush,
  .is_rotational = filter_is_rotational,
  .can_trim = filter_can_trim,
  .can_zero = filter_can_zero,
  .can_fast_zero = filter_can_fast_zero,
  .can_extents = filter_can_extents,
  .can_fua = filter_can_fua,
  .can_multi_conn = filter_can_multi_conn,
  .can_cache = filter_can_cache,
  .pread = filter_pread,
  .pwrite = filter_pwrite,
  .flush = filter_flush,
  .trim = filter_trim,
  .zero = filter_zero,
  .extents = filter_extents,
  .cache = filter_cache,
};

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
  l->next = next;
  l->filename = layer_find_so ("filter", name, &by_path);
  if (!l->filename)
    goto err;
  l->dl = dlopen (l->filename, RTLD_NOW | RTLD_GLOBAL);
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
  if (!src || src->_api_version != NBDKIT_FILTER_API_VERSION ||
      !src->_version || strcmp (src->_version, PACKAGE_VERSION) != 0) {
    nbdkit_error ("%s: filter was built for another server version "
                  "(%s); rebuild it against nbdkit %s", l->filename,
                  src && src->_version ? src->_version : "unknown",
                  PACKAGE_VERSION);
    goto err;
  }
  if (!src->name) {
    nbdkit_error ("%s: filter has no name", l->filename);
    goto err;
  }
  l->priv = malloc (sizeof *src);
  l->name = strdup (src->name);
  if (!l->priv || !l->name) {
    nbdkit_error ("malloc: %m");
    goto err;
  }
  memcpy (l->priv, src, sizeof *src);
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
