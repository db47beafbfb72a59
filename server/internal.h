/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the types and functions shared between the server's
 * files.  Nothing here is visible to plugins or filters, which see only
 * include/.
 *
 * The main objects:
 *   struct config      the command line, read-only once the server runs
 *   struct layer       one loaded plugin or filter, chained by ->next
 *   struct context     one layer opened for one connection; filters see
 *                      the context below them as an nbdkit_next
 *   struct connection  one client: its socket, negotiated state, workers
 */
#ifndef NBDKIT_INTERNAL_H
#define NBDKIT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NBDKIT_API_VERSION 2
#include "nbdkit-plugin.h"
#include "nbdkit-filter.h"

#include "probes.h"
#include "cleanup.h"
#include "utils/vector.h"
#include "include/ispowerof2.h"
#include "include/isaligned.h"
#include "include/rounding.h"
#include "include/minmax.h"

DEFINE_VECTOR_TYPE (const_string_vector, const char *);
DEFINE_VECTOR_TYPE (int_vector, int);

/* Limits that protect the server from what clients send. */
/* The longest read or write: longer ones are refused with ENOMEM, as
 * nbdkit refuses them, whatever block sizes the layers advertise.  A
 * refused write's payload is read and thrown away up to
 * MAX_SKIPPED_PAYLOAD; beyond that the connection ends (no reply).
 * A connection's reads and writes in flight hold at most
 * MAX_PAYLOAD_IN_FLIGHT bytes of buffers (request.c).
 */
#define MAX_REQUEST_SIZE   (64 * 1024 * 1024)
#define MAX_SKIPPED_PAYLOAD (2 * (uint64_t) MAX_REQUEST_SIZE)
#define MAX_PAYLOAD_IN_FLIGHT (512 * 1024 * 1024)
#define MAX_OPTION_LENGTH  (64 * 1024)        /* one handshake option */
#define MAX_META_QUERIES   128
#define DEFAULT_THREADS    16
#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_HANDSHAKE_TIMEOUT 30            /* seconds */
#define DEFAULT_BUSY_POLL  50                   /* microseconds */
#define MAX_BUSY_POLL      10000
#define CONN_INBUF_SIZE    (64 * 1024)          /* buffered request input */

/* ---- config (options.c fills it, main.c runs it) ---- */

struct layer;

/* What the command line asks for besides serving. */
enum config_action {
  ACTION_SERVE = 0,
  ACTION_HELP,                  /* --help, with the plugin's help too */
  ACTION_VERSION,               /* -V, with every layer's version too */
  ACTION_DUMP_PLUGIN,           /* --dump-plugin */
};

/* Where messages go: the default is stderr in the foreground and
 * syslog once daemonised.
 */
enum config_log { LOG_TO_DEFAULT = 0, LOG_TO_STDERR, LOG_TO_SYSLOG,
                  LOG_TO_NULL };

struct config {
  const char *program;          /* argv[0], for messages */
  enum config_action action;
  bool foreground;              /* -f, or implied by --run, -s, ... */
  bool verbose;                 /* -v */
  bool readonly;                /* -r */
  bool single;                  /* -s, --single, --stdin */
  bool print_uri;               /* --print-uri */
  bool exit_with_parent;        /* --exit-with-parent */
  bool no_sr;                   /* --no-sr: refuse structured replies */
  bool oldstyle;                /* -o: oldstyle negotiation (-n undoes) */
  uint16_t mask_handshake;      /* --mask-handshake: global flags offered */
  bool swap;                    /* --swap: lock in memory, IO flusher */
  bool vsock;                   /* --vsock: AF_VSOCK on -p */
  const char *selinux_label;    /* --selinux-label */
  enum config_log log_to;       /* --log */
  bool use_syslog;              /* messages go to syslog once started */
  bool unix_private;            /* -U -: a socket in a private dir */
  const char *unixsocket;       /* -U, after `-' is resolved */
  char *tmpdir;                 /* temp dir holding the `-U -' socket */
  const char *port;             /* -p, a number once resolved */
  char *port_buf;               /* -p SERVICE resolved to its number */
  const char *ipaddr;           /* -i */
  int family;                   /* -4, -6 or AF_UNSPEC */
  unsigned threads;             /* -t */
  unsigned max_connections;     /* --max-connections */
  unsigned handshake_timeout;   /* --handshake-timeout, seconds, 0 = none */
  unsigned busy_poll;           /* --busy-poll, microseconds, 0 = none */
  int tls;                      /* --tls: TLS_OFF, TLS_ON, TLS_REQUIRE */
  bool tls_given;               /* --tls was on the command line */
  const char *tls_certificates; /* --tls-certificates DIR */
  const char *tls_psk;          /* --tls-psk FILE */
  bool tls_verify_peer;         /* --tls-verify-peer */
  const char *tls_priority;     /* --tls-priority STRING, NULL = default */
  const char *user, *group;     /* -u, -g */
  const char *exportname;       /* -e */
  const char *pidfile;          /* -P */
  const char *run;              /* --run */
  int listen_fds;               /* socket activation: count from fd 3 */

  /* The plugin and its parameters (argv after the options), the
   * filters (outermost first) and the -D flags, as given.
   */
  const char *plugin_name;
  char **params;
  int nparams;
  const_string_vector filters;
  const_string_vector debug_flags;
  /* Keys split off key=value parameters: plugins may keep pointers to
   * them (nbdkit-plugin(3) promises they live as long as the plugin),
   * so they are freed only after the plugin is unloaded.
   */
  string_vector keys;

  struct layer *top;            /* the outermost layer of the chain */
  int thread_model;             /* weakest of every layer's */
};

enum { TLS_OFF = 0, TLS_ON = 1, TLS_REQUIRE = 2 };

/* ---- layers (backend.c, plugins.c, filters.c) ---- */

#include "layer-ops.h"

struct context;

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
extern void layer_set_cookie (uint64_t cookie);
extern uint64_t layer_current_cookie (void);
extern void layer_requests_lock (void);
extern void layer_requests_unlock (void);
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

/* ---- connections (connection.c, conn-io.c, handshake.c, transmission.h) */

struct connection {
  uint64_t id;                  /* never reused */
  int sockin, sockout;
  bool sockout_is_socket;       /* send with MSG_NOSIGNAL, else write */

  /* Buffered input (conn_recv), used under the read lock only. */
  char *in_buf;                 /* CONN_INBUF_SIZE bytes, or NULL */
  size_t in_pos, in_len;        /* unread bytes: in_buf[in_pos, +in_len) */
  uint64_t deadline_ns;         /* reads fail after this (handshake), or 0 */
  int lowat;                    /* SO_RCVLOWAT as set (TCP), 0: never set */
  uint64_t poll_ns;             /* --busy-poll window; 0: never poll */
  unsigned poll_waits;          /* polling waits since the last sample */
  unsigned poll_every;          /* a sample every this many waits */
  unsigned poll_misses;         /* windows in a row that ran out */
  unsigned poll_skip;           /* waits left to sleep without polling */
  bool poll_slept;              /* a wait slept: see conn_poll_feedback */
  bool poll_sampled;            /* ... and it was a sample */
  void *tls;                    /* gnutls_session_t after STARTTLS */
  bool tls_active;              /* the TLS handshake succeeded */
  char *tls_out;                /* records of a large reply, batched */
  size_t tls_out_len;           /* bytes in tls_out */
  bool tls_batching;            /* transport_push appends to tls_out */
  char *tls_in;                 /* bytes read ahead from the socket */
  size_t tls_in_pos, tls_in_len; /* ... the next one, and the end */
  const struct config *cfg;
  const char *transport;        /* "unix", "tcp", "vsock", "stdio", ... */
  char peer[128];               /* printable peer address */
  struct sockaddr_storage peer_addr;
  socklen_t peer_addrlen;
  int64_t peer_pid, peer_uid;   /* a Unix peer's (SO_PEERCRED), else -1 */
  uint64_t start_ns;

  /* What connection_info reports once negotiation is over, written
   * under the registry's lock (connection.c) so that the watcher
   * (conn-watch.c) can read it from its own thread.
   */
  const char *info_export;      /* the negotiated export, or NULL */
  bool info_tls;                /* negotiated over TLS */

  /* Negotiated in the handshake, fixed during transmission. */
  bool structured;
  bool extended;
  bool meta_base_allocation;    /* base:allocation selected */
  char *meta_export;            /* export named in SET_META_CONTEXT */
  bool exports_listed;          /* NBD_OPT_LIST was answered */
  unsigned hs_errors;           /* option replies that were errors */
  char *exportname;
  struct context *top;
  uint64_t exportsize;
  uint16_t eflags;
  bool block_sizes;             /* a layer gave block sizes */
  uint32_t block_min, block_pref, block_max; /* as it gave them */
  bool can_write, can_flush, can_trim, can_zero, can_fast_zero;
  bool can_fua, can_cache, can_extents, can_multi_conn;

  /* Transmission: workers take read_lock to decode one request, then
   * run it, then take write_lock to send its reply (a mapped read takes
   * it before the layer call: see run()).  read_lock and write_lock are
   * never held together.  status_lock guards closing and close_reason,
   * and is taken last: under either, or under a pool's lock.
   */
  pthread_mutex_t read_lock;
  pthread_mutex_t write_lock;
  pthread_mutex_t status_lock;
  /* Bytes of large buffers that requests in flight hold against
   * MAX_PAYLOAD_IN_FLIGHT (request.c), and the signal that some came
   * back.  payload_lock is a leaf, taken under the read lock or alone.
   */
  pthread_mutex_t payload_lock;
  pthread_cond_t payload_back;
  uint64_t payload_held;
  bool closing;
  const char *close_reason;
  /* The server's stop cut this connection while its client was still
   * there (conn_shutdown_all, under the registry's lock).
   */
  _Atomic bool cut_by_stop;

  /* Statistics for connection_close. */
  _Atomic uint64_t requests;
  _Atomic uint64_t bytes_in;
  _Atomic uint64_t bytes_out;
  /* Replies written, for request_dispatch's in_flight (requests -
   * replies).  Written only under write_lock; read without it.
   */
  uint64_t replies;

  /* Each layer's default export, by depth, once asked (backend.c). */
  string_vector default_exports;

  /* Strings from nbdkit_strdup_intern during this connection. */
  pthread_mutex_t intern_lock;
  string_vector interned;
};

/* connection.c: a connection's life, the registry, closing. */
extern void conn_handle (const struct config *cfg, int sockin, int sockout,
                         const char *transport);
extern void conn_set_closing (struct connection *conn, const char *reason);
extern bool conn_is_closing (struct connection *conn);
extern bool conn_is_aborted (struct connection *conn);
extern struct connection *conn_current (void);
extern void conn_set_current (struct connection *conn);
extern uint64_t conn_count_active (void);
extern bool conn_admit (unsigned max);
extern void conn_release (void);
extern void conn_release_thread (void);
extern void conn_reap_threads (void);
extern void conn_shutdown_all (int timeout_s);
extern void conn_foreach_live (void (*fn) (struct connection *conn));

/* conn-watch.c: connection_info for tracers that attach late. */
extern void conn_info_fire (struct connection *conn);
extern void conn_watch_start (void);
extern void conn_watch_stop (void);

/* conn-io.c: the bytes to and from the client. */
extern void conn_io_init (struct connection *conn);
extern void conn_io_free (struct connection *conn);
extern int conn_recv (struct connection *conn, void *buf, size_t len);
extern int conn_recvv (struct connection *conn, const struct iovec *iov,
                       int n);
extern void conn_poll_feedback (struct connection *conn, bool more);
extern int conn_poll_input (struct connection *conn, int ms);
extern int conn_send (struct connection *conn, const void *buf, size_t len);
extern int conn_sendv (struct connection *conn, const struct iovec *iov,
                       int iovcnt);
extern ssize_t conn_sendv_nowait (struct connection *conn,
                                  const struct iovec *iov, int iovcnt);
extern size_t conn_pending_input (struct connection *conn);
extern bool conn_can_send_nowait (const struct connection *conn);
extern void conn_iov_advance (struct iovec **v, int *cnt, size_t len);

/* handshake.c: returns 0 to go on to transmission, -1 to close. */
extern int hs_negotiate (struct connection *conn);
extern const char *hs_option_name (uint32_t option);

/* The transmission phase (transmission.h lists its files).  workers.c:
 * serves requests until the connection ends.  request.c: a command's
 * name, for probes and messages.
 */
extern void tx_serve (struct connection *conn);

/* stalls.c: stop the stall watcher, at shutdown. */
extern void pool_watch_stop (void);
extern const char *tx_command_name (uint16_t cmd);

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
extern void log_init (const struct config *cfg);
extern void log_start_syslog (void);
extern void log_set_layer_name (const char *name);
extern const char *log_swap_layer_name (const char *name);
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
extern int exports_resolve_default (struct nbdkit_exports *e, struct layer *l,
                                    int readonly, int is_tls);

/* ---- main.c: the start-up order ---- */
extern void server_request_shutdown (const char *reason);
extern const struct config *server_config (void);
extern bool server_drain_over (void);
extern int server_drain_fd (void);
extern void server_end_drain (void);

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

/* ---- helpers ---- */

/* A probe argument forced into a register.  <sys/sdt.h> records where
 * each argument lives at each site: a literal becomes an immediate and
 * a thread-local a %fs-relative operand, which perf and bpftrace cannot
 * read or refuse when the sites of one probe disagree.  Literals and
 * thread-locals go through this.
 */
static inline uint64_t
probe_u64 (uint64_t v)
{
  __asm__ ("" : "+r" (v));
  return v;
}
extern uint64_t now_ns (void);

#define container_of(ptr, type, member) \
  ((type *) ((char *) (ptr) - offsetof (type, member)))

#endif /* NBDKIT_INTERNAL_H */
