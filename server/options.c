/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the command line.  options_parse turns argv into the
 * struct config that the rest of the server reads (every option of
 * nbdkit 1.32's nbdkit(1), those nbdkit 1.36 to 1.46 added, and ours),
 * reads the @PATH parameter files, checks the combinations, and
 * answers the options that only print (--dump-config, --long-options,
 * --short-options, plain --help and --version).  options_configure
 * later hands the plugin parameters (key=value, or a bare value for
 * the magic key or a script) to the loaded layers.
 *
 * This is part of main's job, split out by size: a bad command line
 * ends the process here, with one line on stderr.
 */
#include <config.h>

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "internal.h"

static void
usage (FILE *fp, const char *program)
{
  fprintf (fp,
"usage: %s [options] PLUGIN [[KEY=]VALUE | @FILE ...] [--run CMD]\n"
"       %s --dump-config | --help | --version\n"
"       %s PLUGIN --dump-plugin | --help | --version\n"
"\n"
"Serve PLUGIN's data over the NBD protocol.  PLUGIN is a short name\n"
"(memory, file, null, ...) or the path of a plugin .so.  @FILE stands\n"
"for the parameters in FILE, one per line (# comments).\n"
"\n"
"  -4, --ipv4-only          listen on IPv4 only\n"
"  -6, --ipv6-only          listen on IPv6 only\n"
"  -D, --debug NAME.FLAG=N  set a plugin, filter or server (nbdkit.*)\n"
"                           debug flag\n"
"  -e, --exportname NAME    export name used in $uri and --print-uri\n"
"      --exit-with-parent   exit when the parent process exits\n"
"  -f, --foreground         do not fork into the background\n"
"      --filter=FILTER      add a filter (the first is nearest the client)\n"
"  -g, --group GROUP        run as GROUP once the sockets are bound\n"
"  -i, --ipaddr ADDR        listen on this address only\n"
"      --keepalive          turn on TCP keepalive for clients' connections\n"
"      --log=stderr|syslog|null|default|FILE  where messages go (FILE: a\n"
"                           path with a /, appended to)\n"
"      --mask-handshake=MASK  global handshake flags to offer\n"
"      --name=NAME          name this server in its messages and syslog\n"
"  -n, --newstyle           newstyle negotiation (the default)\n"
"      --no-mc, --no-meta-contexts  refuse meta contexts (no block status)\n"
"      --no-sr              do not offer structured replies\n"
"  -o, --oldstyle           oldstyle negotiation (old clients only)\n"
"  -P, --pidfile FILE       write the server's pid here\n"
"  -p, --port PORT          TCP (or vsock) port or service (default 10809)\n"
"  -r, --readonly           refuse writes\n"
"      --run CMD            run CMD with $uri set, exit with its status\n"
"                           (on a private Unix socket unless -p, -i, -4,\n"
"                           -6 or --vsock asks for another)\n"
"      --selinux-label=LABEL  SELinux label of the listening socket\n"
"  -s, --single, --stdin    serve one connection on stdin/stdout\n"
"      --swap               lock the server in memory (NBD swap device)\n"
"  -t, --threads N          worker threads per connection (default %d;\n"
"                           0 for the default)\n"
"      --timeout=TIME       drop clients still negotiating after TIME\n"
"                           (seconds, or 1.5s, 500ms; default %d; 0 for\n"
"                           none); --handshake-timeout is the same\n"
"      --tls=off|on|require  offer TLS (STARTTLS), or insist on it\n"
"      --tls-certificates DIR  X.509 files: ca-cert.pem, server-cert.pem,\n"
"                           server-key.pem (and ca-crl.pem)\n"
"      --tls-psk FILE       PSK keys (psktool format) instead of X.509\n"
"      --tls-verify-peer    require a client certificate signed by the CA\n"
"  -U, --unix SOCKET        listen on a Unix socket (- for a private one)\n"
"  -u, --user USER          run as USER once the sockets are bound\n"
"  -v, --verbose            print debug messages\n"
"      --vsock              listen on AF_VSOCK (with -p) instead of TCP\n"
"\n"
"Options of this server beyond nbdkit's:\n"
"      --max-connections N  refuse clients beyond N at once (default %d)\n"
"      --handshake-timeout TIME  the same as --timeout\n"
"      --metrics=unix:PATH|[ADDR]:PORT  serve live metrics over HTTP\n"
"                           (OpenMetrics; ADDR defaults to 127.0.0.1)\n"
"      --busy-poll US       poll for a client's next request for up to US\n"
"                           microseconds before sleeping (default %d; 0\n"
"                           for never)\n"
"      --print-uri          print the URI clients can use\n"
"      --tls-priority STRING  GnuTLS priority string replacing the default\n"
"                           (which refuses TLS 1.0 and 1.1)\n"
"\n"
"      --dump-config        print the build configuration\n"
"      --dump-plugin        print what the plugin provides\n"
"      --long-options, --short-options  list the options (for completion)\n"
"  -V, --version            print the version\n"
"      --help               this text (with PLUGIN: its parameters too)\n"
"\n"
"This is %s %s, command-compatible with %s %s.\n"
"See nbdkit(1), nbdkit-captive(1) and nbdkit-probes(1).\n",
           program, program, program, DEFAULT_THREADS,
           DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
           DEFAULT_BUSY_POLL, SERVER_NAME, SERVER_VERSION, PACKAGE_NAME,
           PACKAGE_VERSION);
}

#define SHORT_OPTIONS "46D:e:fg:i:noP:p:rst:U:u:vV"

enum {
  OPT_RUN = 256, OPT_METRICS, OPT_FILTER, OPT_DUMP_CONFIG, OPT_DUMP_PLUGIN, OPT_HELP,
  OPT_VERSION, OPT_PRINT_URI, OPT_EXIT_WITH_PARENT, OPT_NO_SR, OPT_LOG,
  OPT_MAX_CONNECTIONS, OPT_HANDSHAKE_TIMEOUT, OPT_TLS, OPT_TLS_CERTIFICATES,
  OPT_TLS_PSK, OPT_TLS_VERIFY_PEER, OPT_TLS_PRIORITY, OPT_BUSY_POLL,
  OPT_LONG_OPTIONS, OPT_SHORT_OPTIONS, OPT_MASK_HANDSHAKE, OPT_SELINUX_LABEL,
  OPT_SWAP, OPT_VSOCK, OPT_KEEPALIVE, OPT_NAME, OPT_NO_MC,
};

static const struct option long_options[] = {
  { "busy-poll", required_argument, NULL, OPT_BUSY_POLL },
  { "debug", required_argument, NULL, 'D' },
  { "dump-config", no_argument, NULL, OPT_DUMP_CONFIG },
  { "dump-plugin", no_argument, NULL, OPT_DUMP_PLUGIN },
  { "exit-with-parent", no_argument, NULL, OPT_EXIT_WITH_PARENT },
  { "export", required_argument, NULL, 'e' },
  { "export-name", required_argument, NULL, 'e' },
  { "exportname", required_argument, NULL, 'e' },
  { "filter", required_argument, NULL, OPT_FILTER },
  { "foreground", no_argument, NULL, 'f' },
  { "group", required_argument, NULL, 'g' },
  { "handshake-timeout", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT },
  { "help", no_argument, NULL, OPT_HELP },
  { "ip-addr", required_argument, NULL, 'i' },
  { "ipaddr", required_argument, NULL, 'i' },
  { "ipv4-only", no_argument, NULL, '4' },
  { "ipv6-only", no_argument, NULL, '6' },
  { "keepalive", no_argument, NULL, OPT_KEEPALIVE },
  { "log", required_argument, NULL, OPT_LOG },
  { "long-options", no_argument, NULL, OPT_LONG_OPTIONS },
  { "mask-handshake", required_argument, NULL, OPT_MASK_HANDSHAKE },
  { "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
  { "name", required_argument, NULL, OPT_NAME },
  { "new-style", no_argument, NULL, 'n' },
  { "newstyle", no_argument, NULL, 'n' },
  { "no-fork", no_argument, NULL, 'f' },
  { "no-mc", no_argument, NULL, OPT_NO_MC },
  { "no-meta-contexts", no_argument, NULL, OPT_NO_MC },
  { "no-sr", no_argument, NULL, OPT_NO_SR },
  { "no-structured-replies", no_argument, NULL, OPT_NO_SR },
  { "old-style", no_argument, NULL, 'o' },
  { "oldstyle", no_argument, NULL, 'o' },
  { "pid-file", required_argument, NULL, 'P' },
  { "pidfile", required_argument, NULL, 'P' },
  { "port", required_argument, NULL, 'p' },
  { "print-uri", no_argument, NULL, OPT_PRINT_URI },
  { "read-only", no_argument, NULL, 'r' },
  { "readonly", no_argument, NULL, 'r' },
  { "run", required_argument, NULL, OPT_RUN },
  { "metrics", required_argument, NULL, OPT_METRICS },
  { "selinux-label", required_argument, NULL, OPT_SELINUX_LABEL },
  { "short-options", no_argument, NULL, OPT_SHORT_OPTIONS },
  { "single", no_argument, NULL, 's' },
  { "stdin", no_argument, NULL, 's' },
  { "swap", no_argument, NULL, OPT_SWAP },
  { "threads", required_argument, NULL, 't' },
  { "timeout", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT },
  { "tls", required_argument, NULL, OPT_TLS },
  { "tls-certificates", required_argument, NULL, OPT_TLS_CERTIFICATES },
  { "tls-priority", required_argument, NULL, OPT_TLS_PRIORITY },
  { "tls-psk", required_argument, NULL, OPT_TLS_PSK },
  { "tls-verify-peer", no_argument, NULL, OPT_TLS_VERIFY_PEER },
  { "unix", required_argument, NULL, 'U' },
  { "user", required_argument, NULL, 'u' },
  { "verbose", no_argument, NULL, 'v' },
  { "version", no_argument, NULL, OPT_VERSION },
  { "vsock", no_argument, NULL, OPT_VSOCK },
  { NULL, 0, NULL, 0 },
};

/* For bash completion (Debian's calls both): one option per line. */
static void
print_long_options (void)
{
  for (const struct option *o = long_options; o->name; o++)
    printf ("--%s\n", o->name);
}

static void
print_short_options (void)
{
  for (const char *s = SHORT_OPTIONS; *s; s++)
    if (*s != ':')
      printf ("-%c\n", *s);
}

/* Key by key as nbdkit prints them (sorted), then this server's own. */
static void
dump_config (void)
{
  /* The binary that is running (a build tree's, or one moved after
   * install), as scripts use it to start the same server again; the
   * configured path only when the kernel cannot say.
   */
  char self[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    printf ("binary=%s\n", self);
  }
  else
    printf ("binary=%s/nbdkit\n", SBINDIR);
  printf ("bindir=%s\n", BINDIR);
  printf ("exit_with_parent=yes\n");
  printf ("filterdir=%s\n", FILTERDIR);
  printf ("host_cpu=%s\n", HOST_CPU);
  printf ("host_os=%s\n", HOST_OS);
  printf ("libdir=%s\n", LIBDIR);
  printf ("mandir=%s\n", MANDIR);
  printf ("name=%s\n", PACKAGE_NAME);
  printf ("plugindir=%s\n", PLUGINDIR);
  printf ("probes=%s\n",
#ifdef ENABLE_PROBES
          "yes"
#else
          "no"
#endif
          );
  printf ("root_tls_certificates_dir=%s/pki/nbdkit\n", SYSCONFDIR);
  printf ("sbindir=%s\n", SBINDIR);
  /* This build does not link libselinux: --selinux-label is refused
   * where a label would be applied (see nbdkit(1)).
   */
  printf ("selinux=no\n");
  printf ("server=%s\n", SERVER_NAME);
  printf ("server_version=%s\n", SERVER_VERSION);
  printf ("sysconfdir=%s\n", SYSCONFDIR);
  printf ("tls=%s\n", tls_available () ? "yes" : "no");
  printf ("version=%s\n", PACKAGE_VERSION);
  printf ("version_major=%d\n", atoi (PACKAGE_VERSION));
  printf ("version_minor=%d\n", atoi (strchr (PACKAGE_VERSION, '.') + 1));
  printf ("zstd=%s\n",
#if defined HAVE_LIBZSTD || defined HAVE_ZSTD
          "yes"
#else
          "no"
#endif
          );
}

/* The release a layer names: a plugin's version field, or the nbdkit
 * version a filter was built for (nbdkit prints the same).  Asked of
 * the .so's own init function, which only returns its static struct.
 */
static const char *
layer_version (const struct layer *l)
{
  if (strcmp (l->type, "plugin") == 0) {
    struct nbdkit_plugin *(*init) (void) = dlsym (l->dl, "plugin_init");
    struct nbdkit_plugin *p = init ? init () : NULL;
    return p ? p->version : NULL;
  }
  struct nbdkit_filter *(*init) (void) = dlsym (l->dl, "filter_init");
  struct nbdkit_filter *f = init ? init () : NULL;
  return f ? f->_version : NULL;
}

/* -V: exactly nbdkit's answer, because scripts read $(nbdkit --version)
 * as one value: the release whose interfaces we implement, then one
 * line per layer, outermost first.  This server's own name is in
 * --dump-config (server=, server_version=) and --help instead.
 */
void
options_print_version (const struct config *cfg)
{
  printf ("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
  for (const struct layer *l = cfg ? cfg->top : NULL; l; l = l->next) {
    const char *v = layer_version (l);
    /* As nbdkit: the version follows whenever the layer gives one. */
    if (v)
      printf ("%s %s\n", l->name, v);
    else
      printf ("%s\n", l->name);
  }
}

static void __attribute__ ((noreturn, format (printf, 2, 3)))
fail (const char *program, const char *fs, ...)
{
  va_list args;
  fprintf (stderr, "%s: ", program);
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
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
  if (errno || *end || end == arg || n < min || n > max || arg[0] == '-')
    fail (program, message, arg);
  return n;
}

/* -p: a port number, or a service name (nbd) looked up as getaddrinfo
 * would, kept as its number so $port and $uri are usable by clients.
 */
static void
set_port (struct config *cfg, const char *arg)
{
  if (isdigit ((unsigned char) arg[0])) {
    option_number (cfg->program, arg, 0, 65535,
                   "-p: \"%s\" is not a valid port number or service");
    cfg->port = arg;
    return;
  }
  struct servent *s = getservbyname (arg, "tcp");
  if (!s)
    fail (cfg->program, "-p: \"%s\" is not a valid port number or service",
          arg);
  free (cfg->port_buf);
  if (asprintf (&cfg->port_buf, "%d", ntohs (s->s_port)) == -1)
    fail (cfg->program, "%s", "out of memory");
  cfg->port = cfg->port_buf;
}

static void
append (const_string_vector *v, const char *s, const char *program)
{
  if (const_string_vector_append (v, s) == -1)
    fail (program, "%s", "out of memory");
}

static bool
is_yes (const char *s)
{
  return !strcmp (s, "on") || !strcmp (s, "yes") || !strcmp (s, "true") ||
    !strcmp (s, "1");
}

static bool
is_no (const char *s)
{
  return !strcmp (s, "off") || !strcmp (s, "no") || !strcmp (s, "false") ||
    !strcmp (s, "0");
}

/* Relative paths must survive the chdir ("/") of daemonising. */
static void
make_absolute (const char **path)
{
  if (*path && (*path)[0] != '/') {
    *path = nbdkit_absolute_path (*path);
    if (!*path)
      exit (EXIT_FAILURE);
  }
}

/* The TLS options, as nbdkit takes them (nbdkit-tls(1)).  Naming
 * credentials (--tls-psk, --tls-certificates) without --tls turns TLS
 * on, not required.  Otherwise, while TLS is off, the other TLS options
 * are accepted and unused: clients probe for TLS support with exactly
 * such throwaway command lines, so refusing them would read as "no TLS".
 * A PSK file wins over certificates, and --tls-verify-peer, which checks
 * X.509 client certificates, does nothing under PSK.
 */
static void
check_tls_options (struct config *cfg)
{
  const char *program = cfg->program;

  if (!cfg->tls_given && !cfg->oldstyle &&
      (cfg->tls_psk || cfg->tls_certificates))
    cfg->tls = TLS_ON;
  if (cfg->tls != TLS_OFF && cfg->oldstyle)
    fail (program, "%s", "-o cannot be used with --tls (oldstyle "
          "negotiation has no STARTTLS)");

  /* An explicit --tls=off says the options are meant to go unused;
   * without it they are probably a mistake, worth a word.
   */
  bool off = cfg->tls == TLS_OFF;
  bool psk_wins = !off && cfg->tls_psk;
  if (off && cfg->tls_given)
    return;
  char unused[128] = "";
  if (off && cfg->tls_psk)
    strcat (unused, " --tls-psk");
  if ((off || psk_wins) && cfg->tls_certificates)
    strcat (unused, " --tls-certificates");
  if ((off || psk_wins) && cfg->tls_verify_peer)
    strcat (unused, " --tls-verify-peer");
  if (off && cfg->tls_priority)
    strcat (unused, " --tls-priority");
  if (*unused)
    fprintf (stderr, "%s: warning: %s, so these options are unused:%s\n",
             program,
             !off ? "--tls-psk overrides X.509 certificates"
             : cfg->oldstyle ? "oldstyle negotiation (-o) has no TLS"
             : "TLS is off (no --tls=on or --tls=require)", unused);
}

/* --timeout and --handshake-timeout (the same option): seconds, or a
 * time in nbdkit_parse_delay's format (1.5s, 500ms), up to a day.
 * Kept in nanoseconds.  A value that does not parse is reported by
 * nbdkit_parse_delay itself.
 */
static uint64_t
option_timeout (const char *program, const char *opt, const char *arg)
{
  unsigned sec, nsec;
  if (nbdkit_parse_delay (opt, arg, &sec, &nsec) == -1)
    exit (EXIT_FAILURE);
  if (sec > 86400 || (sec == 86400 && nsec > 0))
    fail (program, "%s: \"%s\" is not a time from 0 to 86400 seconds",
          opt, arg);
  return sec * UINT64_C (1000000000) + nsec;
}

/* --name: it heads every message and is the syslog identity, so it is
 * kept short and free of spaces and control characters, which would
 * make log lines ambiguous.
 */
static const char *
option_name (const char *program, const char *arg)
{
  size_t len = strlen (arg);
  if (len == 0 || len > 64)
    fail (program, "--name: \"%s\" must be 1 to 64 characters", arg);
  for (const char *p = arg; *p; p++)
    if (!isgraph ((unsigned char) *p))
      fail (program, "--name: \"%s\" may not contain spaces or control "
            "characters", arg);
  return arg;
}

/* --log: a destination word, or a file (any value with a '/', so a
 * misspelt word is an error and not a file of that name).
 */
static void
option_log (struct config *cfg, const char *arg)
{
  cfg->log_file = NULL;
  if (!strcmp (arg, "default"))
    cfg->log_to = LOG_TO_DEFAULT;
  else if (!strcmp (arg, "stderr"))
    cfg->log_to = LOG_TO_STDERR;
  else if (!strcmp (arg, "syslog"))
    cfg->log_to = LOG_TO_SYSLOG;
  else if (!strcmp (arg, "null"))
    cfg->log_to = LOG_TO_NULL;
  else if (strchr (arg, '/')) {
    cfg->log_to = LOG_TO_FILE;
    cfg->log_file = arg;
  }
  else
    fail (cfg->program, "--log: \"%s\" must be default, stderr, syslog, "
          "null or the path of a file (with a /, as in ./%s)", arg, arg);
}

/* Parameter files nest (a line @OTHER reads OTHER) this deep at most,
 * which also stops a file that names itself.
 */
#define MAX_PARAM_FILE_DEPTH 8

static void add_param (struct config *cfg, const char *arg,
                       const char *from, int depth);

/* @PATH: each line of PATH is one parameter, exactly as it would be
 * written as one shell word (no quoting: spaces and = are part of the
 * value), without the blanks at either end.  Blank lines and lines
 * whose first non-blank character is # are skipped.
 */
static void
read_param_file (struct config *cfg, const char *path, int depth)
{
  const char *program = cfg->program;
  FILE *fp = fopen (path, "r");
  if (!fp)
    fail (program, "@%s: %s", path, strerror (errno));
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  unsigned lineno = 0;
  while ((n = getline (&line, &cap, fp)) != -1) {
    lineno++;
    if (memchr (line, '\0', n))
      fail (program, "@%s:%u: the line contains a NUL byte", path, lineno);
    char *start = line, *end = line + n;
    while (isspace ((unsigned char) *start))
      start++;
    while (end > start && isspace ((unsigned char) end[-1]))
      end--;
    *end = '\0';
    if (*start == '\0' || *start == '#')
      continue;
    add_param (cfg, start, path, depth);
  }
  if (ferror (fp))
    fail (program, "@%s: %s", path, strerror (errno));
  free (line);
  fclose (fp);
}

/* Is ARG (from the command line, or from the file FROM) @PATH naming a
 * parameter file?  Only if that file exists: otherwise ARG is an
 * ordinary value, as in nbdkit 1.32, so the data plugin's expressions
 * ("@4 1 2 3" places bytes at offset 4, "@^512" aligns) still reach it.
 */
static bool
is_param_file (const char *arg, const char *from)
{
  if (arg[0] != '@' || arg[1] == '\0')
    return false;
  struct stat st;
  if (from && arg[1] != '/') {
    char *copy = strdup (from), *path = NULL;
    bool found = copy &&
      asprintf (&path, "%s/%s", dirname (copy), arg + 1) != -1 &&
      stat (path, &st) == 0;
    free (copy);
    free (path);
    return found;
  }
  return stat (arg + 1, &st) == 0;
}

/* One parameter from the command line (FROM is NULL) or from the file
 * FROM, kept in cfg->param_store; @PATH is replaced by PATH's
 * parameters, a relative PATH in a file being relative to that file.
 */
static void
add_param (struct config *cfg, const char *arg, const char *from, int depth)
{
  const char *program = cfg->program;
  if (is_param_file (arg, from)) {
    if (depth >= MAX_PARAM_FILE_DEPTH)
      fail (program, "%s in %s: parameter files nest deeper than %d "
            "(does one include itself?)", arg, from, MAX_PARAM_FILE_DEPTH);
    char *path = NULL;
    if (from && arg[1] != '/') {
      char *copy = strdup (from);
      if (!copy || asprintf (&path, "%s/%s", dirname (copy), arg + 1) == -1)
        fail (program, "%s", "out of memory");
      free (copy);
    }
    else if (!(path = strdup (arg + 1)))
      fail (program, "%s", "out of memory");
    read_param_file (cfg, path, depth + 1);
    free (path);
    return;
  }
  char *copy = strdup (arg);
  if (!copy || string_vector_append (&cfg->param_store, copy) == -1)
    fail (program, "%s", "out of memory");
}

void
options_parse (struct config *cfg, int argc, char *argv[])
{
  const char *program = cfg->program;
  int c;

  opterr = 0;                   /* we print our own one-line errors */
  int longindex = -1;
  while ((c = getopt_long (argc, argv, SHORT_OPTIONS, long_options,
                           &longindex)) != -1) {
    switch (c) {
    case '4': cfg->family = AF_INET; break;
    case '6': cfg->family = AF_INET6; break;
    case 'D':
      append (&cfg->debug_flags, optarg, program);
      break;
    case 'e':
      if (strlen (optarg) > 4096)
        fail (program, "%s", "-e: export name is too long");
      cfg->exportname = optarg;
      break;
    case 'f': cfg->foreground = true; break;
    case 'g': cfg->group = optarg; break;
    case 'i': cfg->ipaddr = optarg; break;
    case 'n': cfg->oldstyle = false; break;
    case 'o': cfg->oldstyle = true; break;
    case 'P': cfg->pidfile = optarg; break;
    case 'p': set_port (cfg, optarg); break;
    case 'r': cfg->readonly = true; break;
    case 's': cfg->single = true; break;
    case 't':
      /* 0 means the default, as with nbdkit. */
      cfg->threads = option_number (program, optarg, 0, 1024,
                                    "-t: \"%s\" is not a thread count "
                                    "from 0 to 1024");
      if (cfg->threads == 0)
        cfg->threads = DEFAULT_THREADS;
      break;
    case 'U':
      if (strcmp (optarg, "-") == 0) {
        cfg->unix_private = true;
        cfg->unixsocket = NULL;
      }
      else {
        cfg->unix_private = false;
        cfg->unixsocket = optarg;
      }
      break;
    case 'u': cfg->user = optarg; break;
    case 'v': cfg->verbose = true; break;
    case 'V': cfg->action = ACTION_VERSION; break;
    case OPT_TLS:
      cfg->tls_given = true;
      if (is_no (optarg))
        cfg->tls = TLS_OFF;
      else if (is_yes (optarg))
        cfg->tls = TLS_ON;
      else if (!strcmp (optarg, "require") || !strcmp (optarg, "required")
               || !strcmp (optarg, "force"))
        cfg->tls = TLS_REQUIRE;
      else
        fail (program, "--tls: \"%s\" must be off, on or require", optarg);
      break;
    case OPT_TLS_CERTIFICATES: cfg->tls_certificates = optarg; break;
    case OPT_TLS_PSK: cfg->tls_psk = optarg; break;
    case OPT_TLS_VERIFY_PEER: cfg->tls_verify_peer = true; break;
    case OPT_TLS_PRIORITY: cfg->tls_priority = optarg; break;
    case OPT_RUN: cfg->run = optarg; break;
    case OPT_METRICS: cfg->metrics = optarg; break;
    case OPT_FILTER:
      append (&cfg->filters, optarg, program);
      break;
    case OPT_EXIT_WITH_PARENT: cfg->exit_with_parent = true; break;
    case OPT_NO_SR: cfg->no_sr = true; break;
    case OPT_MAX_CONNECTIONS:
      cfg->max_connections =
        option_number (program, optarg, 1, 1000000,
                       "--max-connections: \"%s\" is not a count from 1 "
                       "to 1000000");
      break;
    case OPT_HANDSHAKE_TIMEOUT:
      /* Named as the user wrote it, in case of an error. */
      cfg->handshake_timeout_ns =
        option_timeout (program,
                        !strcmp (long_options[longindex].name, "timeout")
                        ? "--timeout" : "--handshake-timeout", optarg);
      break;
    case OPT_BUSY_POLL:
      cfg->busy_poll =
        option_number (program, optarg, 0, MAX_BUSY_POLL,
                       "--busy-poll: \"%s\" is not a number of "
                       "microseconds from 0 to 10000");
      break;
    case OPT_LOG: option_log (cfg, optarg); break;
    case OPT_NAME: cfg->name = option_name (program, optarg); break;
    case OPT_KEEPALIVE: cfg->keepalive = true; break;
    case OPT_NO_MC: cfg->no_mc = true; break;
    case OPT_MASK_HANDSHAKE: {
      /* Decimal, 0x hex or 0 octal, as nbdkit takes it. */
      char *end;
      errno = 0;
      unsigned long m = strtoul (optarg, &end, 0);
      if (errno || *end || end == optarg || optarg[0] == '-' ||
          m > UINT32_MAX)
        fail (program, "--mask-handshake: \"%s\" is not a number from 0 "
              "to 4294967295", optarg);
      cfg->mask_handshake = m & 0xffff;
      break;
    }
    case OPT_SELINUX_LABEL: cfg->selinux_label = optarg; break;
    case OPT_SWAP: cfg->swap = true; break;
    case OPT_VSOCK: cfg->vsock = true; break;
    case OPT_PRINT_URI: cfg->print_uri = true; break;
    case OPT_DUMP_CONFIG: dump_config (); exit (EXIT_SUCCESS);
    case OPT_LONG_OPTIONS: print_long_options (); exit (EXIT_SUCCESS);
    case OPT_SHORT_OPTIONS: print_short_options (); exit (EXIT_SUCCESS);
    case OPT_DUMP_PLUGIN: cfg->action = ACTION_DUMP_PLUGIN; break;
    case OPT_HELP: cfg->action = ACTION_HELP; break;
    case OPT_VERSION: cfg->action = ACTION_VERSION; break;
    default:
      if (optopt && c == '?' && strchr ("DegiPptuU", optopt))
        fail (program, "option '-%c' needs an argument; try '%s --help'",
              optopt, program);
      else if (optopt)
        fail (program, "unknown option '-%c'; try '%s --help'", optopt,
              program);
      else
        fail (program, "unknown or incomplete option '%s'; try '%s --help'",
              argv[optind - 1], program);
    }
  }

  if (optind >= argc) {
    if (cfg->action == ACTION_HELP) {
      usage (stdout, program);
      exit (EXIT_SUCCESS);
    }
    if (cfg->action == ACTION_VERSION) {
      options_print_version (NULL);
      exit (EXIT_SUCCESS);
    }
    fail (program, "no plugin given on the command line; try '%s --help'",
          program);
  }
  cfg->plugin_name = argv[optind];
  for (int i = optind + 1; i < argc; i++)
    add_param (cfg, argv[i], NULL, 0);
  cfg->params = cfg->param_store.ptr;
  cfg->nparams = cfg->param_store.len;

  bool unix_socket = cfg->unixsocket || cfg->unix_private;
  /* Socket activation, as systemd and systemd-socket-activate do it. */
  const char *lpid = getenv ("LISTEN_PID"), *lfds = getenv ("LISTEN_FDS");
  if (lpid && lfds && atol (lpid) == (long) getpid () && atoi (lfds) > 0) {
    cfg->listen_fds = atoi (lfds);
    unsetenv ("LISTEN_PID");
    unsetenv ("LISTEN_FDS");
    unsetenv ("LISTEN_FDNAMES");
    if (unix_socket || cfg->port || cfg->ipaddr || cfg->vsock)
      fail (program, "%s",
            "-U, -p, -i and --vsock cannot be used with socket activation");
    /* The command would be told of an address we do not listen on. */
    if (cfg->run)
      fail (program, "%s", "--run cannot be used with socket activation");
  }
  if (cfg->action == ACTION_DUMP_PLUGIN &&
      (cfg->single || cfg->run || unix_socket || cfg->port || cfg->vsock))
    fail (program, "%s", "--dump-plugin cannot be combined with -s, -p, -U, "
          "--run or --vsock");
  if (cfg->single && (unix_socket || cfg->port || cfg->run ||
                      cfg->listen_fds || cfg->vsock))
    fail (program, "%s",
          "-s cannot be combined with -U, -p, --vsock or --run");
  if (unix_socket && (cfg->port || cfg->ipaddr))
    fail (program, "%s", "-U cannot be combined with -p or -i");
  if (cfg->vsock && (unix_socket || cfg->ipaddr))
    fail (program, "%s", "--vsock cannot be combined with -U or -i");
  /* As nbdkit >= 1.36: a captive server listens on a private Unix
   * socket unless the command line asks for TCP or vsock (-4 and -6
   * only make sense for TCP, so they ask for it too).
   */
  if (cfg->run && !unix_socket && !cfg->port && !cfg->ipaddr &&
      !cfg->vsock && cfg->family == AF_UNSPEC && !cfg->listen_fds)
    cfg->unix_private = true;
  check_tls_options (cfg);

  /* --run, -s, socket activation and --exit-with-parent keep the server
   * in the foreground (a daemon has no parent to follow).
   */
  if (cfg->run || cfg->single || cfg->listen_fds || cfg->exit_with_parent ||
      cfg->action != ACTION_SERVE)
    cfg->foreground = true;

  make_absolute (&cfg->pidfile);
  make_absolute (&cfg->tls_psk);
  make_absolute (&cfg->tls_certificates);
  make_absolute (&cfg->unixsocket);
  /* --metrics=unix:PATH too: its socket is removed at exit, after a
   * daemon's chdir ("/"), which left a relative one behind.
   */
  if (cfg->metrics && strncmp (cfg->metrics, "unix:", 5) == 0 &&
      cfg->metrics[5] != '\0' && cfg->metrics[5] != '/') {
    char *path = nbdkit_absolute_path (cfg->metrics + 5), *spec;
    if (!path || asprintf (&spec, "unix:%s", path) == -1)
      exit (EXIT_FAILURE);
    free (path);
    cfg->metrics = spec;
  }

  switch (cfg->log_to) {
  case LOG_TO_DEFAULT: cfg->use_syslog = !cfg->foreground; break;
  case LOG_TO_SYSLOG: cfg->use_syslog = true; break;
  default: cfg->use_syslog = false;
  }
}

/* A key=value parameter's key: a letter or _, then letters, digits,
 * _, - and '.'.  Anything else is a bare value.
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

/* The plugin parameters, in order, to the outermost layer (filters
 * pass on what they do not take).  A bare value goes to the magic key
 * the plugin declares (asked through the filters); a plugin without
 * one takes a bare first parameter as script=VALUE, which is how the
 * language plugins are run: nbdkit python foo.py.
 */
int
options_configure (struct config *cfg)
{
  struct layer *top = cfg->top;
  for (int i = 0; i < cfg->nparams; i++) {
    const char *arg = cfg->params[i];
    const char *eq = strchr (arg, '=');
    const char *key, *value;
    if (eq && is_key (arg, eq - arg)) {
      char *k = strndup (arg, eq - arg);
      if (!k || string_vector_append (&cfg->keys, k) == -1) {
        free (k);
        nbdkit_error ("out of memory");
        return -1;
      }
      key = k;
      value = eq + 1;
    }
    else {
      key = top->ops->magic_config_key (top);
      if (!key && i == 0)
        key = "script";
      if (!key) {
        nbdkit_error ("parameter \"%s\" must be key=value (this plugin "
                      "has no magic config key, and only the first bare "
                      "parameter is taken as script=)", arg);
        return -1;
      }
      value = arg;
    }
    log_set_layer_name (top->name);
    int r = layer_config (top, key, value);
    log_set_layer_name (NULL);
    if (r == -1)
      return -1;
  }
  return 0;
}

/* After the layers are unloaded: nothing of the command line is in use. */
void
options_free (struct config *cfg)
{
  string_vector_free_all (&cfg->keys);
  string_vector_free_all (&cfg->param_store);
  cfg->params = NULL;
  cfg->nparams = 0;
  const_string_vector_reset (&cfg->filters);
  const_string_vector_reset (&cfg->debug_flags);
  free (cfg->port_buf);
  cfg->port_buf = NULL;
}

/* --help with a plugin: this, then each layer's parameters. */
void
options_usage (FILE *fp, const char *program)
{
  usage (fp, program);
}
