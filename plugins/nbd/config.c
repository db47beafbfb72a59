/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's parameters: where the upstream is (uri=, socket=,
 * hostname=/port=, vsock=/port=, command=/arg=, socket-fd=) and how to
 * talk to it (export=, dynamic-export=, shared=, retry=, tls*=,
 * connections=, connect-timeout=, request-timeout=).  config() takes
 * them one by one into nbd_cfg, config_complete() checks that they go
 * together and settles the defaults that depend on each other; after
 * that nbd_cfg is read-only.  Also --dump-plugin's libnbd lines.
 */
#include <config.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "nbd.h"
#include "params.h"
#include "vector.h"
#include "array-size.h"

struct nbd_config nbd_cfg = {
  .fd = -1, .shared = -1, .tls = -1, .tls_verify = -1,
  .connect_timeout = 60, .request_timeout = 300, .connections = 1,
};

void
proxy_unload (void)
{
  free (nbd_cfg.uri);
  free (nbd_cfg.socket);
  free (nbd_cfg.hostname);
  free (nbd_cfg.port);
  string_vector_free_all (&nbd_cfg.argv);
  free (nbd_cfg.export);
  free (nbd_cfg.tls_certificates);
  free (nbd_cfg.tls_psk);
  free (nbd_cfg.tls_username);
  free (nbd_cfg.description);
}

static int
set_transport (enum transport by)
{
  nbd_cfg.by = by;
  nbd_cfg.by_count++;
  return 0;
}

static int
set_string (char **dst, const char *key, const char *value)
{
  if (*dst) {
    nbdkit_error ("%s= given twice", key);
    return -1;
  }
  *dst = strdup (value);
  if (*dst == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

static int
set_path (char **dst, const char *key, const char *value)
{
  if (*dst) {
    nbdkit_error ("%s= given twice", key);
    return -1;
  }
  *dst = nbdkit_absolute_path (value);
  return *dst ? 0 : -1;
}

static int
append_arg (const char *value)
{
  char *s = strdup (value);

  if (s == NULL || string_vector_append (&nbd_cfg.argv, s) == -1) {
    free (s);
    nbdkit_error ("%m");
    return -1;
  }
  return 0;
}

/* Is WORD one of the NULL-ended list (ignoring case)? */
static bool
word_in (const char *word, ...)
{
  va_list ap;
  const char *w;
  bool found = false;

  va_start (ap, word);
  while (!found && (w = va_arg (ap, const char *)) != NULL)
    found = strcasecmp (word, w) == 0;
  va_end (ap);
  return found;
}

int
proxy_config (const char *key, const char *value)
{
  int r;

  if (strcmp (key, "uri") == 0) {
    if (set_string (&nbd_cfg.uri, key, value) == -1)
      return -1;
    return set_transport (BY_URI);
  }
  else if (strcmp (key, "socket") == 0) {
    if (set_path (&nbd_cfg.socket, key, value) == -1)
      return -1;
    return set_transport (BY_UNIX);
  }
  else if (strcmp (key, "hostname") == 0) {
    if (set_string (&nbd_cfg.hostname, key, value) == -1)
      return -1;
    return set_transport (BY_TCP);
  }
  else if (strcmp (key, "port") == 0)
    return set_string (&nbd_cfg.port, key, value);
  else if (strcmp (key, "vsock") == 0) {
    if (nbdkit_parse_uint32_t ("vsock", value, &nbd_cfg.cid) == -1)
      return -1;
    return set_transport (BY_VSOCK);
  }
  else if (strcmp (key, "command") == 0) {
    if (nbd_cfg.argv.len > 0) {
      nbdkit_error ("command= given twice, or after arg=");
      return -1;
    }
    if (append_arg (value) == -1)
      return -1;
    return set_transport (BY_COMMAND);
  }
  else if (strcmp (key, "arg") == 0) {
    if (nbd_cfg.argv.len == 0) {
      nbdkit_error ("arg= must come after command=");
      return -1;
    }
    return append_arg (value);
  }
  else if (strcmp (key, "socket-fd") == 0) {
    if (nbdkit_parse_int ("socket-fd", value, &nbd_cfg.fd) == -1)
      return -1;
    if (nbd_cfg.fd < 0 || fcntl (nbd_cfg.fd, F_GETFD) == -1) {
      nbdkit_error ("socket-fd=%s is not an open file descriptor",
                    value);
      return -1;
    }
    return set_transport (BY_FD);
  }
  else if (strcmp (key, "export") == 0)
    return set_string (&nbd_cfg.export, key, value);
  else if (strcmp (key, "shared") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    nbd_cfg.shared = r;
  }
  else if (strcmp (key, "retry") == 0)
    return nbdkit_parse_unsigned ("retry", value, &nbd_cfg.retry);
  else if (strcmp (key, "connect-timeout") == 0) {
    if (nbdkit_parse_unsigned ("connect-timeout", value,
                               &nbd_cfg.connect_timeout) == -1)
      return -1;
    if (nbd_cfg.connect_timeout == 0 || nbd_cfg.connect_timeout > 86400) {
      nbdkit_error ("connect-timeout must be 1 to 86400 seconds");
      return -1;
    }
  }
  else if (strcmp (key, "connections") == 0) {
    if (nbdkit_parse_unsigned ("connections", value, &nbd_cfg.connections) == -1)
      return -1;
    if (nbd_cfg.connections < 1 || nbd_cfg.connections > 64) {
      nbdkit_error ("connections must be 1 to 64");
      return -1;
    }
  }
  else if (strcmp (key, "request-timeout") == 0) {
    if (nbdkit_parse_unsigned ("request-timeout", value,
                               &nbd_cfg.request_timeout) == -1)
      return -1;
    if (nbd_cfg.request_timeout > 86400) {
      nbdkit_error ("request-timeout must be 0 to 86400 seconds");
      return -1;
    }
  }
  else if (strcmp (key, "dynamic-export") == 0)
    return param_bool (value, &nbd_cfg.dynamic_export);
  else if (strcmp (key, "tls") == 0) {
    if (strcmp (value, "require") == 0 || strcmp (value, "required") == 0 ||
        strcmp (value, "force") == 0)
      nbd_cfg.tls = LIBNBD_TLS_REQUIRE;
    else if (word_in (value, "on", "yes", "true", "1", NULL))
      nbd_cfg.tls = LIBNBD_TLS_ALLOW;
    else if (word_in (value, "off", "no", "false", "0", NULL))
      nbd_cfg.tls = LIBNBD_TLS_DISABLE;
    else {
      nbdkit_error ("tls= must be off, on or require, not '%s'", value);
      return -1;
    }
  }
  else if (strcmp (key, "tls-certificates") == 0)
    return set_path (&nbd_cfg.tls_certificates, key, value);
  else if (strcmp (key, "tls-psk") == 0)
    return set_path (&nbd_cfg.tls_psk, key, value);
  else if (strcmp (key, "tls-username") == 0)
    return set_string (&nbd_cfg.tls_username, key, value);
  else if (strcmp (key, "tls-verify") == 0) {
    if ((r = nbdkit_parse_bool (value)) == -1)
      return -1;
    nbd_cfg.tls_verify = r;
  }
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

/* What this libnbd can do (its answers need a handle). */
static int
supports (int (*query) (struct nbd_handle *))
{
  struct nbd_handle *nbd = nbd_create ();
  int r;

  if (nbd == NULL)
    return 0;
  r = query (nbd);
  nbd_close (nbd);
  return r == 1;
}

#ifdef AF_VSOCK
#define HAVE_VSOCK 1
#else
#define HAVE_VSOCK 0
#endif

/* The checks libnbd would make only when connecting, made at start-up
 * so that a mistyped uri= stops the server rather than every client.
 */
static int
check_uri (const char *uri)
{
  static const char *const schemes[] = {
    "nbd://", "nbds://", "nbd+unix://", "nbds+unix://",
    "nbd+vsock://", "nbds+vsock://",
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (schemes); i++) {
    if (strncmp (uri, schemes[i], strlen (schemes[i])) == 0) {
      if (strstr (schemes[i], "+unix") && !strstr (uri, "socket=")) {
        nbdkit_error ("uri '%s': a +unix URI needs ?socket=PATH", uri);
        return -1;
      }
      if (strstr (schemes[i], "+vsock") && !HAVE_VSOCK) {
        nbdkit_error ("uri '%s': this libnbd has no vsock support", uri);
        return -1;
      }
      if (strncmp (uri, "nbds", 4) == 0 && !supports (nbd_supports_tls)) {
        nbdkit_error ("uri '%s': this libnbd has no TLS support", uri);
        return -1;
      }
      return 0;
    }
  }
  nbdkit_error ("uri '%s' is not an NBD URI (nbd://, nbds://, "
                "nbd+unix://, nbd+vsock://...)", uri);
  return -1;
}

int
proxy_config_complete (void)
{
  int n;

  if (nbd_cfg.by_count == 0) {
    nbdkit_error ("say where the server is: uri=, socket=, hostname=, "
                  "vsock=, command= or socket-fd=");
    return -1;
  }
  if (nbd_cfg.by_count > 1) {
    nbdkit_error ("give only one of uri=, socket=, hostname=, vsock=, "
                  "command= and socket-fd=");
    return -1;
  }
  if (nbd_cfg.port && nbd_cfg.by != BY_TCP && nbd_cfg.by != BY_VSOCK) {
    nbdkit_error ("port= goes with hostname= or vsock=");
    return -1;
  }
  if (nbd_cfg.by == BY_URI) {
    if (!supports (nbd_supports_uri)) {
      nbdkit_error ("this libnbd has no URI support");
      return -1;
    }
    if (check_uri (nbd_cfg.uri) == -1)
      return -1;
    if (nbd_cfg.export) {
      nbdkit_error ("with uri=, put the export name in the URI, "
                    "not in export=");
      return -1;
    }
  }
  if (nbd_cfg.by == BY_VSOCK && !HAVE_VSOCK) {
    nbdkit_error ("this libnbd has no vsock support");
    return -1;
  }
  if (nbd_cfg.by == BY_VSOCK && nbd_cfg.port) {
    uint32_t p;
    if (nbdkit_parse_uint32_t ("port", nbd_cfg.port, &p) == -1)
      return -1;
  }
  if (nbd_cfg.dynamic_export && nbd_cfg.export) {
    nbdkit_error ("export= and dynamic-export=true do not go together");
    return -1;
  }

  /* Only one connection can be made through a command or an inherited
   * socket, so those are shared.
   */
  if (nbd_cfg.shared == -1)
    nbd_cfg.shared = nbd_cfg.by == BY_COMMAND || nbd_cfg.by == BY_FD;
  if (!nbd_cfg.shared && (nbd_cfg.by == BY_COMMAND || nbd_cfg.by == BY_FD)) {
    nbdkit_error ("command= and socket-fd= need shared=true");
    return -1;
  }
  if (nbd_cfg.connections > 1 && (nbd_cfg.by == BY_COMMAND || nbd_cfg.by == BY_FD)) {
    nbdkit_error ("connections= needs an upstream that can be connected "
                  "to again: not command= or socket-fd=");
    return -1;
  }
  if (nbd_cfg.shared && nbd_cfg.dynamic_export) {
    nbdkit_error ("dynamic-export=true needs a connection per client: "
                  "not with shared=true, command= or socket-fd=");
    return -1;
  }

  if (nbd_cfg.tls == -1 && (nbd_cfg.tls_certificates || nbd_cfg.tls_psk ||
                        nbd_cfg.tls_username || nbd_cfg.tls_verify != -1))
    nbd_cfg.tls = LIBNBD_TLS_ALLOW;
  if (nbd_cfg.tls > 0 && !supports (nbd_supports_tls)) {
    nbdkit_error ("tls= was given but this libnbd has no TLS support");
    return -1;
  }

  if (nbd_cfg.by == BY_COMMAND && string_vector_append (&nbd_cfg.argv, NULL) == -1) {
    nbdkit_error ("%m");
    return -1;
  }

  switch (nbd_cfg.by) {
  case BY_URI:
    n = asprintf (&nbd_cfg.description, "%s", nbd_cfg.uri);
    break;
  case BY_UNIX:
    n = asprintf (&nbd_cfg.description, "unix:%s", nbd_cfg.socket);
    break;
  case BY_TCP:
    n = asprintf (&nbd_cfg.description, "tcp:%s:%s", nbd_cfg.hostname,
                  nbd_cfg.port ? nbd_cfg.port : "10809");
    break;
  case BY_VSOCK:
    n = asprintf (&nbd_cfg.description, "vsock:%" PRIu32 ":%s", nbd_cfg.cid,
                  nbd_cfg.port ? nbd_cfg.port : "10809");
    break;
  case BY_COMMAND:
    n = asprintf (&nbd_cfg.description, "command:%s", nbd_cfg.argv.ptr[0]);
    break;
  case BY_FD:
    n = asprintf (&nbd_cfg.description, "fd:%d", nbd_cfg.fd);
    break;
  default:
    abort ();
  }
  if (n == -1) {
    nbd_cfg.description = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  return 0;
}

void
proxy_dump_plugin (void)
{
  struct nbd_handle *nbd = nbd_create ();

  if (nbd) {
    printf ("libnbd_version=%s\n", nbd_get_version (nbd));
    nbd_close (nbd);
  }
  printf ("libnbd_tls=%d\n", supports (nbd_supports_tls));
  printf ("libnbd_uri=%d\n", supports (nbd_supports_uri));
  printf ("libnbd_vsock=%d\n", HAVE_VSOCK);
  printf ("libnbd_dynamic_list=1\n");
}
