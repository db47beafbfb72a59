/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: one connection's life.  conn_handle runs in the
 * connection's own thread: it records the peer, fires
 * connection_accept, negotiates (handshake.c), serves requests
 * (tx_serve, workers.c, which adds worker threads), then closes the
 * layers and the socket and fires connection_close.  This file also
 * keeps the registry of live connections that shutdown uses, the
 * count that --max-connections limits, and each connection's closing
 * state.  The bytes themselves go through conn-io.c.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Connection ids count up from 1 and are never reused. */
static _Atomic uint64_t next_id = 1;

/* The live connections, so that shutdown can wake them and the watcher
 * (conn-watch.c) can announce them.  A connection is in it from before
 * connection_accept until just before connection_close.  Lock order:
 * registry_lock is taken alone.
 */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t registry_empty = PTHREAD_COND_INITIALIZER;
DEFINE_VECTOR_TYPE (connection_list, struct connection *);
static connection_list registry = empty_vector;

/* Connections the accept loop admitted (conn_admit) and that have not
 * yet finished (conn_release).  A connection counts from the moment it
 * is accepted, before its thread runs and joins the registry: so a
 * burst of clients cannot slip past --max-connections, and shutdown
 * waits for, and the plugin outlives, connections not yet registered.
 * Guarded by registry_lock.
 */
static unsigned n_admitted;

/* Connection threads that have finished serving (conn_release_thread)
 * and are about to exit, not yet joined.  They are joined by the accept
 * loop (conn_reap_threads) and at shutdown, so that when the server
 * exits every connection thread has ended, its thread-local
 * destructors included: a library a plugin uses (OpenSSL under libssh
 * or libcurl) frees per-thread state there, which a server that only
 * waited for the connection count left half-freed, and leak checkers
 * saw as lost.  Guarded by registry_lock.
 */
DEFINE_VECTOR_TYPE (thread_list, pthread_t);
static thread_list finished;

/* SERIALIZE_CONNECTIONS: one connection at a time, server-wide. */
static pthread_mutex_t one_connection_lock = PTHREAD_MUTEX_INITIALIZER;

static bool
registry_add (struct connection *conn)
{
  LOCK_FOR_SCOPE (&registry_lock);
  return connection_list_append (&registry, conn) == 0;
}

static void
registry_remove (struct connection *conn)
{
  LOCK_FOR_SCOPE (&registry_lock);
  for (size_t i = 0; i < registry.len; i++)
    if (registry.ptr[i] == conn) {
      registry.ptr[i] = registry.ptr[--registry.len];
      break;
    }
  if (registry.len == 0 && n_admitted == 0)
    pthread_cond_broadcast (&registry_empty);
}

/* Call FN for each live connection, under the registry's lock: a
 * connection cannot leave (nor its published fields change) meanwhile.
 */
void
conn_foreach_live (void (*fn) (struct connection *conn))
{
  LOCK_FOR_SCOPE (&registry_lock);
  for (size_t i = 0; i < registry.len; i++)
    fn (registry.ptr[i]);
}

/* Fire connection_info for CONN.  The caller holds the registry's lock
 * (conn_foreach_live, or connection.c publishing the end of a
 * negotiation), which keeps CONN alive and its published fields still.
 */
void
conn_info_fire (struct connection *conn)
{
  if (NBDKIT_CONNECTION_INFO_ENABLED ()) {
    char transport[32];
    snprintf (transport, sizeof transport, "%s%s", conn->transport,
              conn->info_tls ? "+tls" : "");
    NBDKIT_CONNECTION_INFO (conn->id,
                            conn->info_export ? conn->info_export : "",
                            conn->peer, transport, conn->peer_pid,
                            conn->peer_uid);
  }
}

/* Negotiation is over: publish what connection_info reports and fire
 * it, under the registry's lock so that the watcher reports the
 * connection either as negotiating or as it is now.
 */
static void
publish_info (struct connection *conn)
{
  LOCK_FOR_SCOPE (&registry_lock);
  conn->info_export = conn->nego.exportname;
  conn->info_tls = conn->tls_active;
  conn_info_fire (conn);
}

bool
conn_admit (unsigned max)
{
  LOCK_FOR_SCOPE (&registry_lock);
  if (n_admitted >= max)
    return false;
  n_admitted++;
  return true;
}

void
conn_release (void)
{
  LOCK_FOR_SCOPE (&registry_lock);
  if (--n_admitted == 0 && registry.len == 0)
    pthread_cond_broadcast (&registry_empty);
}

/* conn_release, from a connection thread about to return: it is
 * queued to be joined.
 */
void
conn_release_thread (void)
{
  LOCK_FOR_SCOPE (&registry_lock);
  if (thread_list_append (&finished, pthread_self ()) == -1)
    pthread_detach (pthread_self ());   /* out of memory: nobody joins */
  if (--n_admitted == 0 && registry.len == 0)
    pthread_cond_broadcast (&registry_empty);
}

/* Join the connection threads that have finished.  Each has at most a
 * return left to run, so this waits microseconds.
 */
void
conn_reap_threads (void)
{
  thread_list done;
  {
    LOCK_FOR_SCOPE (&registry_lock);
    if (finished.len == 0)
      return;
    done = finished;
    finished = (thread_list) empty_vector;
  }
  for (size_t i = 0; i < done.len; i++)
    pthread_join (done.ptr[i], NULL);
  thread_list_reset (&done);
}

uint64_t
conn_count_active (void)
{
  LOCK_FOR_SCOPE (&registry_lock);
  return n_admitted > registry.len ? n_admitted : registry.len;
}

/* Stop reading from every connection: requests in flight finish and
 * send their replies, then each connection closes.  Waits up to
 * TIMEOUT_S seconds for them to go (the drain); then cuts short what
 * is still in flight (server_end_drain: nbdkit_nanosleep gives up) and
 * waits up to AFTER_DRAIN_S more.  Every stop signal, nbdkit_shutdown
 * and the end of a --run command stop the same way.
 */
#define AFTER_DRAIN_S 2

static bool
registry_wait (const struct timespec *deadline)
{
  while (registry.len > 0 || n_admitted > 0)
    if (pthread_cond_timedwait (&registry_empty, &registry_lock,
                                deadline) == ETIMEDOUT)
      return false;
  return true;
}

void
conn_shutdown_all (int timeout_s)
{
  struct timespec deadline;
  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_s;

  {
    LOCK_FOR_SCOPE (&registry_lock);
    for (size_t i = 0; i < registry.len; i++) {
      struct connection *conn = registry.ptr[i];
      /* A client that has already hung up (a --run command that
       * exited) left on its own: its connection ends as it would
       * have without the stop.
       */
      struct pollfd pfd = { .fd = conn->sockin, .events = POLLRDHUP };
      if (poll (&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP)))
        continue;
      /* No more requests are read; those read already run on, and a
       * sleep among them goes on until the drain is over.
       */
      conn->cut_by_stop = true;
      conn_set_closing (conn, "stop");
      shutdown (conn->sockin, SHUT_RD);
    }
    if (!registry_wait (&deadline)) {
      nbdkit_debug ("stop: requests still in flight after %d s: "
                    "cutting them short", timeout_s);
      server_end_drain ();
      clock_gettime (CLOCK_REALTIME, &deadline);
      deadline.tv_sec += AFTER_DRAIN_S;
      registry_wait (&deadline);
    }
  }
  /* Those that finished; any still serving past the deadline are left. */
  conn_reap_threads ();
}

static void
describe_peer (struct connection *conn)
{
  struct sockaddr_storage *ss = &conn->peer_addr;
  socklen_t len = sizeof *ss;
  char host[INET6_ADDRSTRLEN] = "";

  if (getpeername (conn->sockin, (struct sockaddr *) ss, &len) == -1) {
    conn->peer_addrlen = 0;
    snprintf (conn->peer, sizeof conn->peer, "%s", conn->transport);
    return;
  }
  conn->peer_addrlen = len;
  switch (ss->ss_family) {
  case AF_INET: {
    struct sockaddr_in *sin = (struct sockaddr_in *) ss;
    inet_ntop (AF_INET, &sin->sin_addr, host, sizeof host);
    snprintf (conn->peer, sizeof conn->peer, "%s:%d", host,
              ntohs (sin->sin_port));
    break;
  }
  case AF_INET6: {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) ss;
    inet_ntop (AF_INET6, &sin6->sin6_addr, host, sizeof host);
    snprintf (conn->peer, sizeof conn->peer, "[%s]:%d", host,
              ntohs (sin6->sin6_port));
    break;
  }
  case AF_UNIX: {
    /* The process at the other end: the client that connected, or
     * that made the socket pair (-s).
     */
    struct ucred cred;
    socklen_t credlen = sizeof cred;
    if (getsockopt (conn->sockin, SOL_SOCKET, SO_PEERCRED, &cred,
                    &credlen) == 0) {
      conn->peer_pid = cred.pid;
      conn->peer_uid = cred.uid;
    }
    snprintf (conn->peer, sizeof conn->peer, "unix");
    break;
  }
  default:
    snprintf (conn->peer, sizeof conn->peer, "family-%d", ss->ss_family);
  }
}

void
conn_handle (const struct config *cfg, int sockin, int sockout,
             const char *transport)
{
  struct connection *conn = calloc (1, sizeof *conn);
  if (!conn) {
    nbdkit_error ("calloc: %m");
    close (sockin);
    if (sockout != sockin)
      close (sockout);
    return;
  }
  conn->id = next_id++;
  conn->cfg = cfg;
  conn->sockin = sockin;
  conn->sockout = sockout;
  conn->transport = transport;
  if (conn_io_init (conn) == -1) {
    nbdkit_error ("calloc: %m");
    free (conn);
    close (sockin);
    if (sockout != sockin)
      close (sockout);
    return;
  }
  conn->start_ns = now_ns ();
  pthread_mutex_init (&conn->read_lock, NULL);
  pthread_mutex_init (&conn->write_lock, NULL);
  pthread_mutex_init (&conn->status_lock, NULL);
  pthread_mutex_init (&conn->payload_lock, NULL);
  pthread_cond_init (&conn->payload_back, NULL);
  pthread_mutex_init (&conn->intern_lock, NULL);
  conn->peer_pid = conn->peer_uid = -1;
  describe_peer (conn);
  conn_set_current (conn, conn->id);
  bool registered = registry_add (conn);
  conn->metrics = metrics_conn_open (conn->id, conn->peer, conn);

  NBDKIT_CONNECTION_ACCEPT (conn->id, (int64_t) sockin, conn->peer,
                            transport, conn->peer_pid, conn->peer_uid);
  nbdkit_debug ("accepted connection %" PRIu64 " from %s", conn->id,
                conn->peer);

  bool serialize = cfg->thread_model ==
    NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS;
  if (serialize)
    lock_or_wait (&one_connection_lock, conn->id, 0, "serialize_conn");

  if (!registered) {
    conn_handshake_failed (conn, "out of memory");
    conn_set_closing (conn, "out of memory");
  }
  else if (layer_preconnect (cfg->top, cfg->readonly) == -1) {
    conn_handshake_failed (conn, "preconnect refused");
    conn_set_closing (conn, "preconnect refused");
  }
  else {
    /* The whole negotiation must finish within the handshake timeout. */
    if (cfg->handshake_timeout_ns > 0)
      conn->deadline_ns = conn->start_ns + cfg->handshake_timeout_ns;
    int r = hs_negotiate (conn);
    conn->deadline_ns = 0;
    if (r == 0) {
      metrics_conn_ready (conn->metrics, conn->nego.exportname);
      publish_info (conn);
      tx_serve (conn);
    }
    else
      conn_set_closing (conn, "handshake ended");
  }

  /* A server told to stop makes the writes it acknowledged durable
   * before it closes the plugin: a client it cut off may never get to
   * flush.
   */
  if (conn->nego.top && conn->cut_by_stop &&
      conn->nego.can_write && conn->nego.can_flush) {
    int err;
    if (layer_flush (conn->nego.top, 0, &err) == -1)
      nbdkit_debug ("flush at shutdown: %s", strerror (err));
  }
  if (conn->nego.top)
    layer_close_all (conn->nego.top);
  if (serialize)
    pthread_mutex_unlock (&one_connection_lock);
  tls_end (conn);

  /* No connection_info after connection_close. */
  if (registered)
    registry_remove (conn);
  metrics_conn_close (conn->metrics);
  NBDKIT_CONNECTION_CLOSE (conn->id,
                           conn->close_reason ? conn->close_reason : "eof",
                           (uint64_t) conn->requests,
                           (uint64_t) conn->bytes_in,
                           (uint64_t) conn->bytes_out,
                           now_ns () - conn->start_ns);
  nbdkit_debug ("closed connection %" PRIu64 " (%s)", conn->id,
                conn->close_reason ? conn->close_reason : "eof");

  close (sockin);
  if (sockout != sockin)
    close (sockout);
  conn_set_current (NULL, 0);
  public_free_interned (conn);
  layer_forget_default_exports (conn);
  free (conn->nego.exportname);
  free (conn->nego.meta_export);
  conn_io_free (conn);
  pthread_mutex_destroy (&conn->read_lock);
  pthread_mutex_destroy (&conn->write_lock);
  pthread_mutex_destroy (&conn->status_lock);
  pthread_mutex_destroy (&conn->payload_lock);
  pthread_cond_destroy (&conn->payload_back);
  pthread_mutex_destroy (&conn->intern_lock);
  free (conn);
}
