/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of the header-only helpers in common/include. */
#include <config.h>

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array-size.h"
#include "checked-overflow.h"
#include "isaligned.h"
#include "ispowerof2.h"
#include "iszero.h"
#include "minmax.h"
#include "now-ns.h"
#include "rounding.h"

static int calls;

static int
counted (int v)
{
  calls++;
  return v;
}

static void
test_minmax (void)
{
  assert (MIN (1, 2) == 1);
  assert (MAX (1, 2) == 2);
  assert (MIN (-5, 3) == -5);
  assert (MAX (UINT64_MAX, UINT64_C (0)) == UINT64_MAX);
  /* Each argument once, and nesting works. */
  calls = 0;
  assert (MIN (counted (4), counted (3)) == 3);
  assert (calls == 2);
  assert (MAX (MIN (1, 9), MIN (7, 5)) == 5);
}

static void
test_rounding (void)
{
  uint64_t big = UINT64_C (1) << 62;
  uint32_t x = 4095;

  assert (ROUND_UP (0, 4096) == 0);
  assert (ROUND_UP (1, 4096) == 4096);
  assert (ROUND_UP (4096, 4096) == 4096);
  assert (ROUND_UP (x, 4096) == 4096);
  assert (ROUND_DOWN (x, 4096) == 0);
  assert (ROUND_DOWN (8191, 4096) == 4096);
  assert (ROUND_UP (big + 1, big) == 2 * big);
  assert (ROUND_DOWN (UINT64_MAX, 512) == UINT64_MAX - 511);
  assert (DIV_ROUND_UP (0, 3) == 0);
  assert (DIV_ROUND_UP (7, 3) == 3);
  assert (DIV_ROUND_UP (9, 3) == 3);
  /* No overflow near the top, unlike (i + n - 1) / n. */
  assert (DIV_ROUND_UP (UINT64_MAX, 2) == UINT64_C (1) << 63);
  /* Nested, and each argument once. */
  assert (ROUND_UP (ROUND_DOWN (5000, 4096), 512) == 4096);
  calls = 0;
  assert (ROUND_UP (counted (3), counted (4)) == 4);
  assert (calls == 2);
}

static void
test_aligned (void)
{
  char buf[64] __attribute__ ((aligned (16)));

  assert (IS_ALIGNED (0, 512));
  assert (IS_ALIGNED (1024, 512));
  assert (!IS_ALIGNED (1025, 512));
  assert (IS_ALIGNED (UINT64_C (1) << 40, 4096));
  assert (IS_PTR_ALIGNED (buf, 16));
  assert (!IS_PTR_ALIGNED (buf + 1, 2));
}

static void
test_powerof2 (void)
{
  assert (!is_power_of_2 (0));
  assert (is_power_of_2 (1));
  assert (is_power_of_2 (4096));
  assert (!is_power_of_2 (4097));
  assert (is_power_of_2 (UINT64_C (1) << 63));
  assert (!is_power_of_2 (UINT64_MAX));
  assert (log_2_bits (1) == 0);
  assert (log_2_bits (4096) == 12);
  assert (log_2_bits (UINT64_C (1) << 63) == 63);
  assert (next_power_of_2 (0) == 0);
  assert (next_power_of_2 (1) == 1);
  assert (next_power_of_2 (3) == 4);
  assert (next_power_of_2 (4096) == 4096);
  assert (next_power_of_2 ((UINT64_C (1) << 63) + 1) == 0);
}

static void
test_overflow (void)
{
  uint64_t r64;
  uint32_t r32;
  int64_t s64;

  assert (!ADD_OVERFLOW (UINT64_C (1), UINT64_C (2), &r64) && r64 == 3);
  assert (ADD_OVERFLOW (UINT64_MAX, 1, &r64));
  assert (ADD_OVERFLOW (UINT32_MAX, 1, &r32));
  assert (!ADD_OVERFLOW (UINT32_MAX, 1, &r64) && r64 == UINT64_C (1) << 32);
  assert (SUB_OVERFLOW (0, 1, &r64));
  assert (!SUB_OVERFLOW (5, 1, &r64) && r64 == 4);
  assert (!MUL_OVERFLOW (UINT64_C (1) << 31, 2, &r64));
  assert (MUL_OVERFLOW (UINT64_C (1) << 32, UINT64_C (1) << 32, &r64));
  assert (ADD_OVERFLOW (INT64_MAX, 1, &s64));
  /* A client's offset + count against a 2^63 - 1 byte disk. */
  assert (ADD_OVERFLOW (UINT64_MAX - 10, UINT32_C (4096), &r64));
}

static void
test_array_size (void)
{
  int a[7];
  struct { char c[3]; } b[2];

  assert (ARRAY_SIZE (a) == 7);
  assert (ARRAY_SIZE (b) == 2);
  assert (ARRAY_SIZE (b[0].c) == 3);
}

static void
test_iszero (void)
{
  size_t sizes[] = { 0, 1, 15, 16, 17, 4096, 65536 + 3 };
  size_t i, j;

  for (i = 0; i < ARRAY_SIZE (sizes); ++i) {
    size_t n = sizes[i];
    unsigned char *buf = calloc (1, n + 1);

    assert (buf != NULL);
    assert (is_zero (buf, n));
    /* A single non-zero byte anywhere, including the last, is seen. */
    for (j = 0; j < n; j += (n > 64 ? n / 37 + 1 : 1)) {
      buf[j] = 1;
      assert (!is_zero (buf, n));
      buf[j] = 0;
    }
    if (n > 0) {
      buf[n - 1] = 0x80;
      assert (!is_zero (buf, n));
      buf[n - 1] = 0;
    }
    /* Bytes past the end are not looked at. */
    buf[n] = 1;
    assert (is_zero (buf, n));
    free (buf);
  }
}

/* now_ns never goes back, and counts a 10 ms sleep as at least that. */
static void
test_now_ns (void)
{
  uint64_t t0 = now_ns ();
  struct timespec ts = { .tv_sec = 0, .tv_nsec = 10 * 1000 * 1000 };
  nanosleep (&ts, NULL);
  uint64_t t1 = now_ns ();
  assert (t1 >= t0 + 10 * 1000 * 1000);
}

int
main (void)
{
  test_minmax ();
  test_rounding ();
  test_aligned ();
  test_powerof2 ();
  test_overflow ();
  test_array_size ();
  test_iszero ();
  test_now_ns ();
  printf ("test-include: ok\n");
  return 0;
}
