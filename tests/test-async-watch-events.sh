#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit_async_watch_events changes what the server's event loop waits
# for on a watched descriptor.  A plugin (compiled by the cc plugin)
# watches the read end of a pipe with no events, then with POLLIN, then
# with none again, writing a byte each time; each read of the disk
# reports how many times the callback ran: never while the events are
# none (though a byte waits), at once when POLLIN is asked for (the
# callback drains the pipe, so a level-triggered loop calls it once per
# byte), and never again after nbdkit_async_unwatch.
source "$(dirname "$0")/functions.sh"
requires_cmd cc gcc nbdsh

cat > "$tmpdir/w.c" <<'C'
#define NBDKIT_API_VERSION 2
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS
static int fds[2] = { -1, -1 };
static struct nbdkit_async_watch *w;
static atomic_uint calls;
static void
cb (void *opaque, int revents)
{
  char c;
  if (revents & POLLIN && read (fds[0], &c, 1) == 1)
    calls++;
}
static int
ready (void)
{
  if (pipe (fds) == -1) { nbdkit_error ("pipe: %m"); return -1; }
  return 0;
}
static void *o (int r) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t s (void *h) { return 4096; }
static int
p (void *h, void *b, uint32_t n, uint64_t off, uint32_t f)
{
  int r = 0;
  switch (off) {
  case 0:                       /* watch, interested in nothing */
    w = nbdkit_async_watch (fds[0], 0, cb, NULL);
    r = w ? write (fds[1], "a", 1) : -1;
    break;
  case 512:                     /* now POLLIN */
    r = nbdkit_async_watch_events (w, POLLIN);
    break;
  case 1024:                    /* nothing again, and a second byte */
    r = nbdkit_async_watch_events (w, 0);
    if (r == 0)
      r = write (fds[1], "b", 1);
    break;
  case 1536:                    /* POLLIN, then gone */
    r = nbdkit_async_watch_events (w, POLLIN);
    break;
  case 2048:
    nbdkit_async_unwatch (w);
    r = write (fds[1], "c", 1);
    break;
  }
  if (r == -1) { nbdkit_error ("step at %u failed", (unsigned) off); return -1; }
  usleep (300000);              /* time for the loop to call, or not */
  memset (b, '0' + calls, n);
  return 0;
}
static struct nbdkit_plugin plugin = {
  .name = "watchtest", .get_ready = ready, .open = o, .get_size = s,
  .pread = p,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C

start_server cc "$tmpdir/w.c"
out="$(t nbdsh -u "$uri" -c '
print("".join(chr(h.pread(1, off)[0]) for off in (0, 512, 1024, 1536, 2048)))')"
# calls after each step: 0 (no events), 1 (POLLIN: byte a), 1 (none:
# byte b waits), 2 (POLLIN: byte b), 2 (unwatched: byte c waits).
[ "$out" = "01122" ] || fail "callback counts after each step: $out, not 01122"
