/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test plugin that watches how the server calls it, for the layer
 * boundary tests:
 *
 *   open and get_size count their calls: the server asks get_size
 *     once per connection and caches the answer, however often the
 *     filters above ask.
 *   open, close and pread note when they run at the same time as
 *     another of them (each sleeps sleep_ms=N milliseconds, default 0,
 *     to make it likely); with model=serialize_all_requests that must
 *     never happen.
 *
 * It also exports a function named shadow_probe, as trace-filter.c
 * does: each must call its own (test-layer-private-symbols.sh).
 *
 * A read at offset 0 returns "opens=K get_size=N overlaps=M" (the
 * counts so far); unload prints the same line on stderr.
 */
#include <config.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

#define SIZE (1024 * 1024)

static int model = NBDKIT_THREAD_MODEL_PARALLEL;
static unsigned sleep_ms;
static _Atomic unsigned opens, get_size_calls, inside, overlaps;

/* Deliberately global: the same name is in trace-filter.c. */
extern int shadow_probe (void);
int
shadow_probe (void)
{
  return 1;
}

static int
layer_config (const char *key, const char *value)
{
  if (strcmp (key, "model") == 0) {
    if (strcmp (value, "serialize_all_requests") == 0)
      model = NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS;
    else if (strcmp (value, "parallel") == 0)
      model = NBDKIT_THREAD_MODEL_PARALLEL;
    else {
      nbdkit_error ("model: unknown \"%s\"", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "sleep_ms") == 0)
    return nbdkit_parse_unsigned ("sleep_ms", value, &sleep_ms);
  nbdkit_error ("unknown parameter \"%s\"", key);
  return -1;
}

static int
layer_thread_model (void)
{
  return model;
}

/* Run while "inside": count it if something else is inside too. */
static void
watched_sleep (void)
{
  if (atomic_fetch_add (&inside, 1) > 0)
    atomic_fetch_add (&overlaps, 1);
  struct timespec ts = {
    .tv_sec = sleep_ms / 1000, .tv_nsec = (sleep_ms % 1000) * 1000000L
  };
  nanosleep (&ts, NULL);
  atomic_fetch_sub (&inside, 1);
}

static void
layer_unload (void)
{
  fprintf (stderr, "layer-plugin: opens=%u get_size=%u overlaps=%u\n",
           opens, get_size_calls, overlaps);
}

static void *
layer_open (int readonly)
{
  atomic_fetch_add (&opens, 1);
  watched_sleep ();
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
layer_close (void *handle)
{
  watched_sleep ();
}

static int64_t
layer_get_size (void *handle)
{
  atomic_fetch_add (&get_size_calls, 1);
  return SIZE;
}

static int
layer_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  watched_sleep ();
  memset (buf, 0, count);
  if (offset == 0) {
    char line[64];
    int n = snprintf (line, sizeof line,
                      "opens=%u get_size=%u overlaps=%u shadow=%d",
                      opens, get_size_calls, overlaps, shadow_probe ());
    memcpy (buf, line, (uint32_t) n < count ? (uint32_t) n : count);
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "layer",
  .config = layer_config,
  .thread_model = layer_thread_model,
  .unload = layer_unload,
  .open = layer_open,
  .close = layer_close,
  .get_size = layer_get_size,
  .pread = layer_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
