/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of the pluginkit headers, against a stand-in for the
 * server's nbdkit_parse_size and nbdkit_error.
 */
#include <config.h>

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "answers.h"
#include "params.h"

static char last_error[128];

void
nbdkit_error (const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  vsnprintf (last_error, sizeof last_error, fs, args);
  va_end (args);
}

/* Whole numbers with an optional K suffix; anything else is an error. */
int64_t
nbdkit_parse_size (const char *str)
{
  char *end;
  long long v = strtoll (str, &end, 10);

  if (end == str || v < 0) {
    nbdkit_error ("could not parse size string (%s)", str);
    return -1;
  }
  if (*end == 'K')
    v *= 1024, end++;
  if (*end != '\0') {
    nbdkit_error ("could not parse size string (%s)", str);
    return -1;
  }
  return v;
}

/* Only the spellings the tests use. */
int
nbdkit_parse_bool (const char *str)
{
  if (strcmp (str, "on") == 0)
    return 1;
  if (strcmp (str, "off") == 0)
    return 0;
  nbdkit_error ("could not decipher boolean (%s)", str);
  return -1;
}

static void
test_params (void)
{
  int64_t size = -1;
  char *s = NULL;
  bool flag = false;

  assert (param_size ("4K", &size) == 0 && size == 4096);
  /* An error leaves the size as it was. */
  assert (param_size ("x", &size) == -1 && size == 4096);

  size = -1;
  assert (param_size_only ("size", "10", &size) == 0 && size == 10);
  last_error[0] = '\0';
  assert (param_size_only ("sise", "20", &size) == -1 && size == 10);
  assert (strcmp (last_error, "unknown parameter 'sise'") == 0);
  assert (param_size_only ("size", "?", &size) == -1 && size == 10);

  assert (param_bool ("on", &flag) == 0 && flag);
  assert (param_bool ("maybe", &flag) == -1 && flag);
  assert (param_bool ("off", &flag) == 0 && !flag);

  assert (param_string ("a", &s) == 0 && strcmp (s, "a") == 0);
  /* A later one replaces (and frees) the earlier. */
  assert (param_string ("bc", &s) == 0 && strcmp (s, "bc") == 0);
  free (s);
}

static void
test_answers (void)
{
  assert (answer_no_handle (0) == NBDKIT_HANDLE_NOT_NEEDED);
  assert (answer_no_handle (1) == NBDKIT_HANDLE_NOT_NEEDED);
  assert (answer_yes (NULL) == 1);
  assert (answer_fua_native (NULL) == NBDKIT_FUA_NATIVE);
  assert (answer_cache_native (NULL) == NBDKIT_CACHE_NATIVE);
  assert (answer_flush_done (NULL, 0) == 0);
  assert (answer_range_done (NULL, 512, 0, 0) == 0);
}

int
main (void)
{
  test_params ();
  test_answers ();
  printf ("test-pluginkit: ok\n");
  return 0;
}
