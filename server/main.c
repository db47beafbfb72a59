/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the start-up order.
 *
 *   parse options (options.c) -> load plugin and filters -> configure
 *   them -> bind sockets (sockets.c) -> daemonise, pid file, -u/-g
 *   (daemon.c) -> run the --run command (captive.c) -> accept until
 *   told to stop -> wind connections down -> unload
 *
 * The configuration (struct config) is filled by options.c and is
 * read-only once the first connection thread starts; runtime.c
 * publishes it, and holds the stop's state (the quit pipe that signal
 * handlers, the --run waiter and nbdkit_shutdown write to).
 */
#include <config.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "internal.h"

static void
on_signal (int sig)
{
  server_request_shutdown ("signal");
}

/* --help, --version, --dump-plugin: answered once the layers are
 * loaded, then the process exits.
 */
static void
answer_action (struct config *cfg)
{
  switch (cfg->action) {
  case ACTION_HELP:
    options_usage (stdout, cfg->program);
    printf ("\n");
    for (struct layer *l = cfg->top; l; l = l->next)
      l->ops->usage (l);
    break;
  case ACTION_VERSION:
    options_print_version (cfg);
    break;
  case ACTION_DUMP_PLUGIN: {
    struct layer *plugin = cfg->top;
    while (plugin->next)
      plugin = plugin->next;
    plugin->ops->dump_fields (plugin);
    break;
  }
  case ACTION_SERVE:
    return;
  }
  exit (EXIT_SUCCESS);
}

/* Load the plugin, then the filters from the innermost out.  Messages
 * while loading a layer carry no layer name: the layer is not there
 * yet, and the one loaded before it is not to blame.
 */
static int
load_layers (struct config *cfg)
{
  log_set_layer_name (NULL);
  struct layer *plugin = plugin_load (cfg->plugin_name, false);
  log_set_layer_name (NULL);
  if (!plugin)
    return -1;
  cfg->top = plugin;
  for (size_t i = cfg->filters.len; i-- > 0; ) {
    struct layer *f = filter_load (cfg->filters.ptr[i], cfg->top);
    log_set_layer_name (NULL);
    if (!f)
      return -1;
    cfg->top = f;
  }
  unsigned depth = 0;
  for (struct layer *l = cfg->top; l; l = l->next)
    l->depth = depth++;
  log_remember_layers (cfg->top);
  return 0;
}

/* -D flags: nbdkit.* are the server's own, the rest name a layer. */
static int
set_debug_flags (const struct config *cfg)
{
  for (size_t i = 0; i < cfg->debug_flags.len; i++) {
    const char *arg = cfg->debug_flags.ptr[i];
    int r = strncmp (arg, "nbdkit.", 7) == 0
      ? log_set_server_debug_flag (arg)
      : layer_set_debug_flag (cfg->top, arg);
    if (r == -1)
      return -1;
  }
  return 0;
}

/* The weakest thread model of any layer rules, then get_ready from
 * the plugin outwards.
 */
static int
get_layers_ready (struct config *cfg)
{
  cfg->thread_model = NBDKIT_THREAD_MODEL_PARALLEL;
  for (struct layer *l = cfg->top; l; l = l->next) {
    int m = l->ops->thread_model (l);
    if (m == -1)
      return -1;
    if (m < cfg->thread_model)
      cfg->thread_model = m;
  }
  struct layer *stack[64];
  size_t nstack = 0;
  for (struct layer *l = cfg->top; l && nstack < 64; l = l->next)
    stack[nstack++] = l;
  while (nstack-- > 0) {
    log_set_layer_name (stack[nstack]->name);
    int r = layer_get_ready (stack[nstack], cfg->thread_model);
    log_set_layer_name (NULL);
    if (r == -1)
      return -1;
  }
  return 0;
}

/* -s: one connection on stdin/stdout, then exit. */
static void __attribute__ ((noreturn))
serve_single (struct config *cfg)
{
  if (daemon_change_user (cfg) == -1 || daemon_lock_memory (cfg) == -1)
    exit (EXIT_FAILURE);
  NBDKIT_SERVER_START (PACKAGE_VERSION, (uint64_t) getpid ());
  log_start_syslog ();
  for (struct layer *l = cfg->top; l; l = l->next)
    if (layer_after_fork (l) == -1)
      exit (EXIT_FAILURE);
  log_set_layer_name (NULL);
  if ((cfg->metrics &&
       (metrics_bind (cfg->metrics) == -1 || metrics_start () == -1)) ||
      (cfg->pidfile && daemon_write_pidfile (cfg->pidfile) == -1))
    exit (EXIT_FAILURE);
  daemon_ready ();
  NBDKIT_SERVER_READY ();
  int in = dup (STDIN_FILENO), out = dup (STDOUT_FILENO);
  /* Keep stray prints from plugins out of the protocol stream. */
  int null = open ("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2 (null, STDIN_FILENO);
    dup2 (STDERR_FILENO, STDOUT_FILENO);
    close (null);
  }
  conn_watch_start ();
  conn_handle (cfg, in, out, "stdio");
  conn_watch_stop ();
  metrics_stop ();
  NBDKIT_SERVER_STOP ("single-done");
  pool_watch_stop ();
  layer_unload_all (cfg->top);
  options_free (cfg);
  exit (EXIT_SUCCESS);
}

int
main (int argc, char *argv[])
{
  struct config cfg = {
    .program = "nbdkit",
    .family = AF_UNSPEC,
    .threads = DEFAULT_THREADS,
    .busy_poll = DEFAULT_BUSY_POLL,
    .max_connections = DEFAULT_MAX_CONNECTIONS,
    .handshake_timeout_ns = DEFAULT_HANDSHAKE_TIMEOUT * UINT64_C (1000000000),
    .mask_handshake = 0xffff,
  };

  signal (SIGPIPE, SIG_IGN);
  daemon_take_notify_socket ();
  resident_object ((const void *) main);  /* for the probes' strings */

  options_parse (&cfg, argc, argv);
  runtime_set_config (&cfg);
  if (log_init (&cfg) == -1)
    exit (EXIT_FAILURE);

  if (load_layers (&cfg) == -1)
    exit (EXIT_FAILURE);
  /* --dump-plugin answers after the parameters are given to the
   * layers, as nbdkit does: a script plugin's dump_plugin and thread
   * model depend on its script.  --help and --version need none.
   */
  if (cfg.action != ACTION_DUMP_PLUGIN)
    answer_action (&cfg);
  if (set_debug_flags (&cfg) == -1)
    exit (EXIT_FAILURE);
  log_print_environment ();
  if (options_configure (&cfg) == -1)
    exit (EXIT_FAILURE);
  if (cfg.action == ACTION_DUMP_PLUGIN)
    answer_action (&cfg);
  log_set_layer_name (cfg.top->name);
  int r = layer_config_complete (cfg.top);
  log_set_layer_name (NULL);
  if (r == -1 || get_layers_ready (&cfg) == -1)
    exit (EXIT_FAILURE);

  /* Credentials are read now, while the server may still read files
   * that -u USER could not.
   */
  if (tls_load (&cfg) == -1)
    exit (EXIT_FAILURE);
  if (runtime_contain_open_crashes)
    layer_contain_open_crashes ();

  if (cfg.exit_with_parent)
    prctl (PR_SET_PDEATHSIG, SIGTERM);

  if (runtime_stop_init () == -1) {
    nbdkit_error ("pipe2: %m");
    exit (EXIT_FAILURE);
  }
  /* With -s there is no accept loop to stop: signals keep their
   * default action and end the process.
   */
  if (cfg.single)
    serve_single (&cfg);
  struct sigaction sa = { .sa_handler = on_signal };
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGQUIT, &sa, NULL);
  sigaction (SIGHUP, &sa, NULL);

  if (cfg.unix_private) {
    cfg.tmpdir = strdup ("/tmp/nbdkitXXXXXX");
    char *path = NULL;
    if (!cfg.tmpdir || !mkdtemp (cfg.tmpdir) ||
        asprintf (&path, "%s/socket", cfg.tmpdir) == -1) {
      nbdkit_error ("could not make a private socket directory: %m");
      exit (EXIT_FAILURE);
    }
    cfg.unixsocket = path;
  }

  struct listener listener;
  if (daemon_check_ids (&cfg) == -1 ||
      sock_bind_all (&cfg, &listener) == -1 ||
      (cfg.metrics && metrics_bind (cfg.metrics) == -1) ||
      daemon_give_socket (&cfg) == -1)
    exit (EXIT_FAILURE);

  char *uri = captive_uri (&cfg);
  if (cfg.print_uri && uri && !cfg.listen_fds) {
    printf ("%s\n", uri);
    fflush (stdout);
  }

  if (!cfg.foreground) {
    if (daemon_fork () == -1)
      exit (EXIT_FAILURE);
    /* fork left the constant data out of this process's page tables. */
    resident_all (cfg.top);
  }
  /* From here on this is the process that serves. */
  NBDKIT_SERVER_START (PACKAGE_VERSION, (uint64_t) getpid ());
  log_start_syslog ();
  if (daemon_lock_memory (&cfg) == -1)
    exit (EXIT_FAILURE);
  /* The sockets are bound (privileged ports too): -u and -g give up
   * root now, before any plugin thread starts or any client connects.
   * The pid file often lives where only root may write (/run), so with
   * -u or -g it is written just before.
   */
  bool early_pidfile = cfg.pidfile && (cfg.user || cfg.group);
  if (early_pidfile && daemon_write_pidfile (cfg.pidfile) == -1)
    exit (EXIT_FAILURE);
  if (daemon_change_user (&cfg) == -1) {
    /* This process never served: its pid must not look like a server's
     * (nbdkit writes the file only after changing user).
     */
    if (early_pidfile)
      unlink (cfg.pidfile);
    exit (EXIT_FAILURE);
  }
  for (struct layer *l = cfg.top; l; l = l->next)
    if (layer_after_fork (l) == -1)
      exit (EXIT_FAILURE);
  log_set_layer_name (NULL);
  if (metrics_start () == -1 ||
      (cfg.pidfile && !early_pidfile &&
       daemon_write_pidfile (cfg.pidfile) == -1))
    exit (EXIT_FAILURE);

  struct captive cap = { .pid = -1 };
  if (cfg.run && captive_start (&cfg, uri ? uri : "", &cap) == -1)
    exit (EXIT_FAILURE);

  daemon_ready ();
  NBDKIT_SERVER_READY ();
  sock_accept_loop (&cfg, &listener, server_quit_fd ());
  daemon_stopping ();
  NBDKIT_SERVER_STOP (server_stop_reason ());
  nbdkit_debug ("stopping: %s", server_stop_reason ());

  sock_close_all (&listener);
  metrics_stop ();
  conn_watch_stop ();
  conn_shutdown_all (5);
  int status = captive_wait (&cap);
  if (!cfg.listen_fds)
    sock_remove_unix (&listener);
  if (cfg.tmpdir)
    rmdir (cfg.tmpdir);
  /* The pid file stays, as nbdkit(1) -P promises: scripts read the
   * pid after the server has gone.
   */
  /* Unload only when no connection thread can still be in a plugin;
   * the parameters' keys are the plugin's until then.
   */
  if (conn_count_active () == 0) {
    pool_watch_stop ();
    layer_unload_all (cfg.top);
    options_free (&cfg);
  }
  free (uri);
  exit (status);
}
