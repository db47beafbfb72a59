/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Parameters that many plugins take, parsed one way: size=SIZE, a
 * yes/no flag, and a string parameter that a later one replaces.  Each returns 0, or -1
 * after reporting the error with nbdkit_error (as a config callback
 * must).  Include after <nbdkit-plugin.h>.
 */
#ifndef NBDKIT_PLUGINKIT_PARAMS_H
#define NBDKIT_PLUGINKIT_PARAMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A size (1M, 2G, ...) into *SIZE, which is left alone on error. */
static inline int
param_size (const char *value, int64_t *size)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1)
    return -1;
  *size = r;
  return 0;
}

/* The config callback of a plugin whose one parameter is size=. */
static inline int
param_size_only (const char *key, const char *value, int64_t *size)
{
  if (strcmp (key, "size") == 0)
    return param_size (value, size);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* A yes/no (true, on, 1, no, ...) into *FLAG, left alone on error. */
static inline int
param_bool (const char *value, bool *flag)
{
  int r = nbdkit_parse_bool (value);

  if (r == -1)
    return -1;
  *flag = r;
  return 0;
}

/* A copy of VALUE into *STR, freeing what an earlier one left there. */
static inline int
param_string (const char *value, char **str)
{
  char *copy = strdup (value);

  if (copy == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  free (*str);
  *str = copy;
  return 0;
}

#endif /* NBDKIT_PLUGINKIT_PARAMS_H */
