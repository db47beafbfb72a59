/* nbdkit server: messages.  nbdkit_error and nbdkit_debug (called by
 * plugins, filters and the server) end up here, on stderr or, for a
 * daemonised server, in syslog.  The last error text of each thread is
 * kept so the handshake can pass it to the client.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "internal.h"

/* Set once by log_init before any thread starts; read-only after. */
static const struct config *log_cfg;

/* Switched on once, when the server daemonises. */
static bool to_syslog;

static __thread const char *layer_name;
static __thread char last_error[256];

void
log_init (const struct config *cfg)
{
  log_cfg = cfg;
}

/* Until the server is in the background, messages go to stderr so the
 * person starting it sees them; afterwards to syslog if so configured.
 */
void
log_start_syslog (void)
{
  if (log_cfg && log_cfg->use_syslog) {
    openlog ("nbdkit", LOG_PID, LOG_DAEMON);
    to_syslog = true;
  }
}

void
log_set_layer_name (const char *name)
{
  layer_name = name;
}

/* Name the layer about to be called, returning the caller's, so
 * messages from a data call carry the right origin.
 */
const char *
log_swap_layer_name (const char *name)
{
  const char *old = layer_name;
  layer_name = name;
  return old;
}

const char *
log_last_error (void)
{
  return last_error[0] ? last_error : NULL;
}

void
log_clear_last_error (void)
{
  last_error[0] = '\0';
}

/* Without -v and without a tracer on the log probe, debug messages
 * cost one test.
 */
static inline bool
debug_wanted (void)
{
  return (log_cfg && log_cfg->verbose) || NBDKIT_LOG_ENABLED ();
}

/* Format a message into a buffer, keeping errno for %m. */
static void
emit (int priority, const char *kind, const char *fs, va_list args)
{
  int saved_errno = errno;
  char msg[1024];

  if (priority == LOG_DEBUG && !debug_wanted ())
    return;
  struct connection *conn = conn_current ();

  errno = saved_errno;
  vsnprintf (msg, sizeof msg, fs, args);
  /* Strip trailing newlines: every message is one line. */
  size_t len = strlen (msg);
  while (len > 0 && msg[len - 1] == '\n')
    msg[--len] = '\0';

  if (priority == LOG_ERR) {
    /* Kept for the client, truncated if long. */
    size_t n = strnlen (msg, sizeof last_error - 1);
    memcpy (last_error, msg, n);
    last_error[n] = '\0';
  }

  NBDKIT_LOG (priority == LOG_ERR ? "error" : "debug",
              layer_name ? layer_name : "nbdkit", msg);
  /* Debug messages are formatted for the probe even without -v. */
  if (priority == LOG_DEBUG && !(log_cfg && log_cfg->verbose))
    return;

  char prefix[96] = "";
  if (layer_name && conn)
    snprintf (prefix, sizeof prefix, "%s[%" PRIu64 "]: ", layer_name,
              conn->id);
  else if (layer_name)
    snprintf (prefix, sizeof prefix, "%s: ", layer_name);

  if (to_syslog)
    syslog (priority, "%s%s%s", prefix, kind, msg);
  else {
    flockfile (stderr);
    fprintf (stderr, "nbdkit: %s%s%s\n", prefix, kind, msg);
    funlockfile (stderr);
  }
  errno = saved_errno;
}

void
nbdkit_verror (const char *fs, va_list args)
{
  emit (LOG_ERR, "error: ", fs, args);
}

void
nbdkit_error (const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  nbdkit_verror (fs, args);
  va_end (args);
}

void
nbdkit_vdebug (const char *fs, va_list args)
{
  if (!debug_wanted ())
    return;
  emit (LOG_DEBUG, "debug: ", fs, args);
}

void
nbdkit_debug (const char *fs, ...)
{
  va_list args;
  if (!debug_wanted ())
    return;
  va_start (args, fs);
  nbdkit_vdebug (fs, args);
  va_end (args);
}
