/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: captive mode (--run) and the URI clients use.
 * captive_uri builds the URI from the configuration (also printed by
 * --print-uri); captive_start runs the --run command with it and the
 * other variables nbdkit-captive(1) lists set as shell variables, and a
 * waiter thread asks the accept loop to stop when the command exits;
 * captive_wait gives the command's exit status for the server's own.
 * The waiter writes cap->status before it asks the loop to stop, and
 * the main thread reads it only after joining the waiter.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

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

/* The URI a client uses to reach us, in a malloc'd string.  Only
 * --tls=require gives an nbds URI: with --tls=on TLS is optional and a
 * plain client must still be able to connect, as with nbdkit.
 */
char *
captive_uri (const struct config *cfg)
{
  char *uri = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&uri, &len);
  if (!fp)
    return NULL;
  const char *name = cfg->exportname ? cfg->exportname : "";
  bool tls = cfg->tls == TLS_REQUIRE;
  const char *scheme = tls ? "nbds" : "nbd";
  char sep = '?';
  /* The PSK username goes in the authority, as libnbd expects. */
  char *user = tls && cfg->tls_psk ? psk_first_user (cfg->tls_psk) : NULL;
  if (cfg->unixsocket) {
    fprintf (fp, "%s+unix://", scheme);
    fput_userinfo (fp, user);
    fprintf (fp, "/");
    fput_uri_escaped (fp, name, "/");
    fprintf (fp, "?socket=");
    fput_uri_escaped (fp, cfg->unixsocket, "/");
    sep = '&';
  }
  else if (cfg->vsock) {
    /* CID 1 is this machine (VMADDR_CID_LOCAL). */
    fprintf (fp, "%s+vsock://", scheme);
    fput_userinfo (fp, user);
    fprintf (fp, "1:%s/", cfg->port ? cfg->port : "10809");
    fput_uri_escaped (fp, name, "/");
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
  if (tls && cfg->tls_psk) {
    fprintf (fp, "%ctls-psk-file=", sep);
    fput_uri_escaped (fp, cfg->tls_psk, "/");
  }
  else if (tls && cfg->tls_certificates) {
    fprintf (fp, "%ctls-certificates=", sep);
    fput_uri_escaped (fp, cfg->tls_certificates, "/");
  }
  fclose (fp);
  free (user);
  return uri;
}

static void *
wait_for_run (void *arg)
{
  struct captive *cap = arg;
  while (waitpid (cap->pid, &cap->status, 0) == -1 && errno == EINTR)
    ;
  server_request_shutdown ("run-exited");
  return NULL;
}

/* Append "NAME='VALUE'\n" to FP, VALUE single-quoted for the shell. */
static void
fput_assignment (FILE *fp, const char *name, const char *value)
{
  fprintf (fp, "%s='", name);
  for (; *value; value++) {
    if (*value == '\'')
      fputs ("'\\''", fp);
    else
      fputc (*value, fp);
  }
  fputs ("'\n", fp);
}

/* The script the shell runs: assignments of the connection details,
 * then CMD.  They are shell variables of CMD, as nbdkit-captive(1)
 * says ("shell variables ... available in the --run argument"), not
 * exported: a program CMD starts does not see them unless CMD passes
 * them on (as nbdkit's do not), though a variable the server itself
 * inherited from its environment stays exported, with the new value.
 * $uri and $nbd are the same URI (as in nbdkit >= 1.24); $port or
 * $unixsocket is empty; $tls is "1" for on, "2" for require, and
 * unset when off.  malloc'd, or NULL.
 */
static char *
run_script (const struct config *cfg, const char *uri)
{
  char *script = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&script, &len);
  if (!fp)
    return NULL;
  fput_assignment (fp, "uri", uri);
  fput_assignment (fp, "nbd", uri);
  fput_assignment (fp, "exportname", cfg->exportname ? cfg->exportname : "");
  if (cfg->tls == TLS_OFF)
    fputs ("unset tls\n", fp);
  else
    fput_assignment (fp, "tls", cfg->tls == TLS_REQUIRE ? "2" : "1");
  fput_assignment (fp, "unixsocket", cfg->unixsocket ? cfg->unixsocket : "");
  fput_assignment (fp, "port",
                   cfg->unixsocket ? "" : cfg->port ? cfg->port : "10809");
  fputs (cfg->run, fp);
  fputc ('\n', fp);
  if (fclose (fp) == EOF) {
    free (script);
    return NULL;
  }
  return script;
}

/* Start the --run command: /bin/sh -c with the script above. */
int
captive_start (const struct config *cfg, const char *uri,
               struct captive *cap)
{
  char *script = run_script (cfg, uri);
  if (!script) {
    nbdkit_error ("--run: %m");
    return -1;
  }
  pid_t pid = fork ();
  if (pid == -1) {
    nbdkit_error ("fork: %m");
    free (script);
    return -1;
  }
  if (pid == 0) {
    signal (SIGPIPE, SIG_DFL);
    execl ("/bin/sh", "sh", "-c", script, (char *) NULL);
    perror ("nbdkit: --run: /bin/sh");
    _exit (127);
  }
  free (script);
  cap->pid = pid;
  int e = pthread_create (&cap->thread, NULL, wait_for_run, cap);
  if (e != 0) {
    errno = e;
    nbdkit_error ("pthread_create: %m");
    return -1;
  }
  return 0;
}

/* The command's exit status as the server's (128+N for a signal). */
int
captive_wait (struct captive *cap)
{
  if (cap->pid == -1)
    return EXIT_SUCCESS;
  pthread_join (cap->thread, NULL);
  if (WIFEXITED (cap->status))
    return WEXITSTATUS (cap->status);
  if (WIFSIGNALED (cap->status))
    return 128 + WTERMSIG (cap->status);
  return 1;
}
