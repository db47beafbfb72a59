/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The readonly filter: make the layer below read-only, for good (no
 * parameter) or while a file exists (readonly-file=PATH).  For good,
 * the layer below is opened read-only and the export is advertised
 * read-only, so the server refuses writes before they get here.  With
 * a file, the export stays writable (if the plugin is) and every
 * write, zero and trim looks for the file first and fails with EPERM
 * while it exists, so an operator can switch a running server between
 * the two.  The path is set by config and read-only afterwards; the
 * last state seen is an atomic, only used to report switches.
 */
#include <config.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

/* Absolute (the server may change directory when it forks), or NULL
 * for read-only for good.
 */
static char *readonly_file;

/* The state the last write-like request found: 0 writable, 1 read-only.
 * Starts writable, so the first request to find the file reports the
 * switch.
 */
static atomic_int last_seen;

static void
readonly_unload (void)
{
  free (readonly_file);
}

static int
readonly_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "readonly-file") == 0) {
    if (value[0] == '\0') {
      nbdkit_error ("readonly-file: the path must not be empty");
      return -1;
    }
    free (readonly_file);
    readonly_file = nbdkit_absolute_path (value);
    return readonly_file ? 0 : -1;
  }
  return next (nxdata, key, value);
}

#define readonly_config_help \
  "readonly-file=<PATH>        Read-only while PATH exists (default: always)."

static void *
readonly_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  /* For good: the plugin is never even asked to be writable. */
  if (next (context, readonly || readonly_file == NULL, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int
readonly_can_write (nbdkit_next *next, void *handle)
{
  if (readonly_file == NULL)
    return 0;
  return next->can_write (next);
}

/* Whether a change must be refused now.  Sets *err to EPERM if so. */
static bool
refused (const char *command, uint64_t offset, uint32_t count, int *err)
{
  int ro = readonly_file == NULL || access (readonly_file, F_OK) == 0;

  if (atomic_exchange (&last_seen, ro) != ro) {
    nbdkit_debug ("readonly: %s %s: now %s", readonly_file,
                  ro ? "exists" : "is gone", ro ? "read-only" : "writable");
    NBDKIT_PROBE (readonly_switch, nbdkit_connection_id (),
                  nbdkit_request_cookie (), ro);
  }
  if (!ro)
    return false;
  NBDKIT_PROBE (readonly_refuse, nbdkit_connection_id (),
                nbdkit_request_cookie (), command, offset, count);
  *err = EPERM;
  return true;
}

static int
readonly_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (refused ("write", offset, count, err))
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
readonly_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  if (refused ("zero", offset, count, err))
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
readonly_trim (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  if (refused ("trim", offset, count, err))
    return -1;
  return next->trim (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "readonly",
  .longname = "nbdkit readonly filter",
  .unload = readonly_unload,
  .config = readonly_config,
  .config_help = readonly_config_help,
  .open = readonly_open,
  .can_write = readonly_can_write,
  .pwrite = readonly_pwrite,
  .zero = readonly_zero,
  .trim = readonly_trim,
};

NBDKIT_REGISTER_FILTER (filter)
