/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The data plugin's expression language, shown: -D data.AST=1 prints
 * the tree that format-parse.c built (format-tree.h), one node a line,
 * indented by depth, through the caller's print function (nbdkit_debug
 * in the plugin).  Names and $VARs are already resolved in the tree, so
 * their expressions appear where they are used; adjacent literal bytes
 * appear joined, as they will be stored.  Read-only: it only walks the
 * tree.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "format-tree.h"
#include "minmax.h"

#define SHOW_BYTES 64           /* bytes of a literal shown in full */
#define MAX_INDENT 20           /* deeper levels are shown at this one */
#define MAX_LINES 10000         /* a named expression used many times can
                                 * expand to more than anyone reads */

struct shower {
  void (*print) (const char *fmt, ...);
  unsigned lines;               /* left to print */
};

/* Print one line, if the budget allows. */
#define LINE(s, ...)                            \
  do {                                          \
    if ((s)->lines > 0) {                       \
      (s)->lines--;                             \
      (s)->print (__VA_ARGS__);                 \
    }                                           \
  } while (0)

/* Spaces before a node at LEVEL. */
static int
indent (unsigned level)
{
  return 4 * MIN (level, (unsigned) MAX_INDENT);
}

/* A literal as a C-like string: printable ASCII as it is, other bytes
 * as \xNN, at most SHOW_BYTES of them.
 */
static void
quote (char *out, size_t size, const uint8_t *b, uint64_t len)
{
  size_t o = 0;

  out[o++] = '"';
  for (uint64_t i = 0; i < len && i < SHOW_BYTES; ++i) {
    uint8_t c = b[i];

    if (c == '"' || c == '\\')
      o += snprintf (out + o, size - o, "\\%c", c);
    else if (c >= 0x20 && c < 0x7f)
      out[o++] = c;
    else
      o += snprintf (out + o, size - o, "\\x%02x", c);
  }
  out[o++] = '"';
  out[o] = '\0';
  if (len > SHOW_BYTES)
    snprintf (out + o, size - o, "... (%" PRIu64 " bytes)", len);
}

static void
show (struct shower *s, const struct node *n, unsigned level)
{
  const int in = indent (level);

  if (s->lines == 0)
    return;
  switch (n->kind) {
  case N_BYTES:
    if (n->source)
      LINE (s, "%*s%s (%" PRIu64 " bytes)", in, "", n->source, n->len);
    else if (n->len == 1)
      LINE (s, "%*s%u", in, "", (unsigned) n->bytes[0]);
    else {
      char q[4 * SHOW_BYTES + 64];

      quote (q, sizeof q, n->bytes, n->len);
      LINE (s, "%*s%s%s", in, "", q,
            n->zero_run ? " (zeroes: a hole)" : "");
    }
    break;
  case N_LIST:
    LINE (s, "%*s(", in, "");
    for (size_t i = 0; i < n->items.len; ++i)
      show (s, n->items.ptr[i], level + 1);
    LINE (s, "%*s)", in, "");
    break;
  case N_REPEAT:
    /* A repeated byte is what nbdkit calls a fill. */
    if (n->child->kind == N_BYTES && n->child->source == NULL &&
        n->child->len == 1)
      LINE (s, "%*sfill(%u*%" PRIu64 ")", in, "",
            (unsigned) n->child->bytes[0], n->n);
    else {
      LINE (s, "%*s(", in, "");
      show (s, n->child, level + 1);
      LINE (s, "%*s) *%" PRIu64, in, "", n->n);
    }
    break;
  case N_SLICE:
    LINE (s, "%*s(", in, "");
    show (s, n->child, level + 1);
    LINE (s, "%*s)[%" PRIu64 ":%" PRIu64 "]", in, "", n->n,
          n->n + n->len);
    break;
  case N_ABS:
    LINE (s, "%*s@%" PRIu64, in, "", n->n);
    break;
  case N_FWD:
    LINE (s, "%*s@+%" PRIu64, in, "", n->n);
    break;
  case N_BACK:
    LINE (s, "%*s@-%" PRIu64, in, "", n->n);
    break;
  case N_ALIGN:
    LINE (s, "%*s@^%" PRIu64, in, "", n->n);
    break;
  }
}

void
data_show (const struct data_tree *t, void (*print) (const char *fmt, ...))
{
  struct shower s = { .print = print, .lines = MAX_LINES };

  print ("BEGIN AST (-D data.AST=1), %" PRIu64 " bytes", t->root->len);
  show (&s, t->root, 0);
  if (s.lines == 0)
    print ("... (cut after %d lines)", MAX_LINES);
  print ("END AST");
}
