/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ssh plugin: one remote file served over SFTP, through libssh.
 *
 * This file owns the parameters (set by config, read-only once the
 * server is ready) and, per NBD connection, one SSH session (opened by
 * session.c) with one SFTP session and the open remote file (struct
 * handle).  libssh
 * sessions must not be used by two threads at once, so the thread
 * model serialises the requests of a connection; connections run in
 * parallel, each on its own session.
 *
 * Data leaves through sftp_write in pieces of at most 255 KiB
 * (OpenSSH's server refuses messages over 256 KiB) or 32 KiB for other
 * servers, and enters through pipelined reads (sftp_async_read).
 * Flush is fsync@openssh.com where the server offers it.  TCP_NODELAY
 * is on: each write waits for its reply, and Nagle's algorithm would
 * add up to 40 ms to each.
 *
 * At start-up (get_ready) the plugin connects once, checks the host
 * key and the credentials and, unless create=true, that the file
 * exists, so that these mistakes stop the server with one line rather
 * than failing each client.  The file named by create=true is made on
 * the first NBD connection, as nbdkit 1.32 documents.
 *
 * libssh bounds the connection and login by SSH_OPTIONS_TIMEOUT but
 * not the SFTP calls: watchdog.c bounds those (timeout=, default 60 s)
 * by shutting down the socket of a session whose reply is overdue.
 *
 * Probes: ssh_connect after each connection attempt (session.c);
 * ssh_read_done, ssh_write_done and ssh_flush_done after each request
 * (one probe per operation: bpftrace reads at most six arguments);
 * ssh_sftp_error for each failed SFTP or channel call (see
 * nbdkit-ssh-plugin(1)).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <libssh/libssh.h>
#include <libssh/sftp.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "include/minmax.h"
#include "params.h"
#include "vector.h"
#include "session.h"
#include "watchdog.h"

NBDKIT_PROBE_SEMAPHORE (ssh_read_done);
NBDKIT_PROBE_SEMAPHORE (ssh_write_done);
NBDKIT_PROBE_SEMAPHORE (ssh_flush_done);
NBDKIT_PROBE_SEMAPHORE (ssh_sftp_error);

/* The largest read or write sent in one SFTP message.  Every SFTP
 * server must take messages of about 34000 bytes; OpenSSH's take up to
 * 256 KiB (its limits@openssh.com says 255 KiB of data), and a server
 * that names OpenSSH extensions is taken to be one of those.
 */
#define SFTP_CHUNK_SAFE UINT32_C (32768)
#define SFTP_CHUNK_OPENSSH UINT32_C (261120)

/* Seconds any wait on the remote may take, unless timeout= says. */
#define DEFAULT_TIMEOUT 60

/* The parameters, owned here (strdup'd), read-only after config. */
static struct ssh_params params = {
  .verify_remote_host = true,
  .timeout = DEFAULT_TIMEOUT,
  .identities = empty_vector,
};
static char *path;
static bool create;
static int64_t create_size = -1;
static unsigned create_mode = 0600;

/* create=true makes the file on the first NBD connection only. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static bool created;            /* protected by create_lock */

struct handle {
  ssh_session session;
  sftp_session sftp;
  sftp_file file;
  bool can_fsync;               /* the server offers fsync@openssh.com */
  uint32_t chunk;               /* the largest read or write to send */
  bool watched;                 /* watch is on the watchdog's list */
  struct ssh_watch watch;       /* bounds each wait for the server */
};

static void
ssh_unload (void)
{
  watch_stop ();
  free (params.host);
  free (params.port);
  free (params.user);
  free (params.password);
  free (path);
  free (params.config_file);
  free (params.known_hosts);
  string_vector_free_all (&params.identities);
}

/* Replace *FIELD with a copy of VALUE. */
static int
set_string (char **field, const char *value)
{
  char *copy = strdup (value);

  if (copy == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  free (*field);
  *field = copy;
  return 0;
}

static int
ssh_config (const char *key, const char *value)
{
  if (strcmp (key, "host") == 0)
    return set_string (&params.host, value);
  if (strcmp (key, "port") == 0)
    return set_string (&params.port, value);
  if (strcmp (key, "user") == 0)
    return set_string (&params.user, value);
  if (strcmp (key, "path") == 0)
    return set_string (&path, value);
  if (strcmp (key, "known-hosts") == 0)
    return set_string (&params.known_hosts, value);
  if (strcmp (key, "config") == 0) {
    params.config_set = true;
    return set_string (&params.config_file, value);
  }
  if (strcmp (key, "password") == 0) {
    free (params.password);
    params.password = NULL;
    return nbdkit_read_password (value, &params.password);
  }
  if (strcmp (key, "identity") == 0) {
    char *copy = strdup (value);

    if (copy == NULL ||
        string_vector_append (&params.identities, copy) == -1) {
      nbdkit_error ("identity: %m");
      free (copy);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "verify-remote-host") == 0)
    return param_bool (value, &params.verify_remote_host);
  if (strcmp (key, "compression") == 0)
    return param_bool (value, &params.compression);
  if (strcmp (key, "create") == 0)
    return param_bool (value, &create);
  if (strcmp (key, "create-size") == 0) {
    create_size = nbdkit_parse_size (value);
    return create_size == -1 ? -1 : 0;
  }
  if (strcmp (key, "create-mode") == 0) {
    char *end;
    unsigned long m;

    errno = 0;
    m = strtoul (value, &end, 8);
    if (errno != 0 || end == value || *end != '\0' || m > 07777) {
      nbdkit_error ("create-mode: '%s' is not an octal mode (0 to 07777)",
                    value);
      return -1;
    }
    create_mode = m;
    return 0;
  }
  if (strcmp (key, "timeout") == 0) {
    uint32_t secs;

    if (nbdkit_parse_uint32_t ("timeout", value, &secs) == -1)
      return -1;
    if (secs == 0 || secs > 86400) {
      nbdkit_error ("timeout: %s seconds is out of range (1 to 86400)",
                    value);
      return -1;
    }
    params.timeout = secs;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
ssh_config_complete (void)
{
  if (params.host == NULL || params.host[0] == '\0') {
    nbdkit_error ("host= is required (the SSH server to connect to)");
    return -1;
  }
  if (path == NULL || path[0] == '\0') {
    nbdkit_error ("path= is required (the remote file to serve)");
    return -1;
  }
  if (create && create_size < 0) {
    nbdkit_error ("create=true needs create-size=SIZE");
    return -1;
  }
  if (!create && create_size >= 0) {
    nbdkit_error ("create-size= is only used with create=true");
    return -1;
  }
  return 0;
}

#define ssh_config_help \
  "host=<HOST>          (required) The SSH server.\n" \
  "[path=]<PATH>        (required) The remote file.\n" \
  "port=<PORT>          The SSH port.\n" \
  "user=<USER>          The remote user name.\n" \
  "password=<PASSWORD>  Password (or - to ask, +FILE, -FD).\n" \
  "identity=<FILENAME>  A private key to try first (repeatable).\n" \
  "known-hosts=<FILE>   The known hosts file.\n" \
  "verify-remote-host=false  Do not check the host key (dangerous).\n" \
  "config=<FILE>        SSH client config file (empty: none).\n" \
  "compression=true     Compress the SSH traffic.\n" \
  "timeout=<SECS>       Limit on each wait for the server.\n" \
  "create=true          Create (replace) the file, with\n" \
  "create-size=<SIZE>   its size and\n" \
  "create-mode=<MODE>   its permissions (default 0600)."

/* The errno for an SFTP status code. */
static int
status_errno (int code)
{
  switch (code) {
  case SSH_FX_NO_SUCH_FILE:
  case SSH_FX_NO_SUCH_PATH:
    return ENOENT;
  case SSH_FX_PERMISSION_DENIED:
    return EACCES;
  case SSH_FX_WRITE_PROTECT:
    return EROFS;
  case SSH_FX_FILE_ALREADY_EXISTS:
    return EEXIST;
  case SSH_FX_OP_UNSUPPORTED:
    return EOPNOTSUPP;
  default:
    return EIO;
  }
}

/* An SFTP call failed: say which and why, fire ssh_sftp_error, and
 * return the errno the client should get.  The SFTP status is 0 when
 * the failure was below SFTP (the channel or the connection).
 */
static int
sftp_failed (struct handle *h, const char *what)
{
  /* After the connection is lost libssh's SFTP status is stale. */
  const bool connected = ssh_is_connected (h->session);
  const int code = h->sftp && connected ? sftp_get_error (h->sftp) : 0;
  const char *msg;

  if (h->watched && watch_fired (&h->watch))
    msg = "no reply from the server in time (timeout=): connection closed";
  else if (!connected)
    msg = "the connection to the server is lost";
  else
    msg = ssh_get_error (h->session);

  NBDKIT_PROBE (ssh_sftp_error, nbdkit_connection_id (),
                nbdkit_request_cookie (), code, msg);
  nbdkit_error ("%s: %s: %s (SFTP status %d)", path, what, msg, code);
  return code == 0 ? EIO : status_errno (code);
}

/* Bound the waits of the calls between wait_start and wait_end. */
static void
wait_start (struct handle *h)
{
  watch_arm (&h->watch, params.timeout);
}

static void
wait_end (struct handle *h)
{
  watch_disarm (&h->watch);
}

static void
close_handle (struct handle *h)
{
  if (h->watched)
    wait_start (h);
  if (h->file)
    sftp_close (h->file);
  if (h->sftp)
    sftp_free (h->sftp);
  if (h->session)
    ssh_disconnect (h->session);
  if (h->watched)
    watch_remove (&h->watch);
  if (h->session)
    ssh_free (h->session);
  free (h);
}

/* A connected SFTP session on a new handle, or NULL. */
static struct handle *
open_sftp (void)
{
  struct handle *h = calloc (1, sizeof *h);

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->session = session_connect (&params);
  if (h->session == NULL)
    goto err;
  if (watch_add (&h->watch, ssh_get_fd (h->session)) == -1)
    goto err;
  h->watched = true;
  wait_start (h);
  h->sftp = sftp_new (h->session);
  if (h->sftp == NULL) {
    sftp_failed (h, "starting SFTP");
    goto err;
  }
  if (sftp_init (h->sftp) != SSH_OK) {
    sftp_failed (h, "starting SFTP");
    goto err;
  }
  wait_end (h);
  return h;

 err:
  close_handle (h);
  return NULL;
}

/* Check at start-up what every connection will need: the host key,
 * the login and, unless it is to be created, the file.
 */
static int
ssh_get_ready (void)
{
  struct handle *h = open_sftp ();
  int r = 0;

  if (h == NULL) {
    watch_stop ();
    return -1;
  }
  if (!create) {
    sftp_attributes a;

    wait_start (h);
    a = sftp_stat (h->sftp, path);
    wait_end (h);

    if (a == NULL) {
      sftp_failed (h, "stat");
      r = -1;
    }
    else if (a->type == SSH_FILEXFER_TYPE_DIRECTORY) {
      nbdkit_error ("%s: is a directory on %s", path, params.host);
      r = -1;
    }
    sftp_attributes_free (a);
  }
  close_handle (h);
  /* The server may fork next: no thread must be left behind. */
  watch_stop ();
  return r;
}

/* create=true: replace the file with an empty one of create-size
 * bytes.  The mode given to open only applies to a new file, so it is
 * set again with the size for a file that was there.
 */
static int
create_file (struct handle *h)
{
  struct sftp_attributes_struct attrs = {
    .flags = SSH_FILEXFER_ATTR_SIZE | SSH_FILEXFER_ATTR_PERMISSIONS,
    .size = create_size,
    .permissions = create_mode,
  };

  h->file = sftp_open (h->sftp, path, O_RDWR | O_CREAT | O_TRUNC,
                       create_mode);
  if (h->file == NULL) {
    sftp_failed (h, "create");
    return -1;
  }
  if (sftp_setstat (h->sftp, path, &attrs) != SSH_OK) {
    sftp_failed (h, "setting the size and mode");
    return -1;
  }
  nbdkit_debug ("created %s on %s, %" PRIi64 " bytes, mode 0%o",
                path, params.host, create_size, create_mode);
  return 0;
}

static void *
ssh_open (int readonly)
{
  struct handle *h = open_sftp ();

  if (h == NULL)
    return NULL;

  wait_start (h);
  if (create) {
    pthread_mutex_lock (&create_lock);
    if (!created) {
      if (create_file (h) == -1) {
        pthread_mutex_unlock (&create_lock);
        close_handle (h);
        return NULL;
      }
      created = true;
    }
    pthread_mutex_unlock (&create_lock);
  }
  if (h->file == NULL) {
    h->file = sftp_open (h->sftp, path, readonly ? O_RDONLY : O_RDWR, 0);
    if (h->file == NULL) {
      sftp_failed (h, "open");
      close_handle (h);
      return NULL;
    }
  }
  wait_end (h);
  h->can_fsync = sftp_extension_supported (h->sftp, "fsync@openssh.com",
                                           "1");
  h->chunk = h->can_fsync ||
    sftp_extension_supported (h->sftp, "limits@openssh.com", "1") ||
    sftp_extension_supported (h->sftp, "posix-rename@openssh.com", "1")
    ? SFTP_CHUNK_OPENSSH : SFTP_CHUNK_SAFE;
  nbdkit_debug ("opened %s on %s%s, %" PRIu32 " bytes per message",
                path, params.host,
                h->can_fsync ? ", with fsync@openssh.com" : "",
                h->chunk);
  return h;
}

static void
ssh_close (void *handle)
{
  close_handle (handle);
}

static int64_t
ssh_get_size (void *handle)
{
  struct handle *h = handle;
  sftp_attributes a;
  int64_t size;

  wait_start (h);
  a = sftp_fstat (h->file);
  wait_end (h);
  if (a == NULL) {
    nbdkit_set_error (sftp_failed (h, "stat"));
    return -1;
  }
  if (!(a->flags & SSH_FILEXFER_ATTR_SIZE) || a->size > INT64_MAX) {
    nbdkit_error ("%s: the server did not give a usable size", path);
    sftp_attributes_free (a);
    nbdkit_set_error (EIO);
    return -1;
  }
  size = a->size;
  sftp_attributes_free (a);
  return size;
}

static int
ssh_can_flush (void *handle)
{
  struct handle *h = handle;

  return h->can_fsync;
}

/* The return value of a request that ended with ERR (0 or an errno). */
static int
request_result (int err)
{
  if (err == 0)
    return 0;
  nbdkit_set_error (err);
  return -1;
}

/* The time since START for a probe (0 if the probe was not enabled
 * when the request started).
 */
static uint64_t
elapsed (uint64_t start)
{
  return start ? watch_now_ns () - start : 0;
}

/* Read COUNT bytes at OFFSET one message at a time: the slow path,
 * for what the pipelined reads below could not finish.
 */
static int
read_in_turn (struct handle *h, char *buf, uint32_t count, uint64_t offset)
{
  if (sftp_seek64 (h->file, offset) < 0)
    return sftp_failed (h, "seek");
  while (count > 0) {
    const uint32_t n = MIN (count, h->chunk);
    ssize_t r = sftp_read (h->file, buf, n);

    if (r < 0)
      return sftp_failed (h, "read");
    if (r == 0 || (size_t) r > n) {
      nbdkit_error ("%s: the file ended at %" PRIu64 " (it shrank?)",
                    path, offset);
      return EIO;
    }
    buf += r;
    count -= r;
    offset += r;
  }
  return 0;
}

/* Reads are pipelined: up to READ_WINDOW requests of READ_PIECE bytes
 * are in flight, so a large read costs about one round trip rather
 * than one per message.  The replies are taken in order.  A short
 * reply (which servers may send) ends the pipeline: the rest is read
 * in turn.
 */
#define READ_PIECE UINT32_C (65536)
#define READ_WINDOW 16

static int
do_read (struct handle *h, char *buf, uint32_t count, uint64_t offset)
{
  const uint32_t piece = MIN (READ_PIECE, h->chunk);
  const uint32_t npieces = count / piece + (count % piece != 0);
  int ids[READ_WINDOW];
  uint32_t sent = 0, done = 0;
  uint32_t good = count;        /* bytes read in order from the start */
  int err = 0;

  if (sftp_seek64 (h->file, offset) < 0)
    return sftp_failed (h, "seek");
  while (done < npieces) {
    /* Keep the window full while nothing went wrong. */
    while (err == 0 && good == count && sent < npieces &&
           sent - done < READ_WINDOW) {
      const uint32_t len = MIN (piece, count - sent * piece);
      int id = sftp_async_read_begin (h->file, len);

      if (id < 0) {
        err = sftp_failed (h, "read");
        break;
      }
      ids[sent % READ_WINDOW] = id;
      sent++;
    }
    if (done == sent)
      break;
    /* Take the oldest reply, even after an error: libssh would keep
     * it queued for the life of the session otherwise.
     */
    {
      const uint32_t len = MIN (piece, count - done * piece);
      int r = sftp_async_read (h->file, buf + (size_t) done * piece, len,
                               ids[done % READ_WINDOW]);

      if (r < 0 && err == 0)
        err = sftp_failed (h, "read");
      else if (r >= 0 && (uint32_t) r < len && good == count)
        good = done * piece + r;
      done++;
    }
  }
  if (err != 0)
    return err;
  if (good < count)
    return read_in_turn (h, buf + good, count - good, offset + good);
  return 0;
}

static int
ssh_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  const uint64_t start =
    NBDKIT_PROBE_ENABLED (ssh_read_done) ? watch_now_ns () : 0;
  int err;

  (void) flags;
  wait_start (handle);
  err = do_read (handle, buf, count, offset);
  wait_end (handle);
  if (NBDKIT_PROBE_ENABLED (ssh_read_done))
    NBDKIT_PROBE (ssh_read_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset, count, elapsed (start),
                  err);
  return request_result (err);
}

static int
do_write (struct handle *h, const char *buf, uint32_t count, uint64_t offset)
{
  if (sftp_seek64 (h->file, offset) < 0)
    return sftp_failed (h, "seek");
  while (count > 0) {
    const uint32_t n = MIN (count, h->chunk);
    ssize_t r = sftp_write (h->file, buf, n);

    if (r < 0)
      return sftp_failed (h, "write");
    if (r != n) {
      nbdkit_error ("%s: short write at %" PRIu64, path, offset);
      return EIO;
    }
    buf += n;
    count -= n;
    offset += n;
  }
  return 0;
}

static int
do_flush (struct handle *h)
{
  if (!h->can_fsync)
    return 0;
  if (sftp_fsync (h->file) != SSH_OK)
    return sftp_failed (h, "fsync");
  return 0;
}

static int
ssh_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  const uint64_t start =
    NBDKIT_PROBE_ENABLED (ssh_write_done) ? watch_now_ns () : 0;
  int err;

  wait_start (handle);
  err = do_write (handle, buf, count, offset);
  if (err == 0 && (flags & NBDKIT_FLAG_FUA))
    err = do_flush (handle);
  wait_end (handle);
  if (NBDKIT_PROBE_ENABLED (ssh_write_done))
    NBDKIT_PROBE (ssh_write_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), offset, count, elapsed (start),
                  err);
  return request_result (err);
}

static int
ssh_flush (void *handle, uint32_t flags)
{
  const uint64_t start =
    NBDKIT_PROBE_ENABLED (ssh_flush_done) ? watch_now_ns () : 0;
  int err;

  (void) flags;
  wait_start (handle);
  err = do_flush (handle);
  wait_end (handle);
  if (NBDKIT_PROBE_ENABLED (ssh_flush_done))
    NBDKIT_PROBE (ssh_flush_done, nbdkit_connection_id (),
                  nbdkit_request_cookie (), elapsed (start), err);
  return request_result (err);
}

/* OpenSSH's sftp-server (which offers fsync@openssh.com) writes each
 * request straight to the file with no cache of its own, and its fsync
 * is fsync(2) of the file, which covers data written by every session:
 * so what one connection wrote and flushed is what all others read.
 * Other servers are not known to promise that.
 */
static int
ssh_can_multi_conn (void *handle)
{
  struct handle *h = handle;

  return h->can_fsync;
}

static int
ssh_can_fua (void *handle)
{
  struct handle *h = handle;

  return h->can_fsync ? NBDKIT_FUA_NATIVE : NBDKIT_FUA_NONE;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS

static struct nbdkit_plugin plugin = {
  .name              = "ssh",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit ssh plugin",
  .description       = "A remote file over SSH (SFTP)",
  .unload            = ssh_unload,
  .config            = ssh_config,
  .config_complete   = ssh_config_complete,
  .config_help       = ssh_config_help,
  .magic_config_key  = "path",
  .get_ready         = ssh_get_ready,
  .open              = ssh_open,
  .close             = ssh_close,
  .get_size          = ssh_get_size,
  .can_flush         = ssh_can_flush,
  .can_fua           = ssh_can_fua,
  .can_multi_conn    = ssh_can_multi_conn,
  .pread             = ssh_pread,
  .pwrite            = ssh_pwrite,
  .flush             = ssh_flush,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin)
