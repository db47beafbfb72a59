/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The langhost callbacks against a fake host: which script function
 * each callback calls, with which arguments, and what an absent
 * function means.  Built twice: as a version 1 host with Tcl's names
 * (test-langhost) and, with -DPASS_FLAGS, as a version 2 host that
 * looks first, as perl does (test-langhost-v2).
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "langhost.h"

#ifdef PASS_FLAGS
const struct langhost langhost = {
  .word = "sub", .open = "open", .close = "close", .flush = "flush",
  .pass_flags = true, .look_first = true, .no_zero_note = NULL,
};
#else
const struct langhost langhost = {
  .word = "proc", .open = "plugin_open", .close = "plugin_close",
  .flush = "plugin_flush", .pass_flags = false, .look_first = false,
  .no_zero_note = "no zero proc",
};
#endif

/* ---- the server's side, recorded ---- */

static char last_error[256];
static int last_errno;
static int debugs;

void
nbdkit_error (const char *fs, ...)
{
  va_list args;
  va_start (args, fs);
  vsnprintf (last_error, sizeof last_error, fs, args);
  va_end (args);
}

void
nbdkit_debug (const char *fs, ...)
{
  debugs++;
}

void
nbdkit_set_error (int err)
{
  last_errno = err;
}

/* ---- the fake script ---- */

/* The functions the script defines, space-separated with a space at
 * each end.
 */
static const char *script_fns;

/* The last call the callbacks asked for. */
static struct lh_call seen;
static int calls, freed;

/* What the next call does: fail, or return this. */
static bool fail_next;
static const char *data_next;

bool
lh_host_defined (const char *name)
{
  char word[64];
  snprintf (word, sizeof word, " %s ", name);
  return strstr (script_fns, word) != NULL;
}

enum lh_outcome
lh_host_call (struct lh_call *c)
{
  if (c->optional && !lh_host_defined (c->name))
    return LH_ABSENT;
  calls++;
  seen = *c;
  if (fail_next) {
    fail_next = false;
    nbdkit_set_error (EIO);
    return LH_FAILED;
  }
  switch (c->want) {
  case LH_NEW_HANDLE: c->handle = &seen; break;
  case LH_SIZE: c->size = 1024; break;
  case LH_TRUTH: c->truth = 1; break;
  case LH_DATA:
    if (lh_take_data (c, data_next, strlen (data_next)) == -1) {
      nbdkit_set_error (EIO);
      return LH_FAILED;
    }
    break;
  case LH_NOTHING: break;
  }
  return LH_DONE;
}

void
lh_host_free_handle (void *handle)
{
  freed++;
}

static void
reset (const char *fns)
{
  script_fns = fns;
  memset (&seen, 0, sizeof seen);
  calls = freed = debugs = 0;
  last_error[0] = '\0';
  last_errno = 0;
}

static void
expect_args (size_t n, const enum lh_arg_type *types, const uint64_t *u)
{
  assert (seen.nargs == n);
  for (size_t i = 0; i < n; i++) {
    assert (seen.args[i].type == types[i]);
    if (types[i] != LH_HANDLE)
      assert (seen.args[i].u == u[i]);
  }
}

int
main (void)
{
  int h;                        /* a handle: only its address matters */
  char buf[8];
  void *hp;

  lh_script = (char *) "t.script";

  /* open passes readonly and keeps what the call made. */
  reset (" ");
  hp = lh_open (1);
  assert (hp == &seen);
  assert (strcmp (seen.name, langhost.open) == 0);
  expect_args (1, (enum lh_arg_type[]) { LH_BOOL }, (uint64_t[]) { 1 });

  /* close is optional; the handle is freed either way. */
  reset (" ");
  lh_close (&h);
  assert (calls == 0 && freed == 1);
  reset (" plugin_close close ");
  lh_close (&h);
  assert (calls == 1 && freed == 1);
  assert (strcmp (seen.name, langhost.close) == 0);
  assert (seen.args[0].type == LH_HANDLE && seen.args[0].p == &h);

  /* get_size: a failure is -1. */
  reset (" ");
  assert (lh_get_size (&h) == 1024);
  fail_next = true;
  assert (lh_get_size (&h) == -1 && last_errno == EIO);

  /* can_*: the script's answer, else whether it has the callback. */
  reset (" ");
  assert (lh_can_write (&h) == 0);
  assert (lh_can_flush (&h) == 0);
  assert (lh_can_trim (&h) == 0);
  assert (lh_is_rotational (&h) == 0);
  assert (calls == 0);
  reset (" pwrite trim ");
  assert (lh_can_write (&h) == 1);
  assert (lh_can_trim (&h) == 1);
  assert (calls == 0);
  /* can_flush looks for the host's name of flush, and only that. */
  reset (langhost.pass_flags ? " flush " : " plugin_flush ");
  assert (lh_can_flush (&h) == 1);
  reset (langhost.pass_flags ? " plugin_flush " : " flush ");
  assert (lh_can_flush (&h) == 0);
  reset (" can_write ");
  fail_next = true;
  assert (lh_can_write (&h) == -1);
  reset (" is_rotational ");
  assert (lh_is_rotational (&h) == 1 && calls == 1);

  /* pread: count, offset (and flags); the data is copied. */
  reset (" ");
  data_next = "abcdefgh";
  assert (lh_pread (&h, buf, 4, 512, NBDKIT_FLAG_FUA) == 0);
  assert (memcmp (buf, "abcd", 4) == 0);
  if (langhost.pass_flags)
    expect_args (4, (enum lh_arg_type[]) { LH_HANDLE, LH_UINT, LH_UINT,
                                            LH_UINT },
                 (uint64_t[]) { 0, 4, 512, NBDKIT_FLAG_FUA });
  else
    expect_args (3, (enum lh_arg_type[]) { LH_HANDLE, LH_UINT, LH_UINT },
                 (uint64_t[]) { 0, 4, 512 });
  data_next = "ab";
  assert (lh_pread (&h, buf, 4, 0, 0) == -1 && last_errno == EIO);
  assert (strcmp (last_error,
                  "t.script: pread: returned 2 bytes, expected 4") == 0);

  /* pwrite: the data, then offset.  Absent: EROFS if the host looks
   * first, else the call is made and the language reports it.
   */
  reset (" ");
  assert (lh_pwrite (&h, "xyz", 3, 7, 0) == (langhost.look_first ? -1 : 0));
  if (langhost.look_first) {
    assert (last_errno == EROFS && calls == 0);
    assert (strcmp (last_error, "t.script: the script has no sub pwrite")
            == 0);
  }
  else {
    assert (calls == 1);
    assert (seen.args[1].type == LH_BYTES && seen.args[1].u == 3);
    assert (memcmp (seen.args[1].p, "xyz", 3) == 0);
    assert (seen.args[2].u == 7);
  }

  /* flush: optional, under the host's name. */
  reset (" ");
  assert (lh_flush (&h, 0) == 0 && calls == 0);
  reset (" plugin_flush flush ");
  assert (lh_flush (&h, NBDKIT_FLAG_FUA) == 0 && calls == 1);
  assert (strcmp (seen.name, langhost.flush) == 0);
  assert (seen.nargs == (langhost.pass_flags ? 2 : 1));
  fail_next = true;
  assert (lh_flush (&h, 0) == -1);

  /* trim: absent is a no-op only for a host that looks first. */
  reset (" ");
  assert (lh_trim (&h, 1, 2, 0) == 0);
  assert (calls == (langhost.look_first ? 0 : 1));

  /* zero: absent is EOPNOTSUPP (the server writes zeroes); may_trim
   * or the flags last; a version 1 host refuses a fast zero itself.
   */
  reset (" ");
  assert (lh_zero (&h, 1, 2, 0) == -1 && last_errno == EOPNOTSUPP);
  assert (calls == 0 && debugs == (langhost.no_zero_note ? 1 : 0));
  reset (" zero ");
  assert (lh_zero (&h, 1, 2, NBDKIT_FLAG_MAY_TRIM) == 0 && calls == 1);
  if (langhost.pass_flags)
    expect_args (4, (enum lh_arg_type[]) { LH_HANDLE, LH_UINT, LH_UINT,
                                            LH_UINT },
                 (uint64_t[]) { 0, 1, 2, NBDKIT_FLAG_MAY_TRIM });
  else
    expect_args (4, (enum lh_arg_type[]) { LH_HANDLE, LH_UINT, LH_UINT,
                                            LH_BOOL },
                 (uint64_t[]) { 0, 1, 2, 1 });
  reset (" zero ");
  if (langhost.pass_flags)
    assert (lh_zero (&h, 1, 2, NBDKIT_FLAG_FAST_ZERO) == 0 && calls == 1);
  else {
    assert (lh_zero (&h, 1, 2, NBDKIT_FLAG_FAST_ZERO) == -1);
    assert (last_errno == ENOTSUP && calls == 0);
  }

  /* The fixed answers of a version 1 host. */
  assert (lh_yes (&h) == 1);
  assert (lh_fua_emulate (&h) == NBDKIT_FUA_EMULATE);

  printf ("test-langhost: ok\n");
  return 0;
}
