/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ssh plugin's SSH sessions: the connection parameters, and one
 * call that turns them into a connected, verified and logged-in libssh
 * session (session.c).  ssh.c fills the parameters from the command
 * line and opens SFTP on the sessions.
 */
#ifndef NBDKIT_SSH_SESSION_H
#define NBDKIT_SSH_SESSION_H

#include <stdbool.h>

#include <libssh/libssh.h>

#include "vector.h"

/* Read-only once the server is ready.  Strings are owned (strdup'd). */
struct ssh_params {
  char *host;
  char *port;                   /* NULL: the config's, or 22 */
  char *user;                   /* NULL: the config's, or the local user */
  char *password;               /* NULL: no password login */
  char *config_file;            /* with config_set: "" means none */
  bool config_set;              /* config= given, even empty */
  char *known_hosts;            /* NULL: libssh's default files */
  string_vector identities;     /* tried first, in this order */
  bool verify_remote_host;
  bool compression;
  long timeout;                 /* seconds: any one wait for the server */
};

/* -D ssh.log=N: libssh's log level (0 = off .. 4 = functions). */
extern int ssh_debug_log;

/* Connect to P->host, check its host key (unless told not to) and log
 * in.  Returns the session, or NULL after reporting why with one
 * nbdkit_error line.  Fires the probe ssh_connect either way.
 */
extern ssh_session session_connect (const struct ssh_params *p);

#endif /* NBDKIT_SSH_SESSION_H */
