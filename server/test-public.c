/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of the server's helpers that plugins and filters call
 * (public.c, extents.c, exports.c) and of the ground floor they stand
 * on (runtime.c), linked from the server's own sources.  Every failure
 * must also leave a message (log_last_error), as a plugin's user sees
 * it.  Only the TLS peer questions are stubbed: this program has no
 * connection.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "include/array-size.h"

/* crypto.c is not linked: there is no TLS session outside a
 * connection, and public.c asks only inside one.
 */
char *
tls_peer_dn (struct connection *conn, bool issuer)
{
  abort ();
}

char *
tls_peer_username (struct connection *conn)
{
  abort ();
}

static unsigned failures;

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf (stderr, "%s:%d: check failed: %s\n",                     \
               __FILE__, __LINE__, #cond);                              \
      failures++;                                                       \
    }                                                                   \
  } while (0)

/* A call that must fail and say why: MSG is part of its message. */
#define CHECK_FAILS(call, msg)                                          \
  do {                                                                  \
    log_clear_last_error ();                                            \
    CHECK ((call) == -1);                                               \
    const char *e_ = log_last_error ();                                 \
    CHECK (e_ && strstr (e_, (msg)));                                   \
  } while (0)

static void
test_parse_size (void)
{
  static const struct { const char *s; int64_t v; } good[] = {
    { "0", 0 }, { "1024", 1024 }, { "1b", 1 }, { "1B", 1 },
    { "1s", 512 }, { "3S", 1536 }, { "1k", 1024 }, { "1K", 1024 },
    { "1KB", 1024 }, { "1KiB", 1024 }, { "2M", 2 << 20 },
    { "1MiB", 1 << 20 }, { "1G", INT64_C (1) << 30 },
    { "1T", INT64_C (1) << 40 }, { "1P", INT64_C (1) << 50 },
    { "7E", INT64_C (7) << 60 }, { " 10", 10 },
    { "9223372036854775807", INT64_MAX },
  };
  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    CHECK (nbdkit_parse_size (good[i].s) == good[i].v);

  CHECK_FAILS (nbdkit_parse_size (""), "could not parse size");
  CHECK_FAILS (nbdkit_parse_size ("-1"), "could not parse size");
  CHECK_FAILS (nbdkit_parse_size ("1X"), "could not parse size");
  CHECK_FAILS (nbdkit_parse_size ("1KiBx"), "could not parse size");
  CHECK_FAILS (nbdkit_parse_size ("1bB"), "could not parse size");
  CHECK_FAILS (nbdkit_parse_size ("8E"), "too large");
  CHECK_FAILS (nbdkit_parse_size ("9223372036854775808"), "too large");
  CHECK_FAILS (nbdkit_parse_size ("99999999999999999999"), "too large");
  CHECK_FAILS (nbdkit_parse_size ("8796093022208T"), "too large");
}

static void
test_parse_bool (void)
{
  static const char *const yes[] = { "1", "true", "TRUE", "t", "yes", "Y",
                                     "on", "On" };
  static const char *const no[] = { "0", "false", "F", "no", "n", "off",
                                    "OFF" };
  for (size_t i = 0; i < ARRAY_SIZE (yes); i++)
    CHECK (nbdkit_parse_bool (yes[i]) == 1);
  for (size_t i = 0; i < ARRAY_SIZE (no); i++)
    CHECK (nbdkit_parse_bool (no[i]) == 0);
  CHECK_FAILS (nbdkit_parse_bool (""), "could not decipher boolean");
  CHECK_FAILS (nbdkit_parse_bool ("2"), "could not decipher boolean");
  CHECK_FAILS (nbdkit_parse_bool ("yess"), "could not decipher boolean");
}

static void
test_parse_ints (void)
{
  int i;
  int8_t i8;
  int64_t i64;
  unsigned u;
  uint8_t u8;
  uint16_t u16;
  uint64_t u64;

  CHECK (nbdkit_parse_int ("t", "0x10", &i) == 0 && i == 16);
  CHECK (nbdkit_parse_int ("t", "010", &i) == 0 && i == 8);
  CHECK (nbdkit_parse_int ("t", "-2147483648", &i) == 0 && i == INT32_MIN);
  CHECK (nbdkit_parse_int ("t", "7", NULL) == 0);   /* only checked */
  CHECK_FAILS (nbdkit_parse_int ("t", "2147483648", &i), "out of range");
  CHECK_FAILS (nbdkit_parse_int ("t", "", &i), "could not parse");
  CHECK_FAILS (nbdkit_parse_int ("t", " 1", &i), "could not parse");
  CHECK_FAILS (nbdkit_parse_int ("t", "1 ", &i), "could not parse");
  CHECK_FAILS (nbdkit_parse_int ("t", "1e3", &i), "could not parse");

  CHECK (nbdkit_parse_int8_t ("t", "-128", &i8) == 0 && i8 == -128);
  CHECK (nbdkit_parse_int8_t ("t", "127", &i8) == 0 && i8 == 127);
  CHECK_FAILS (nbdkit_parse_int8_t ("t", "128", &i8), "out of range");
  CHECK_FAILS (nbdkit_parse_int8_t ("t", "-129", &i8), "out of range");
  CHECK (nbdkit_parse_int64_t ("t", "-9223372036854775808", &i64) == 0 &&
         i64 == INT64_MIN);
  CHECK_FAILS (nbdkit_parse_int64_t ("t", "9223372036854775808", &i64),
               "out of range");

  CHECK (nbdkit_parse_unsigned ("t", "4294967295", &u) == 0 &&
         u == UINT32_MAX);
  CHECK_FAILS (nbdkit_parse_unsigned ("t", "4294967296", &u), "out of range");
  /* strtoumax would wrap "-1" to the largest value: refused instead. */
  CHECK_FAILS (nbdkit_parse_unsigned ("t", "-1", &u), "could not parse");
  CHECK_FAILS (nbdkit_parse_uint64_t ("t", "-0", &u64), "could not parse");
  CHECK_FAILS (nbdkit_parse_unsigned ("t", " 1", &u), "could not parse");
  CHECK (nbdkit_parse_uint8_t ("t", "255", &u8) == 0 && u8 == 255);
  CHECK_FAILS (nbdkit_parse_uint8_t ("t", "256", &u8), "out of range");
  CHECK (nbdkit_parse_uint16_t ("t", "0xffff", &u16) == 0 && u16 == 65535);
  CHECK (nbdkit_parse_uint64_t ("t", "18446744073709551615", &u64) == 0 &&
         u64 == UINT64_MAX);
  CHECK_FAILS (nbdkit_parse_uint64_t ("t", "18446744073709551616", &u64),
               "out of range");

  /* The caller's name for the value starts the message. */
  log_clear_last_error ();
  CHECK (nbdkit_parse_int ("threads", "many", &i) == -1);
  CHECK (log_last_error () && strstr (log_last_error (), "threads: "));
}

/* Probabilities and delays (nbdkit 1.36 and 1.40's forms). */
static void
test_parse_probability_delay (void)
{
  double d = -1;
  CHECK (nbdkit_parse_probability ("p", "0.1", &d) == 0 && d == 0.1);
  CHECK (nbdkit_parse_probability ("p", "1e-1", &d) == 0 && d == 0.1);
  CHECK (nbdkit_parse_probability ("p", "10%", &d) == 0 && d == 0.1);
  CHECK (nbdkit_parse_probability ("p", "1:10", &d) == 0 && d == 0.1);
  CHECK (nbdkit_parse_probability ("p", "1/10", &d) == 0 && d == 0.1);
  CHECK (nbdkit_parse_probability ("p", "200%", &d) == 0 && d == 2.0);
  CHECK (nbdkit_parse_probability ("p", "0", &d) == 0 && d == 0);
  CHECK (nbdkit_parse_probability ("p", "0.5", NULL) == 0);
  d = 7;
  CHECK_FAILS (nbdkit_parse_probability ("p", "-0.1", &d), "out of range");
  CHECK_FAILS (nbdkit_parse_probability ("p", "inf", &d), "out of range");
  CHECK_FAILS (nbdkit_parse_probability ("p", "nan", &d), "out of range");
  CHECK_FAILS (nbdkit_parse_probability ("p", "1:0", &d), "divisor");
  CHECK_FAILS (nbdkit_parse_probability ("p", "1/-2", &d), "divisor");
  CHECK_FAILS (nbdkit_parse_probability ("p", "", &d), "could not parse");
  CHECK_FAILS (nbdkit_parse_probability ("p", "1:", &d), "could not parse");
  CHECK_FAILS (nbdkit_parse_probability ("p", "10%%", &d), "could not parse");
  CHECK_FAILS (nbdkit_parse_probability ("p", " 0.1", &d), "could not parse");
  CHECK_FAILS (nbdkit_parse_probability ("error-rate", "x", &d),
               "error-rate: ");
  CHECK (d == 7);               /* untouched on error */

  unsigned s = 99, ns = 99;
  CHECK (nbdkit_parse_delay ("t", "1", &s, &ns) == 0 && s == 1 && ns == 0);
  CHECK (nbdkit_parse_delay ("t", "1.2", &s, &ns) == 0 &&
         s == 1 && ns == 200000000);
  CHECK (nbdkit_parse_delay ("t", "1.2s", &s, &ns) == 0 &&
         s == 1 && ns == 200000000);
  CHECK (nbdkit_parse_delay ("t", "120ms", &s, &ns) == 0 &&
         s == 0 && ns == 120000000);
  CHECK (nbdkit_parse_delay ("t", "1.2ms", &s, &ns) == 0 &&
         s == 0 && ns == 1200000);
  CHECK (nbdkit_parse_delay ("t", "1.2us", &s, &ns) == 0 &&
         s == 0 && ns == 1200);
  CHECK (nbdkit_parse_delay ("t", "120\xce\xbcs", &s, &ns) == 0 &&
         s == 0 && ns == 120000);
  CHECK (nbdkit_parse_delay ("t", "1ns", &s, &ns) == 0 && s == 0 && ns == 1);
  CHECK (nbdkit_parse_delay ("t", ".5", &s, &ns) == 0 &&
         s == 0 && ns == 500000000);
  CHECK (nbdkit_parse_delay ("t", "2500ms", &s, &ns) == 0 &&
         s == 2 && ns == 500000000);
  CHECK (nbdkit_parse_delay ("t", "4294967295.999999999", &s, &ns) == 0 &&
         s == UINT_MAX && ns == 999999999);
  CHECK (nbdkit_parse_delay ("t", "3", NULL, NULL) == 0);
  s = ns = 99;
  CHECK_FAILS (nbdkit_parse_delay ("t", "4294967296", &s, &ns), "range");
  CHECK_FAILS (nbdkit_parse_delay ("t", "99999999999999999999999", &s, &ns),
               "range");
  CHECK_FAILS (nbdkit_parse_delay ("t", "-1", &s, &ns), "could not parse");
  CHECK_FAILS (nbdkit_parse_delay ("t", "", &s, &ns), "could not parse");
  CHECK_FAILS (nbdkit_parse_delay ("t", ".", &s, &ns), "could not parse");
  CHECK_FAILS (nbdkit_parse_delay ("t", "1m", &s, &ns), "could not parse");
  CHECK_FAILS (nbdkit_parse_delay ("t", "1 s", &s, &ns), "could not parse");
  CHECK_FAILS (nbdkit_parse_delay ("delay-read", "x", &s, &ns),
               "delay-read: ");
  CHECK (s == 99 && ns == 99);  /* untouched on error */
}

static void
test_paths (void)
{
  char *p = nbdkit_absolute_path ("/a/b");
  CHECK (p && strcmp (p, "/a/b") == 0);
  free (p);

  char *cwd = getcwd (NULL, 0);
  assert (cwd);
  p = nbdkit_absolute_path ("rel/x");
  char *want;
  assert (asprintf (&want, "%s/rel/x", cwd) > 0);
  CHECK (p && strcmp (p, want) == 0);
  free (p);
  free (want);
  free (cwd);

  log_clear_last_error ();
  CHECK (nbdkit_absolute_path ("") == NULL);
  CHECK (log_last_error () && strstr (log_last_error (), "empty path"));
  log_clear_last_error ();
  CHECK (nbdkit_realpath ("/nonexistent/../x/y") == NULL);
  CHECK (log_last_error () && strstr (log_last_error (), "realpath"));
}

static void
test_extents (void)
{
  struct nbdkit_extents *e;

  /* Ranges the protocol cannot express are refused. */
  log_clear_last_error ();
  errno = 0;
  CHECK (nbdkit_extents_new (10, 5) == NULL && errno == ERANGE);
  CHECK (nbdkit_extents_new (0, (uint64_t) INT64_MAX + 1) == NULL);
  CHECK (log_last_error () && strstr (log_last_error (), "bad range"));

  /* Extents are clipped to [start, end) and neighbours of one type
   * merge; a zero-length extent is ignored.
   */
  e = nbdkit_extents_new (100, 1000);
  assert (e);
  CHECK (nbdkit_add_extent (e, 0, 200, 0) == 0);
  CHECK (nbdkit_add_extent (e, 200, 0, NBDKIT_EXTENT_HOLE) == 0);
  CHECK (nbdkit_add_extent (e, 200, 100, 0) == 0);
  CHECK (nbdkit_add_extent (e, 300, 1000, NBDKIT_EXTENT_HOLE) == 0);
  CHECK (nbdkit_extents_count (e) == 2);
  struct nbdkit_extent x0 = nbdkit_get_extent (e, 0);
  struct nbdkit_extent x1 = nbdkit_get_extent (e, 1);
  CHECK (x0.offset == 100 && x0.length == 200 && x0.type == 0);
  CHECK (x1.offset == 300 && x1.length == 700 &&
         x1.type == NBDKIT_EXTENT_HOLE);

  /* A gap, or an extent that wraps, is an error with ERANGE. */
  errno = 0;
  CHECK_FAILS (nbdkit_add_extent (e, 1400, 10, 0), "contiguous");
  CHECK (errno == ERANGE);
  CHECK_FAILS (nbdkit_add_extent (e, UINT64_MAX - 5, 10, 0), "wraps");
  nbdkit_extents_free (e);

  /* The first extent must cover the start. */
  e = nbdkit_extents_new (100, 1000);
  assert (e);
  CHECK_FAILS (nbdkit_add_extent (e, 150, 10, 0), "start at the requested");
  nbdkit_extents_free (e);

  /* A reader that wants only [0, 10): once that is covered, only the
   * last extent grows; nothing after it is kept.
   */
  e = extents_new_wanted (0, 10, 1000);
  assert (e);
  CHECK (nbdkit_add_extent (e, 0, 20, 0) == 0);
  CHECK (nbdkit_add_extent (e, 20, 20, NBDKIT_EXTENT_HOLE) == 0);
  CHECK (nbdkit_add_extent (e, 40, 20, 0) == 0);
  CHECK (nbdkit_extents_count (e) == 1);
  CHECK (nbdkit_get_extent (e, 0).length == 20);
  nbdkit_extents_free (e);
  nbdkit_extents_free (NULL);
}

static void
test_exports (void)
{
  struct nbdkit_exports *x = nbdkit_exports_new ();
  assert (x);
  CHECK (nbdkit_add_export (x, "a", NULL) == 0);
  CHECK (nbdkit_add_export (x, "b", "the second") == 0);
  CHECK (nbdkit_exports_count (x) == 2);
  CHECK (strcmp (nbdkit_get_export (x, 1).name, "b") == 0);
  CHECK (strcmp (nbdkit_get_export (x, 1).description, "the second") == 0);
  CHECK (nbdkit_get_export (x, 0).description == NULL);

  /* NBD strings are at most 4096 bytes. */
  char *big = malloc (5000);
  assert (big);
  memset (big, 'x', 4999);
  big[4999] = '\0';
  errno = 0;
  CHECK_FAILS (nbdkit_add_export (x, big, NULL), "too long");
  CHECK (errno == EINVAL);
  CHECK_FAILS (nbdkit_add_export (x, "c", big), "too long");
  free (big);
  CHECK (nbdkit_exports_count (x) == 2);

  /* The default-export mark is taken once. */
  CHECK (!exports_has_default (x));
  CHECK (nbdkit_use_default_export (x) == 0);
  CHECK (exports_has_default (x));
  CHECK (exports_take_default (x));
  CHECK (!exports_take_default (x));
  nbdkit_exports_free (x);
}

static void
test_outside_a_connection (void)
{
  /* Plugins call these from their own threads too. */
  CHECK (conn_current () == NULL);
  CHECK (nbdkit_connection_id () == 0);
  CHECK (nbdkit_request_cookie () == 0);
  CHECK (nbdkit_export_name () == NULL);
  CHECK (nbdkit_peer_pid () == -1);

  /* Interned outside a connection: kept for the process (freed here
   * only so that a leak checker sees nothing else).
   */
  const char *s = nbdkit_strdup_intern ("kept");
  CHECK (s && strcmp (s, "kept") == 0);
  free ((char *) s);
  s = nbdkit_printf_intern ("%d-%s", 42, "x");
  CHECK (s && strcmp (s, "42-x") == 0);
  free ((char *) s);
  s = nbdkit_strndup_intern ("abcdef", 3);
  CHECK (s && strcmp (s, "abc") == 0);
  free ((char *) s);

  /* A short sleep outside a connection, before any stop. */
  CHECK (nbdkit_nanosleep (0, 1000000) == 0);

  /* The cookie a thread runs is its own. */
  layer_set_cookie (7);
  CHECK (nbdkit_request_cookie () == 7 && layer_current_cookie () == 7);
  layer_set_cookie (0);
}

static void
test_stop (void)
{
  CHECK (runtime_stop_init () == 0);
  CHECK (strcmp (server_stop_reason (), "unknown") == 0);
  nbdkit_shutdown ();
  CHECK (strcmp (server_stop_reason (), "nbdkit_shutdown") == 0);
  /* The first reason stays. */
  server_request_shutdown ("signal");
  CHECK (strcmp (server_stop_reason (), "nbdkit_shutdown") == 0);
  /* The quit pipe woke: the accept loop would see it. */
  char c;
  CHECK (read (server_quit_fd (), &c, 1) == 1);

  /* Once the drain is over, sleeps end at once with ESHUTDOWN. */
  CHECK (!server_drain_over ());
  server_end_drain ();
  CHECK (server_drain_over ());
  errno = 0;
  CHECK (nbdkit_nanosleep (5, 0) == -1 && errno == ESHUTDOWN);
}

int
main (void)
{
  test_parse_size ();
  test_parse_bool ();
  test_parse_ints ();
  test_parse_probability_delay ();
  test_paths ();
  test_extents ();
  test_exports ();
  test_outside_a_connection ();
  test_stop ();
  if (failures) {
    fprintf (stderr, "test-public: %u checks failed\n", failures);
    return 1;
  }
  printf ("test-public: all checks passed\n");
  return 0;
}
