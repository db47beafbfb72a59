/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test plugin that fails, stalls and keeps a diary on demand.  The
 * fault tests (test-fault-*.sh) load it by path.  Its data is a RAM
 * buffer, so whatever does not fail behaves like the memory plugin.
 *
 * Parameters:
 *   size=SIZE          the export size (default 1M)
 *   fail=CALL,...      these calls fail: open pread pwrite flush trim
 *                      zero extents cache, or all
 *   error=ERRNO        the errno they fail with, by name (EIO, ENOSPC,
 *                      EDQUOT, ...) or number; 0 means fail without
 *                      calling nbdkit_set_error (default EIO)
 *   delay=CALL,...     these calls sleep delay-ms milliseconds first
 *   delay-ms=N         (default 2000)
 *   log=FILE           append one line per call: the call's name, and
 *                      "-done" lines after slow calls finish
 *
 * Calls are also steered by the export name a client asks for, so one
 * server can treat its clients differently: "fail-open" makes open
 * fail, "slow-open" makes open take delay-ms, "crash-open" makes open
 * write to an unmapped address (a real SIGSEGV; not address 0, which
 * UBSan would catch first in a sanitizer build).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include "array-size.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static int64_t size = 1024 * 1024;
static char *data;
static pthread_mutex_t data_lock = PTHREAD_MUTEX_INITIALIZER;
static char *fail_calls, *delay_calls;
static int fail_errno = EIO;
static unsigned delay_ms = 2000;
static int log_fd = -1;

static const struct {
  const char *name;
  int value;
} errnos[] = {
  { "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
  { "EFBIG", EFBIG }, { "EPERM", EPERM }, { "EROFS", EROFS },
  { "EINVAL", EINVAL }, { "ENOMEM", ENOMEM }, { "ESHUTDOWN", ESHUTDOWN },
  { "EOVERFLOW", EOVERFLOW }, { "ENOTSUP", ENOTSUP },
  { "EOPNOTSUPP", EOPNOTSUPP }, { "ENOENT", ENOENT },
  { "ETIMEDOUT", ETIMEDOUT }, { "EBADMSG", EBADMSG },
};

static void
diary (const char *what)
{
  if (log_fd == -1)
    return;
  char line[64];
  int n = snprintf (line, sizeof line, "%s\n", what);
  /* One write per line, O_APPEND: lines from threads never interleave. */
  if (write (log_fd, line, n) != n)
    nbdkit_debug ("fault: could not write the log");
}

/* Is CALL in the comma-separated LIST (or is LIST "all")? */
static bool
listed (const char *list, const char *call)
{
  if (!list)
    return false;
  if (strcmp (list, "all") == 0)
    return true;
  size_t len = strlen (call);
  for (const char *p = list; *p; ) {
    const char *end = strchr (p, ',');
    size_t n = end ? (size_t) (end - p) : strlen (p);
    if (n == len && strncmp (p, call, n) == 0)
      return true;
    p += n + (end != NULL);
  }
  return false;
}

static void
sleep_ms (unsigned ms)
{
  struct timespec ts = { .tv_sec = ms / 1000,
                         .tv_nsec = (ms % 1000) * 1000000L };
  while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
    ;
}

/* The start of every call: log it, stall if asked, and say whether it
 * must fail (after setting the error).
 */
static bool
enter (const char *call, bool stall)
{
  diary (call);
  if (stall || listed (delay_calls, call)) {
    sleep_ms (delay_ms);
    char done[32];
    snprintf (done, sizeof done, "%s-done", call);
    diary (done);
  }
  if (!listed (fail_calls, call))
    return false;
  nbdkit_error ("fault: %s fails as asked (errno %d)", call, fail_errno);
  if (fail_errno)
    nbdkit_set_error (fail_errno);
  else
    errno = ETIMEDOUT;          /* not preserved: the server says EIO */
  return true;
}

static void
fault_unload (void)
{
  diary ("unload");
  free (data);
  free (fail_calls);
  free (delay_calls);
  if (log_fd >= 0)
    close (log_fd);
}

static int
parse_errno (const char *value)
{
  for (size_t i = 0; i < ARRAY_SIZE (errnos); i++)
    if (strcmp (value, errnos[i].name) == 0)
      return errnos[i].value;
  char *end;
  long n = strtol (value, &end, 10);
  if (*value && !*end && n >= 0 && n < 4096)
    return n;
  nbdkit_error ("fault: unknown errno \"%s\"", value);
  return -1;
}

static int
fault_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    size = nbdkit_parse_size (value);
    return size == -1 ? -1 : 0;
  }
  if (strcmp (key, "fail") == 0 || strcmp (key, "delay") == 0) {
    char **list = key[0] == 'f' ? &fail_calls : &delay_calls;
    free (*list);
    *list = strdup (value);
    if (!*list) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "error") == 0) {
    fail_errno = parse_errno (value);
    return fail_errno == -1 ? -1 : 0;
  }
  if (strcmp (key, "delay-ms") == 0) {
    char *end;
    unsigned long n = strtoul (value, &end, 10);
    if (!*value || *end || n > 600000) {
      nbdkit_error ("fault: bad delay-ms \"%s\"", value);
      return -1;
    }
    delay_ms = n;
    return 0;
  }
  if (strcmp (key, "log") == 0) {
    if (log_fd >= 0)
      close (log_fd);
    log_fd = open (value, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd == -1) {
      nbdkit_error ("%s: %m", value);
      return -1;
    }
    return 0;
  }
  nbdkit_error ("fault: unknown parameter \"%s\"", key);
  return -1;
}

static int
fault_get_ready (void)
{
  data = calloc (1, size);
  if (!data) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  return 0;
}

/* An address nothing is mapped at, out of the compiler's sight. */
static volatile uintptr_t unmapped = 16;

static void *
fault_open (int readonly)
{
  const char *name = nbdkit_export_name ();
  bool stall = name && strcmp (name, "slow-open") == 0;
  if (enter ("open", stall))
    return NULL;
  if (name && strcmp (name, "fail-open") == 0) {
    nbdkit_error ("fault: open refused for export \"%s\"", name);
    return NULL;
  }
  if (name && strcmp (name, "crash-open") == 0)
    *(volatile int *) unmapped = 1;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
fault_close (void *handle)
{
  diary ("close");
}

static int64_t
fault_get_size (void *handle)
{
  return size;
}

static int
fault_can_fast_zero (void *handle)
{
  return 1;
}

static int
fault_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  if (enter ("pread", false))
    return -1;
  pthread_mutex_lock (&data_lock);
  memcpy (buf, data + offset, count);
  pthread_mutex_unlock (&data_lock);
  return 0;
}

static int
fault_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  if (enter ("pwrite", false))
    return -1;
  pthread_mutex_lock (&data_lock);
  memcpy (data + offset, buf, count);
  pthread_mutex_unlock (&data_lock);
  return 0;
}

static int
fault_flush (void *handle, uint32_t flags)
{
  return enter ("flush", false) ? -1 : 0;
}

static int
fault_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return enter ("trim", false) ? -1 : 0;
}

static int
fault_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (enter ("zero", false))
    return -1;
  pthread_mutex_lock (&data_lock);
  memset (data + offset, 0, count);
  pthread_mutex_unlock (&data_lock);
  return 0;
}

static int
fault_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents)
{
  if (enter ("extents", false))
    return -1;
  return nbdkit_add_extent (extents, offset, count, 0);
}

static int
fault_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return enter ("cache", false) ? -1 : 0;
}

static struct nbdkit_plugin plugin = {
  .name = "fault",
  .unload = fault_unload,
  .config = fault_config,
  .get_ready = fault_get_ready,
  .open = fault_open,
  .close = fault_close,
  .get_size = fault_get_size,
  .can_fast_zero = fault_can_fast_zero,
  .pread = fault_pread,
  .pwrite = fault_pwrite,
  .flush = fault_flush,
  .trim = fault_trim,
  .zero = fault_zero,
  .extents = fault_extents,
  .cache = fault_cache,
};

NBDKIT_REGISTER_PLUGIN (plugin)
