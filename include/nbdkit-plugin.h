/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit: the interface a plugin implements.
 *
 * A plugin is a shared object exporting plugin_init(), which returns a
 * pointer to a struct nbdkit_plugin.  The server reads the struct only
 * up to _struct_size, so a plugin built against an older or newer copy
 * of this header still loads.  The layout is a binary interface shared
 * with nbdkit's plugin API versions 1 and 2: fields are only ever added
 * at the end.
 *
 * Define NBDKIT_API_VERSION to 2 before including this header to get
 * the flag-taking data callbacks; the default is 1.
 */
#ifndef NBDKIT_PLUGIN_H
#define NBDKIT_PLUGIN_H

#include <nbdkit-common.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef NBDKIT_API_VERSION
#define NBDKIT_API_VERSION 1
#elif (NBDKIT_API_VERSION - 0) < 1 || NBDKIT_API_VERSION > 2
#error "NBDKIT_API_VERSION must be 1 or 2"
#endif

struct nbdkit_plugin {
  /* Filled in by NBDKIT_REGISTER_PLUGIN. */
  uint64_t _struct_size;
  int _api_version;
  int _thread_model;

  const char *name;                       /* required */
  const char *longname;
  const char *version;
  const char *description;

  void (*load) (void);
  void (*unload) (void);

  int (*config) (const char *key, const char *value);
  int (*config_complete) (void);
  const char *config_help;

  void * (*open) (int readonly);          /* required */
  void (*close) (void *handle);

  int64_t (*get_size) (void *handle);     /* required */

  int (*can_write) (void *handle);
  int (*can_flush) (void *handle);
  int (*is_rotational) (void *handle);
  int (*can_trim) (void *handle);

  /* Version 1 data callbacks, without flags. */
#if NBDKIT_API_VERSION == 1
  int (*pread) (void *handle, void *buf, uint32_t count, uint64_t offset);
  int (*pwrite) (void *handle, const void *buf, uint32_t count,
                 uint64_t offset);
  int (*flush) (void *handle);
  int (*trim) (void *handle, uint32_t count, uint64_t offset);
  int (*zero) (void *handle, uint32_t count, uint64_t offset, int may_trim);
#else
  int (*_pread_v1) (void *, void *, uint32_t, uint64_t);
  int (*_pwrite_v1) (void *, const void *, uint32_t, uint64_t);
  int (*_flush_v1) (void *);
  int (*_trim_v1) (void *, uint32_t, uint64_t);
  int (*_zero_v1) (void *, uint32_t, uint64_t, int);
#endif

  int errno_is_preserved;

  void (*dump_plugin) (void);

  int (*can_zero) (void *handle);
  int (*can_fua) (void *handle);

  /* Version 2 data callbacks, with NBDKIT_FLAG_* flags. */
#if NBDKIT_API_VERSION == 1
  int (*_unused1) (void *, void *, uint32_t, uint64_t, uint32_t);
  int (*_unused2) (void *, const void *, uint32_t, uint64_t, uint32_t);
  int (*_unused3) (void *, uint32_t);
  int (*_unused4) (void *, uint32_t, uint64_t, uint32_t);
  int (*_unused5) (void *, uint32_t, uint64_t, uint32_t);
#else
  int (*pread) (void *handle, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags);
  int (*pwrite) (void *handle, const void *buf, uint32_t count,
                 uint64_t offset, uint32_t flags);
  int (*flush) (void *handle, uint32_t flags);
  int (*trim) (void *handle, uint32_t count, uint64_t offset,
               uint32_t flags);
  int (*zero) (void *handle, uint32_t count, uint64_t offset,
               uint32_t flags);
#endif

  const char *magic_config_key;

  int (*can_multi_conn) (void *handle);

  int (*can_extents) (void *handle);
  int (*extents) (void *handle, uint32_t count, uint64_t offset,
                  uint32_t flags, struct nbdkit_extents *extents);

  int (*can_cache) (void *handle);
  int (*cache) (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags);

  int (*thread_model) (void);

  int (*can_fast_zero) (void *handle);

  int (*preconnect) (int readonly);

  int (*get_ready) (void);
  int (*after_fork) (void);

  int (*list_exports) (int readonly, int is_tls,
                       struct nbdkit_exports *exports);
  const char * (*default_export) (int readonly, int is_tls);
  const char * (*export_description) (void *handle);

  void (*cleanup) (void);

  int (*block_size) (void *handle, uint32_t *minimum, uint32_t *preferred,
                     uint32_t *maximum);
};

NBDKIT_EXTERN_DECL (void, nbdkit_set_error, (int err));
NBDKIT_EXTERN_DECL (const char *, nbdkit_export_name, (void));
NBDKIT_EXTERN_DECL (int, nbdkit_is_tls, (void));

/* Each plugin defines THREAD_MODEL before using this macro. */
#define NBDKIT_REGISTER_PLUGIN(plugin)                                  \
  NBDKIT_CXX_LANG_C NBDKIT_DLL_PUBLIC struct nbdkit_plugin *            \
  plugin_init (void)                                                    \
  {                                                                     \
    (plugin)._struct_size = sizeof (plugin);                            \
    (plugin)._api_version = NBDKIT_API_VERSION;                         \
    (plugin)._thread_model = THREAD_MODEL;                              \
    return &(plugin);                                                   \
  }

#ifdef __cplusplus
}
#endif

#endif /* NBDKIT_PLUGIN_H */
