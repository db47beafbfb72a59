/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: loading a plugin .so and adapting its callbacks to the
 * layer interface.  The plugin's struct is read only up to its
 * _struct_size (older plugins have fewer fields), API version 1 and 2
 * callbacks are both accepted, and what a plugin leaves out gets the
 * default the protocol expects (no trim, emulated FUA and zero, ...).
 * The emulation itself (zero, FUA, cache, block status) happens at the
 * layer boundary in backend.c, which serves filters the same way.
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "zerocopy.h"
#include "nbdkit-async.h"

/* The plugin's struct as the plugin filled it in, and the version 1
 * view of the same memory (the data callbacks live at other offsets).
 */
struct plugin_priv {
  struct nbdkit_plugin p;
  /* Version 1 data callbacks, from the _pread_v1 ... _zero_v1 slots. */
  int (*pread_v1) (void *, void *, uint32_t, uint64_t);
  int (*pwrite_v1) (void *, const void *, uint32_t, uint64_t);
  int (*flush_v1) (void *);
  int (*trim_v1) (void *, uint32_t, uint64_t);
  int (*zero_v1) (void *, uint32_t, uint64_t, int);
  const struct nbdkit_zerocopy_ops *zc; /* or NULL */
  const struct nbdkit_async_ops *async; /* or NULL */
};

static struct nbdkit_plugin *
P (struct layer *l)
{
  return &((struct plugin_priv *) l->priv)->p;
}

static struct plugin_priv *
PP (struct context *c)
{
  return c->layer->priv;
}

/* Turn a failed plugin call into an errno. */
static int
plugin_errno (struct context *c, int saved_errno)
{
  int e = public_take_error ();
  if (e == 0 && PP (c)->p.errno_is_preserved)
    e = saved_errno;
  return e ? e : EIO;
}

#define CALL_FAILED(c, err) \
  do { int e_ = errno; *(err) = plugin_errno ((c), e_); } while (0)

/* ---- the layer operations ---- */

static void
plugin_unload (struct layer *l)
{
  if (P (l)->unload)
    P (l)->unload ();
  free (l->priv);
}

static void
plugin_usage (struct layer *l)
{
  struct nbdkit_plugin *p = P (l);
  printf ("%s", p->name);
  if (p->longname)
    printf (" (%s)", p->longname);
  printf ("\n%s", l->filename);
  if (p->description)
    printf ("\n%s", p->description);
  printf ("\n");
  if (p->config_help)
    printf ("%s\n", p->config_help);
}

const char *
layer_thread_model_name (int m)
{
  switch (m) {
  case NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS:
    return "serialize_connections";
  case NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS:
    return "serialize_all_requests";
  case NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS:
    return "serialize_requests";
  case NBDKIT_THREAD_MODEL_PARALLEL:
    return "parallel";
  default:
    return "unknown";
  }
}

static int plugin_thread_model (struct layer *l);

static void
plugin_dump_fields (struct layer *l)
{
  struct nbdkit_plugin *p = P (l);
  struct plugin_priv *pp = l->priv;
  char *path = realpath (l->filename, NULL);

  printf ("path=%s\n", path ? path : l->filename);
  free (path);
  printf ("name=%s\n", p->name);
  if (p->version)
    printf ("version=%s\n", p->version);
  printf ("api_version=%d\n", p->_api_version);
  printf ("struct_size=%" PRIu64 "\n", p->_struct_size);
  printf ("max_thread_model=%s\n",
          layer_thread_model_name (p->_thread_model));
  /* The model the server will use: the weakest of every layer's, as
   * filters such as noparallel lower it (nbdkit prints the same).
   */
  int model = plugin_thread_model (l);
  const struct config *cfg = server_config ();
  for (struct layer *f = cfg ? cfg->top : NULL; f && f != l; f = f->next) {
    int m = f->ops->thread_model (f);
    if (m >= 0 && m < model)
      model = m;
  }
  printf ("thread_model=%s\n", layer_thread_model_name (model));
  printf ("errno_is_preserved=%d\n", !!p->errno_is_preserved);
  if (p->magic_config_key)
    printf ("magic_config_key=%s\n", p->magic_config_key);

#define HAS(field) if (p->field) printf ("has_%s=1\n", #field)
#define HAS_V(field)                                                    \
  if (p->_api_version == 1 ? (pp->field##_v1 != NULL) : (p->field != NULL)) \
    printf ("has_%s=1\n", #field)
  /* In nbdkit's order (longname and description are not listed). */
  HAS (load); HAS (unload); HAS (dump_plugin);
  HAS (config); HAS (config_complete); HAS (config_help);
  HAS (thread_model); HAS (get_ready); HAS (after_fork); HAS (cleanup);
  HAS (preconnect); HAS (list_exports); HAS (default_export);
  HAS (open); HAS (close); HAS (export_description); HAS (get_size);
  HAS (block_size); HAS (can_write); HAS (can_flush);
  HAS (is_rotational); HAS (can_trim); HAS (can_zero);
  HAS (can_fast_zero); HAS (can_extents); HAS (can_fua);
  HAS (can_multi_conn); HAS (can_cache);
  HAS_V (pread); HAS_V (pwrite); HAS_V (flush); HAS_V (trim); HAS_V (zero);
  HAS (extents); HAS (cache);
#undef HAS
#undef HAS_V

  if (p->dump_plugin) {
    fflush (stdout);
    p->dump_plugin ();
  }
}

static int
plugin_config (struct layer *l, const char *key, const char *value)
{
  struct nbdkit_plugin *p = P (l);
  if (!p->config) {
    nbdkit_error ("plugin %s does not take parameters, got %s=%s",
                  l->name, key, value);
    return -1;
  }
  return p->config (key, value);
}

static int
plugin_config_complete (struct layer *l)
{
  return P (l)->config_complete ? P (l)->config_complete () : 0;
}

static const char *
plugin_magic_config_key (struct layer *l)
{
  return P (l)->magic_config_key;
}

static int
plugin_thread_model (struct layer *l)
{
  struct nbdkit_plugin *p = P (l);
  int m = p->_thread_model;
  if (p->thread_model) {
    int r = p->thread_model ();
    if (r == -1)
      return -1;
    if (r < m)
      m = r;
  }
  return m;
}

static int
plugin_get_ready (struct layer *l, int thread_model)
{
  return P (l)->get_ready ? P (l)->get_ready () : 0;
}

static int
plugin_after_fork (struct layer *l)
{
  return P (l)->after_fork ? P (l)->after_fork () : 0;
}

static void
plugin_cleanup (struct layer *l)
{
  if (P (l)->cleanup)
    P (l)->cleanup ();
}

static int
plugin_preconnect (struct layer *l, int readonly)
{
  return P (l)->preconnect ? P (l)->preconnect (readonly) : 0;
}

static const char *
plugin_default_export (struct layer *l, int readonly, int is_tls)
{
  return P (l)->default_export ? P (l)->default_export (readonly, is_tls)
                               : "";
}

static int
plugin_list_exports (struct layer *l, int readonly, int is_tls,
                     struct nbdkit_exports *exports)
{
  if (P (l)->list_exports)
    return P (l)->list_exports (readonly, is_tls, exports);
  return nbdkit_use_default_export (exports);
}

static int
plugin_open (struct context *c, int readonly, const char *exportname,
             int is_tls)
{
  c->handle = P (c->layer)->open (readonly);
  return c->handle ? 0 : -1;
}

static int
plugin_prepare (struct context *c, int readonly)
{
  return 0;
}

static int
plugin_finalize (struct context *c)
{
  return 0;
}

static void
plugin_close (struct context *c)
{
  if (P (c->layer)->close)
    P (c->layer)->close (c->handle);
}

static int64_t
plugin_get_size (struct context *c)
{
  return P (c->layer)->get_size (c->handle);
}

static const char *
plugin_export_description (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->export_description ? p->export_description (c->handle) : NULL;
}

static int
plugin_block_size (struct context *c, uint32_t *minimum, uint32_t *preferred,
                   uint32_t *maximum)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->block_size ? p->block_size (c->handle, minimum, preferred,
                                        maximum) : 0;
}

static bool
has_pwrite (struct context *c)
{
  return PP (c)->p._api_version == 1 ? PP (c)->pwrite_v1 != NULL
                                     : PP (c)->p.pwrite != NULL;
}

static bool
has_flush (struct context *c)
{
  return PP (c)->p._api_version == 1 ? PP (c)->flush_v1 != NULL
                                     : PP (c)->p.flush != NULL;
}

static bool
has_trim (struct context *c)
{
  return PP (c)->p._api_version == 1 ? PP (c)->trim_v1 != NULL
                                     : PP (c)->p.trim != NULL;
}

static bool
has_zero (struct context *c)
{
  return PP (c)->p._api_version == 1 ? PP (c)->zero_v1 != NULL
                                     : PP (c)->p.zero != NULL;
}

static int
plugin_can_write (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->can_write ? p->can_write (c->handle) : has_pwrite (c);
}

static int
plugin_can_flush (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->can_flush ? p->can_flush (c->handle) : has_flush (c);
}

static int
plugin_is_rotational (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->is_rotational ? p->is_rotational (c->handle) : 0;
}

static int
plugin_can_trim (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->can_trim ? p->can_trim (c->handle) : has_trim (c);
}

/* Zero is always possible on a writable export: without a native zero
 * callback the server writes zero buffers.
 */
static int
plugin_can_zero (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  if (p->can_zero) {
    int r = p->can_zero (c->handle);
    if (r == -1)
      return -1;
    /* A plugin saying no to native zero still gets emulation. */
    return r ? NBDKIT_ZERO_NATIVE : NBDKIT_ZERO_EMULATE;
  }
  return has_zero (c) ? NBDKIT_ZERO_NATIVE : NBDKIT_ZERO_EMULATE;
}

static int
plugin_can_fast_zero (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  if (p->can_fast_zero)
    return p->can_fast_zero (c->handle);
  /* Emulated zeroing fails fast with ENOTSUP, so it is "fast". */
  return !has_zero (c) || plugin_can_zero (c) == NBDKIT_ZERO_EMULATE;
}

static int
plugin_can_extents (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->can_extents ? p->can_extents (c->handle) : p->extents != NULL;
}

static int
plugin_can_fua (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  /* Version 1 plugins have no flags: FUA is always emulated. */
  if (p->can_fua && p->_api_version >= 2)
    return p->can_fua (c->handle);
  return plugin_can_flush (c) == 1 ? NBDKIT_FUA_EMULATE : NBDKIT_FUA_NONE;
}

static int
plugin_can_multi_conn (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  return p->can_multi_conn ? p->can_multi_conn (c->handle) : 0;
}

static int
plugin_can_cache (struct context *c)
{
  struct nbdkit_plugin *p = P (c->layer);
  if (p->can_cache)
    return p->can_cache (c->handle);
  return p->cache ? NBDKIT_CACHE_NATIVE : NBDKIT_CACHE_NONE;
}

static bool
plugin_has_map_read (struct context *c)
{
  const struct nbdkit_zerocopy_ops *zc = PP (c)->zc;
  return zc != NULL && zc->map_read && zc->unmap_read;
}

static int
plugin_map_read (struct context *c, uint32_t count, uint64_t offset,
                 struct iovec *iov, int *niov, int *err)
{
  int r = PP (c)->zc->map_read (c->handle, count, offset, iov, niov);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static void
plugin_unmap_read (struct context *c)
{
  PP (c)->zc->unmap_read (c->handle);
}

static bool
plugin_has_map_write (struct context *c)
{
  const struct nbdkit_zerocopy_ops *zc = PP (c)->zc;
  return zc != NULL && zc->version >= 2 && zc->map_write && zc->unmap_write;
}

static int
plugin_map_write (struct context *c, uint32_t count, uint64_t offset,
                  struct iovec *iov, int *niov)
{
  return PP (c)->zc->map_write (c->handle, count, offset, iov, niov);
}

static int
plugin_unmap_write (struct context *c, uint32_t count, uint64_t offset,
                    const struct iovec *iov, int keep, int *err)
{
  int r = PP (c)->zc->unmap_write (c->handle, count, offset, iov, keep);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static bool
plugin_has_read_fd (struct context *c)
{
  const struct nbdkit_zerocopy_ops *zc = PP (c)->zc;
  return zc != NULL && zc->version >= 3 && zc->read_fd;
}

static int
plugin_read_fd (struct context *c, uint32_t count, uint64_t offset,
                int *fd, uint64_t *fd_offset, int *err)
{
  int r = PP (c)->zc->read_fd (c->handle, count, offset, fd, fd_offset);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static const struct nbdkit_async_ops *
plugin_async_ops (struct context *c)
{
  return PP (c)->async;
}

static int
plugin_async_submit (struct context *c, struct nbdkit_async_request *req,
                     enum layer_async_cmd cmd, void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags, int *err)
{
  const struct nbdkit_async_ops *a = PP (c)->async;
  int r = -1;
  switch (cmd) {
  case LAYER_ASYNC_PREAD:
    r = a->pread (c->handle, req, buf, count, offset, flags);
    break;
  case LAYER_ASYNC_PWRITE:
    r = a->pwrite (c->handle, req, buf, count, offset, flags);
    break;
  case LAYER_ASYNC_FLUSH:
    r = a->flush (c->handle, req, flags);
    break;
  case LAYER_ASYNC_TRIM:
    r = a->trim (c->handle, req, count, offset, flags);
    break;
  case LAYER_ASYNC_ZERO:
    r = a->zero (c->handle, req, count, offset, flags);
    break;
  }
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static void
plugin_async_cancel (struct context *c)
{
  if (PP (c)->async->cancel)
    PP (c)->async->cancel (c->handle);
}

static int
plugin_pread (struct context *c, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  struct plugin_priv *pp = PP (c);
  int r = pp->p._api_version == 1
    ? pp->pread_v1 (c->handle, buf, count, offset)
    : pp->p.pread (c->handle, buf, count, offset, 0);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static int
plugin_flush (struct context *c, uint32_t flags, int *err)
{
  struct plugin_priv *pp = PP (c);
  int r;
  if (pp->p._api_version == 1)
    r = pp->flush_v1 ? pp->flush_v1 (c->handle) : (errno = EINVAL, -1);
  else
    r = pp->p.flush ? pp->p.flush (c->handle, 0) : (errno = EINVAL, -1);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

/* The boundary passes FUA only to a plugin that does it natively. */
static int
plugin_pwrite (struct context *c, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct plugin_priv *pp = PP (c);
  int r = pp->p._api_version == 1
    ? pp->pwrite_v1 (c->handle, buf, count, offset)
    : pp->p.pwrite (c->handle, buf, count, offset, flags);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static int
plugin_trim (struct context *c, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  struct plugin_priv *pp = PP (c);
  if (!has_trim (c))
    return 0;                   /* trim is advisory */
  int r = pp->p._api_version == 1
    ? pp->trim_v1 (c->handle, count, offset)
    : pp->p.trim (c->handle, count, offset, flags);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

/* Native zero only: failing with ENOTSUP makes the boundary write
 * zeroes instead (unless the client asked for a fast zero).
 */
static int
plugin_zero (struct context *c, uint32_t count, uint64_t offset,
             uint32_t flags, int *err)
{
  struct plugin_priv *pp = PP (c);
  bool fast = flags & NBDKIT_FLAG_FAST_ZERO;
  int r;

  if (!has_zero (c) || (pp->p._api_version == 1 && fast)) {
    *err = ENOTSUP;
    return -1;
  }
  errno = 0;
  if (pp->p._api_version == 1)
    r = pp->zero_v1 (c->handle, count, offset,
                     !!(flags & NBDKIT_FLAG_MAY_TRIM));
  else
    r = pp->p.zero (c->handle, count, offset, flags);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static int
plugin_extents (struct context *c, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  struct nbdkit_plugin *p = P (c->layer);
  if (!p->extents) {
    /* can_extents said yes without an extents callback: all data. */
    if (nbdkit_add_extent (extents, offset, count, 0) == -1) {
      *err = errno ? errno : EIO;
      return -1;
    }
    return 0;
  }
  int r = p->extents (c->handle, count, offset, flags, extents);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static int
plugin_cache (struct context *c, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  struct nbdkit_plugin *p = P (c->layer);
  if (!p->cache)
    return 0;                   /* can_cache said native without one */
  int r = p->cache (c->handle, count, offset, flags);
  if (r == -1)
    CALL_FAILED (c, err);
  return r;
}

static const struct layer_ops plugin_ops = {
  .unload = plugin_unload,
  .usage = plugin_usage,
  .dump_fields = plugin_dump_fields,
  .config = plugin_config,
  .config_complete = plugin_config_complete,
  .magic_config_key = plugin_magic_config_key,
  .thread_model = plugin_thread_model,
  .get_ready = plugin_get_ready,
  .after_fork = plugin_after_fork,
  .cleanup = plugin_cleanup,
  .preconnect = plugin_preconnect,
  .list_exports = plugin_list_exports,
  .default_export = plugin_default_export,
  .open = plugin_open,
  .prepare = plugin_prepare,
  .finalize = plugin_finalize,
  .close = plugin_close,
  .export_description = plugin_export_description,
  .block_size = plugin_block_size,
#define X(name, ...) .name = plugin_##name,
  LAYER_QUERIES (X)
  LAYER_DATA_CALLS (X)
#undef X
  .has_map_read = plugin_has_map_read,
  .map_read = plugin_map_read,
  .unmap_read = plugin_unmap_read,
  .has_map_write = plugin_has_map_write,
  .map_write = plugin_map_write,
  .unmap_write = plugin_unmap_write,
  .has_read_fd = plugin_has_read_fd,
  .read_fd = plugin_read_fd,
  .async_ops = plugin_async_ops,
  .async_submit = plugin_async_submit,
  .async_cancel = plugin_async_cancel,
};

/* ---- loading ---- */

struct layer *
plugin_load (const char *name, bool by_path)
{
  struct layer *l = calloc (1, sizeof *l);
  struct plugin_priv *pp = calloc (1, sizeof *pp);
  if (!l || !pp) {
    nbdkit_error ("calloc: %m");
    goto err;
  }
  l->ops = &plugin_ops;
  l->type = "plugin";
  l->priv = pp;
  l->filename = layer_find_so ("plugin", name, &by_path);
  if (!l->filename)
    goto err;

  l->dl = layer_dlopen (l->filename);
  if (!l->dl) {
    nbdkit_error ("cannot open plugin \"%s\": %s", name, dlerror ());
    goto err;
  }
  struct nbdkit_plugin *(*init) (void) = dlsym (l->dl, "plugin_init");
  if (!init) {
    nbdkit_error ("%s: not an nbdkit plugin (no plugin_init)", l->filename);
    goto err;
  }
  resident_object ((const void *) init);
  struct nbdkit_plugin *src = init ();
  if (!src) {
    nbdkit_error ("%s: plugin_init returned NULL", l->filename);
    goto err;
  }
  if (src->_api_version < 1 || src->_api_version > 2) {
    nbdkit_error ("%s: plugin API version %d is not supported",
                  l->filename, src->_api_version);
    goto err;
  }
  if (src->_struct_size < offsetof (struct nbdkit_plugin, errno_is_preserved)) {
    nbdkit_error ("%s: plugin struct is too small", l->filename);
    goto err;
  }
  /* Copy what the plugin has; fields past its size stay NULL. */
  size_t size = src->_struct_size < sizeof pp->p ? src->_struct_size
                                                 : sizeof pp->p;
  memcpy (&pp->p, src, size);
  pp->pread_v1 = pp->p._pread_v1;
  pp->pwrite_v1 = pp->p._pwrite_v1;
  pp->flush_v1 = pp->p._flush_v1;
  pp->trim_v1 = pp->p._trim_v1;
  pp->zero_v1 = pp->p._zero_v1;
  const struct nbdkit_zerocopy_ops *zc = dlsym (l->dl, "nbdkit_zerocopy_ops");
  if (zc && zc->version >= 1 && zc->version <= NBDKIT_ZEROCOPY_VERSION)
    pp->zc = zc;
  /* Asynchronous requests (include/nbdkit-async.h): a version this
   * server knows, or none at all.
   */
  const struct nbdkit_async_ops *ao = dlsym (l->dl, "nbdkit_async_ops");
  if (ao && ao->version >= 1 && ao->version <= NBDKIT_ASYNC_VERSION)
    pp->async = ao;
  else if (ao)
    nbdkit_debug ("%s: nbdkit_async_ops version %" PRIu32 " is not "
                  "supported: the plugin is called synchronously",
                  l->filename, ao->version);
  if (pp->p._api_version == 1) {
    /* The version 2 slots hold version 1 padding: ignore them. */
    pp->p.pread = NULL;
    pp->p.pwrite = NULL;
    pp->p.flush = NULL;
    pp->p.trim = NULL;
    pp->p.zero = NULL;
  }

  struct nbdkit_plugin *p = &pp->p;
  if (!p->name || !layer_valid_name (p->name)) {
    nbdkit_error ("%s: plugin has a missing or invalid name", l->filename);
    goto err;
  }
  if (!p->open || !p->get_size ||
      (p->_api_version == 1 ? !pp->pread_v1 : !p->pread)) {
    nbdkit_error ("%s: plugin %s must have open, get_size and pread",
                  l->filename, p->name);
    goto err;
  }
  l->name = strdup (p->name);
  if (!l->name) {
    nbdkit_error ("strdup: %m");
    goto err;
  }
  log_set_layer_name (l->name);
  if (p->load)
    p->load ();
  /* The declared model: thread_model() may only be asked after config. */
  NBDKIT_PLUGIN_LOAD (l->name, l->filename, (int64_t) p->_api_version,
                      (int64_t) p->_thread_model);
  return l;

 err:
  if (l && l->dl)
    dlclose (l->dl);
  if (l)
    free (l->filename);
  free (l);
  free (pp);
  return NULL;
}
