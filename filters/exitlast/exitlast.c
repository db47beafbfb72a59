/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The exitlast filter: the server exits when its last client leaves.
 * .open counts a client in, .close counts it out, and the close that
 * brings the count to zero asks the server to stop (nbdkit_shutdown).
 * Before the first client nothing happens, so a server waits for its
 * first client as long as it takes.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

/* Clients with the export open, and all ever opened (for the probe). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned connections;
static uint64_t served;

static void *
exitlast_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  {
    LOCK_FOR_SCOPE (&lock);
    connections++;
  }
  if (next (context, readonly, exportname) == -1) {
    /* Never opened, so never closed: it does not count. */
    LOCK_FOR_SCOPE (&lock);
    connections--;
    return NULL;
  }
  LOCK_FOR_SCOPE (&lock);
  served++;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static void
exitlast_close (void *handle)
{
  LOCK_FOR_SCOPE (&lock);
  if (--connections > 0)
    return;
  /* A copy: given the global itself, the probe's operand would be
   * %rip-relative, which bpftrace misreads in a shared object.
   */
  volatile uint64_t n = served;
  NBDKIT_PROBE (exitlast_exit, n);
  nbdkit_debug ("the last client has gone after %" PRIu64 " in all: exiting",
                served);
  nbdkit_shutdown ();
}

static struct nbdkit_filter filter = {
  .name = "exitlast",
  .longname = "nbdkit exitlast filter",
  .open = exitlast_open,
  .close = exitlast_close,
};

NBDKIT_REGISTER_FILTER (filter)
