/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzzing: the server set up once, one connection per fuzz input.
 *
 * fuzz_server_init does what main() does for "nbdkit memory SIZE",
 * minus sockets and signals: it loads the memory plugin through
 * plugin_load (an instrumented build of plugins/memory, so the store is
 * covered and checked by the sanitizers too), configures it and makes
 * it ready.  The handshake has no deadline and a connection has one
 * worker, so a run depends on its input only.
 *
 * fuzz_run_connection hands one end of a socketpair to conn_handle, in
 * a thread of its own as the accept loop would, and plays the client
 * on the other end: it sends the input, closes its side, and passes
 * every byte the server writes to the reply checker until the server
 * closes.  Afterwards the memory plugin's store is recreated, so no
 * input sees what an earlier one wrote.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "fuzz-harness.h"
#include "reply-checker.h"

/* A server that has not answered for this long is stuck. */
#define STUCK_MS 10000

static struct config cfg;
static struct layer *plugin;

/* $NBDKIT_FUZZ_PLUGIN, else the plugin built next to the fuzzer. */
static char *
plugin_path (void)
{
  const char *env = getenv ("NBDKIT_FUZZ_PLUGIN");
  if (env && *env)
    return strdup (env);

  char exe[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  char *slash = strrchr (exe, '/');
  if (slash)
    *slash = '\0';
  char *path;
  if (asprintf (&path, "%s/nbdkit-memory-plugin-fuzz.so", exe) == -1)
    return NULL;
  return path;
}

static void __attribute__ ((noreturn))
init_failed (const char *what)
{
  fprintf (stderr, "fuzz-harness: %s failed\n", what);
  exit (EXIT_FAILURE);
}

void
fuzz_server_init (void)
{
  cfg = (struct config) {
    .program = "nbdkit-fuzz",
    .foreground = true,
    .family = AF_UNSPEC,
    .threads = 1,               /* one worker: deterministic */
    .max_connections = 1,
    .handshake_timeout_ns = 0,  /* no deadline: no slow runs, no clock */
    .mask_handshake = 0xffff,   /* every global flag offered, as main.c */
  };
  signal (SIGPIPE, SIG_IGN);
  log_init (&cfg);

  char *path = plugin_path ();
  if (!path)
    init_failed ("finding the plugin");
  plugin = plugin_load (path, true);
  free (path);
  if (!plugin)
    init_failed ("loading the memory plugin (set $NBDKIT_FUZZ_PLUGIN?)");
  plugin->depth = 0;
  cfg.top = plugin;

  log_set_layer_name (plugin->name);
  if (layer_config (plugin, "size", FUZZ_DISK_SIZE) == -1 ||
      layer_config_complete (plugin) == -1)
    init_failed ("configuring the plugin");
  cfg.thread_model = plugin->ops->thread_model (plugin);
  if (cfg.thread_model == -1 ||
      layer_get_ready (plugin, cfg.thread_model) == -1 ||
      layer_after_fork (plugin) == -1)
    init_failed ("getting the plugin ready");
  log_set_layer_name (NULL);
}

/* An empty disk for the next input: the memory plugin keeps its store
 * from config_complete to unload, so go round that cycle again.
 */
static void
reset_disk (void)
{
  struct nbdkit_plugin *p = plugin->priv;   /* as main.c reads it */
  p->unload ();
  if (p->config_complete () == -1)
    init_failed ("recreating the memory plugin's store");
}

static void *
serve (void *arg)
{
  int fd = *(int *) arg;
  conn_handle (&cfg, fd, fd, "fuzz");     /* closes fd */
  return NULL;
}

/* Send what the socket takes now.  Returns false once the server has
 * stopped reading.
 */
static bool
send_some (int fd, const uint8_t *data, size_t len, size_t *sent)
{
  while (*sent < len) {
    ssize_t r = send (fd, data + *sent, len - *sent,
                      MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      *sent += r;
      continue;
    }
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;
    return false;               /* EPIPE, ECONNRESET: the server closed */
  }
  return true;
}

bool
fuzz_run_connection (const uint8_t *data, size_t len, bool readonly)
{
  static uint8_t buf[256 * 1024];
  int sv[2];

  cfg.readonly = readonly;
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
    perror ("fuzz-harness: socketpair");
    abort ();
  }
  struct checker *checker = checker_new (data, len);

  /* Queue as much input as fits before the server starts, so that its
   * reads see the same bytes each run.
   */
  size_t sent = 0;
  bool sending = send_some (sv[0], data, len, &sent);
  if (!sending || sent == len) {
    shutdown (sv[0], SHUT_WR);
    sending = false;
  }

  pthread_t server;
  if (pthread_create (&server, NULL, serve, &sv[1]) != 0) {
    perror ("fuzz-harness: pthread_create");
    abort ();
  }

  /* Each pass reads or writes at least one byte, or gives up. */
  for (;;) {
    struct pollfd p = {
      .fd = sv[0], .events = POLLIN | (sending ? POLLOUT : 0),
    };
    int r = poll (&p, 1, STUCK_MS);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == 0) {
      fprintf (stderr, "fuzz-harness: the server is stuck: no reply for "
               "%d ms (%zu of %zu input bytes sent)\n", STUCK_MS, sent, len);
      abort ();
    }
    if (r == -1) {
      perror ("fuzz-harness: poll");
      abort ();
    }
    if (sending && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
      sending = send_some (sv[0], data, len, &sent);
      if (!sending || sent == len) {
        shutdown (sv[0], SHUT_WR);
        sending = false;
      }
    }
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      ssize_t n = recv (sv[0], buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0)
        checker_feed (checker, buf, n);
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        break;                  /* the server closed */
    }
  }

  pthread_join (server, NULL);
  checker_finish (checker);
  bool tx = checker_in_transmission (checker);
  checker_free (checker);
  close (sv[0]);
  reset_disk ();
  return tx;
}
