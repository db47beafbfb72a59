/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 *
 * The C side of the Go binding: the plugin structure, trampolines
 * into the exported Go functions, and wrappers for the server
 * functions cgo cannot call itself (variadic ones) or that only this
 * server has (weak references, so the .so also loads in nbdkit 1.32).
 */
#ifndef NBDKIT_GO_PLUGIN_H
#define NBDKIT_GO_PLUGIN_H

#include <stdint.h>
#include <stdlib.h>

/* Which optional callbacks the plugin has: bits of the mask given to
 * go_setup (the Go side sets the same bits).
 */
enum {
  GO_LOAD = 0, GO_UNLOAD, GO_CONFIG, GO_CONFIG_COMPLETE, GO_DUMP_PLUGIN,
  GO_THREAD_MODEL, GO_PRECONNECT, GO_GET_READY, GO_AFTER_FORK, GO_CLEANUP,
  GO_LIST_EXPORTS, GO_DEFAULT_EXPORT, GO_EXPORT_DESCRIPTION, GO_BLOCK_SIZE,
  GO_CAN_WRITE, GO_CAN_FLUSH, GO_IS_ROTATIONAL, GO_CAN_TRIM, GO_CAN_ZERO,
  GO_CAN_FAST_ZERO, GO_CAN_FUA, GO_CAN_MULTI_CONN, GO_CAN_EXTENTS,
  GO_CAN_CACHE, GO_PWRITE, GO_FLUSH, GO_TRIM, GO_ZERO, GO_CACHE,
  GO_EXTENTS,
};

extern void go_setup (uint64_t mask, char *name, char *longname,
                      char *version, char *description, char *config_help,
                      char *magic_config_key, int thread_model);
extern void go_error (const char *msg);
extern void go_debug (const char *msg);
extern void go_set_error (int err);
extern const char *go_export_name (void);
extern int go_is_tls (void);
extern int64_t go_parse_size (const char *s);
extern void go_shutdown (void);
extern const char *go_intern (const char *s);
extern int go_add_extent (void *e, uint64_t offset, uint64_t length,
                          uint32_t type);
extern int go_add_export (void *e, const char *name, const char *desc);
extern int go_use_default_export (void *e);
extern void go_probe (const char *name, int64_t arg1, int64_t arg2,
                      const char *text);
extern uint64_t go_connection_id (void);
extern uint64_t go_request_cookie (void);
extern void go_disconnect (int force);
extern int go_parse_probability (const char *what, const char *s,
                                 double *r);
extern int go_parse_delay (const char *what, const char *s, unsigned *sec,
                           unsigned *nsec);

#endif /* NBDKIT_GO_PLUGIN_H */
