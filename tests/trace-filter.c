/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test filter that prints its per-connection life on stderr, for
 * test-layer-lifecycle.sh.  It is built twice, as trace1 and trace2
 * (TRACE_NAME), so that a chain can hold two of them.  Each line is
 * "trace: NAME EVENT" for open, prepare, finalize and close.
 * NAME-fail=open makes its open fail after opening the layer below;
 * NAME-fail=prepare makes its prepare fail.  Its get_size asks the
 * layer below ten times (the server caches the answer: the plugin is
 * asked once, test-layer-answers-cached.sh).  Its open also prints
 * "trace: NAME shadow=N" from a global function that layer-plugin.c
 * defines too: N is 2 when the filter calls its own.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include <nbdkit-filter.h>

#ifndef TRACE_NAME
#error "build with -DTRACE_NAME=\"...\""
#endif

static const char *fail_at = "";

static void
say (const char *event)
{
  fprintf (stderr, "trace: %s %s\n", TRACE_NAME, event);
}

static int
trace_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, TRACE_NAME "-fail") == 0) {
    fail_at = value;
    return 0;
  }
  return next (nxdata, key, value);
}

/* Deliberately global: the same name is in layer-plugin.c. */
extern int shadow_probe (void);
int
shadow_probe (void)
{
  return 2;
}

static void *
trace_open (nbdkit_next_open *next, nbdkit_context *context, int readonly,
            const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  say ("open");
  fprintf (stderr, "trace: %s shadow=%d\n", TRACE_NAME, shadow_probe ());
  if (strcmp (fail_at, "open") == 0) {
    nbdkit_error ("%s: failing open as asked", TRACE_NAME);
    return NULL;
  }
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int
trace_prepare (nbdkit_next *next, void *handle, int readonly)
{
  say ("prepare");
  if (strcmp (fail_at, "prepare") == 0) {
    nbdkit_error ("%s: failing prepare as asked", TRACE_NAME);
    return -1;
  }
  return 0;
}

static int
trace_finalize (nbdkit_next *next, void *handle)
{
  say ("finalize");
  return 0;
}

static void
trace_close (void *handle)
{
  say ("close");
}

static int64_t
trace_get_size (nbdkit_next *next, void *handle)
{
  int64_t size = -1;
  for (int i = 0; i < 10; i++)
    size = next->get_size (next);
  return size;
}

static struct nbdkit_filter filter = {
  .name = TRACE_NAME,
  .config = trace_config,
  .open = trace_open,
  .prepare = trace_prepare,
  .finalize = trace_finalize,
  .close = trace_close,
  .get_size = trace_get_size,
};

NBDKIT_REGISTER_FILTER (filter)
