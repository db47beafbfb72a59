/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzz-data: the data plugin's expression parser and renderer
 * (plugins/data/format-parse.c, format-render.c), alone.
 *
 * The fuzzer's bytes are the text of data= (cut at the first NUL, as a
 * command line argument would be).  Files, scripts and the environment
 * are off; $v, $w and $self are defined as parameters would define
 * them ($self refers to itself, to exercise the depth limit).  A
 * parsed expression is rendered for its first RENDER_MAX bytes into a
 * buffer whose sink aborts on any write outside the window; the whole
 * rendering is then checked against a second rendering of a shifted
 * window, which must agree byte for byte (clipping must not change
 * what a byte is).
 */
#include <config.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

#define RENDER_MAX (256 * 1024)

/* format-parse.c reports errors through nbdkit_error, normally the server's. */
void
nbdkit_error (const char *fmt, ...)
{
  va_list ap;
  char buf[512];

  va_start (ap, fmt);
  vsnprintf (buf, sizeof buf, fmt, ap); /* format it, to check the args */
  va_end (ap);
}

static const char *
lookup (void *opaque, const char *name)
{
  if (strcmp (name, "v") == 0)
    return "0x55 0xaa";
  if (strcmp (name, "w") == 0)
    return "( $v @^8 ) -> \\x \\x*3 le32:7";
  if (strcmp (name, "self") == 0)
    return "1 $self";
  return NULL;
}

struct window {
  uint8_t *buf;
  uint64_t limit;
};

static int
w_write (void *opaque, const void *data, uint32_t count, uint64_t offset)
{
  struct window *w = opaque;

  if (count == 0 || offset > w->limit || count > w->limit - offset)
    abort ();
  memcpy (w->buf + offset, data, count);
  return 0;
}

static int
w_zero (void *opaque, uint32_t count, uint64_t offset)
{
  struct window *w = opaque;

  if (count == 0 || offset > w->limit || count > w->limit - offset)
    abort ();
  memset (w->buf + offset, 0, count);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct data_parse_opts opts = { .allow_io = false, .lookup = lookup };
  struct data_tree *t;
  uint64_t len, limit, half;
  char *text = malloc (size + 1);

  if (text == NULL)
    return 0;
  memcpy (text, data, size);
  text[size] = '\0';
  t = data_parse (text, &opts, &len);
  free (text);
  if (t == NULL)
    return 0;
  if (len > INT64_MAX)
    abort ();

  limit = len < RENDER_MAX ? len : RENDER_MAX;
  struct window a = { .buf = calloc (1, limit + 1), .limit = limit };
  struct data_sink sa = { .write = w_write, .zero = w_zero, .opaque = &a };

  if (a.buf == NULL || data_render (t, limit, &sa) == -1)
    abort ();

  /* The first half again, rendered with a limit of its own. */
  half = limit / 2;
  struct window b = { .buf = calloc (1, half + 1), .limit = half };
  struct data_sink sb = { .write = w_write, .zero = w_zero, .opaque = &b };

  if (b.buf == NULL || data_render (t, half, &sb) == -1)
    abort ();
  if (memcmp (a.buf, b.buf, half) != 0)
    abort ();

  free (a.buf);
  free (b.buf);
  data_free (t);
  return 0;
}
