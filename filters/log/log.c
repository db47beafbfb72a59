/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The log filter: one line per event, to a file (logfile=) and/or as
 * the shell variables of a script run for each event (logscript=).
 *
 * An event is an action (Read, Connect, ...), a type (ENTER before the
 * call below, LEAVE after it, PRINT for a one-off), the connection and
 * transaction ids where there are some, and a list of key=value fields
 * whose values are already in shell syntax (numbers, quoted strings,
 * arrays), so the same fields make the file line and the script's
 * variables.  The format is nbdkit 1.32's, so existing log readers work.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "cleanup.h"
#include "subprocess.h"
#include "vector.h"

static char *logfile;           /* logfile=, or NULL */
static char *logscript;         /* logscript=, or NULL */
static bool logappend;
static FILE *logfp;
/* One event at a time: lines never interleave, and scripts run in the
 * order of the events.
 */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* Ids of the calls made outside a connection, and of connections. */
static _Atomic uint64_t preconnect_ids, list_exports_ids, connection_ids;

struct handle {
  uint64_t connection;
  _Atomic uint64_t ids;         /* transactions so far */
  char *exportname;
  int tls;
};

/* ---- configuration ---- */

static void
log_unload (void)
{
  if (logfp)
    fclose (logfp);
  free (logfile);
  free (logscript);
}

static int
log_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  if (strcmp (key, "logfile") == 0) {
    free (logfile);
    logfile = nbdkit_absolute_path (value);
    return logfile ? 0 : -1;
  }
  if (strcmp (key, "logscript") == 0) {
    free (logscript);
    logscript = strdup (value);
    if (!logscript) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "logappend") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    logappend = r;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
log_config_complete (nbdkit_next_config_complete *next,
                     nbdkit_backend *nxdata)
{
  if (logfile) {
    int flags = O_CREAT | O_WRONLY | O_CLOEXEC |
      (logappend ? O_APPEND : O_TRUNC);
    int fd = open (logfile, flags, 0666);
    if (fd == -1) {
      nbdkit_error ("logfile: open: %s: %m", logfile);
      return -1;
    }
    logfp = fdopen (fd, logappend ? "a" : "w");
    if (!logfp) {
      nbdkit_error ("logfile: fdopen: %s: %m", logfile);
      close (fd);
      return -1;
    }
  }
  return next (nxdata);
}

#define log_config_help \
  "logfile=<FILE>       The file to log to.\n" \
  "logscript=<SCRIPT>   A shell script run with each event's fields.\n" \
  "logappend=<BOOL>     Append to the log file (default: truncate it)."

/* ---- events ---- */

struct field {
  const char *key;
  char *value;                  /* shell syntax */
};
DEFINE_VECTOR_TYPE (field_list, struct field);

struct event {
  const char *act;
  const char *type;             /* "ENTER", "LEAVE" or "PRINT" */
  uint64_t connection;          /* 0: none */
  uint64_t id;                  /* 0: none */
  field_list fields;
  bool failed;                  /* allocation failed: log what we have */
};

static void
event_free (struct event *ev)
{
  for (size_t i = 0; i < ev->fields.len; ++i)
    free (ev->fields.ptr[i].value);
  field_list_reset (&ev->fields);
}

static void
add_field (struct event *ev, const char *key, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static void
add_field (struct event *ev, const char *key, const char *fmt, ...)
{
  va_list ap;
  char *value;
  va_start (ap, fmt);
  int r = vasprintf (&value, fmt, ap);
  va_end (ap);
  if (r == -1) {
    ev->failed = true;
    return;
  }
  if (field_list_append (&ev->fields,
                         (struct field) { .key = key, .value = value }) == -1) {
    free (value);
    ev->failed = true;
  }
}

/* Quote S for the shell, the way nbdkit's log does: left bare when
 * every character is safe, else in double quotes with $ ` \ " escaped.
 */
static void
shell_quote (FILE *fp, const char *s)
{
  static const char safe[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "%+,-./:=@_";
  if (*s && strspn (s, safe) == strlen (s)) {
    fputs (s, fp);
    return;
  }
  fputc ('"', fp);
  for (; *s; s++) {
    if (strchr ("$`\\\"", *s))
      fputc ('\\', fp);
    fputc (*s, fp);
  }
  fputc ('"', fp);
}

static void
add_quoted (struct event *ev, const char *key, const char *s)
{
  char *value = NULL;
  size_t len;
  FILE *fp = open_memstream (&value, &len);
  if (!fp) {
    ev->failed = true;
    return;
  }
  shell_quote (fp, s ? s : "");
  if (fclose (fp) == EOF) {
    free (value);
    ev->failed = true;
    return;
  }
  add_field (ev, key, "%s", value);
  free (value);
}

static const char *
errno_name (int err)
{
  switch (err) {
  case EPERM: return "EPERM";
  case EIO: return "EIO";
  case ENOMEM: return "ENOMEM";
  case EINVAL: return "EINVAL";
  case ENOSPC: return "ENOSPC";
  case ESHUTDOWN: return "ESHUTDOWN";
  case EOVERFLOW: return "EOVERFLOW";
  case ENOTSUP: return "ENOTSUP";
  case EROFS: return "EROFS";
  case EFBIG: return "EFBIG";
  case EBADMSG: return "EBADMSG";
  case ENOENT: return "ENOENT";
  case EAGAIN: return "EAGAIN";
  case EBUSY: return "EBUSY";
  case ENODEV: return "ENODEV";
  case ETIMEDOUT: return "ETIMEDOUT";
  case ECONNRESET: return "ECONNRESET";
  case EPIPE: return "EPIPE";
  default: return NULL;
  }
}

/* The LEAVE fields of a call that returned R with errno ERR. */
static void
add_result (struct event *ev, int r, int err)
{
  add_field (ev, "return", "%d", r);
  if (r == -1) {
    const char *name = errno_name (err);
    if (name)
      add_field (ev, "error", "%s", name);
    else
      add_field (ev, "error", "%d", err);
  }
}

static void
write_line (const struct event *ev)
{
  struct timeval tv;
  struct tm tm;
  char stamp[64];

  gettimeofday (&tv, NULL);
  localtime_r (&tv.tv_sec, &tm);
  strftime (stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  fprintf (logfp, "%s.%06ld ", stamp, (long) tv.tv_usec);
  if (ev->connection)
    fprintf (logfp, "connection=%" PRIu64 " ", ev->connection);
  if (strcmp (ev->type, "LEAVE") == 0)
    fputs ("...", logfp);
  fputs (ev->act, logfp);
  if (ev->id)
    fprintf (logfp, " id=%" PRIu64, ev->id);
  for (size_t i = 0; i < ev->fields.len; ++i)
    fprintf (logfp, " %s=%s", ev->fields.ptr[i].key, ev->fields.ptr[i].value);
  if (strcmp (ev->type, "ENTER") == 0)
    fputs (" ...", logfp);
  fputc ('\n', logfp);
  fflush (logfp);
}

/* Run the script with the event's fields as shell variables, and wait
 * for it: its exit status is ignored, as the page says.
 */
static void
run_script (const struct event *ev)
{
  char *text = NULL;
  size_t len;
  FILE *fp = open_memstream (&text, &len);
  if (!fp)
    return;
  fprintf (fp, "act=%s\ntype=%s\n", ev->act, ev->type);
  if (ev->connection)
    fprintf (fp, "connection=%" PRIu64 "\n", ev->connection);
  if (ev->id)
    fprintf (fp, "id=%" PRIu64 "\n", ev->id);
  for (size_t i = 0; i < ev->fields.len; ++i)
    fprintf (fp, "%s=%s\n", ev->fields.ptr[i].key, ev->fields.ptr[i].value);
  fprintf (fp, "%s\n", logscript);
  if (fclose (fp) == EOF) {
    free (text);
    return;
  }

  /* The script must not read the client's socket or our stdin. */
  const char *const argv[] = { "bash", "-c", text, NULL };
  struct subprocess sp = {
    .argv = argv, .file = "/bin/bash", .stdin_mode = SUBPROCESS_NULL,
  };
  if (subprocess_run (&sp) == SUBPROCESS_ERROR)
    nbdkit_error ("logscript: %s: %m", sp.failed_call);
  free (text);
}

static void
emit (struct event *ev)
{
  if (logfp || logscript) {
    LOCK_FOR_SCOPE (&log_lock);
    if (logfp)
      write_line (ev);
    if (logscript)
      run_script (ev);
  }
  event_free (ev);
}

static bool
active (void)
{
  return logfp || logscript;
}

/* ---- calls outside a connection ---- */

static int
log_get_ready (int thread_model)
{
  if (active ()) {
    struct event ev = { .act = "Ready", .type = "PRINT" };
    add_field (&ev, "thread_model", "%d", thread_model);
    emit (&ev);
  }
  return 0;
}

static int
log_after_fork (nbdkit_backend *backend)
{
  if (active ()) {
    struct event ev = { .act = "Fork", .type = "PRINT" };
    emit (&ev);
  }
  return 0;
}

static int
log_preconnect (nbdkit_next_preconnect *next, nbdkit_backend *nxdata,
                int readonly)
{
  if (!active ())
    return next (nxdata, readonly);
  uint64_t id = ++preconnect_ids;
  struct event ev = { .act = "Preconnect", .type = "ENTER", .id = id };
  add_field (&ev, "readonly", "%d", readonly);
  emit (&ev);
  int r = next (nxdata, readonly);
  int err = errno;
  ev = (struct event) { .act = "Preconnect", .type = "LEAVE", .id = id };
  add_result (&ev, r, err);
  emit (&ev);
  return r;
}

static int
log_list_exports (nbdkit_next_list_exports *next, nbdkit_backend *nxdata,
                  int readonly, int is_tls, struct nbdkit_exports *exports)
{
  if (!active ())
    return next (nxdata, readonly, exports);
  uint64_t id = ++list_exports_ids;
  struct event ev = { .act = "ListExports", .type = "ENTER", .id = id };
  add_field (&ev, "readonly", "%d", readonly);
  add_field (&ev, "tls", "%d", is_tls);
  emit (&ev);
  int r = next (nxdata, readonly, exports);
  int err = errno;
  ev = (struct event) { .act = "ListExports", .type = "LEAVE", .id = id };
  if (r == 0) {
    char *list = NULL;
    size_t len;
    FILE *fp = open_memstream (&list, &len);
    if (fp) {
      fputc ('(', fp);
      size_t n = nbdkit_exports_count (exports);
      for (size_t i = 0; i < n; ++i) {
        if (i)
          fputc (' ', fp);
        shell_quote (fp, nbdkit_get_export (exports, i).name);
      }
      fputc (')', fp);
      if (fclose (fp) == 0)
        add_field (&ev, "exports", "%s", list);
      free (list);
    }
  }
  add_result (&ev, r, err);
  emit (&ev);
  return r;
}

/* ---- connections ---- */

static void *
log_open (nbdkit_next_open *next, nbdkit_context *context, int readonly,
          const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  struct handle *h = calloc (1, sizeof *h);
  if (!h) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->exportname = strdup (exportname);
  if (!h->exportname) {
    nbdkit_error ("strdup: %m");
    free (h);
    return NULL;
  }
  h->tls = is_tls;
  h->connection = ++connection_ids;
  return h;
}

static void
log_close (void *handle)
{
  struct handle *h = handle;
  if (active ()) {
    struct event ev = { .act = "Disconnect", .type = "PRINT",
                        .connection = h->connection };
    add_field (&ev, "transactions", "%" PRIu64, (uint64_t) h->ids);
    emit (&ev);
  }
  free (h->exportname);
  free (h);
}

static int
log_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  if (!active ())
    return 0;
  uint32_t minsize = 0, prefsize = 0, maxsize = 0;
  int64_t size = next->get_size (next);
  if (next->block_size (next, &minsize, &prefsize, &maxsize) == -1)
    minsize = prefsize = maxsize = 0;
  struct event ev = { .act = "Connect", .type = "PRINT",
                      .connection = h->connection };
  add_quoted (&ev, "export", h->exportname);
  add_field (&ev, "tls", "%d", h->tls);
  add_field (&ev, "size", "0x%" PRIx64, (uint64_t) (size < 0 ? 0 : size));
  add_field (&ev, "minsize", "0x%" PRIx32, minsize);
  add_field (&ev, "prefsize", "0x%" PRIx32, prefsize);
  add_field (&ev, "maxsize", "0x%" PRIx32, maxsize);
  add_field (&ev, "write", "%d", next->can_write (next));
  add_field (&ev, "flush", "%d", next->can_flush (next));
  add_field (&ev, "rotational", "%d", next->is_rotational (next));
  add_field (&ev, "trim", "%d", next->can_trim (next));
  add_field (&ev, "zero", "%d", next->can_zero (next));
  add_field (&ev, "fua", "%d", next->can_fua (next));
  add_field (&ev, "extents", "%d", next->can_extents (next));
  add_field (&ev, "cache", "%d", next->can_cache (next));
  add_field (&ev, "fast_zero", "%d", next->can_fast_zero (next));
  emit (&ev);
  return 0;
}

/* ENTER for a data call, returning its id (0 when not logging). */
static uint64_t
enter (struct handle *h, struct event *ev, const char *act)
{
  *ev = (struct event) { .act = act, .type = "ENTER",
                         .connection = h->connection };
  return ev->id = ++h->ids;
}

/* ENTER for a data call on a range: its offset and count first. */
static uint64_t
enter_range (struct handle *h, struct event *ev, const char *act,
             uint64_t offset, uint32_t count)
{
  uint64_t id = enter (h, ev, act);
  add_field (ev, "offset", "0x%" PRIx64, offset);
  add_field (ev, "count", "0x%" PRIx32, count);
  return id;
}

static void
leave (struct handle *h, uint64_t id, const char *act, int r, int err)
{
  struct event ev = { .act = act, .type = "LEAVE",
                      .connection = h->connection, .id = id };
  add_result (&ev, r, err);
  emit (&ev);
}

static int
log_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
           uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->pread (next, buf, count, offset, flags, err);
  struct event ev;
  uint64_t id = enter_range (h, &ev, "Read", offset, count);
  emit (&ev);
  int r = next->pread (next, buf, count, offset, flags, err);
  leave (h, id, "Read", r, *err);
  return r;
}

static int
log_pwrite (nbdkit_next *next, void *handle, const void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->pwrite (next, buf, count, offset, flags, err);
  struct event ev;
  uint64_t id = enter_range (h, &ev, "Write", offset, count);
  add_field (&ev, "fua", "%d", !!(flags & NBDKIT_FLAG_FUA));
  emit (&ev);
  int r = next->pwrite (next, buf, count, offset, flags, err);
  leave (h, id, "Write", r, *err);
  return r;
}

static int
log_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->flush (next, flags, err);
  struct event ev;
  uint64_t id = enter (h, &ev, "Flush");
  emit (&ev);
  int r = next->flush (next, flags, err);
  leave (h, id, "Flush", r, *err);
  return r;
}

static int
log_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->trim (next, count, offset, flags, err);
  struct event ev;
  uint64_t id = enter_range (h, &ev, "Trim", offset, count);
  add_field (&ev, "fua", "%d", !!(flags & NBDKIT_FLAG_FUA));
  emit (&ev);
  int r = next->trim (next, count, offset, flags, err);
  leave (h, id, "Trim", r, *err);
  return r;
}

static int
log_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->zero (next, count, offset, flags, err);
  struct event ev;
  uint64_t id = enter_range (h, &ev, "Zero", offset, count);
  add_field (&ev, "trim", "%d", !!(flags & NBDKIT_FLAG_MAY_TRIM));
  add_field (&ev, "fua", "%d", !!(flags & NBDKIT_FLAG_FUA));
  add_field (&ev, "fast", "%d", !!(flags & NBDKIT_FLAG_FAST_ZERO));
  emit (&ev);
  int r = next->zero (next, count, offset, flags, err);
  leave (h, id, "Zero", r, *err);
  return r;
}

static int
log_extents (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, struct nbdkit_extents *extents,
             int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->extents (next, count, offset, flags, extents, err);
  struct event ev;
  uint64_t id = enter_range (h, &ev, "Extents", offset, count);
  add_field (&ev, "req_one", "%d", !!(flags & NBDKIT_FLAG_REQ_ONE));
  emit (&ev);
  int r = next->extents (next, count, offset, flags, extents, err);

  ev = (struct event) { .act = "Extents", .type = "LEAVE",
                        .connection = h->connection, .id = id };
  if (r == 0) {
    char *list = NULL;
    size_t len;
    FILE *fp = open_memstream (&list, &len);
    if (fp) {
      fputc ('(', fp);
      size_t n = nbdkit_extents_count (extents);
      for (size_t i = 0; i < n; ++i) {
        struct nbdkit_extent e = nbdkit_get_extent (extents, i);
        const char *type =
          (e.type & NBDKIT_EXTENT_HOLE) && (e.type & NBDKIT_EXTENT_ZERO)
          ? "hole,zero" : (e.type & NBDKIT_EXTENT_HOLE) ? "hole"
          : (e.type & NBDKIT_EXTENT_ZERO) ? "zero" : "";
        fprintf (fp, "%s0x%" PRIx64 " 0x%" PRIx64 " \"%s\"", i ? " " : "",
                 e.offset, e.length, type);
      }
      fputc (')', fp);
      if (fclose (fp) == 0)
        add_field (&ev, "extents", "%s", list);
      free (list);
    }
  }
  add_result (&ev, r, *err);
  emit (&ev);
  return r;
}

static int
log_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  struct handle *h = handle;
  if (!active ())
    return next->cache (next, count, offset, flags, err);
  struct event ev;
  uint64_t id = enter_range (h, &ev, "Cache", offset, count);
  emit (&ev);
  int r = next->cache (next, count, offset, flags, err);
  leave (h, id, "Cache", r, *err);
  return r;
}

static struct nbdkit_filter filter = {
  .name = "log",
  .longname = "nbdkit log filter",
  .unload = log_unload,
  .config = log_config,
  .config_complete = log_config_complete,
  .config_help = log_config_help,
  .get_ready = log_get_ready,
  .after_fork = log_after_fork,
  .preconnect = log_preconnect,
  .list_exports = log_list_exports,
  .open = log_open,
  .close = log_close,
  .prepare = log_prepare,
  .pread = log_pread,
  .pwrite = log_pwrite,
  .flush = log_flush,
  .trim = log_trim,
  .zero = log_zero,
  .extents = log_extents,
  .cache = log_cache,
};

NBDKIT_REGISTER_FILTER (filter)
