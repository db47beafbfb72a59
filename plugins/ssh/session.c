/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ssh plugin's SSH sessions (see session.h): options from the
 * parameters, the connection (bounded by SSH_OPTIONS_TIMEOUT), the host
 * key check against the known hosts files, and the login: none, then
 * public keys, then the password.  libssh's log lines go to
 * nbdkit_debug with -D ssh.log=N.  Fires ssh_connect after each
 * attempt.  Keeps no state of its own beyond the debug flag.
 */
#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "include/minmax.h"
#include "session.h"
#include "watchdog.h"

NBDKIT_PROBE_SEMAPHORE (ssh_connect);

NBDKIT_DLL_PUBLIC int ssh_debug_log = 0;

/* libssh's log lines, for -D ssh.log=N. */
static void
log_to_debug (int priority, const char *function, const char *buffer,
              void *opaque)
{
  (void) opaque;
  nbdkit_debug ("libssh[%d] %s: %s", priority, function, buffer);
}

/* The user name libssh will log in as (ours if user= was not given),
 * for messages.  Free with ssh_string_free_char.
 */
static char *
session_user (ssh_session s)
{
  char *u = NULL;

  if (ssh_options_get (s, SSH_OPTIONS_USER, &u) != SSH_OK)
    return NULL;
  return u;
}

/* Check the server's host key against the known hosts files. */
static int
verify_host (const struct ssh_params *p, ssh_session s)
{
  switch (ssh_session_is_known_server (s)) {
  case SSH_KNOWN_HOSTS_OK:
    return 0;
  case SSH_KNOWN_HOSTS_CHANGED:
    nbdkit_error ("the host key of %s does not match the one in the known "
                  "hosts file (it changed, or someone is in between): "
                  "refusing to connect", p->host);
    return -1;
  case SSH_KNOWN_HOSTS_OTHER:
    nbdkit_error ("%s offered a host key of another type than the one in "
                  "the known hosts file: refusing to connect", p->host);
    return -1;
  case SSH_KNOWN_HOSTS_NOT_FOUND:
    nbdkit_error ("no known hosts file to check the host key of %s "
                  "(give known-hosts=FILE, or verify-remote-host=false)",
                  p->host);
    return -1;
  case SSH_KNOWN_HOSTS_UNKNOWN:
    nbdkit_error ("%s is not in the known hosts file, so its host key "
                  "cannot be checked (add it, give known-hosts=FILE, or "
                  "verify-remote-host=false)", p->host);
    return -1;
  case SSH_KNOWN_HOSTS_ERROR:
  default:
    nbdkit_error ("checking the host key of %s: %s", p->host,
                  ssh_get_error (s));
    return -1;
  }
}

/* Try none, then public keys (identity=, the default keys, the agent),
 * then the password if one was given, as far as the server offers
 * them.
 */
static int
authenticate (const struct ssh_params *p, ssh_session s)
{
  char tried[64] = "";
  char *u;
  int rc, methods;

  rc = ssh_userauth_none (s, NULL);
  if (rc == SSH_AUTH_SUCCESS)
    return 0;
  if (rc == SSH_AUTH_ERROR)
    goto error;
  methods = ssh_userauth_list (s, NULL);

  if (methods & SSH_AUTH_METHOD_PUBLICKEY) {
    strcat (tried, " publickey");
    rc = ssh_userauth_publickey_auto (s, NULL, NULL);
    if (rc == SSH_AUTH_SUCCESS)
      return 0;
    if (rc == SSH_AUTH_ERROR)
      goto error;
  }
  if (p->password != NULL && (methods & SSH_AUTH_METHOD_PASSWORD)) {
    strcat (tried, " password");
    rc = ssh_userauth_password (s, NULL, p->password);
    if (rc == SSH_AUTH_SUCCESS)
      return 0;
    if (rc == SSH_AUTH_ERROR)
      goto error;
  }

  u = session_user (s);
  nbdkit_error ("%s refused the login of %s (tried:%s; the server "
                "accepts:%s%s%s)", p->host, u ? u : "the local user",
                tried[0] ? tried : " none",
                methods & SSH_AUTH_METHOD_PUBLICKEY ? " publickey" : "",
                methods & SSH_AUTH_METHOD_PASSWORD ? " password" : "",
                methods & SSH_AUTH_METHOD_INTERACTIVE
                ? " keyboard-interactive (not supported)" : "");
  ssh_string_free_char (u);
  return -1;

 error:
  nbdkit_error ("authenticating to %s: %s", p->host, ssh_get_error (s));
  return -1;
}

/* A connected, verified and authenticated SSH session, or NULL after
 * reporting why.  Fires ssh_connect either way.
 */
ssh_session
session_connect (const struct ssh_params *p)
{
  const uint64_t start =
    NBDKIT_PROBE_ENABLED (ssh_connect) ? watch_now_ns () : 0;
  ssh_session s;
  const char *stage = "ssh_new";
  int r = -1;
  size_t i;

  s = ssh_new ();
  if (s == NULL) {
    nbdkit_error ("ssh_new: %m");
    goto out;
  }
  if (ssh_debug_log > 0) {
    int level = MIN (ssh_debug_log, 4);

    /* libssh keeps its log callback per thread. */
    ssh_set_log_callback (log_to_debug);
    stage = "log level";
    if (ssh_options_set (s, SSH_OPTIONS_LOG_VERBOSITY, &level) != SSH_OK)
      goto option_error;
  }

  stage = "host";
  if (ssh_options_set (s, SSH_OPTIONS_HOST, p->host) != SSH_OK)
    goto option_error;
  /* The config file first, so that the parameters override it. */
  if (p->config_set) {
    if (p->config_file[0] == '\0') {
      bool no = false;

      stage = "config";
      if (ssh_options_set (s, SSH_OPTIONS_PROCESS_CONFIG, &no) != SSH_OK)
        goto option_error;
    }
    else if (ssh_options_parse_config (s, p->config_file) != SSH_OK) {
      stage = "config";
      goto option_error;
    }
  }
  stage = "port";
  if (p->port && ssh_options_set (s, SSH_OPTIONS_PORT_STR, p->port) != SSH_OK)
    goto option_error;
  stage = "user";
  if (p->user && ssh_options_set (s, SSH_OPTIONS_USER, p->user) != SSH_OK)
    goto option_error;
  stage = "known-hosts";
  if (p->known_hosts &&
      ssh_options_set (s, SSH_OPTIONS_KNOWNHOSTS, p->known_hosts) != SSH_OK)
    goto option_error;
  /* ADD_IDENTITY puts each in front of the list: add the last first so
   * that they are tried in the order given.
   */
  stage = "identity";
  for (i = p->identities.len; i-- > 0;)
    if (ssh_options_set (s, SSH_OPTIONS_ADD_IDENTITY,
                         p->identities.ptr[i]) != SSH_OK)
      goto option_error;
  stage = "compression";
  if (p->compression &&
      ssh_options_set (s, SSH_OPTIONS_COMPRESSION, "yes") != SSH_OK)
    goto option_error;
  /* Each request waits for its reply: Nagle's algorithm would hold
   * back the last packet of a request until the previous one's ACK.
   */
  stage = "nodelay";
  if (ssh_options_set (s, SSH_OPTIONS_NODELAY, &(int) { 1 }) != SSH_OK)
    goto option_error;
  stage = "timeout";
  if (ssh_options_set (s, SSH_OPTIONS_TIMEOUT, &p->timeout) != SSH_OK)
    goto option_error;

  if (ssh_connect (s) != SSH_OK) {
    nbdkit_error ("could not connect to %s%s%s: %s", p->host,
                  p->port ? " port " : "", p->port ? p->port : "",
                  ssh_get_error (s));
    goto out;
  }
  if (p->verify_remote_host && verify_host (p, s) == -1)
    goto out;
  if (authenticate (p, s) == -1)
    goto out;
  r = 0;
  goto out;

 option_error:
  nbdkit_error ("%s: %s", stage, ssh_get_error (s));
 out:
  if (NBDKIT_PROBE_ENABLED (ssh_connect)) {
    char *u = s ? session_user (s) : NULL;

    NBDKIT_PROBE (ssh_connect, nbdkit_connection_id (), p->host,
                  u ? u : "", watch_now_ns () - start, r);
    ssh_string_free_char (u);
  }
  if (r == -1 && s) {
    ssh_disconnect (s);
    ssh_free (s);
    s = NULL;
  }
  return s;
}
