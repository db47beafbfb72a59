/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The callbacks of methods.c, shared by the sh and eval plugins.
 * SCRIPT_METHODS fills the common part of a struct nbdkit_plugin.
 */
#ifndef NBDKIT_SH_METHODS_H
#define NBDKIT_SH_METHODS_H

#include <stdint.h>

extern void script_unload (void);
extern void script_dump_plugin (void);
extern int script_config_complete (void);
extern int script_thread_model (void);
extern int script_get_ready (void);
extern int script_after_fork (void);
extern int script_preconnect (int readonly);
extern int script_list_exports (int readonly, int is_tls,
                                struct nbdkit_exports *exports);
extern const char *script_default_export (int readonly, int is_tls);
extern void *script_open (int readonly);
extern void script_close (void *handle);
extern const char *script_export_description (void *handle);
extern int64_t script_get_size (void *handle);
extern int script_block_size (void *handle, uint32_t *minimum,
                              uint32_t *preferred, uint32_t *maximum);
extern int script_can_write (void *handle);
extern int script_can_flush (void *handle);
extern int script_is_rotational (void *handle);
extern int script_can_trim (void *handle);
extern int script_can_zero (void *handle);
extern int script_can_extents (void *handle);
extern int script_can_fua (void *handle);
extern int script_can_multi_conn (void *handle);
extern int script_can_cache (void *handle);
extern int script_can_fast_zero (void *handle);
extern int script_pread (void *handle, void *buf, uint32_t count,
                         uint64_t offset, uint32_t flags);
extern int script_pwrite (void *handle, const void *buf, uint32_t count,
                          uint64_t offset, uint32_t flags);
extern int script_flush (void *handle, uint32_t flags);
extern int script_trim (void *handle, uint32_t count, uint64_t offset,
                        uint32_t flags);
extern int script_zero (void *handle, uint32_t count, uint64_t offset,
                        uint32_t flags);
extern int script_extents (void *handle, uint32_t count, uint64_t offset,
                           uint32_t flags, struct nbdkit_extents *extents);
extern int script_cache (void *handle, uint32_t count, uint64_t offset,
                         uint32_t flags);

/* Not .thread_model: each plugin says what it is without a script. */
#define SCRIPT_METHODS                                  \
  .get_ready          = script_get_ready,               \
  .after_fork         = script_after_fork,              \
  .preconnect         = script_preconnect,              \
  .list_exports       = script_list_exports,            \
  .default_export     = script_default_export,          \
  .open               = script_open,                    \
  .close              = script_close,                   \
  .export_description = script_export_description,      \
  .get_size           = script_get_size,                \
  .block_size         = script_block_size,              \
  .can_write          = script_can_write,               \
  .can_flush          = script_can_flush,               \
  .is_rotational      = script_is_rotational,           \
  .can_trim           = script_can_trim,                \
  .can_zero           = script_can_zero,                \
  .can_extents        = script_can_extents,             \
  .can_fua            = script_can_fua,                 \
  .can_multi_conn     = script_can_multi_conn,          \
  .can_cache          = script_can_cache,               \
  .can_fast_zero      = script_can_fast_zero,           \
  .pread              = script_pread,                   \
  .pwrite             = script_pwrite,                  \
  .flush              = script_flush,                   \
  .trim               = script_trim,                    \
  .zero               = script_zero,                    \
  .extents            = script_extents,                 \
  .cache              = script_cache,                   \
  .errno_is_preserved = 1

#endif /* NBDKIT_SH_METHODS_H */
