/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Picking an allocator from its allocator= string (see allocator.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "allocator.h"
#include "cleanup.h"
#include "array-size.h"

/* The boolean words nbdkit_parse_bool takes, which this library cannot
 * call.
 */
static int
parse_bool (const char *s)
{
  static const char *const yes[] = { "1", "true", "yes", "on" };
  static const char *const no[] = { "0", "false", "no", "off" };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (yes); ++i) {
    if (strcasecmp (s, yes[i]) == 0)
      return 1;
    if (strcasecmp (s, no[i]) == 0)
      return 0;
  }
  return -1;
}

struct allocator *
allocator_create (const char *spec, uint64_t size, allocator_debug_fn debug,
                  const char **why)
{
  CLEANUP_FREE char *copy = strdup (spec);
  char *type, *param, *rest;
  bool mlock = false;
  struct allocator *a;

  *why = NULL;
  if (copy == NULL)
    return NULL;
  if (size > INT64_MAX) {
    *why = "size is larger than 2^63 - 1 bytes";
    errno = EINVAL;
    return NULL;
  }

  /* TYPE[,KEY=VALUE...] */
  rest = copy;
  type = strsep (&rest, ",");
  while ((param = strsep (&rest, ",")) != NULL) {
    char *value = strchr (param, '=');

    if (strcmp (type, "malloc") == 0 && value != NULL &&
        strncmp (param, "mlock", value - param) == 0 &&
        value - param == 5) {
      int b = parse_bool (value + 1);

      if (b == -1) {
        *why = "mlock= must be true or false";
        errno = EINVAL;
        return NULL;
      }
      mlock = b;
      continue;
    }
    *why = strcmp (type, "malloc") == 0
      ? "unknown parameter (malloc takes only mlock=true|false)"
      : "this allocator takes no parameters";
    errno = EINVAL;
    return NULL;
  }

  if (strcmp (type, "sparse") == 0)
    a = sparse_allocator_create (size, why);
  else if (strcmp (type, "malloc") == 0)
    a = malloc_allocator_create (size, mlock, why);
  else if (strcmp (type, "zstd") == 0)
    a = zstd_allocator_create (size, debug, why);
  else {
    *why = "unknown allocator (use sparse, malloc[,mlock=true] or zstd)";
    errno = EINVAL;
    return NULL;
  }
  if (a == NULL)
    return NULL;
  a->size = size;
  a->debug = debug;
  if (debug)
    debug ("allocator: %s, %" PRIu64 " bytes%s", a->ops->type, size,
           mlock ? ", locked in RAM" : "");
  return a;
}

bool
allocator_have_mlock (void)
{
#ifdef HAVE_MLOCK
  return true;
#else
  return false;
#endif
}

bool
allocator_have_zstd (void)
{
#ifdef HAVE_LIBZSTD
  return true;
#else
  return false;
#endif
}
