/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The python plugin's per-connection and data callbacks (methods.c),
 * for the plugin struct in python.c.
 */
#ifndef NBDKIT_PYTHON_METHODS_H
#define NBDKIT_PYTHON_METHODS_H

#include <stdint.h>

struct nbdkit_exports;
struct nbdkit_extents;

extern int py_preconnect (int readonly);
extern int py_list_exports (int readonly, int is_tls,
                            struct nbdkit_exports *exports);
extern const char *py_default_export (int readonly, int is_tls);
extern void *py_open (int readonly);
extern void py_close (void *handle);
extern const char *py_export_description (void *handle);
extern int64_t py_get_size (void *handle);
extern int py_block_size (void *handle, uint32_t *minimum,
                          uint32_t *preferred, uint32_t *maximum);
extern int py_is_rotational (void *handle);
extern int py_can_multi_conn (void *handle);
extern int py_can_write (void *handle);
extern int py_can_flush (void *handle);
extern int py_can_trim (void *handle);
extern int py_can_zero (void *handle);
extern int py_can_fast_zero (void *handle);
extern int py_can_fua (void *handle);
extern int py_can_cache (void *handle);
extern int py_can_extents (void *handle);
extern int py_pread (void *handle, void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags);
extern int py_pwrite (void *handle, const void *buf, uint32_t count,
                      uint64_t offset, uint32_t flags);
extern int py_flush (void *handle, uint32_t flags);
extern int py_trim (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags);
extern int py_zero (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags);
extern int py_cache (void *handle, uint32_t count, uint64_t offset,
                     uint32_t flags);
extern int py_extents (void *handle, uint32_t count, uint64_t offset,
                       uint32_t flags, struct nbdkit_extents *extents);

#endif /* NBDKIT_PYTHON_METHODS_H */
