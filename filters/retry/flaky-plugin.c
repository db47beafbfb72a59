/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test plugin that fails its first few calls and then works, for the
 * retry and retry-request filters' tests (built by make check, loaded
 * by path).  Its data is a zeroed RAM buffer.
 *
 * Parameters:
 *   size=SIZE       the export size (default 1M)
 *   fail=N          the first N data calls (pread, pwrite, flush, trim,
 *                   zero), counted across all connections, fail with EIO
 *   fail-open=N     the first N opens fail
 *   log=FILE        append a line per open ("open ro=0|1"), per failed
 *                   call ("fail CALL") and per call that worked ("CALL")
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static int64_t size = 1024 * 1024;
static unsigned fail_calls, fail_opens;
static char *log_path;
static unsigned char *data;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;  /* all below */
static unsigned calls, opens;

static void
flaky_unload (void)
{
  free (log_path);
  free (data);
}

static int
flaky_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0)
    return (size = nbdkit_parse_size (value)) == -1 ? -1 : 0;
  if (strcmp (key, "fail") == 0)
    return nbdkit_parse_unsigned (key, value, &fail_calls);
  if (strcmp (key, "fail-open") == 0)
    return nbdkit_parse_unsigned (key, value, &fail_opens);
  if (strcmp (key, "log") == 0) {
    free (log_path);
    log_path = nbdkit_absolute_path (value);
    return log_path ? 0 : -1;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
flaky_get_ready (void)
{
  data = calloc (1, size);
  if (data == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  return 0;
}

/* Called with the lock held. */
static void
log_line (const char *what, const char *call)
{
  if (log_path) {
    FILE *fp = fopen (log_path, "a");
    if (fp) {
      fprintf (fp, "%s%s\n", what, call);
      fclose (fp);
    }
  }
}

static void *
flaky_open (int readonly)
{
  pthread_mutex_lock (&lock);
  bool fail = opens++ < fail_opens;
  log_line (fail ? "fail open" : readonly ? "open ro=1" : "open ro=0", "");
  pthread_mutex_unlock (&lock);
  if (fail) {
    nbdkit_error ("flaky: failing open");
    return NULL;
  }
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
flaky_get_size (void *handle)
{
  return size;
}

/* Whether this call fails; logs it either way. */
static bool
failing (const char *call)
{
  pthread_mutex_lock (&lock);
  bool fail = calls++ < fail_calls;
  log_line (fail ? "fail " : "", call);
  pthread_mutex_unlock (&lock);
  if (fail) {
    nbdkit_error ("flaky: failing %s", call);
    nbdkit_set_error (EIO);
  }
  return fail;
}

static int
flaky_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  if (failing ("pread"))
    return -1;
  memcpy (buf, data + offset, count);
  return 0;
}

static int
flaky_pwrite (void *handle, const void *buf, uint32_t count,
              uint64_t offset, uint32_t flags)
{
  if (failing ("pwrite"))
    return -1;
  memcpy (data + offset, buf, count);
  return 0;
}

static int
flaky_flush (void *handle, uint32_t flags)
{
  return failing ("flush") ? -1 : 0;
}

static int
flaky_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (failing ("trim"))
    return -1;
  memset (data + offset, 0, count);
  return 0;
}

static int
flaky_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (failing ("zero"))
    return -1;
  memset (data + offset, 0, count);
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "flaky",
  .unload = flaky_unload,
  .config = flaky_config,
  .get_ready = flaky_get_ready,
  .open = flaky_open,
  .get_size = flaky_get_size,
  .pread = flaky_pread,
  .pwrite = flaky_pwrite,
  .flush = flaky_flush,
  .trim = flaky_trim,
  .zero = flaky_zero,
};

NBDKIT_REGISTER_PLUGIN (plugin)
