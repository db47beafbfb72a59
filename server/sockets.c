/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: listening and accepting.  sock_bind_all opens the
 * listening sockets the configuration asks for (a Unix socket, TCP on
 * every address of -i/-p, AF_VSOCK with --vsock, or the fds handed
 * over by socket activation); sock_accept_loop accepts until the quit fd becomes
 * readable, running each connection in its own detached thread.  It
 * turns away clients beyond --max-connections, and rests rather than
 * spins while out of file descriptors.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "internal.h"

static int
add_fd (struct listener *l, int fd)
{
  if (int_vector_append (&l->fds, fd) == -1) {
    nbdkit_error ("realloc: %m");
    close (fd);
    return -1;
  }
  return 0;
}

/* Is a server listening on the Unix socket at PATH?  A socket that
 * refuses a connect is stale (its server is gone); anything else that
 * goes wrong counts as alive, so that nothing live is ever removed.
 */
static bool
unix_socket_alive (const struct sockaddr_un *addr)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return true;
  int r = connect (fd, (const struct sockaddr *) addr, sizeof *addr);
  int e = errno;
  close (fd);
  return r == 0 || e != ECONNREFUSED;
}

static int
bind_unix (const char *path, struct listener *l)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  if (strlen (path) >= sizeof addr.sun_path) {
    nbdkit_error ("Unix socket path is too long: %s", path);
    return -1;
  }
  strcpy (addr.sun_path, path);

  /* Only a stale socket is replaced: a file, a directory or the socket
   * of a live server at PATH is refused, as nbdkit refuses them.
   */
  struct stat st;
  if (lstat (path, &st) == 0) {
    if (!S_ISSOCK (st.st_mode) || unix_socket_alive (&addr)) {
      nbdkit_error ("%s: %s", path, strerror (EADDRINUSE));
      return -1;
    }
    nbdkit_debug ("%s: replacing a stale socket", path);
    unlink (path);
  }

  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    nbdkit_error ("socket: %m");
    return -1;
  }
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) == -1 ||
      listen (fd, SOMAXCONN) == -1) {
    nbdkit_error ("bind: %s: %m", path);
    close (fd);
    return -1;
  }
  /* What the socket is, so that at exit only ours is removed. */
  if (lstat (path, &st) == 0) {
    l->unix_dev = st.st_dev;
    l->unix_ino = st.st_ino;
    l->unix_path = path;
  }
  if (NBDKIT_LISTEN_ENABLED ()) {
    char desc[sizeof addr.sun_path + 8];
    snprintf (desc, sizeof desc, "unix:%s", path);
    NBDKIT_LISTEN ((int64_t) fd, desc);
  }
  return add_fd (l, fd);
}

static int
bind_tcp (const struct config *cfg, struct listener *l)
{
  struct addrinfo hints = {
    .ai_family = cfg->family,
    .ai_socktype = SOCK_STREAM,
    .ai_flags = AI_PASSIVE | AI_ADDRCONFIG,
  };
  struct addrinfo *ai;
  const char *port = cfg->port ? cfg->port : "10809";
  int e = getaddrinfo (cfg->ipaddr, port, &hints, &ai);
  if (e != 0) {
    nbdkit_error ("getaddrinfo: %s:%s: %s",
                  cfg->ipaddr ? cfg->ipaddr : "<any>", port,
                  gai_strerror (e));
    return -1;
  }
  size_t before = l->fds.len;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    int fd = socket (a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                     a->ai_protocol);
    if (fd == -1)
      continue;
    int one = 1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6)
      setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind (fd, a->ai_addr, a->ai_addrlen) == -1) {
      if (errno == EADDRINUSE) {
        nbdkit_error ("bind: port %s is already in use", port);
        close (fd);
        freeaddrinfo (ai);
        return -1;
      }
      close (fd);
      continue;
    }
    if (listen (fd, SOMAXCONN) == -1) {
      close (fd);
      continue;
    }
    if (NBDKIT_LISTEN_ENABLED ()) {
      char host[NI_MAXHOST], serv[NI_MAXSERV], desc[NI_MAXHOST + NI_MAXSERV + 8];
      if (getnameinfo (a->ai_addr, a->ai_addrlen, host, sizeof host, serv,
                       sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        snprintf (desc, sizeof desc, "tcp:%s:%s", host, serv);
        NBDKIT_LISTEN ((int64_t) fd, desc);
      }
    }
    if (add_fd (l, fd) == -1) {
      freeaddrinfo (ai);
      return -1;
    }
  }
  freeaddrinfo (ai);
  if (l->fds.len == before) {
    nbdkit_error ("could not listen on any address for port %s", port);
    return -1;
  }
  return 0;
}

/* --vsock: listen on every CID (the host, and guests reaching it). */
static int
bind_vsock (const struct config *cfg, struct listener *l)
{
  const char *port = cfg->port ? cfg->port : "10809";
  struct sockaddr_vm addr = {
    .svm_family = AF_VSOCK,
    .svm_cid = VMADDR_CID_ANY,
    .svm_port = (unsigned) atoi (port),
  };
  int fd = socket (AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    nbdkit_error ("--vsock: socket: %m (is the vsock module loaded?)");
    return -1;
  }
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) == -1 ||
      listen (fd, SOMAXCONN) == -1) {
    nbdkit_error ("--vsock: bind: port %s: %m", port);
    close (fd);
    return -1;
  }
  if (NBDKIT_LISTEN_ENABLED ()) {
    char desc[32];
    snprintf (desc, sizeof desc, "vsock:%s", port);
    NBDKIT_LISTEN ((int64_t) fd, desc);
  }
  return add_fd (l, fd);
}

int
sock_bind_all (struct config *cfg, struct listener *l)
{
  *l = (struct listener) { .fds = empty_vector };
  /* The label applies to sockets we create: with -s or socket
   * activation there are none, and the option is harmless.
   */
  if (cfg->selinux_label && cfg->listen_fds == 0) {
    nbdkit_error ("--selinux-label: this nbdkit was built without SELinux "
                  "support (libselinux), so the label cannot be applied");
    return -1;
  }
  if (cfg->listen_fds > 0) {
    for (int i = 0; i < cfg->listen_fds; i++) {
      int fd = 3 + i;
      fcntl (fd, F_SETFD, FD_CLOEXEC);
      if (NBDKIT_LISTEN_ENABLED ())
        NBDKIT_LISTEN ((int64_t) fd, "activated");
      if (add_fd (l, fd) == -1)
        return -1;
    }
    return 0;
  }
  if (cfg->unixsocket)
    return bind_unix (cfg->unixsocket, l);
  if (cfg->vsock)
    return bind_vsock (cfg, l);
  return bind_tcp (cfg, l);
}

void
sock_remove_unix (const struct listener *l)
{
  struct stat st;
  if (l->unix_path && lstat (l->unix_path, &st) == 0 &&
      st.st_dev == l->unix_dev && st.st_ino == l->unix_ino)
    unlink (l->unix_path);
}

void
sock_close_all (struct listener *l)
{
  for (size_t i = 0; i < l->fds.len; i++)
    close (l->fds.ptr[i]);
  int_vector_reset (&l->fds);
}

struct accepted {
  const struct config *cfg;
  int fd;
  const char *transport;
};

static void *
connection_thread (void *arg)
{
  struct accepted a = *(struct accepted *) arg;
  free (arg);
  /* The late-attach watcher starts with the first connection. */
  conn_watch_start ();
  conn_handle (a.cfg, a.fd, a.fd, a.transport);
  conn_release_thread ();
  return NULL;
}

/* Close a connection we will not serve, saying why to tracers. */
static void
reject (int fd, const char *reason)
{
  if (NBDKIT_CONNECTION_REJECT_ENABLED ()) {
    /* A client gone already fails getpeername: then "unix" it is. */
    struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
    socklen_t len = sizeof ss;
    char host[NI_MAXHOST] = "unix", serv[NI_MAXSERV] = "";
    char peer[NI_MAXHOST + NI_MAXSERV + 8];
    if (getpeername (fd, (struct sockaddr *) &ss, &len) == 0 &&
        ss.ss_family != AF_UNIX)
      getnameinfo ((struct sockaddr *) &ss, len, host, sizeof host, serv,
                   sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
    if (ss.ss_family == AF_INET6)
      snprintf (peer, sizeof peer, "[%s]:%s", host, serv);
    else
      snprintf (peer, sizeof peer, "%s%s%s", host, *serv ? ":" : "", serv);
    NBDKIT_CONNECTION_REJECT ((int64_t) fd, peer, reason);
  }
  close (fd);
}

/* Out of file descriptors or memory: the client stays queued and the
 * listening socket stays readable, so accepting again at once would
 * spin.
 */
static bool
out_of_resources (int err)
{
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* A Unix socket's send buffer starts at net.core.wmem_default (208
 * KiB on Debian), less than one 1 MiB reply, so a large read used to
 * go out in five or more pieces, each a sleep until the client had
 * taken the last and a wake-up when it had.  Asking for UNIX_SNDBUF
 * gets what the kernel allows without privileges: the smaller of that
 * and net.core.wmem_max, doubled for its own overhead (416 KiB with
 * Debian's default wmem_max).  Measured, 1 MiB sequential reads QD8
 * ran 1.75x faster (bench/HISTORY.md, "Unix send buffer").  A buffer
 * already at least that large is left alone.  TCP keeps the kernel's
 * own tuning: setting a size there would turn it off, and gained
 * nothing.
 */
#define UNIX_SNDBUF (1024 * 1024)

/* What asking for UNIX_SNDBUF gets (or would, if wmem_max cannot be
 * read): only the accept loop calls this.
 */
static int
sndbuf_granted (void)
{
  static int granted;
  if (granted == 0) {
    long max = UNIX_SNDBUF;
    FILE *f = fopen ("/proc/sys/net/core/wmem_max", "r");
    if (f) {
      if (fscanf (f, "%ld", &max) != 1 || max <= 0 || max > UNIX_SNDBUF)
        max = UNIX_SNDBUF;
      fclose (f);
    }
    granted = 2 * (int) max;
  }
  return granted;
}

static void
grow_sndbuf (int fd)
{
  int v;
  socklen_t len = sizeof v;
  if (getsockopt (fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == -1 ||
      v >= sndbuf_granted ())
    return;
  v = UNIX_SNDBUF;
  if (setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) == 0 &&
      getsockopt (fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0)
    nbdkit_debug ("unix socket send buffer: %d bytes", v);
}

/* Accept one client.  Returns 0, or the errno of an accept that failed
 * for want of resources (the caller backs off and reports it).
 */
static int
accept_one (const struct config *cfg, int lfd, bool stopping)
{
  int fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC);
  if (fd == -1) {
    if (out_of_resources (errno))
      return errno;
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
      nbdkit_error ("accept: %m");
    return 0;
  }
  if (stopping) {
    reject (fd, "shutdown");
    return 0;
  }
  if (!conn_admit (cfg->max_connections)) {
    NBDKIT_LIMIT_HIT (probe_u64 (0), "connections");
    nbdkit_debug ("refusing a connection: %u connections already",
                  cfg->max_connections);
    reject (fd, "limit");
    return 0;
  }

  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  const char *transport = cfg->listen_fds > 0 ? "activated" : "unix";
  if (getsockname (fd, (struct sockaddr *) &ss, &len) == -1)
    ss.ss_family = AF_UNSPEC;
  if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
    int one = 1;
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* --keepalive: the kernel probes an idle client, so one that
     * vanished (a crashed host, a cut cable) is noticed and its
     * connection ends instead of waiting for ever.
     */
    if (cfg->keepalive &&
        setsockopt (fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == -1)
      nbdkit_debug ("setsockopt SO_KEEPALIVE: %m");
    transport = "tcp";
  }
  else if (ss.ss_family == AF_UNIX)
    grow_sndbuf (fd);
  else if (ss.ss_family == AF_VSOCK)
    transport = "vsock";

  struct accepted *a = malloc (sizeof *a);
  if (!a) {
    conn_release ();
    close (fd);
    return 0;
  }
  *a = (struct accepted) { cfg, fd, transport };

  /* Joinable: finished ones are joined here and at shutdown. */
  conn_reap_threads ();
  pthread_t t;
  int e = pthread_create (&t, NULL, connection_thread, a);
  if (e != 0) {
    conn_release ();
    errno = e;
    nbdkit_error ("pthread_create: %m");
    close (fd);
    free (a);
  }
  return 0;
}

/* How long the accept loop rests when out of resources, so that
 * connections ending meanwhile can free some.
 */
#define ACCEPT_BACKOFF_MS 100

void
sock_accept_loop (const struct config *cfg, struct listener *l, int quit_fd)
{
  struct pollfd *p = calloc (l->fds.len + 1, sizeof *p);
  if (!p) {
    nbdkit_error ("calloc: %m");
    return;
  }
  for (size_t i = 0; i < l->fds.len; i++)
    p[i] = (struct pollfd) { .fd = l->fds.ptr[i], .events = POLLIN };
  p[l->fds.len] = (struct pollfd) { .fd = quit_fd, .events = POLLIN };

  /* While accept fails for want of resources, only the quit fd is
   * watched, for ACCEPT_BACKOFF_MS at a time.  The failure is reported
   * once per episode, not once per attempt, and so is its end, so that
   * whoever reads the log knows the outage is over and how long it
   * lasted.
   */
  bool starved = false, reported = false;
  int starved_err = 0;
  uint64_t starved_since = 0;
  for (;;) {
    int r = starved ? poll (&p[l->fds.len], 1, ACCEPT_BACKOFF_MS)
                    : poll (p, l->fds.len + 1, -1);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      nbdkit_error ("poll: %m");
      break;
    }
    if (starved) {
      starved = false;
      if (r == 0)
        continue;             /* rested: try accepting again */
      for (size_t i = 0; i < l->fds.len; i++)
        p[i].revents = 0;
    }
    /* Connections already waiting when we are told to stop are
     * accepted only to be turned away.
     */
    bool stopping = p[l->fds.len].revents != 0;
    int err = 0;
    for (size_t i = 0; i < l->fds.len; i++)
      if ((p[i].revents & POLLIN) && err == 0)
        err = accept_one (cfg, l->fds.ptr[i], stopping);
    if (stopping)
      break;
    if (err != 0) {
      if (!reported) {
        errno = err;
        nbdkit_error ("accept: %m (not accepting for a while)");
        reported = true;
        starved_err = err;
        starved_since = now_ns ();
      }
      starved = true;
    }
    else if (reported) {
      errno = starved_err;
      nbdkit_error ("accept: %m for %.1f s: accepting again",
                    (now_ns () - starved_since) / 1e9);
      reported = false;
    }
  }
  free (p);
}
