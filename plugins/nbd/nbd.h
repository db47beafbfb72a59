/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin: what its files share.
 *
 * config.c owns the parameters (struct nbd_config); nbd.c owns
 * connecting to the upstream server (with retries and a deadline), the
 * connections' lifecycle and the callbacks that answer from the
 * handshake.  The data path: io.c issues the commands upstream and
 * holds what both ways of waiting for them share; sync.c has the
 * synchronous data callbacks, async.c each upstream's poller thread and
 * the asynchronous callbacks (nbdkit_async_ops).
 */
#ifndef NBDKIT_NBD_PLUGIN_H
#define NBDKIT_NBD_PLUGIN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "vector.h"

enum transport {
  BY_NONE, BY_URI, BY_UNIX, BY_TCP, BY_VSOCK, BY_COMMAND, BY_FD,
};

/* The plugin's configuration: filled by config and config_complete
 * (config.c), read-only afterwards.
 */
struct nbd_config {
  enum transport by;
  int by_count;                 /* how many transports were given */
  char *uri;
  char *socket;
  char *hostname;
  char *port;
  uint32_t cid;
  string_vector argv;           /* command= then each arg=, NULL-ended */
  int fd;
  char *export;
  int shared;                   /* -1 until decided */
  unsigned retry;
  bool dynamic_export;
  int tls;                      /* LIBNBD_TLS_*, -1 if not given */
  char *tls_certificates;
  char *tls_psk;
  char *tls_username;
  int tls_verify;               /* -1 if not given */
  unsigned connect_timeout;     /* seconds */
  unsigned request_timeout;     /* seconds, 0 = none */
  unsigned connections;         /* per client (or shared), multi-conn only */
  char *description;            /* for messages and the nbd_connect probe */
};
extern struct nbd_config nbd_cfg;

#define proxy_config_help \
  "[uri=]URI               nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH ...\n" \
  "socket=PATH             Unix socket of the server.\n" \
  "hostname=HOST [port=PORT]  TCP address of the server.\n" \
  "vsock=CID [port=PORT]   AF_VSOCK address of the server.\n" \
  "command=PROG [arg=ARG]...  Run the server, by socket activation.\n" \
  "socket-fd=FD            An inherited socket connected to the server.\n" \
  "export=NAME             The export to use (default \"\").\n" \
  "dynamic-export=BOOL     Pass each client's export name through.\n" \
  "shared=BOOL             One upstream connection for all clients.\n" \
  "retry=N                 Retry a failed connection N times, 1 s apart.\n" \
  "connections=N           Upstream connections per client (multi-conn).\n" \
  "connect-timeout=SECS    Give up a connection attempt after SECS (60).\n" \
  "request-timeout=SECS    Drop an upstream silent for SECS (300; 0: never).\n" \
  "tls=off|on|require      TLS to the server.\n" \
  "tls-certificates=DIR    X.509 client certificates.\n" \
  "tls-psk=FILE            Pre-shared keys.\n" \
  "tls-username=NAME       User name for TLS.\n" \
  "tls-verify=BOOL         Check the server's certificate (default true)."

/* config.c: the configuration callbacks. */
extern void proxy_unload (void);
extern int proxy_config (const char *key, const char *value);
extern int proxy_config_complete (void);
extern void proxy_dump_plugin (void);

struct aio_req;

/* One connection to the upstream server.  In shared mode one of these
 * serves every client; otherwise each client connection has its own.
 * libnbd's handle does its own locking, so any number of worker threads
 * issue commands on it at once while the poller thread moves the bytes.
 */
struct upstream {
  struct nbd_handle *nbd;
  int wake[2];                  /* pipe: a worker kicks the poller */
  pthread_t poller;
  bool poller_running;
  atomic_bool stopping;         /* the poller should return */
  unsigned request_timeout;     /* seconds, 0 = wait for ever */
  /* Asynchronous requests (async.c).  The lock is taken inside libnbd's
   * handle lock (in a completion) and never held across a libnbd call.
   */
  pthread_mutex_t lock;         /* protects the lists */
  struct aio_req *oldest, *newest;  /* in flight, in the order sent */
  struct aio_req *spare;        /* recycled request records */
  unsigned n_spare;
  _Atomic uint64_t cancel_at;   /* ns: drop the connection if requests
                                   are still in flight then; 0: no */
};

/* The plugin's handle: one or more connections to the same export
 * (more only to an upstream that allows multi-conn, so that what one
 * connection wrote the others read, and one flush covers them all).
 * Requests go round the connections in turn; the handshake's answers
 * come from the first.
 */
struct proxy {
  unsigned n;
  atomic_uint next;
  struct upstream *up[];
};

/* The data path's commands.  OP_EXTENTS is issued by nbd_io_extents
 * itself (it has a callback of its own), not by nbd_up_issue.
 */
enum op {
  OP_PREAD, OP_PWRITE, OP_FLUSH, OP_TRIM, OP_ZERO, OP_CACHE, OP_EXTENTS,
};

/* io.c: what the two ways of waiting share. */
extern const char *const nbd_io_op_name[];
extern bool nbd_io_tracing (void);
extern void nbd_up_kick (struct upstream *up);
extern struct upstream *nbd_up_pick (void *handle);
extern int64_t nbd_up_issue (struct upstream *up, enum op op, void *buf,
                             uint32_t count, uint64_t offset, uint32_t flags,
                             nbd_completion_callback cb);
extern int nbd_up_issue_error (struct upstream *up, const char *op);
extern int nbd_io_client_errno (int err);
extern void nbd_io_probe_done (uint64_t conn_id, uint64_t cookie,
                               const char *op, int err, uint64_t start_ns,
                               uint64_t offset, uint32_t count);

/* async.c: an upstream's poller thread (nbd.c starts it once connected
 * and stops it before closing); the asynchronous callbacks are found
 * by the server in nbdkit_async_ops.
 */
extern int nbd_up_start_poller (struct upstream *up);
extern void nbd_up_stop_poller (struct upstream *up);

/* sync.c: the synchronous data callbacks (their handle is a struct
 * proxy).
 */
extern int nbd_io_pread (void *handle, void *buf, uint32_t count,
                         uint64_t offset, uint32_t flags);
extern int nbd_io_pwrite (void *handle, const void *buf, uint32_t count,
                          uint64_t offset, uint32_t flags);
extern int nbd_io_flush (void *handle, uint32_t flags);
extern int nbd_io_trim (void *handle, uint32_t count, uint64_t offset,
                        uint32_t flags);
extern int nbd_io_zero (void *handle, uint32_t count, uint64_t offset,
                        uint32_t flags);
extern int nbd_io_cache (void *handle, uint32_t count, uint64_t offset,
                         uint32_t flags);
struct nbdkit_extents;
extern int nbd_io_extents (void *handle, uint32_t count, uint64_t offset,
                           uint32_t flags, struct nbdkit_extents *extents);

#endif /* NBDKIT_NBD_PLUGIN_H */
