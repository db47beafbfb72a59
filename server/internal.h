/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the types and functions shared between the server's
 * files.  Nothing here is visible to plugins or filters, which see only
 * include/.
 *
 * By subsystem:
 *   runtime.h     limits, struct config, the ground floor (runtime.c)
 *   layer.h       struct layer, struct context and their functions
 *   conn.h        struct connection and the files that serve one
 *   here          TLS, sockets, messages, the public helpers, the
 *                 start-up (options, --run, daemon)
 */
#ifndef NBDKIT_INTERNAL_H
#define NBDKIT_INTERNAL_H

#include "runtime.h"
#include "layer.h"
#include "metrics.h"
#include "conn.h"

/* ---- crypto.c: TLS ---- */
extern bool tls_available (void);
extern int tls_load (struct config *cfg);
extern int tls_start (struct connection *conn);
extern ssize_t tls_recv (struct connection *conn, void *buf, size_t len);
extern int tls_sendv (struct connection *conn, const struct iovec *iov,
                      int iovcnt);
extern void tls_end (struct connection *conn);
extern char *tls_peer_dn (struct connection *conn, bool issuer);
extern char *tls_peer_username (struct connection *conn);

/* ---- sockets.c ---- */
struct listener {
  int_vector fds;
  const char *unix_path;        /* -U: the socket made, to remove at exit */
  dev_t unix_dev;
  ino_t unix_ino;
};
extern int sock_bind_all (struct config *cfg, struct listener *l);
extern void sock_accept_loop (const struct config *cfg, struct listener *l,
                              int quit_fd);
extern void sock_close_all (struct listener *l);
extern void sock_remove_unix (const struct listener *l);

/* ---- log.c ---- */
extern int log_init (const struct config *cfg);
extern void log_start_syslog (void);
extern void log_print_environment (void);
extern void log_set_layer_name (const char *name);
extern const char *log_swap_layer_name (const char *name);
extern void log_remember_layers (const struct layer *top);
extern const char *log_layer_of_caller (const void *ra);
extern const char *log_last_error (void);
extern void log_clear_last_error (void);
extern int log_set_server_debug_flag (const char *arg);
extern void log_layer_call (const struct connection *conn,
                            const struct layer *l, const char *cb,
                            uint64_t offset, uint64_t count);
extern void log_layer_open (const struct layer *l, int readonly,
                            const char *exportname, int is_tls);
extern void log_layer_open_done (const struct layer *l, const void *handle);

/* The server's own messages carry where they were written, for the log
 * probe's where argument: in the server, nbdkit_error and nbdkit_debug
 * are these macros (log.c, which defines the functions, opts out).
 * Plugins and filters call the functions, and the probe gives the
 * caller's object and offset instead.
 */
extern void log_error_at (const char *where, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void log_debug_at (const char *where, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));
#define LOG_STR_(x) #x
#define LOG_STR(x) LOG_STR_ (x)
#ifdef __FILE_NAME__
#define LOG_WHERE "server/" __FILE_NAME__ ":" LOG_STR (__LINE__)
#else
#define LOG_WHERE __FILE__ ":" LOG_STR (__LINE__)
#endif
#ifndef NBDKIT_LOG_DEFINES_FUNCTIONS
#define nbdkit_error(...) log_error_at (LOG_WHERE, __VA_ARGS__)
#define nbdkit_debug(...) log_debug_at (LOG_WHERE, __VA_ARGS__)
#endif

/* The server's own -D nbdkit.* flags, exported as data symbols under
 * the names nbdkit gives them.  backend.c prints a debug line per layer
 * call (with -v) unless the matching backend flag is 0; crypto.c reads
 * the TLS ones.
 */
extern int nbdkit_debug_backend_controlpath;
extern int nbdkit_debug_backend_datapath;
extern int nbdkit_debug_tls_log;
extern int nbdkit_debug_tls_session;

/* ---- public.c ---- */
extern int public_take_error (void);
extern void public_set_config_param (const char *key, const char *value,
                                     const char **old_key,
                                     const char **old_value);
extern void public_free_interned (struct connection *conn);

/* ---- extents.c, exports.c ---- */
/* An extent list for [start, end) whose reader needs only what covers
 * [start, wanted): once that is covered, only the last extent grows.
 */
extern struct nbdkit_extents *extents_new_wanted (uint64_t start,
                                                  uint64_t wanted,
                                                  uint64_t end);
extern bool exports_has_default (const struct nbdkit_exports *exports);
extern bool exports_take_default (struct nbdkit_exports *exports);

/* ---- options.c: the command line ---- */
extern void options_parse (struct config *cfg, int argc, char *argv[]);
extern void options_print_version (const struct config *cfg);
extern void options_usage (FILE *fp, const char *program);
extern int options_configure (struct config *cfg);
extern void options_free (struct config *cfg);

/* ---- captive.c: --run ---- */
struct captive {
  pid_t pid;                    /* the --run command, or -1 */
  int status;                   /* its wait status, once it exited */
  pthread_t thread;             /* waits for it */
};
extern char *captive_uri (const struct config *cfg);
extern int captive_start (const struct config *cfg, const char *uri,
                          struct captive *cap);
extern int captive_wait (struct captive *cap);

/* ---- daemon.c: background, pid file, -u/-g ---- */
extern int daemon_fork (void);
extern void daemon_ready (void);
extern void daemon_take_notify_socket (void);
extern void daemon_stopping (void);
extern int daemon_write_pidfile (const char *path);
extern int daemon_change_user (const struct config *cfg);
extern int daemon_check_ids (const struct config *cfg);
extern int daemon_give_socket (const struct config *cfg);
extern int daemon_lock_memory (const struct config *cfg);

#endif /* NBDKIT_INTERNAL_H */
