/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit: the interface a filter implements.
 *
 * A filter sits between the server and the plugin (or the next filter)
 * and sees every callback on its way down.  Each callback receives
 * `next', the layer beneath it for this connection, and calls through
 * next's function pointers to pass a request on.  Unlike the plugin
 * ABI, the filter struct carries the version of the headers it was
 * compiled with: the server loads filters built for the nbdkit release
 * series whose filter ABI it implements (API version 6, release 1.32.x,
 * any micro version) and refuses others.
 */
#ifndef NBDKIT_FILTER_H
#define NBDKIT_FILTER_H

#include <stdlib.h>
#include <nbdkit-common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NBDKIT_FILTER_API_VERSION 6

#define NBDKIT_ZERO_NONE     0
#define NBDKIT_ZERO_EMULATE  1
#define NBDKIT_ZERO_NATIVE   2

typedef struct nbdkit_backend nbdkit_backend;
typedef struct nbdkit_context nbdkit_context;
typedef struct nbdkit_next_ops nbdkit_next;

typedef int nbdkit_next_config (nbdkit_backend *nxdata,
                                const char *key, const char *value);
typedef int nbdkit_next_config_complete (nbdkit_backend *nxdata);
typedef int nbdkit_next_preconnect (nbdkit_backend *nxdata, int readonly);
typedef int nbdkit_next_list_exports (nbdkit_backend *nxdata, int readonly,
                                      struct nbdkit_exports *exports);
typedef const char *nbdkit_next_default_export (nbdkit_backend *nxdata,
                                                int readonly);
typedef int nbdkit_next_open (nbdkit_context *context,
                              int readonly, const char *exportname);

/* The layer below, as a filter sees it.  The server's instances carry
 * private data after these pointers: only use pointers it gives you.
 */
struct nbdkit_next_ops {
  int (*prepare) (nbdkit_next *next);
  int (*finalize) (nbdkit_next *next);

  int64_t (*get_size) (nbdkit_next *next);
  const char * (*export_description) (nbdkit_next *next);
  int (*block_size) (nbdkit_next *next, uint32_t *minimum,
                     uint32_t *preferred, uint32_t *maximum);

  int (*can_write) (nbdkit_next *next);
  int (*can_flush) (nbdkit_next *next);
  int (*is_rotational) (nbdkit_next *next);
  int (*can_trim) (nbdkit_next *next);
  int (*can_zero) (nbdkit_next *next);
  int (*can_fast_zero) (nbdkit_next *next);
  int (*can_extents) (nbdkit_next *next);
  int (*can_fua) (nbdkit_next *next);
  int (*can_multi_conn) (nbdkit_next *next);
  int (*can_cache) (nbdkit_next *next);

  int (*pread) (nbdkit_next *next, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err);
  int (*pwrite) (nbdkit_next *next, const void *buf, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err);
  int (*flush) (nbdkit_next *next, uint32_t flags, int *err);
  int (*trim) (nbdkit_next *next, uint32_t count, uint64_t offset,
               uint32_t flags, int *err);
  int (*zero) (nbdkit_next *next, uint32_t count, uint64_t offset,
               uint32_t flags, int *err);
  int (*extents) (nbdkit_next *next, uint32_t count, uint64_t offset,
                  uint32_t flags, struct nbdkit_extents *extents, int *err);
  int (*cache) (nbdkit_next *next, uint32_t count, uint64_t offset,
                uint32_t flags, int *err);
};

/* Reading and building extent lists. */
struct nbdkit_extent {
  uint64_t offset;
  uint64_t length;
  uint32_t type;
};
NBDKIT_EXTERN_DECL (struct nbdkit_extents *, nbdkit_extents_new,
                    (uint64_t start, uint64_t end));
NBDKIT_EXTERN_DECL (void, nbdkit_extents_free, (struct nbdkit_extents *));
NBDKIT_EXTERN_DECL (size_t, nbdkit_extents_count,
                    (const struct nbdkit_extents *));
NBDKIT_EXTERN_DECL (struct nbdkit_extent, nbdkit_get_extent,
                    (const struct nbdkit_extents *, size_t));
/* Ask next for the extents of the whole range, as many times as it
 * takes; the caller frees the list.  REQ_ONE is dropped from flags.
 */
NBDKIT_EXTERN_DECL (struct nbdkit_extents *, nbdkit_extents_full,
                    (nbdkit_next *next,
                     uint32_t count, uint64_t offset,
                     uint32_t flags, int *err));
/* Add to extents the block status of next over [offset, offset+count)
 * (both multiples of align, a power of 2) in pieces of at least align
 * bytes: where next's extents change inside a piece, the piece gets
 * the flags all of them share.
 */
NBDKIT_EXTERN_DECL (int, nbdkit_extents_aligned,
                    (nbdkit_next *next,
                     uint32_t count, uint64_t offset,
                     uint32_t flags, uint32_t align,
                     struct nbdkit_extents *extents, int *err));

/* Reading and building export lists. */
struct nbdkit_export {
  char *name;
  char *description;
};
NBDKIT_EXTERN_DECL (struct nbdkit_exports *, nbdkit_exports_new, (void));
NBDKIT_EXTERN_DECL (void, nbdkit_exports_free, (struct nbdkit_exports *));
NBDKIT_EXTERN_DECL (size_t, nbdkit_exports_count,
                    (const struct nbdkit_exports *));
NBDKIT_EXTERN_DECL (struct nbdkit_export, nbdkit_get_export,
                    (const struct nbdkit_exports *, size_t));

/* Contexts opened by hand.  A filter's backend (the layer below it,
 * stable from .after_fork to .cleanup) comes from its .open context;
 * from it the filter may open contexts of its own: it must prepare
 * one (next->prepare) before use, and finalize and close it after,
 * unless it hands it to the connection with nbdkit_context_set_next,
 * which returns the next the context had before.  A shared context is
 * not tied to one client and may be opened outside any connection.
 */
NBDKIT_EXTERN_DECL (nbdkit_backend *, nbdkit_context_get_backend,
                    (nbdkit_context *context));
NBDKIT_EXTERN_DECL (nbdkit_next *, nbdkit_next_context_open,
                    (nbdkit_backend *backend, int readonly,
                     const char *exportname, int shared));
NBDKIT_EXTERN_DECL (void, nbdkit_next_context_close, (nbdkit_next *next));
NBDKIT_EXTERN_DECL (nbdkit_next *, nbdkit_context_set_next,
                    (nbdkit_context *context, nbdkit_next *next));

NBDKIT_EXTERN_DECL (void, nbdkit_set_error, (int err));
NBDKIT_EXTERN_DECL (const char *, nbdkit_export_name, (void));
NBDKIT_EXTERN_DECL (int, nbdkit_is_tls, (void));

struct nbdkit_filter {
  /* Filled in by NBDKIT_REGISTER_FILTER. */
  int _api_version;
  const char *_version;

  const char *name;                       /* required */
  const char *longname;
  const char *description;

  void (*load) (void);
  void (*unload) (void);

  int (*config) (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value);
  int (*config_complete) (nbdkit_next_config_complete *next,
                          nbdkit_backend *nxdata);
  const char *config_help;

  int (*thread_model) (void);
  int (*get_ready) (int thread_model);
  int (*after_fork) (nbdkit_backend *backend);
  void (*cleanup) (nbdkit_backend *backend);

  int (*preconnect) (nbdkit_next_preconnect *next, nbdkit_backend *nxdata,
                     int readonly);
  int (*list_exports) (nbdkit_next_list_exports *next,
                       nbdkit_backend *nxdata, int readonly, int is_tls,
                       struct nbdkit_exports *exports);
  const char * (*default_export) (nbdkit_next_default_export *next,
                                  nbdkit_backend *nxdata, int readonly,
                                  int is_tls);
  void * (*open) (nbdkit_next_open *next, nbdkit_context *context,
                  int readonly, const char *exportname, int is_tls);
  void (*close) (void *handle);

  int (*prepare) (nbdkit_next *next, void *handle, int readonly);
  int (*finalize) (nbdkit_next *next, void *handle);

  int64_t (*get_size) (nbdkit_next *next, void *handle);
  const char * (*export_description) (nbdkit_next *next, void *handle);
  int (*block_size) (nbdkit_next *next, void *handle, uint32_t *minimum,
                     uint32_t *preferred, uint32_t *maximum);

  int (*can_write) (nbdkit_next *next, void *handle);
  int (*can_flush) (nbdkit_next *next, void *handle);
  int (*is_rotational) (nbdkit_next *next, void *handle);
  int (*can_trim) (nbdkit_next *next, void *handle);
  int (*can_zero) (nbdkit_next *next, void *handle);
  int (*can_fast_zero) (nbdkit_next *next, void *handle);
  int (*can_extents) (nbdkit_next *next, void *handle);
  int (*can_fua) (nbdkit_next *next, void *handle);
  int (*can_multi_conn) (nbdkit_next *next, void *handle);
  int (*can_cache) (nbdkit_next *next, void *handle);

  int (*pread) (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err);
  int (*pwrite) (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err);
  int (*flush) (nbdkit_next *next, void *handle, uint32_t flags, int *err);
  int (*trim) (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err);
  int (*zero) (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err);
  int (*extents) (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags,
                  struct nbdkit_extents *extents, int *err);
  int (*cache) (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags, int *err);
};

#define NBDKIT_REGISTER_FILTER(filter)                                  \
  NBDKIT_CXX_LANG_C NBDKIT_DLL_PUBLIC struct nbdkit_filter *            \
  filter_init (void)                                                    \
  {                                                                     \
    (filter)._api_version = NBDKIT_FILTER_API_VERSION;                  \
    (filter)._version = NBDKIT_VERSION_STRING;                          \
    return &(filter);                                                   \
  }

#ifdef __cplusplus
}
#endif

#endif /* NBDKIT_FILTER_H */
