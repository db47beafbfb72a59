/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin: serve what another NBD server serves, through libnbd.
 *
 * This file owns making a connection to the upstream (connect_upstream:
 * libnbd's asynchronous connect driven here under a deadline, retried
 * once a second retry= times; connect_proxy: connections= of them),
 * the connections' lifecycle, the export list and the default export's
 * name, and the callbacks that answer from what the upstream said in
 * its handshake (size, flags, block size).  The parameters are in
 * config.c (nbd_cfg), the data callbacks in io.c.
 *
 * Without shared=true each client connection opens its own upstream
 * connection in open() and closes it in close().  With shared=true (the
 * default for command= and socket-fd=, which cannot be repeated) one
 * upstream connection is made after the server forks and serves every
 * client; a failure to make it stops the server at start-up.
 *
 * Probes: nbd_connect after each connection attempt, nbd_reconnect
 * before each retry.  -D nbd.verbose=1 turns on libnbd's own debug
 * messages.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "nbd.h"
#include "now-ns.h"
#include "vector.h"

NBDKIT_PROBE_SEMAPHORE (nbd_connect);
NBDKIT_PROBE_SEMAPHORE (nbd_reconnect);

/* -D nbd.verbose=1: libnbd's debug messages, through nbdkit_debug. */
NBDKIT_DLL_PUBLIC int nbd_debug_verbose;


/* The connection of shared mode, made in after_fork. */
static struct proxy *shared_up;


/* --- Connecting ---------------------------------------------------------- */

/* While attempts remain (retry=), a failed attempt's messages are only
 * debug messages: the error that counts is the last attempt's.
 */
static __thread bool attempts_remain;

static void connect_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

static void
connect_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  if (attempts_remain)
    nbdkit_vdebug (fmt, ap);
  else
    nbdkit_verror (fmt, ap);
  va_end (ap);
}

static int
debug_cb (void *opaque, const char *context, const char *msg)
{
  nbdkit_debug ("%s: %s", context, msg);
  return 0;
}

/* Run the state machine of a handle nobody else uses yet until DONE
 * says so, the connection dies or DEADLINE (now_ns) passes.
 */
static int
drive (struct nbd_handle *nbd, bool (*done) (struct nbd_handle *, void *),
       void *opaque, uint64_t deadline, const char *what)
{
  while (!done (nbd, opaque)) {
    uint64_t now = now_ns ();
    unsigned dir;
    struct pollfd p;
    int r;

    if (nbd_aio_is_dead (nbd) || nbd_aio_is_closed (nbd)) {
      connect_error ("%s: %s: %s", nbd_cfg.description, what,
                    nbd_get_error () ? nbd_get_error ()
                    : "the connection was closed");
      return -1;
    }
    if (now >= deadline) {
      connect_error ("%s: %s: timed out after %u s", nbd_cfg.description,
                    what, nbd_cfg.connect_timeout);
      errno = ETIMEDOUT;
      return -1;
    }
    dir = nbd_aio_get_direction (nbd);
    p.fd = nbd_aio_get_fd (nbd);
    p.events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
      ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
    if (p.fd == -1 || p.events == 0) {
      connect_error ("%s: %s: the connection is in no state to go on",
                    nbd_cfg.description, what);
      errno = EIO;
      return -1;
    }
    r = poll (&p, 1, (deadline - now) / 1000000 + 1);
    if (r == -1 && errno != EINTR) {
      connect_error ("poll: %m");
      return -1;
    }
    if (r <= 0)
      continue;
    /* A hang-up or error goes to the side libnbd waits on: a failed
     * connect() is seen by notify_write.
     */
    if ((p.revents & POLLIN) ||
        ((p.revents & (POLLHUP | POLLERR)) &&
         (dir & LIBNBD_AIO_DIRECTION_READ)))
      r = nbd_aio_notify_read (nbd);
    else
      r = nbd_aio_notify_write (nbd);
    if (r == -1) {
      int err = nbd_get_errno ();
      connect_error ("%s: %s: %s", nbd_cfg.description, what,
                    nbd_get_error ());
      errno = err ? err : EIO;
      return -1;
    }
  }
  return 0;
}

static bool
not_connecting (struct nbd_handle *nbd, void *opaque)
{
  return !nbd_aio_is_connecting (nbd);
}

/* An option (GO, LIST, ABORT) in flight, and its outcome. */
struct option_call {
  bool done;
  int err;
};

static bool
option_done (struct nbd_handle *nbd, void *opaque)
{
  struct option_call *c = opaque;

  return c->done;
}

static int
option_complete (void *opaque, int *error)
{
  struct option_call *c = opaque;

  c->done = true;
  c->err = *error;
  return 1;
}

#define OPTION_COMPLETION(c) \
  ((nbd_completion_callback) { .callback = option_complete, .user_data = (c) })

/* A new handle with the settings of every connection, connecting in
 * option mode (so that the caller chooses what to do once the upstream
 * has answered the greeting: GO to an export, INFO, or LIST them).
 */
static struct nbd_handle *
start_connect (void)
{
  struct nbd_handle *nbd = nbd_create ();
  int r = 0;

  if (nbd == NULL) {
    connect_error ("nbd_create: %s", nbd_get_error ());
    return NULL;
  }
  if (nbd_debug_verbose &&
      nbd_set_debug_callback (nbd, (nbd_debug_callback) {
          .callback = debug_cb }) == -1)
    goto fail;
  nbd_set_debug (nbd, nbd_debug_verbose != 0);
  /* The URI is the administrator's: it may name local files. */
  if (nbd_set_handle_name (nbd, "nbdkit-nbd") == -1 ||
      nbd_set_uri_allow_local_file (nbd, true) == -1 ||
      nbd_set_opt_mode (nbd, true) == -1 ||
      nbd_set_full_info (nbd, true) == -1 ||
      /* The server sends nothing of a read that failed: libnbd need
       * not clear each buffer before reading into it.
       */
      nbd_set_pread_initialize (nbd, false) == -1 ||
      nbd_add_meta_context (nbd, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
    goto fail;
  if (nbd_cfg.tls != -1 && nbd_set_tls (nbd, nbd_cfg.tls) == -1)
    goto fail;
  if (nbd_cfg.tls_certificates &&
      nbd_set_tls_certificates (nbd, nbd_cfg.tls_certificates) == -1)
    goto fail;
  if (nbd_cfg.tls_psk && nbd_set_tls_psk_file (nbd, nbd_cfg.tls_psk) == -1)
    goto fail;
  if (nbd_cfg.tls_username && nbd_set_tls_username (nbd, nbd_cfg.tls_username) == -1)
    goto fail;
  if (nbd_cfg.tls_verify != -1 &&
      nbd_set_tls_verify_peer (nbd, nbd_cfg.tls_verify) == -1)
    goto fail;

  switch (nbd_cfg.by) {
  case BY_URI:
    r = nbd_aio_connect_uri (nbd, nbd_cfg.uri);
    break;
  case BY_UNIX:
    r = nbd_aio_connect_unix (nbd, nbd_cfg.socket);
    break;
  case BY_TCP:
    r = nbd_aio_connect_tcp (nbd, nbd_cfg.hostname,
                             nbd_cfg.port ? nbd_cfg.port : "10809");
    break;
  case BY_VSOCK: {
    uint32_t port = 10809;
    if (nbd_cfg.port)
      nbdkit_parse_uint32_t ("port", nbd_cfg.port, &port);
    r = nbd_aio_connect_vsock (nbd, nbd_cfg.cid, port);
    break;
  }
  case BY_COMMAND:
    r = nbd_aio_connect_systemd_socket_activation (nbd, nbd_cfg.argv.ptr);
    break;
  case BY_FD:
    r = nbd_aio_connect_socket (nbd, nbd_cfg.fd);
    break;
  default:
    abort ();
  }
  if (r == -1)
    goto fail;
  return nbd;

 fail:
  {
    int err = nbd_get_errno ();
    connect_error ("%s: %s", nbd_cfg.description, nbd_get_error ());
    nbd_close (nbd);
    errno = err ? err : EIO;
    return NULL;
  }
}

/* Wait for the greeting: 1 when the upstream negotiates options, 0
 * for an oldstyle server (ready at once, no options), -1 on failure.
 */
static int
wait_greeting (struct nbd_handle *nbd, uint64_t deadline)
{
  if (drive (nbd, not_connecting, NULL, deadline, "connecting") == -1)
    return -1;
  if (nbd_aio_is_ready (nbd))
    return 0;
  if (!nbd_aio_is_negotiating (nbd)) {
    connect_error ("%s: the handshake failed: %s", nbd_cfg.description,
                  nbd_get_error () ? nbd_get_error () : "unknown state");
    errno = EIO;
    return -1;
  }
  return 1;
}

/* Wait for the greeting, then GO to EXPORT (NULL: the one the URI
 * names).  The name is set only now, while negotiating: libnbd refuses
 * it once a URI connection has started, and takes it from the URI.
 */
static int
finish_connect (struct nbd_handle *nbd, const char *export,
                uint64_t deadline)
{
  struct option_call go = { 0 };
  int r = wait_greeting (nbd, deadline);

  if (r <= 0)
    return r;
  if (export && nbd_set_export_name (nbd, export) == -1) {
    connect_error ("%s: %s", nbd_cfg.description, nbd_get_error ());
    errno = EINVAL;
    return -1;
  }
  if (nbd_aio_opt_go (nbd, OPTION_COMPLETION (&go)) == -1) {
    connect_error ("%s: %s", nbd_cfg.description, nbd_get_error ());
    return -1;
  }
  if (drive (nbd, option_done, &go, deadline, "choosing the export") == -1)
    return -1;
  if (go.err || !nbd_aio_is_ready (nbd)) {
    connect_error ("%s: the server refused the export: %s%s",
                  nbd_cfg.description,
                  go.err ? strerror (go.err) : "unknown reason",
                  go.err == ENOTSUP && nbd_cfg.tls <= 0
                  ? " (does it require TLS? see tls=)" : "");
    errno = go.err ? go.err : EIO;
    return -1;
  }
  return 0;
}

/* One attempt: a ready handle, or NULL with errno set. */
static struct nbd_handle *
connect_once (const char *export)
{
  uint64_t start = now_ns ();
  uint64_t deadline = start + nbd_cfg.connect_timeout * UINT64_C (1000000000);
  struct nbd_handle *nbd;
  int err = 0;

  nbd = start_connect ();
  if (nbd == NULL)
    err = errno;
  else if (finish_connect (nbd, export, deadline) == -1) {
    err = errno ? errno : EIO;
    nbd_close (nbd);
    nbd = NULL;
  }
  NBDKIT_PROBE (nbd_connect, nbdkit_connection_id (), nbd_cfg.description,
                now_ns () - start, (int64_t) err);
  errno = err;
  return nbd;
}

/* Connect, retrying retry= times a second apart.  EXPORT is the export
 * name to ask for, or NULL to keep the configured one.
 */
static struct upstream *
connect_upstream (const char *export)
{
  struct upstream *up;
  struct nbd_handle *nbd;
  unsigned attempt;

  if (export == NULL)
    export = nbd_cfg.by == BY_URI ? NULL : nbd_cfg.export ? nbd_cfg.export : "";

  for (attempt = 0;; attempt++) {
    attempts_remain = attempt < nbd_cfg.retry;
    nbd = connect_once (export);
    attempts_remain = false;
    if (nbd != NULL)
      break;
    if (attempt >= nbd_cfg.retry)
      return NULL;
    NBDKIT_PROBE (nbd_reconnect, nbdkit_connection_id (),
                  (uint64_t) attempt + 1, (int64_t) errno);
    nbdkit_debug ("retrying in 1 s (%u of %u)", attempt + 1, nbd_cfg.retry);
    if (nbdkit_nanosleep (1, 0) == -1)
      return NULL;
  }

  up = calloc (1, sizeof *up);
  if (up == NULL) {
    nbdkit_error ("calloc: %m");
    nbd_close (nbd);
    return NULL;
  }
  up->nbd = nbd;
  up->wake[0] = up->wake[1] = -1;
  up->request_timeout = nbd_cfg.request_timeout;
  if (nbd_up_start_poller (up) == -1) {
    nbd_close (nbd);
    free (up);
    return NULL;
  }
  return up;
}

static void
close_upstream (struct upstream *up)
{
  if (up == NULL)
    return;
  nbd_up_stop_poller (up);
  /* A polite goodbye when we can; nbd_close drops the socket anyway
   * (and stops a command= server).
   */
  if (nbd_aio_is_ready (up->nbd))
    nbd_aio_disconnect (up->nbd, 0);
  nbd_close (up->nbd);
  free (up);
}

static void
close_proxy (struct proxy *p)
{
  unsigned i;

  if (p == NULL)
    return;
  for (i = 0; i < p->n; i++)
    close_upstream (p->up[i]);
  free (p);
}

/* The first connection, then (connections=N, if the upstream allows
 * multi-conn) the others.
 */
static struct proxy *
connect_proxy (const char *export)
{
  struct proxy *p = calloc (1, sizeof *p +
                            nbd_cfg.connections * sizeof (struct upstream *));
  unsigned want = nbd_cfg.connections;

  if (p == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  p->up[0] = connect_upstream (export);
  if (p->up[0] == NULL) {
    free (p);
    return NULL;
  }
  p->n = 1;
  if (want > 1 && nbd_can_multi_conn (p->up[0]->nbd) != 1) {
    nbdkit_debug ("%s: no multi-conn upstream: one connection, not %u",
                  nbd_cfg.description, want);
    want = 1;
  }
  for (; p->n < want; p->n++) {
    p->up[p->n] = connect_upstream (export);
    if (p->up[p->n] == NULL) {
      close_proxy (p);
      return NULL;
    }
  }
  return p;
}

/* --- Lifecycle ----------------------------------------------------------- */

static int
proxy_after_fork (void)
{
  if (!nbd_cfg.shared)
    return 0;
  shared_up = connect_proxy (NULL);
  return shared_up ? 0 : -1;
}

static void
proxy_cleanup (void)
{
  close_proxy (shared_up);
  shared_up = NULL;
}

static void *
proxy_open (int readonly)
{
  if (nbd_cfg.shared)
    return shared_up;
  return connect_proxy (nbd_cfg.dynamic_export ? nbdkit_export_name () : NULL);
}

static void
proxy_close_handle (void *handle)
{
  if (!nbd_cfg.shared)
    close_proxy (handle);
}

/* --- Exports ------------------------------------------------------------- */

struct list_ctx {
  struct nbdkit_exports *exports;
  int err;
};

static int
list_entry (void *opaque, const char *name, const char *description)
{
  struct list_ctx *ctx = opaque;

  if (ctx->err == 0 &&
      nbdkit_add_export (ctx->exports, name,
                         description && *description ? description : NULL)
      == -1)
    ctx->err = errno ? errno : ENOMEM;
  return 0;
}

static bool
not_negotiating (struct nbd_handle *nbd, void *opaque)
{
  return !nbd_aio_is_negotiating (nbd);
}

static int
proxy_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  struct nbd_handle *nbd;
  struct option_call list = { 0 };
  struct list_ctx ctx = { .exports = exports };
  uint64_t deadline;
  int ret = -1;

  if (!nbd_cfg.dynamic_export)
    return nbdkit_use_default_export (exports);

  deadline = now_ns () + nbd_cfg.connect_timeout * UINT64_C (1000000000);
  nbd = start_connect ();
  if (nbd == NULL)
    return -1;
  switch (wait_greeting (nbd, deadline)) {
  case -1:
    goto out;
  case 0:
    nbdkit_error ("%s: the server cannot list its exports",
                  nbd_cfg.description);
    goto out;
  }
  if (nbd_aio_opt_list (nbd, (nbd_list_callback) {
        .callback = list_entry, .user_data = &ctx },
      OPTION_COMPLETION (&list)) == -1) {
    nbdkit_error ("%s: %s", nbd_cfg.description, nbd_get_error ());
    goto out;
  }
  if (drive (nbd, option_done, &list, deadline, "listing exports") == -1)
    goto out;
  if (list.err || ctx.err) {
    nbdkit_error ("%s: listing exports: %s", nbd_cfg.description,
                  strerror (list.err ? list.err : ctx.err));
    goto out;
  }
  ret = 0;
  if (nbd_aio_opt_abort (nbd) == 0)
    drive (nbd, not_negotiating, NULL, now_ns () + UINT64_C (1000000000),
           "ending the handshake");
 out:
  nbd_close (nbd);
  return ret;
}

/* The name a client asking for "" is told, and whose export it gets.
 * Without dynamic-export, the configured export (its name as given:
 * the upstream is not asked).  With it, the upstream's own name for its
 * default export, from NBD_OPT_INFO on a connection of its own, as
 * nbdkit does; "" if the upstream cannot say, so that the client's
 * connection still tries the upstream's default export.
 */
static const char *
proxy_default_export (int readonly, int is_tls)
{
  struct nbd_handle *nbd;
  struct option_call info = { 0 };
  uint64_t deadline;
  const char *ret = "";

  if (!nbd_cfg.dynamic_export)
    return nbd_cfg.export ? nbd_cfg.export : "";

  deadline = now_ns () + nbd_cfg.connect_timeout * UINT64_C (1000000000);
  attempts_remain = true;       /* failures here are only debug messages */
  nbd = start_connect ();
  if (nbd == NULL)
    goto out;
  if (wait_greeting (nbd, deadline) != 1 ||
      nbd_set_export_name (nbd, "") == -1 ||
      nbd_aio_opt_info (nbd, OPTION_COMPLETION (&info)) == -1 ||
      drive (nbd, option_done, &info, deadline, "asking for the default "
             "export's name") == -1)
    goto out;
  if (info.err == 0) {
    CLEANUP_FREE char *name = nbd_get_canonical_export_name (nbd);

    if (name)
      ret = nbdkit_strdup_intern (name);
  }
  if (ret == NULL)
    ret = "";
  if (nbd_aio_opt_abort (nbd) == 0)
    drive (nbd, not_negotiating, NULL, now_ns () + UINT64_C (1000000000),
           "ending the handshake");
 out:
  attempts_remain = false;
  nbdkit_debug ("%s: the default export is \"%s\"", nbd_cfg.description, ret);
  if (nbd)
    nbd_close (nbd);
  return ret;
}

/* --- What the upstream said in its handshake ----------------------------- */

static const char *
proxy_export_description (void *handle)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];
  CLEANUP_FREE char *s = nbd_get_export_description (up->nbd);

  return s ? nbdkit_strdup_intern (s) : NULL;
}

static int64_t
proxy_get_size (void *handle)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];
  int64_t size = nbd_get_size (up->nbd);

  if (size == -1)
    nbdkit_error ("%s", nbd_get_error ());
  return size;
}

static int
proxy_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                uint32_t *maximum)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];
  int64_t min = nbd_get_block_size (up->nbd, LIBNBD_SIZE_MINIMUM);
  int64_t pref = nbd_get_block_size (up->nbd, LIBNBD_SIZE_PREFERRED);
  int64_t max = nbd_get_block_size (up->nbd, LIBNBD_SIZE_MAXIMUM);

  if (min == -1 || pref == -1 || max == -1) {
    nbdkit_error ("%s", nbd_get_error ());
    return -1;
  }
  /* The upstream sends all three or none (0 here). */
  if (min <= 0 || pref <= 0 || max <= 0 ||
      min > UINT32_MAX || pref > UINT32_MAX || max > UINT32_MAX) {
    *minimum = *preferred = *maximum = 0;
    return 0;
  }
  *minimum = min;
  *preferred = pref;
  *maximum = max;
  return 0;
}

/* libnbd's nbd_can_* and nbd_is_* answer 1, 0 or -1 with an error. */
static int
flag (struct upstream *up, int r)
{
  if (r == -1)
    nbdkit_error ("%s", nbd_get_error ());
  return r;
}

static int
proxy_can_write (void *handle)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];
  int r = flag (up, nbd_is_read_only (up->nbd));

  return r == -1 ? -1 : !r;
}

#define FLAG_CALLBACK(name, call)                       \
  static int                                            \
  name (void *handle)                                   \
  {                                                     \
    struct upstream *up = ((struct proxy *) handle)->up[0];                       \
    return flag (up, call (up->nbd));                   \
  }
FLAG_CALLBACK (proxy_can_flush, nbd_can_flush)
FLAG_CALLBACK (proxy_is_rotational, nbd_is_rotational)
FLAG_CALLBACK (proxy_can_trim, nbd_can_trim)
FLAG_CALLBACK (proxy_can_zero, nbd_can_zero)
FLAG_CALLBACK (proxy_can_fast_zero, nbd_can_fast_zero)
FLAG_CALLBACK (proxy_can_multi_conn, nbd_can_multi_conn)

static int
proxy_can_fua (void *handle)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];
  int r = flag (up, nbd_can_fua (up->nbd));

  return r == -1 ? -1 : r ? NBDKIT_FUA_NATIVE : NBDKIT_FUA_NONE;
}

static int
proxy_can_cache (void *handle)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];
  int r = flag (up, nbd_can_cache (up->nbd));

  return r == -1 ? -1 : r ? NBDKIT_CACHE_NATIVE : NBDKIT_CACHE_NONE;
}

static int
proxy_can_extents (void *handle)
{
  struct upstream *up = ((struct proxy *) handle)->up[0];

  return flag (up, nbd_can_meta_context (up->nbd,
                                         LIBNBD_CONTEXT_BASE_ALLOCATION));
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "nbd",
  .longname           = "nbdkit nbd plugin",
  .version            = PACKAGE_VERSION,
  .unload             = proxy_unload,
  .config             = proxy_config,
  .config_complete    = proxy_config_complete,
  .config_help        = proxy_config_help,
  .magic_config_key   = "uri",
  .dump_plugin        = proxy_dump_plugin,
  .after_fork         = proxy_after_fork,
  .cleanup            = proxy_cleanup,
  .list_exports       = proxy_list_exports,
  .default_export     = proxy_default_export,
  .open               = proxy_open,
  .close              = proxy_close_handle,
  .export_description = proxy_export_description,
  .get_size           = proxy_get_size,
  .block_size         = proxy_block_size,
  .can_write          = proxy_can_write,
  .can_flush          = proxy_can_flush,
  .is_rotational      = proxy_is_rotational,
  .can_trim           = proxy_can_trim,
  .can_zero           = proxy_can_zero,
  .can_fast_zero      = proxy_can_fast_zero,
  .can_fua            = proxy_can_fua,
  .can_multi_conn     = proxy_can_multi_conn,
  .can_extents        = proxy_can_extents,
  .can_cache          = proxy_can_cache,
  .pread              = nbd_io_pread,
  .pwrite             = nbd_io_pwrite,
  .flush              = nbd_io_flush,
  .trim               = nbd_io_trim,
  .zero               = nbd_io_zero,
  .cache              = nbd_io_cache,
  .extents            = nbd_io_extents,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin)
