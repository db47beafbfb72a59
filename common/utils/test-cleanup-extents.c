/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit test of cleanup-extents.h: CLEANUP_EXTENTS_FREE frees the
 * extents list at scope exit, and leaves a NULL one alone.  The server
 * provides nbdkit_extents_free; here a stand-in counts the calls.
 */
#include <config.h>

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "cleanup-extents.h"

static int freed;

void
nbdkit_extents_free (struct nbdkit_extents *e)
{
  assert (e != NULL);
  free (e);
  freed++;
}

static void
scope (bool make)
{
  CLEANUP_EXTENTS_FREE struct nbdkit_extents *e =
    make ? (struct nbdkit_extents *) malloc (16) : NULL;

  if (make)
    assert (e != NULL);
}

int
main (void)
{
  scope (true);
  assert (freed == 1);
  scope (false);
  assert (freed == 1);
  printf ("test-cleanup-extents: ok\n");
  return 0;
}
