/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the ground floor's header.  The limits, the
 * configuration (struct config: the command line, read-only once the
 * server runs), and what runtime.c owns: the process-wide and
 * thread-current state.  Includes no other header of the server but
 * the generated probes.h.
 */
#ifndef NBDKIT_RUNTIME_H
#define NBDKIT_RUNTIME_H

/* The assertions at the layer boundary (backend.c) are part of the
 * server's defence against a filter that breaks its contract: they
 * stay compiled in.
 */
#ifdef NDEBUG
#error "build the server without NDEBUG: its assertions must stay in"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NBDKIT_API_VERSION 2
/* The server defines the extensions that plugins refer to weakly. */
#define NBDKIT_INTERNAL
#include "nbdkit-plugin.h"
#include "nbdkit-filter.h"

#include "probes.h"
#include "utils/cleanup.h"
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
                  LOG_TO_NULL, LOG_TO_FILE };

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
  const char *log_file;         /* --log=PATH (LOG_TO_FILE) */
  const char *name;             /* --name: messages' and syslog's prefix */
  bool keepalive;               /* --keepalive: SO_KEEPALIVE on TCP */
  bool no_mc;                   /* --no-mc: refuse meta contexts */
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
  uint64_t handshake_timeout_ns; /* --timeout, --handshake-timeout; 0 = none */
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
  const char *metrics;          /* --metrics: where to serve them */
  int listen_fds;               /* socket activation: count from fd 3 */

  /* The plugin and its parameters (argv after the options), the
   * filters (outermost first) and the -D flags, as given.
   */
  const char *plugin_name;
  char **params;
  int nparams;
  /* The parameters once @PATH files are read in: owns every string,
   * and params points into it.  Freed after the layers are unloaded
   * (plugins may keep the values).
   */
  string_vector param_store;
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

/* ---- runtime.c: the ground floor ---- */
/* The configuration, published once options.c has filled it. */
extern void runtime_set_config (const struct config *cfg);
extern const struct config *server_config (void);

/* The stop: why, the pipe that wakes the accept loop, and the end of
 * its drain (when sleeps in nbdkit_nanosleep are cut short).
 */
extern int runtime_stop_init (void);
extern int server_quit_fd (void);
extern const char *server_stop_reason (void);
extern void server_request_shutdown (const char *reason);
extern bool server_drain_over (void);
extern int server_drain_fd (void);
extern void server_end_drain (void);

/* What this thread serves: its connection (with its id, which the
 * wait probes of runtime.c report) and the cookie of the request it
 * runs (0 outside one).
 */
struct connection;
extern struct connection *conn_current (void);
extern void conn_set_current (struct connection *conn, uint64_t id);
extern void layer_set_cookie (uint64_t cookie);
extern uint64_t layer_current_cookie (void);

/* -D nbdkit.open.contain_crashes=1: a crash inside a layer's open fails
 * that connection instead of the server (context.c).  Off by default,
 * as in nbdkit: whatever the crashed open held (malloc's lock
 * included) stays held, which can hang the server later.
 */
extern int runtime_contain_open_crashes;

/* -D nbdkit.async=0: never use a plugin's asynchronous callbacks
 * (async.c); every request takes the synchronous path.  For comparing
 * the two paths on the same plugin.
 */
extern int runtime_async;

/* -D nbdkit.async.direct=0: a completion never sends its reply from the
 * plugin's thread (async.c's answer_now); the replier sends them all.
 * For comparing the two.
 */
extern int runtime_async_direct;

/* The thread model's lock around calls into the layers (runtime.c).
 * A wait for it fires the wait probes with this thread's connection
 * and cookie.
 */
extern void layer_requests_lock (void);
extern void layer_requests_unlock (void);

/* Take mutex M, which guards what LOCK names in the wait probes
 * ("write", "read", ...), for request COOKIE (0 for none) of
 * connection ID.  Only a real wait, when another thread holds M, fires
 * wait_start and wait_done (lock_wait, out of line so that each probe
 * has one site); the uncontended path costs one trylock, as much as
 * the lock it replaces.
 */
extern void lock_wait (pthread_mutex_t *m, uint64_t id, uint64_t cookie,
                       const char *lock);

/* A wait that is not for a mutex (for room: "payload", "in_flight"):
 * wait_begin fires wait_start and returns the time to give wait_end,
 * which fires wait_done; 0 when neither probe is traced.  Called only
 * when the thread is about to wait.
 */
extern uint64_t wait_begin (uint64_t id, uint64_t cookie, const char *lock);
extern void wait_end (uint64_t id, uint64_t cookie, const char *lock,
                      uint64_t t0);

static inline void
lock_or_wait (pthread_mutex_t *m, uint64_t id, uint64_t cookie,
              const char *lock)
{
  if (__builtin_expect (pthread_mutex_trylock (m) != 0, 0))
    lock_wait (m, id, cookie, lock);
}

/* LOCK_FOR_SCOPE (utils/cleanup.h), with lock_or_wait's probes. */
#define WAIT_LOCK_FOR_SCOPE(m, id, cookie, lock)                        \
  __attribute__ ((cleanup (cleanup_unlock), unused)) pthread_mutex_t *  \
  CLEANUP_CAT (scope_lock_, __LINE__) =                                 \
    (lock_or_wait ((m), (id), (cookie), (lock)), (m))

/* ---- helpers ---- */
#include "include/now-ns.h"

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

#define container_of(ptr, type, member) \
  ((type *) ((char *) (ptr) - offsetof (type, member)))

#endif /* NBDKIT_RUNTIME_H */
