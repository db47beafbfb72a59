/* nbdkit server: the command line and the start-up order.
 *
 *   parse options -> load plugin and filters -> configure them ->
 *   bind sockets -> daemonise (or run the --run command) -> accept
 *   until told to stop -> wind connections down -> unload
 *
 * The configuration (struct config) is filled here and read-only once
 * the first connection thread starts.  The quit pipe is the one piece
 * of process-wide mutable state: signal handlers, the --run waiter and
 * nbdkit_shutdown write to it to stop the accept loop.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

/* Written by signal handlers and nbdkit_shutdown, read by the accept
 * loop.  Set up once before any thread starts.
 */
static int quit_pipe[2] = { -1, -1 };
static const char *volatile stop_reason;

/* The configuration, published read-only for nbdkit_stdio_safe. */
static const struct config *the_config;

const struct config *
server_config (void)
{
  return the_config;
}

void
server_request_shutdown (const char *reason)
{
  if (!stop_reason)
    stop_reason = reason;
  if (quit_pipe[1] >= 0) {
    char c = 0;
    ssize_t r = write (quit_pipe[1], &c, 1);
    (void) r;
  }
}

static void
on_signal (int sig)
{
  server_request_shutdown ("signal");
}

static void
usage (FILE *fp, const char *program)
{
  fprintf (fp,
"usage: %s [options] PLUGIN [key=value ...] [--run CMD]\n"
"\n"
"Serve PLUGIN's data over the NBD protocol.  PLUGIN is a short name\n"
"(memory, file, null, ...) or the path of a plugin .so.\n"
"\n"
"  -D, --debug NAME.FLAG=N  set a plugin or filter debug flag\n"
"  -e, --exportname NAME    export name used in $uri and --print-uri\n"
"  -f, --foreground         do not fork into the background\n"
"      --filter=FILTER      add a filter (the first is nearest the client)\n"
"  -i, --ipaddr ADDR        listen on this address only\n"
"  -o, --oldstyle           oldstyle negotiation (old clients only)\n"
"  -p, --port PORT          TCP port (default 10809)\n"
"  -P, --pidfile FILE       write the server's pid here\n"
"  -r, --readonly           refuse writes\n"
"  -s, --single             serve one connection on stdin/stdout\n"
"  -t, --threads N          worker threads per connection (default %d)\n"
"  -U, --unix SOCKET        listen on a Unix socket (- for a private one)\n"
"  -v, --verbose            print debug messages\n"
"  -4, -6                   IPv4 or IPv6 only\n"
"      --run CMD            run CMD with $uri set, exit with its status\n"
"      --exit-with-parent   exit when the parent process exits\n"
"      --no-sr              do not offer structured replies\n"
"      --log=stderr|syslog  where messages go\n"
"      --max-connections N  refuse clients beyond N at once (default %d)\n"
"      --handshake-timeout S  drop clients still negotiating after S\n"
"                           seconds (default %d; 0 for none)\n"
"      --busy-poll US       poll for a client's next request for up to US\n"
"                           microseconds before sleeping (default %d; 0\n"
"                           for never)\n"
"      --tls=off|on|require  offer TLS (STARTTLS), or insist on it\n"
"      --tls-certificates DIR  X.509 files: ca-cert.pem, server-cert.pem,\n"
"                           server-key.pem (and ca-crl.pem)\n"
"      --tls-psk FILE       PSK keys (psktool format) instead of X.509\n"
"      --tls-verify-peer    require a client certificate signed by the CA\n"
"  -u, --user USER          run as USER once the sockets are bound\n"
"  -g, --group GROUP        run as GROUP once the sockets are bound\n"
"      --print-uri          print the URI clients can use\n"
"      --dump-config        print the build configuration\n"
"      --dump-plugin        print what the plugin provides\n"
"  -V, --version            print the version\n"
"      --help\n"
"\n"
"See nbdkit(1) and nbdkit-probes(1).\n",
           program, DEFAULT_THREADS, DEFAULT_MAX_CONNECTIONS,
           DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_BUSY_POLL);
}

enum {
  OPT_RUN = 256, OPT_FILTER, OPT_DUMP_CONFIG, OPT_DUMP_PLUGIN, OPT_HELP,
  OPT_VERSION, OPT_PRINT_URI, OPT_EXIT_WITH_PARENT, OPT_NO_SR, OPT_LOG,
  OPT_MAX_CONNECTIONS, OPT_HANDSHAKE_TIMEOUT, OPT_TLS, OPT_TLS_CERTIFICATES,
  OPT_TLS_PSK, OPT_TLS_VERIFY_PEER, OPT_BUSY_POLL,
};

static const struct option long_options[] = {
  { "debug", required_argument, NULL, 'D' },
  { "exportname", required_argument, NULL, 'e' },
  { "export-name", required_argument, NULL, 'e' },
  { "foreground", no_argument, NULL, 'f' },
  { "no-fork", no_argument, NULL, 'f' },
  { "filter", required_argument, NULL, OPT_FILTER },
  { "ipaddr", required_argument, NULL, 'i' },
  { "port", required_argument, NULL, 'p' },
  { "oldstyle", no_argument, NULL, 'o' },
  { "pidfile", required_argument, NULL, 'P' },
  { "pid-file", required_argument, NULL, 'P' },
  { "readonly", no_argument, NULL, 'r' },
  { "read-only", no_argument, NULL, 'r' },
  { "single", no_argument, NULL, 's' },
  { "threads", required_argument, NULL, 't' },
  { "unix", required_argument, NULL, 'U' },
  { "verbose", no_argument, NULL, 'v' },
  { "run", required_argument, NULL, OPT_RUN },
  { "exit-with-parent", no_argument, NULL, OPT_EXIT_WITH_PARENT },
  { "no-sr", no_argument, NULL, OPT_NO_SR },
  { "no-structured-replies", no_argument, NULL, OPT_NO_SR },
  { "log", required_argument, NULL, OPT_LOG },
  { "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
  { "handshake-timeout", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT },
  { "busy-poll", required_argument, NULL, OPT_BUSY_POLL },
  { "tls", required_argument, NULL, OPT_TLS },
  { "tls-certificates", required_argument, NULL, OPT_TLS_CERTIFICATES },
  { "tls-psk", required_argument, NULL, OPT_TLS_PSK },
  { "tls-verify-peer", no_argument, NULL, OPT_TLS_VERIFY_PEER },
  { "user", required_argument, NULL, 'u' },
  { "group", required_argument, NULL, 'g' },
  { "print-uri", no_argument, NULL, OPT_PRINT_URI },
  { "dump-config", no_argument, NULL, OPT_DUMP_CONFIG },
  { "dump-plugin", no_argument, NULL, OPT_DUMP_PLUGIN },
  { "help", no_argument, NULL, OPT_HELP },
  { "version", no_argument, NULL, OPT_VERSION },
  { NULL, 0, NULL, 0 },
};

static void
dump_config (void)
{
  printf ("binary=%s/nbdkit\n", SBINDIR);
  printf ("filterdir=%s\n", FILTERDIR);
  printf ("libdir=%s\n", LIBDIR);
  printf ("name=%s\n", PACKAGE_NAME);
  printf ("plugindir=%s\n", PLUGINDIR);
  printf ("probes=%s\n",
#ifdef ENABLE_PROBES
          "yes"
#else
          "no"
#endif
          );
  printf ("sbindir=%s\n", SBINDIR);
  printf ("tls=%s\n", tls_available () ? "yes" : "no");
  printf ("version=%s\n", PACKAGE_VERSION);
  printf ("version_major=%d\n", atoi (PACKAGE_VERSION));
  printf ("version_minor=%d\n", atoi (strchr (PACKAGE_VERSION, '.') + 1));
}

/* A key=value parameter's key: a letter or _, then letters, digits,
 * _, - and '.'.  Anything else is a bare value for the magic key.
 */
static bool
is_key (const char *s, size_t len)
{
  if (len == 0 || !(isalpha ((unsigned char) s[0]) || s[0] == '_'))
    return false;
  for (size_t i = 1; i < len; i++)
    if (!isalnum ((unsigned char) s[i]) && !strchr ("_-.", s[i]))
      return false;
  return true;
}

/* Percent-encode S for a URI: unreserved characters, and those in
 * KEEP ("/" in a path or query value, nothing in a userinfo), go as
 * they are.
 */
static void
fput_uri_escaped (FILE *fp, const char *s, const char *keep)
{
  for (; *s; s++) {
    unsigned char c = *s;
    if (isalnum (c) || strchr ("-._~", c) || strchr (keep, c))
      fputc (c, fp);
    else
      fprintf (fp, "%%%02X", c);
  }
}

/* "USER@" in a URI's authority, or nothing without a USER. */
static void
fput_userinfo (FILE *fp, const char *user)
{
  if (user) {
    fput_uri_escaped (fp, user, "");
    fputc ('@', fp);
  }
}

/* The first username in a psktool key file ("user:hexkey" lines). */
static char *
psk_first_user (const char *path)
{
  FILE *fp = fopen (path, "r");
  char line[1024];
  char *user = NULL;
  if (!fp)
    return NULL;
  if (fgets (line, sizeof line, fp)) {
    char *colon = strchr (line, ':');
    if (colon && colon > line)
      user = strndup (line, colon - line);
  }
  fclose (fp);
  return user;
}

/* The URI a client uses to reach us, in a malloc'd string. */
static char *
make_uri (const struct config *cfg)
{
  char *uri = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&uri, &len);
  if (!fp)
    return NULL;
  const char *name = cfg->exportname ? cfg->exportname : "";
  const char *scheme = cfg->tls != TLS_OFF ? "nbds" : "nbd";
  char sep = '?';
  /* The PSK username goes in the authority, as libnbd expects. */
  char *user = cfg->tls != TLS_OFF && cfg->tls_psk
    ? psk_first_user (cfg->tls_psk) : NULL;
  if (cfg->unixsocket) {
    fprintf (fp, "%s+unix://", scheme);
    fput_userinfo (fp, user);
    fprintf (fp, "/");
    fput_uri_escaped (fp, name, "/");
    fprintf (fp, "?socket=");
    fput_uri_escaped (fp, cfg->unixsocket, "/");
    sep = '&';
  }
  else {
    const char *host = cfg->ipaddr ? cfg->ipaddr : "localhost";
    fprintf (fp, "%s://", scheme);
    fput_userinfo (fp, user);
    fprintf (fp, strchr (host, ':') ? "[%s]" : "%s", host);
    if (cfg->port && strcmp (cfg->port, "10809") != 0)
      fprintf (fp, ":%s", cfg->port);
    fprintf (fp, "/");
    fput_uri_escaped (fp, name, "/");
  }
  /* Enough for a client on this machine to authenticate (libnbd reads
   * these query parameters): the PSK file and its first user, or the
   * certificate directory (its ca-cert.pem).
   */
  if (cfg->tls != TLS_OFF && cfg->tls_psk) {
    fprintf (fp, "%ctls-psk-file=", sep);
    fput_uri_escaped (fp, cfg->tls_psk, "/");
  }
  else if (cfg->tls != TLS_OFF && cfg->tls_certificates) {
    fprintf (fp, "%ctls-certificates=", sep);
    fput_uri_escaped (fp, cfg->tls_certificates, "/");
  }
  fclose (fp);
  free (user);
  return uri;
}

/* --run: start CMD with the connection details in its environment. */
static pid_t
start_run (const struct config *cfg, const char *uri)
{
  pid_t pid = fork ();
  if (pid == -1) {
    nbdkit_error ("fork: %m");
    return -1;
  }
  if (pid > 0)
    return pid;

  char nbd[PATH_MAX + 64];
  const char *name = cfg->exportname ? cfg->exportname : "";
  if (cfg->unixsocket)
    snprintf (nbd, sizeof nbd, "nbd:unix:%s%s%s", cfg->unixsocket,
              *name ? ":exportname=" : "", name);
  else
    snprintf (nbd, sizeof nbd, "nbd:%s:%s%s%s",
              cfg->ipaddr ? cfg->ipaddr : "localhost",
              cfg->port ? cfg->port : "10809",
              *name ? ":exportname=" : "", name);
  setenv ("uri", uri, 1);
  setenv ("nbd", nbd, 1);
  setenv ("exportname", name, 1);
  setenv ("tls", cfg->tls == TLS_REQUIRE ? "2" : cfg->tls == TLS_ON ? "1" : "0",
          1);
  if (cfg->unixsocket) {
    setenv ("unixsocket", cfg->unixsocket, 1);
    setenv ("port", "", 1);
  }
  else {
    setenv ("unixsocket", "", 1);
    setenv ("port", cfg->port ? cfg->port : "10809", 1);
  }
  signal (SIGPIPE, SIG_DFL);
  execl ("/bin/sh", "sh", "-c", cfg->run, (char *) NULL);
  perror ("nbdkit: --run: /bin/sh");
  _exit (127);
}

struct run_waiter {
  pid_t pid;
  int status;
};

static void *
wait_for_run (void *arg)
{
  struct run_waiter *rw = arg;
  while (waitpid (rw->pid, &rw->status, 0) == -1 && errno == EINTR)
    ;
  server_request_shutdown ("run-exited");
  return NULL;
}

static int
run_exit_status (int status)
{
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return 1;
}

static int
write_pidfile (const char *path)
{
  char tmp[PATH_MAX];
  if (snprintf (tmp, sizeof tmp, "%s.tmp", path) >= (int) sizeof tmp) {
    nbdkit_error ("pidfile path too long");
    return -1;
  }
  FILE *fp = fopen (tmp, "w");
  if (!fp || fprintf (fp, "%d\n", (int) getpid ()) < 0 ||
      fclose (fp) == EOF || rename (tmp, path) == -1) {
    nbdkit_error ("%s: %m", path);
    return -1;
  }
  return 0;
}

/* Fork into the background; the parent exits once the child is set. */
static int
daemonise (void)
{
  pid_t pid = fork ();
  if (pid == -1) {
    nbdkit_error ("fork: %m");
    return -1;
  }
  if (pid > 0)
    _exit (EXIT_SUCCESS);
  setsid ();
  pid = fork ();
  if (pid == -1)
    _exit (EXIT_FAILURE);
  if (pid > 0)
    _exit (EXIT_SUCCESS);
  if (chdir ("/") == -1)
    return -1;
  int fd = open ("/dev/null", O_RDWR);
  if (fd >= 0) {
    dup2 (fd, STDIN_FILENO);
    dup2 (fd, STDOUT_FILENO);
    dup2 (fd, STDERR_FILENO);
    if (fd > 2)
      close (fd);
  }
  return 0;
}

/* -u and -g: become GROUP and USER (names or numbers).  With -u alone
 * the user's own group and supplementary groups are taken.
 */
static int
change_user (const struct config *cfg)
{
  gid_t gid = (gid_t) -1;
  struct passwd *pw = NULL;
  char *end;

  if (!cfg->user && !cfg->group)
    return 0;
  if (cfg->user) {
    pw = getpwnam (cfg->user);
    if (!pw) {
      errno = 0;
      unsigned long n = strtoul (cfg->user, &end, 10);
      if (errno || *end || end == cfg->user || !(pw = getpwuid (n))) {
        nbdkit_error ("-u: no such user: %s", cfg->user);
        return -1;
      }
    }
    gid = pw->pw_gid;
  }
  if (cfg->group) {
    struct group *gr = getgrnam (cfg->group);
    if (gr)
      gid = gr->gr_gid;
    else {
      errno = 0;
      unsigned long n = strtoul (cfg->group, &end, 10);
      if (errno || *end || end == cfg->group || n >= (gid_t) -1) {
        nbdkit_error ("-g: no such group: %s", cfg->group);
        return -1;
      }
      gid = n;
    }
  }

  /* Groups first: once the uid is dropped they cannot change. */
  if (pw && !cfg->group ? initgroups (pw->pw_name, gid) == -1
                        : setgroups (1, &gid) == -1) {
    nbdkit_error ("setting supplementary groups: %m");
    return -1;
  }
  if (setgid (gid) == -1) {
    nbdkit_error ("setgid (%u): %m", (unsigned) gid);
    return -1;
  }
  if (pw && setuid (pw->pw_uid) == -1) {
    nbdkit_error ("setuid (%u): %m", (unsigned) pw->pw_uid);
    return -1;
  }
  nbdkit_debug ("running as uid %u, gid %u", (unsigned) getuid (),
                (unsigned) getgid ());
  return 0;
}

static void
fail (const char *program, const char *fs, const char *arg)
{
  fprintf (stderr, "%s: ", program);
  fprintf (stderr, fs, arg);
  fprintf (stderr, "\n");
  exit (EXIT_FAILURE);
}

/* ARG as a whole number from MIN to MAX, or exit saying MESSAGE (a
 * format taking ARG as its one %s).
 */
static unsigned long
option_number (const char *program, const char *arg, unsigned long min,
               unsigned long max, const char *message)
{
  char *end;
  errno = 0;
  unsigned long n = strtoul (arg, &end, 10);
  if (errno || *end || end == arg || n < min || n > max)
    fail (program, message, arg);
  return n;
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
    .handshake_timeout = DEFAULT_HANDSHAKE_TIMEOUT,
  };
  const char **filters = NULL;
  size_t nfilters = 0;
  const char **debug_flags = NULL;
  size_t ndebug = 0;
  bool dump_plugin = false, help = false, version = false;
  bool unix_private = false;
  const char *log_to = NULL;
  int c;

  signal (SIGPIPE, SIG_IGN);
  resident_object ((const void *) main);  /* for the probes' strings */
  opterr = 0;                   /* we print our own one-line errors */

  while ((c = getopt_long (argc, argv, "46D:e:fg:i:op:P:rst:u:U:vV", long_options,
                           NULL)) != -1) {
    switch (c) {
    case '4': cfg.family = AF_INET; break;
    case '6': cfg.family = AF_INET6; break;
    case 'D':
      debug_flags = realloc (debug_flags, (ndebug + 1) * sizeof *debug_flags);
      if (!debug_flags) fail (cfg.program, "%s", "out of memory");
      debug_flags[ndebug++] = optarg;
      break;
    case 'e':
      if (strlen (optarg) > 4096)
        fail (cfg.program, "%s", "-e: export name is too long");
      cfg.exportname = optarg;
      break;
    case 'f': cfg.foreground = true; break;
    case 'g': cfg.group = optarg; break;
    case 'u': cfg.user = optarg; break;
    case OPT_TLS:
      if (!strcmp (optarg, "off") || !strcmp (optarg, "no") ||
          !strcmp (optarg, "false") || !strcmp (optarg, "0"))
        cfg.tls = TLS_OFF;
      else if (!strcmp (optarg, "on") || !strcmp (optarg, "yes") ||
               !strcmp (optarg, "true") || !strcmp (optarg, "1"))
        cfg.tls = TLS_ON;
      else if (!strcmp (optarg, "require") || !strcmp (optarg, "required")
               || !strcmp (optarg, "force"))
        cfg.tls = TLS_REQUIRE;
      else
        fail (cfg.program, "--tls: \"%s\" must be off, on or require",
              optarg);
      break;
    case OPT_TLS_CERTIFICATES: cfg.tls_certificates = optarg; break;
    case OPT_TLS_PSK: cfg.tls_psk = optarg; break;
    case OPT_TLS_VERIFY_PEER: cfg.tls_verify_peer = true; break;
    case 'i': cfg.ipaddr = optarg; break;
    case 'o': cfg.oldstyle = true; break;
    case 'p':
      option_number (cfg.program, optarg, 0, 65535,
                     "-p: \"%s\" is not a valid port number");
      cfg.port = optarg;
      break;
    case 'P': cfg.pidfile = optarg; break;
    case 'r': cfg.readonly = true; break;
    case 's': cfg.single = true; break;
    case 't':
      cfg.threads = option_number (cfg.program, optarg, 1, 1024,
                                   "-t: \"%s\" is not a thread count from 1 "
                                   "to 1024");
      break;
    case 'U':
      if (strcmp (optarg, "-") == 0)
        unix_private = true;
      else
        cfg.unixsocket = optarg;
      break;
    case 'v': cfg.verbose = true; break;
    case 'V': version = true; break;
    case OPT_RUN: cfg.run = optarg; break;
    case OPT_FILTER:
      filters = realloc (filters, (nfilters + 1) * sizeof *filters);
      if (!filters) fail (cfg.program, "%s", "out of memory");
      filters[nfilters++] = optarg;
      break;
    case OPT_EXIT_WITH_PARENT: cfg.exit_with_parent = true; break;
    case OPT_NO_SR: cfg.no_sr = true; break;
    case OPT_MAX_CONNECTIONS:
      cfg.max_connections =
        option_number (cfg.program, optarg, 1, 1000000,
                       "--max-connections: \"%s\" is not a count from 1 "
                       "to 1000000");
      break;
    case OPT_HANDSHAKE_TIMEOUT:
      cfg.handshake_timeout =
        option_number (cfg.program, optarg, 0, 86400,
                       "--handshake-timeout: \"%s\" is not a number of "
                       "seconds from 0 to 86400");
      break;
    case OPT_BUSY_POLL:
      cfg.busy_poll =
        option_number (cfg.program, optarg, 0, MAX_BUSY_POLL,
                       "--busy-poll: \"%s\" is not a number of "
                       "microseconds from 0 to 10000");
      break;
    case OPT_LOG:
      if (strcmp (optarg, "stderr") && strcmp (optarg, "syslog"))
        fail (cfg.program, "--log: \"%s\" must be stderr or syslog", optarg);
      log_to = optarg;
      break;
    case OPT_PRINT_URI: cfg.print_uri = true; break;
    case OPT_DUMP_CONFIG: dump_config (); exit (EXIT_SUCCESS);
    case OPT_DUMP_PLUGIN: dump_plugin = true; break;
    case OPT_HELP: help = true; break;
    case OPT_VERSION: version = true; break;
    default:
      if (optopt && c == '?' && strchr ("DegiPptuU", optopt))
        fprintf (stderr, "%s: option '-%c' needs an argument\n",
                 cfg.program, optopt);
      else if (optopt)
        fprintf (stderr, "%s: unknown option '-%c'; try '%s --help'\n",
                 cfg.program, optopt, cfg.program);
      else
        fprintf (stderr, "%s: unknown or incomplete option '%s'; "
                 "try '%s --help'\n", cfg.program, argv[optind - 1],
                 cfg.program);
      exit (EXIT_FAILURE);
    }
  }

  if (optind >= argc) {
    if (help) {
      usage (stdout, cfg.program);
      exit (EXIT_SUCCESS);
    }
    if (version) {
      printf ("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
      exit (EXIT_SUCCESS);
    }
    fail (cfg.program, "%s",
          "no plugin given on the command line; try 'nbdkit --help'");
  }

  /* Socket activation, as systemd and systemd-socket-activate do it. */
  const char *lpid = getenv ("LISTEN_PID"), *lfds = getenv ("LISTEN_FDS");
  if (lpid && lfds && atol (lpid) == (long) getpid () && atoi (lfds) > 0) {
    cfg.listen_fds = atoi (lfds);
    unsetenv ("LISTEN_PID");
    unsetenv ("LISTEN_FDS");
    unsetenv ("LISTEN_FDNAMES");
    if (cfg.unixsocket || unix_private || cfg.port || cfg.ipaddr)
      fail (cfg.program, "%s",
            "-U, -p and -i cannot be used with socket activation");
  }
  if (cfg.single && (cfg.unixsocket || unix_private || cfg.port ||
                     cfg.run || cfg.listen_fds))
    fail (cfg.program, "%s", "-s cannot be combined with -U, -p or --run");
  if ((cfg.unixsocket || unix_private) && (cfg.port || cfg.ipaddr))
    fail (cfg.program, "%s", "-U cannot be combined with -p or -i");
  if (cfg.tls == TLS_OFF &&
      (cfg.tls_psk || cfg.tls_certificates || cfg.tls_verify_peer))
    fail (cfg.program, "%s", "--tls-psk, --tls-certificates and "
          "--tls-verify-peer need --tls=on or --tls=require");
  if (cfg.tls_psk && (cfg.tls_certificates || cfg.tls_verify_peer))
    fail (cfg.program, "%s", "--tls-psk cannot be combined with "
          "--tls-certificates or --tls-verify-peer");
  if (cfg.tls != TLS_OFF && cfg.oldstyle)
    fail (cfg.program, "%s", "-o cannot be used with --tls (oldstyle "
          "negotiation has no STARTTLS)");

  /* --run, -s, socket activation and --exit-with-parent keep the server
   * in the foreground (a daemon has no parent to follow).
   */
  if (cfg.run || cfg.single || cfg.listen_fds || cfg.exit_with_parent ||
      dump_plugin || help || version)
    cfg.foreground = true;

  /* Relative paths must survive the chdir ("/") of daemonising. */
  if (cfg.pidfile && cfg.pidfile[0] != '/') {
    cfg.pidfile = nbdkit_absolute_path (cfg.pidfile);
    if (!cfg.pidfile)
      exit (EXIT_FAILURE);
  }
  if (cfg.tls_psk && cfg.tls_psk[0] != '/') {
    cfg.tls_psk = nbdkit_absolute_path (cfg.tls_psk);
    if (!cfg.tls_psk)
      exit (EXIT_FAILURE);
  }
  if (cfg.tls_certificates && cfg.tls_certificates[0] != '/') {
    cfg.tls_certificates = nbdkit_absolute_path (cfg.tls_certificates);
    if (!cfg.tls_certificates)
      exit (EXIT_FAILURE);
  }
  if (cfg.unixsocket && cfg.unixsocket[0] != '/') {
    cfg.unixsocket = nbdkit_absolute_path (cfg.unixsocket);
    if (!cfg.unixsocket)
      exit (EXIT_FAILURE);
  }
  the_config = &cfg;
  cfg.use_syslog = log_to ? strcmp (log_to, "syslog") == 0
                          : !cfg.foreground;
  log_init (&cfg);

  /* Load the plugin, then the filters from the innermost out. */
  struct layer *plugin = plugin_load (argv[optind], false);
  if (!plugin)
    exit (EXIT_FAILURE);
  cfg.top = plugin;
  for (size_t i = nfilters; i-- > 0; ) {
    struct layer *f = filter_load (filters[i], cfg.top);
    if (!f)
      exit (EXIT_FAILURE);
    cfg.top = f;
  }
  unsigned depth = 0;
  for (struct layer *l = cfg.top; l; l = l->next)
    l->depth = depth++;

  if (help) {
    for (struct layer *l = cfg.top; l; l = l->next)
      l->ops->usage (l);
    exit (EXIT_SUCCESS);
  }
  if (version) {
    printf ("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
    struct nbdkit_plugin *p = plugin->priv;
    printf ("%s %s\n", plugin->name, p->version ? p->version : "");
    exit (EXIT_SUCCESS);
  }
  if (dump_plugin) {
    plugin->ops->dump_fields (plugin);
    exit (EXIT_SUCCESS);
  }

  for (size_t i = 0; i < ndebug; i++)
    if (layer_set_debug_flag (cfg.top, debug_flags[i]) == -1)
      exit (EXIT_FAILURE);
  free (debug_flags);

  /* Parameters: key=value, or a bare value for the magic key. */
  for (int i = optind + 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *eq = strchr (arg, '=');
    int r;
    if (eq && is_key (arg, eq - arg)) {
      char *key = strndup (arg, eq - arg);
      if (!key) fail (cfg.program, "%s", "out of memory");
      log_set_layer_name (cfg.top->name);
      r = layer_config (cfg.top, key, eq + 1);
      free (key);
    }
    else {
      const char *magic = cfg.top->ops->magic_config_key (cfg.top);
      if (!magic)
        fail (cfg.program, "parameter \"%s\" must be key=value "
              "(this plugin has no default key)", arg);
      log_set_layer_name (cfg.top->name);
      r = layer_config (cfg.top, magic, arg);
    }
    if (r == -1)
      exit (EXIT_FAILURE);
  }
  log_set_layer_name (cfg.top->name);
  if (layer_config_complete (cfg.top) == -1)
    exit (EXIT_FAILURE);

  /* The weakest thread model of any layer rules. */
  cfg.thread_model = NBDKIT_THREAD_MODEL_PARALLEL;
  for (struct layer *l = cfg.top; l; l = l->next) {
    int m = l->ops->thread_model (l);
    if (m == -1)
      exit (EXIT_FAILURE);
    if (m < cfg.thread_model)
      cfg.thread_model = m;
  }

  /* get_ready from the plugin outwards. */
  struct layer *stack[64];
  size_t nstack = 0;
  for (struct layer *l = cfg.top; l && nstack < 64; l = l->next)
    stack[nstack++] = l;
  while (nstack-- > 0) {
    log_set_layer_name (stack[nstack]->name);
    if (layer_get_ready (stack[nstack], cfg.thread_model) == -1)
      exit (EXIT_FAILURE);
  }
  log_set_layer_name (NULL);

  /* Credentials are read now, while the server may still read files
   * that -u USER could not.
   */
  if (tls_load (&cfg) == -1)
    exit (EXIT_FAILURE);
  layer_contain_open_crashes ();

  if (cfg.exit_with_parent)
    prctl (PR_SET_PDEATHSIG, SIGTERM);

  if (pipe2 (quit_pipe, O_CLOEXEC) == -1) {
    nbdkit_error ("pipe2: %m");
    exit (EXIT_FAILURE);
  }
  /* With -s there is no accept loop to stop: signals keep their
   * default action and end the process.
   */
  if (!cfg.single) {
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGQUIT, &sa, NULL);
    sigaction (SIGHUP, &sa, NULL);
  }

  if (cfg.single) {
    if (change_user (&cfg) == -1)
      exit (EXIT_FAILURE);
    NBDKIT_SERVER_START (PACKAGE_VERSION, (uint64_t) getpid ());
    log_start_syslog ();
    for (struct layer *l = cfg.top; l; l = l->next)
      if (layer_after_fork (l) == -1)
        exit (EXIT_FAILURE);
    if (cfg.pidfile && write_pidfile (cfg.pidfile) == -1)
      exit (EXIT_FAILURE);
    NBDKIT_SERVER_READY ();
    int in = dup (STDIN_FILENO), out = dup (STDOUT_FILENO);
    /* Keep stray prints from plugins out of the protocol stream. */
    int null = open ("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2 (null, STDIN_FILENO);
      dup2 (STDERR_FILENO, STDOUT_FILENO);
      close (null);
    }
    conn_handle (&cfg, in, out, "stdio");
    NBDKIT_SERVER_STOP ("single-done");
    layer_unload_all (cfg.top);
    exit (EXIT_SUCCESS);
  }

  if (unix_private) {
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
  if (sock_bind_all (&cfg, &listener) == -1)
    exit (EXIT_FAILURE);

  char *uri = make_uri (&cfg);
  if (cfg.print_uri && uri && !cfg.listen_fds) {
    printf ("%s\n", uri);
    fflush (stdout);
  }

  if (!cfg.foreground) {
    if (daemonise () == -1)
      exit (EXIT_FAILURE);
    /* fork left the constant data out of this process's page tables. */
    resident_all (cfg.top);
  }
  /* From here on this is the process that serves. */
  NBDKIT_SERVER_START (PACKAGE_VERSION, (uint64_t) getpid ());
  log_start_syslog ();
  /* The sockets are bound (privileged ports too): -u and -g give up
   * root now, before any plugin thread starts or any client connects.
   * The pid file often lives where only root may write (/run), so with
   * -u or -g it is written just before.
   */
  bool early_pidfile = cfg.pidfile && (cfg.user || cfg.group);
  if (early_pidfile && write_pidfile (cfg.pidfile) == -1)
    exit (EXIT_FAILURE);
  if (change_user (&cfg) == -1) {
    if (early_pidfile)
      unlink (cfg.pidfile);
    exit (EXIT_FAILURE);
  }
  for (struct layer *l = cfg.top; l; l = l->next)
    if (layer_after_fork (l) == -1)
      exit (EXIT_FAILURE);
  if (cfg.pidfile && !early_pidfile && write_pidfile (cfg.pidfile) == -1)
    exit (EXIT_FAILURE);

  struct run_waiter rw = { .pid = -1 };
  pthread_t run_thread;
  if (cfg.run) {
    rw.pid = start_run (&cfg, uri ? uri : "");
    if (rw.pid == -1 ||
        pthread_create (&run_thread, NULL, wait_for_run, &rw) != 0)
      exit (EXIT_FAILURE);
  }

  NBDKIT_SERVER_READY ();
  sock_accept_loop (&cfg, &listener, quit_pipe[0]);
  NBDKIT_SERVER_STOP (stop_reason ? stop_reason : "unknown");
  nbdkit_debug ("stopping: %s", stop_reason ? stop_reason : "unknown");

  sock_close_all (&listener);
  conn_shutdown_all (5);
  int status = EXIT_SUCCESS;
  if (cfg.run) {
    pthread_join (run_thread, NULL);
    status = run_exit_status (rw.status);
  }
  if (cfg.unixsocket && !cfg.listen_fds)
    unlink (cfg.unixsocket);
  if (cfg.tmpdir)
    rmdir (cfg.tmpdir);
  if (cfg.pidfile)
    unlink (cfg.pidfile);
  /* Unload only when no connection thread can still be in a plugin. */
  if (conn_count_active () == 0)
    layer_unload_all (cfg.top);
  free (uri);
  free (filters);
  exit (status);
}
