/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* -D curl.times=1: where the time of the plugin's transfers went.
 *
 * After each transfer (the size request of get_ready, and every range
 * request, synchronous or run by an event loop) times_add reads
 * libcurl's timings of that transfer from its handle and adds each
 * stage's share to a running total; times_report prints the totals in
 * the debug log when the plugin is unloaded.  libcurl gives points in
 * time measured from the transfer's start (name resolved, connected,
 * TLS done, ready to send, first byte, end), so a stage's share is the
 * difference between two of them.  A transfer on a connection kept
 * open from an earlier one resolves and connects nothing: its early
 * points are 0, and a difference that would come out negative counts
 * as 0.
 *
 * times_lock protects the totals; it is a leaf, taken under no lock of
 * the plugin's and taking none.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "curldefs.h"

NBDKIT_DLL_PUBLIC int curl_debug_times = 0;

enum stage {
  STAGE_RESOLVE, STAGE_CONNECT, STAGE_TLS, STAGE_PRETRANSFER,
  STAGE_FIRST_BYTE, STAGE_DATA, STAGE_REDIRECT, NR_STAGES
};

static const char *const stage_names[NR_STAGES] = {
  [STAGE_RESOLVE] = "name resolution",
  [STAGE_CONNECT] = "connection",
  [STAGE_TLS] = "SSL negotiation",
  [STAGE_PRETRANSFER] = "pretransfer",
  [STAGE_FIRST_BYTE] = "first byte received",
  [STAGE_DATA] = "data transfer",
  [STAGE_REDIRECT] = "redirection time",
};

static pthread_mutex_t times_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t totals_us[NR_STAGES];  /* microseconds */
static uint64_t transfers;

static curl_off_t
point (CURL *c, CURLINFO what)
{
  curl_off_t t = 0;
  if (curl_easy_getinfo (c, what, &t) != CURLE_OK || t < 0)
    return 0;
  return t;
}

/* B - A, or 0 where a point is missing (a reused connection) or the
 * points are out of order.
 */
static uint64_t
span (curl_off_t a, curl_off_t b)
{
  return b > a ? (uint64_t) (b - a) : 0;
}

void
times_add (CURL *c)
{
  curl_off_t resolved, connected, tls, pre, first, total, redirect;
  curl_off_t ready;
  uint64_t add[NR_STAGES];
  size_t i;

  if (!curl_debug_times)
    return;
  resolved = point (c, CURLINFO_NAMELOOKUP_TIME_T);
  connected = point (c, CURLINFO_CONNECT_TIME_T);
  tls = point (c, CURLINFO_APPCONNECT_TIME_T);  /* 0 without TLS */
  pre = point (c, CURLINFO_PRETRANSFER_TIME_T);
  first = point (c, CURLINFO_STARTTRANSFER_TIME_T);
  total = point (c, CURLINFO_TOTAL_TIME_T);
  redirect = point (c, CURLINFO_REDIRECT_TIME_T);

  /* The request can go once the connection (and TLS on it) is up. */
  ready = tls > connected ? tls : connected;
  add[STAGE_RESOLVE] = resolved;
  add[STAGE_CONNECT] = span (resolved, connected);
  add[STAGE_TLS] = tls > 0 ? span (connected, tls) : 0;
  add[STAGE_PRETRANSFER] = span (ready, pre);
  add[STAGE_FIRST_BYTE] = span (pre, first);
  add[STAGE_DATA] = span (first, total);
  add[STAGE_REDIRECT] = redirect;

  pthread_mutex_lock (&times_lock);
  for (i = 0; i < NR_STAGES; i++)
    totals_us[i] += add[i];
  transfers++;
  pthread_mutex_unlock (&times_lock);
}

void
times_report (void)
{
  size_t i;

  if (!curl_debug_times)
    return;
  /* At unload every transfer has ended: no lock needed, but cheap. */
  pthread_mutex_lock (&times_lock);
  nbdkit_debug ("times (-D curl.times=1), summed over %" PRIu64
                " transfers:", transfers);
  for (i = 0; i < NR_STAGES; i++)
    nbdkit_debug ("%-28s: %5" PRIu64 ".%06" PRIu64 " s", stage_names[i],
                  totals_us[i] / 1000000, totals_us[i] % 1000000);
  pthread_mutex_unlock (&times_lock);
}
