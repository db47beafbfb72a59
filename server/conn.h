/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: connections.  struct connection (one client: its
 * socket, what was negotiated, its statistics) and the functions of
 * the files that serve one (connection.c, conn-io.c, conn-watch.c,
 * handshake.c, and the transmission phase, tx.h).
 */
#ifndef NBDKIT_CONN_H
#define NBDKIT_CONN_H

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "layer.h"

/* ---- connections (connection.c, conn-io.c, handshake.c, tx.h) */

struct conn_tls;
struct conn_input;
struct async_conn;

/* What the handshake settled (handshake.c writes it; fixed during
 * transmission, when the request and reply files read it).
 */
struct negotiated {
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
};

struct connection {
  uint64_t id;                  /* never reused */
  int sockin, sockout;
  bool sockout_is_socket;       /* send with MSG_NOSIGNAL, else write */
  size_t sndbuf;                /* SO_SNDBUF as last read (conn_send_fits,
                                 * under the write lock), or 0 */

  uint64_t deadline_ns;         /* reads fail after this (handshake), or 0 */
  struct conn_input *in;        /* buffered input, busy polling: conn-io.h */
  struct conn_tls *tls;         /* after STARTTLS: crypto.c's alone */
  bool tls_active;              /* the TLS handshake succeeded */
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

  struct negotiated nego;       /* handshake.c writes it, then fixed */

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
  /* Requests in a plugin's asynchronous callbacks, their completions
   * and the thread that answers them (async.c's alone), or NULL.
   */
  struct async_conn *async;
  bool closing;
  const char *close_reason;
  /* nbdkit_disconnect (0): requests read from now on get ESHUTDOWN. */
  _Atomic bool refuse_requests;
  /* The server's stop cut this connection while its client was still
   * there (conn_shutdown_all, under the registry's lock).
   */
  _Atomic bool cut_by_stop;

  /* --metrics' record (metrics.c), or NULL: set before any request. */
  struct metrics_conn *metrics;

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
extern int conn_io_init (struct connection *conn);
extern void conn_io_free (struct connection *conn);
extern int conn_recv (struct connection *conn, void *buf, size_t len);
extern int conn_recvv (struct connection *conn, const struct iovec *iov,
                       int n);
extern void conn_poll_feedback (struct connection *conn, bool more);
extern int conn_send (struct connection *conn, const void *buf, size_t len);
extern int conn_sendv (struct connection *conn, const struct iovec *iov,
                       int iovcnt);
extern ssize_t conn_sendv_nowait (struct connection *conn,
                                  const struct iovec *iov, int iovcnt);
extern size_t conn_pending_input (struct connection *conn);
extern bool conn_can_send_nowait (const struct connection *conn);
extern bool conn_send_fits (struct connection *conn, size_t len);
extern void conn_iov_advance (struct iovec **v, int *cnt, size_t len);

/* handshake.c: returns 0 to go on to transmission, -1 to close. */
extern int hs_negotiate (struct connection *conn);
extern const char *hs_option_name (uint32_t option);

/* The transmission phase (tx.h lists its files).  workers.c:
 * serves requests until the connection ends.  request.c: a command's
 * name, for probes and messages.
 */
extern void tx_serve (struct connection *conn);

/* stalls.c: stop the stall watcher, at shutdown. */
extern void pool_watch_stop (void);
extern const char *tx_command_name (uint16_t cmd);

/* Wait up to MS milliseconds (-1: no limit of its own) for input,
 * never past the connection's deadline (the handshake's, if set).
 * Returns >0 when readable, 0 when the time or the deadline ran out, -1
 * on error.  Plain reads and the TLS session's reads both wait here.
 */
static inline int
conn_poll_input (struct connection *conn, int ms)
{
  for (;;) {
    int wait = ms;
    if (conn->deadline_ns) {
      uint64_t now = now_ns ();
      if (now >= conn->deadline_ns)
        return 0;
      uint64_t left = DIV_ROUND_UP (conn->deadline_ns - now, 1000000);
      if (wait < 0 || left < (uint64_t) wait)
        wait = left;
    }
    struct pollfd p = { .fd = conn->sockin, .events = POLLIN };
    int r = poll (&p, 1, wait);
    if (r >= 0 || errno != EINTR)
      return r;
  }
}

/* The negotiation failed for REASON: the probe, and --metrics' count. */
static inline void
conn_handshake_failed (struct connection *conn, const char *reason)
{
  NBDKIT_HANDSHAKE_FAIL (conn->id, reason);
  if (conn->metrics)
    metrics_handshake_fail (conn->metrics, reason);
}

/* ---- closing (runtime.h: what they mean) ---- */

static inline void
conn_set_closing (struct connection *conn, const char *reason)
{
  LOCK_FOR_SCOPE (&conn->status_lock);
  if (!conn->closing) {
    conn->closing = true;
    conn->close_reason = reason;
  }
}

static inline bool
conn_is_closing (struct connection *conn)
{
  LOCK_FOR_SCOPE (&conn->status_lock);
  return conn->closing;
}

/* Closing for any reason but the client's NBD_CMD_DISC, or a stop
 * whose drain is not over: nothing more will reach the client, so
 * there is no point in waiting for it.
 */
static inline bool
conn_is_aborted (struct connection *conn)
{
  LOCK_FOR_SCOPE (&conn->status_lock);
  return conn->closing && strcmp (conn->close_reason, "disconnect") != 0 &&
    (strcmp (conn->close_reason, "stop") != 0 || server_drain_over ());
}

#endif /* NBDKIT_CONN_H */
