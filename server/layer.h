/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: layers.  struct layer (one loaded plugin or filter,
 * chained by ->next), struct context (one layer opened for one
 * connection), and the functions of the files that load them
 * (load.c, plugins.c, filters.c), open them (context.c) and call
 * them (backend.c).
 */
#ifndef NBDKIT_LAYER_H
#define NBDKIT_LAYER_H

#include "runtime.h"

/* ---- layers (backend.c, plugins.c, filters.c) ---- */

#include "layer-ops.h"

struct context;
struct nbdkit_async_ops;
struct nbdkit_async_request;

/* The calls a layer may take asynchronously (include/nbdkit-async.h). */
enum layer_async_cmd {
  LAYER_ASYNC_PREAD,
  LAYER_ASYNC_PWRITE,
  LAYER_ASYNC_FLUSH,
  LAYER_ASYNC_TRIM,
  LAYER_ASYNC_ZERO,
};

/* What every layer can do.  The server calls these through the checked
 * layer_* functions of backend.c and nothing else; plugins.c and
 * filters.c implement them.  Errors from data calls come back as -1
 * with *err set to an errno.
 */
struct layer_ops {
  void (*unload) (struct layer *);
  void (*usage) (struct layer *);
  void (*dump_fields) (struct layer *);
  int (*config) (struct layer *, const char *key, const char *value);
  int (*config_complete) (struct layer *);
  const char *(*magic_config_key) (struct layer *);
  int (*thread_model) (struct layer *);
  int (*get_ready) (struct layer *, int thread_model);
  int (*after_fork) (struct layer *);
  void (*cleanup) (struct layer *);
  int (*preconnect) (struct layer *, int readonly);
  int (*list_exports) (struct layer *, int readonly, int is_tls,
                       struct nbdkit_exports *exports);
  const char *(*default_export) (struct layer *, int readonly, int is_tls);

  /* Per-connection: open fills in c->handle (and, for filters, usually
   * opens the layer below).  Returns -1 on failure.
   */
  int (*open) (struct context *c, int readonly, const char *exportname,
               int is_tls);
  int (*prepare) (struct context *c, int readonly);
  int (*finalize) (struct context *c);
  void (*close) (struct context *c);

  const char *(*export_description) (struct context *c);
  int (*block_size) (struct context *c, uint32_t *minimum,
                     uint32_t *preferred, uint32_t *maximum);
#define X(name, type, kind) type (*name) (struct context *c);
  LAYER_QUERIES (X)
#undef X
#define X(name, params, args) int (*name) (struct context *c, \
                                           LAYER_UNPAREN params);
  LAYER_DATA_CALLS (X)
#undef X

  /* Reads straight from a plugin's memory (common/zerocopy.h): only a
   * plugin that exports nbdkit_zerocopy_ops has them; NULL elsewhere.
   */
  bool (*has_map_read) (struct context *c);
  int (*map_read) (struct context *c, uint32_t count, uint64_t offset,
                   struct iovec *iov, int *niov, int *err);
  void (*unmap_read) (struct context *c);
  /* Write payloads received straight into its memory (version 2). */
  bool (*has_map_write) (struct context *c);
  int (*map_write) (struct context *c, uint32_t count, uint64_t offset,
                    struct iovec *iov, int *niov);
  int (*unmap_write) (struct context *c, uint32_t count, uint64_t offset,
                      const struct iovec *iov, int keep, int *err);
  /* Reads sent from its file descriptor (version 3). */
  bool (*has_read_fd) (struct context *c);
  int (*read_fd) (struct context *c, uint32_t count, uint64_t offset,
                  int *fd, uint64_t *fd_offset, int *err);

  /* Asynchronous requests (include/nbdkit-async.h): only a plugin that
   * exports nbdkit_async_ops has them; NULL elsewhere, so a stack with
   * a filter on top takes the synchronous path.
   */
  const struct nbdkit_async_ops *(*async_ops) (struct context *c);
  int (*async_submit) (struct context *c, struct nbdkit_async_request *req,
                       enum layer_async_cmd cmd, void *buf, uint32_t count,
                       uint64_t offset, uint32_t flags, int *err);
  void (*async_cancel) (struct context *c);
  /* A filter's part in them: the commands it can pass on to the layer
   * below (a mask of 1 << LAYER_ASYNC_*), and for one request whether
   * it passes it on (1, adjusted for the layer below), wants it to take
   * the synchronous path (0) or fails it (-1).  NULL for a plugin.
   */
  unsigned (*async_passes) (struct context *c);
  int (*async_prepare) (struct context *c, enum layer_async_cmd cmd,
                        uint32_t *count, uint64_t *offset, uint32_t *flags,
                        int *err);
};

struct layer {
  const struct layer_ops *ops;
  struct layer *next;           /* the layer below; NULL for the plugin */
  unsigned depth;               /* 0 = outermost */
  const char *type;             /* "plugin" or "filter" */
  char *name;                   /* short name, e.g. "memory" */
  char *filename;               /* path of the .so */
  void *dl;                     /* dlopen handle */
  void *priv;                   /* struct plugin_priv or filter_priv */
};

/* Where a context is in its life.  Each step is owed only after the
 * one before it succeeded: close only after open, finalize only after
 * prepare, data calls only between prepare and finalize.
 */
enum context_state {
  CTX_NEW,                      /* allocated, open not (yet) successful */
  CTX_OPENED,                   /* open succeeded: close is owed */
  CTX_PREPARED,                 /* prepare succeeded: finalize is owed */
  CTX_FINALIZED,                /* finalize ran (successfully or not) */
};

/* The answers of a layer, asked once per context (layer-ops.h).  -1
 * (or NOT_ASKED for the strings) until asked; read and written with
 * atomics, filled in under answer_lock.
 */
struct layer_answers {
#define X(name, type, kind) type name;
  LAYER_QUERIES (X)
#undef X
  const char *export_description;
  int block_size_known;
  uint32_t block_min, block_pref, block_max;
};

/* A layer opened for one connection (or shared by several, when a
 * filter opens it with nbdkit_next_context_open (..., shared)).
 * next_ops must come first: a filter is handed &context->next_ops as
 * its nbdkit_next, and the server turns it back with container_of.  A
 * filter's own context is what it sees as its nbdkit_context.
 */
struct context {
  struct nbdkit_next_ops next_ops;
  struct layer *layer;
  struct context *below;        /* NULL for the plugin, or a filter that
                                 * did not open the layer below */
  struct connection *conn;      /* NULL for a shared context */
  void *handle;                 /* from the plugin's or filter's open */
  int readonly;                 /* as opened */
  enum context_state state;
  pthread_mutex_t answer_lock;  /* serialises first asks of answers */
  struct layer_answers answers;
};

/* context.c: the lives of contexts */
extern struct context *layer_open (struct connection *conn,
                                   struct layer *layer, int readonly,
                                   const char *exportname, int is_tls);
extern int layer_prepare (struct context *c);
extern int layer_prepare_all (struct context *c, int readonly);
extern int layer_finalize (struct context *c);
extern void layer_close (struct context *c);
extern void layer_close_all (struct context *c);
extern void layer_contain_open_crashes (void);

/* backend.c: the checked calls */
extern const struct nbdkit_next_ops layer_next_ops;
extern void layer_answers_init (struct layer_answers *a);
extern int layer_config (struct layer *l, const char *key, const char *value);
extern int layer_config_complete (struct layer *l);
extern int layer_get_ready (struct layer *l, int thread_model);
extern int layer_after_fork (struct layer *l);
extern int layer_preconnect (struct layer *l, int readonly);
extern int layer_list_exports (struct layer *l, int readonly, int is_tls,
                               struct nbdkit_exports *exports);
extern const char *layer_default_export (struct layer *l, int readonly,
                                         int is_tls);
/* Forget the default exports kept for CONN (at the start of TLS, when
 * is_tls changes, and at the end of the connection).
 */
extern void layer_forget_default_exports (struct connection *conn);
extern const char *layer_export_description (struct context *c);
extern int layer_block_size (struct context *c, uint32_t *minimum,
                             uint32_t *preferred, uint32_t *maximum);
#define X(name, type, kind) extern type layer_##name (struct context *c);
LAYER_QUERIES (X)
#undef X
#define X(name, params, args) \
  extern int layer_##name (struct context *c, LAYER_UNPAREN params);
LAYER_DATA_CALLS (X)
#undef X
extern bool layer_has_map_read (struct context *c);
extern int layer_map_read (struct context *c, uint32_t count, uint64_t offset,
                           struct iovec *iov, int *niov, int *err);
extern void layer_unmap_read (struct context *c);
extern bool layer_has_map_write (struct context *c);
extern int layer_map_write (struct context *c, uint32_t count,
                            uint64_t offset, struct iovec *iov, int *niov);
extern int layer_unmap_write (struct context *c, uint32_t count,
                              uint64_t offset, const struct iovec *iov,
                              int keep, int *err);
extern bool layer_has_read_fd (struct context *c);
extern int layer_read_fd (struct context *c, uint32_t count, uint64_t offset,
                          int *fd, uint64_t *fd_offset, int *err);
extern const struct nbdkit_async_ops *layer_async_ops (struct context *c);
extern int layer_async_submit (struct context *c,
                               struct nbdkit_async_request *req,
                               enum layer_async_cmd cmd, void *buf,
                               uint32_t count, uint64_t offset,
                               uint32_t flags, int *err);
extern void layer_async_cancel (struct context *c);
extern unsigned layer_async_passes (struct context *c);
extern int layer_async_prepare (struct context *c, enum layer_async_cmd cmd,
                                uint32_t *count, uint64_t *offset,
                                uint32_t *flags, int *err);
extern void layer_async_trace_start (struct context *c,
                                     enum layer_async_cmd cmd,
                                     uint64_t offset, uint32_t count);
extern void layer_async_trace_done (struct context *c,
                                    enum layer_async_cmd cmd, int err);

/* resident.c */
extern void resident_object (const void *addr);
extern void resident_all (const struct layer *top);

/* plugins.c, filters.c */
extern struct layer *plugin_load (const char *name, bool by_path);
extern const char *layer_thread_model_name (int model);
extern struct layer *filter_load (const char *name, struct layer *next);

/* load.c */
extern bool layer_valid_name (const char *name);
extern char *layer_find_so (const char *type, const char *name,
                            bool *by_path);
extern void *layer_dlopen (const char *filename);
extern void layer_unload_all (struct layer *top);
extern int layer_set_debug_flag (struct layer *top, const char *arg);

#endif /* NBDKIT_LAYER_H */
