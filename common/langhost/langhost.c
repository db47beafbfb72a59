/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* langhost: the data callbacks of a script-language plugin host,
 * written once over the host's lh_host_call (see langhost.h).
 *
 * Each callback here describes one call of the script (its function's
 * name, its arguments, what it must return), lets the host run it, and
 * decides what an absent function means.  Failures were reported by
 * the host, with the errno set; what is decided here (EROFS for a
 * missing pwrite, EOPNOTSUPP for a missing zero) is reported here.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "langhost.h"

char *lh_script;

/* Start describing a call of NAME, with the handle H first if there
 * is one.
 */
static void
start (struct lh_call *c, const char *name, void *h, enum lh_want want)
{
  memset (c, 0, sizeof *c);
  c->name = name;
  c->want = want;
  if (h != NULL)
    c->args[c->nargs++] = (struct lh_arg) { .type = LH_HANDLE, .p = h };
}

static void
add (struct lh_call *c, enum lh_arg_type type, uint64_t u, const void *p)
{
  assert (c->nargs < LH_MAX_ARGS);
  c->args[c->nargs++] = (struct lh_arg) { .type = type, .u = u, .p = p };
}

/* The request's flags, for a host whose script takes them. */
static void
add_flags (struct lh_call *c, uint32_t flags)
{
  if (langhost.pass_flags)
    add (c, LH_UINT, flags, NULL);
}

void *
lh_open (int readonly)
{
  struct lh_call c;

  start (&c, langhost.open, NULL, LH_NEW_HANDLE);
  add (&c, LH_BOOL, readonly != 0, NULL);
  return lh_host_call (&c) == LH_DONE ? c.handle : NULL;
}

void
lh_close (void *handle)
{
  struct lh_call c;

  start (&c, langhost.close, handle, LH_NOTHING);
  c.optional = true;
  lh_host_call (&c);
  lh_host_free_handle (handle);
}

int64_t
lh_get_size (void *handle)
{
  struct lh_call c;

  start (&c, "get_size", handle, LH_SIZE);
  return lh_host_call (&c) == LH_DONE ? c.size : -1;
}

/* A can_* or is_* question: the script's answer if it has the
 * function, else whether it defines the callback the answer is about,
 * as for a C plugin.  (Debian's nbdkit 1.32 answers some of these
 * false for a script that has the callback, against its own pages; we
 * follow the pages.)
 */
static int
ask (void *handle, const char *name, const char *callback)
{
  struct lh_call c;

  start (&c, name, handle, LH_TRUTH);
  c.optional = true;
  switch (lh_host_call (&c)) {
  case LH_DONE:
    return c.truth;
  case LH_ABSENT:
    return callback ? lh_host_defined (callback) : 0;
  case LH_FAILED:
  default:
    return -1;
  }
}

int
lh_can_write (void *handle)
{
  return ask (handle, "can_write", "pwrite");
}

int
lh_can_flush (void *handle)
{
  return ask (handle, "can_flush", langhost.flush);
}

int
lh_is_rotational (void *handle)
{
  return ask (handle, "is_rotational", NULL);
}

int
lh_can_trim (void *handle)
{
  return ask (handle, "can_trim", "trim");
}

/* 1.32's version 1 hosts have zero and flush callbacks of their own:
 * the server always asks them to zero (without a zero function they
 * answer "not supported" and the server writes zeroes), they
 * advertise fast zero (refused at once) and FUA is emulated with a
 * flush.  These give the client the same flags.
 */
int
lh_yes (void *handle)
{
  return 1;
}

int
lh_fua_emulate (void *handle)
{
  return NBDKIT_FUA_EMULATE;
}

int
lh_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  struct lh_call c;

  start (&c, "pread", handle, LH_DATA);
  c.buf = buf;
  c.count = count;
  add (&c, LH_UINT, count, NULL);
  add (&c, LH_UINT, offset, NULL);
  add_flags (&c, flags);
  return lh_host_call (&c) == LH_DONE ? 0 : -1;
}

int
lh_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  struct lh_call c;

  start (&c, "pwrite", handle, LH_NOTHING);
  c.optional = langhost.look_first;
  add (&c, LH_BYTES, count, buf);
  add (&c, LH_UINT, offset, NULL);
  add_flags (&c, flags);
  switch (lh_host_call (&c)) {
  case LH_DONE:
    return 0;
  case LH_ABSENT:
    nbdkit_error ("%s: the script has no %s pwrite", lh_script,
                  langhost.word);
    nbdkit_set_error (EROFS);
    return -1;
  case LH_FAILED:
  default:
    return -1;
  }
}

int
lh_flush (void *handle, uint32_t flags)
{
  struct lh_call c;

  start (&c, langhost.flush, handle, LH_NOTHING);
  c.optional = true;
  add_flags (&c, flags);
  return lh_host_call (&c) == LH_FAILED ? -1 : 0;
}

int
lh_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct lh_call c;

  start (&c, "trim", handle, LH_NOTHING);
  c.optional = langhost.look_first; /* absent: trim is advisory */
  add (&c, LH_UINT, count, NULL);
  add (&c, LH_UINT, offset, NULL);
  add_flags (&c, flags);
  return lh_host_call (&c) == LH_FAILED ? -1 : 0;
}

/* Without a zero function, fail with EOPNOTSUPP: the server then
 * writes zeroes with pwrite.  A script may do the same by setting that
 * error.
 */
int
lh_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct lh_call c;

  if (!langhost.pass_flags && (flags & NBDKIT_FLAG_FAST_ZERO)) {
    nbdkit_set_error (ENOTSUP);
    return -1;
  }
  start (&c, "zero", handle, LH_NOTHING);
  c.optional = true;
  add (&c, LH_UINT, count, NULL);
  add (&c, LH_UINT, offset, NULL);
  if (langhost.pass_flags)
    add (&c, LH_UINT, flags, NULL);
  else
    add (&c, LH_BOOL, (flags & NBDKIT_FLAG_MAY_TRIM) != 0, NULL);
  switch (lh_host_call (&c)) {
  case LH_DONE:
    return 0;
  case LH_ABSENT:
    if (langhost.no_zero_note)
      nbdkit_debug ("%s", langhost.no_zero_note);
    nbdkit_set_error (EOPNOTSUPP);
    return -1;
  case LH_FAILED:
  default:
    return -1;
  }
}

int
lh_wrong (const char *name, const char *what)
{
  nbdkit_error ("%s: %s: %s", lh_script, name, what);
  return -1;
}

int
lh_take_data (struct lh_call *c, const void *p, size_t len)
{
  if (len < c->count) {
    nbdkit_error ("%s: %s: returned %zu bytes, expected %" PRIu32,
                  lh_script, c->name, len, c->count);
    return -1;
  }
  memcpy (c->buf, p, c->count);
  return 0;
}
