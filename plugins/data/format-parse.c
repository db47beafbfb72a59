/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The data plugin's expression language, parsing (see format.h for the
 * contract, nbdkit-data-plugin.pod for the language).
 *
 * A recursive descent over the text of data= (and of each $VAR, parsed
 * as a group of its own), building the tree of format-tree.h.  Each
 * node's length is computed, with overflow checks, as it is made, so
 * every size error is found here, before anything is stored.  Names
 * (-> \name) live in a chain of scopes, one per group, and are resolved
 * here: the tree holds no names.  <FILE and <(SCRIPT) are read here too,
 * only as far as a following [N:M] needs.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nbdkit-plugin.h>

#include "format.h"
#include "format-tree.h"
#include "ispowerof2.h"
#include "iszero.h"
#include "minmax.h"
#include "subprocess.h"
#include "vector.h"

struct binding {
  char *name;
  struct node *node;
};
DEFINE_VECTOR_TYPE (binding_list, struct binding);

struct scope {
  struct scope *up;
  binding_list names;
};

struct parser {
  const struct data_parse_opts *opts;
  struct data_tree *t;
  const char *where;            /* "data" or the $VAR being parsed */
  const char *s;                /* the text */
  size_t pos;
  unsigned depth;
};

static void
parse_error (struct parser *p, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
parse_error (struct parser *p, const char *fmt, ...)
{
  char msg[256];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  if (strcmp (p->where, "data") == 0)
    nbdkit_error ("data parameter: %s (at offset %zu)", msg, p->pos);
  else
    nbdkit_error ("data parameter: in %s: %s (at offset %zu)",
                  p->where, msg, p->pos);
}

static struct node *
new_node (struct parser *p, enum kind kind)
{
  struct node *n = calloc (1, sizeof *n);

  if (n == NULL || node_list_append (&p->t->all, n) == -1) {
    free (n);
    nbdkit_error ("data parameter: out of memory");
    return NULL;
  }
  n->kind = kind;
  return n;
}

static bool
is_content (const struct node *n)
{
  return n->kind <= N_SLICE;
}

/* Whitespace and # comments. */
static void
skip_blank (struct parser *p)
{
  for (;;) {
    char c = p->s[p->pos];

    if (c == '#') {
      while (p->s[p->pos] && p->s[p->pos] != '\n')
        p->pos++;
    }
    else if (isspace ((unsigned char) c))
      p->pos++;
    else
      return;
  }
}

/* An unsigned number: decimal, 0-prefixed octal or 0x hexadecimal. */
static int
parse_number (struct parser *p, uint64_t *v, const char *what)
{
  const char *s = p->s + p->pos;
  size_t n = 0, i = 0;
  unsigned base = 10;
  uint64_t r = 0;

  while (isalnum ((unsigned char) s[n]))
    n++;
  if (n == 0) {
    if (s[0] == '-')
      parse_error (p, "%s: negative numbers are not allowed", what);
    else
      parse_error (p, "%s: expected a number", what);
    return -1;
  }
  if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
    if (n == 2) {
      parse_error (p, "%s: '%.*s' is not a number", what, (int) n, s);
      return -1;
    }
  }
  else if (n >= 2 && s[0] == '0') {
    base = 8;
    i = 1;
  }
  for (; i < n; ++i) {
    unsigned d;
    char c = s[i];

    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      d = 99;
    if (d >= base) {
      parse_error (p, "%s: '%.*s' is not a number", what, (int) n, s);
      return -1;
    }
    if (__builtin_mul_overflow (r, base, &r) ||
        __builtin_add_overflow (r, d, &r)) {
      parse_error (p, "%s: '%.*s' is too large", what, (int) n, s);
      return -1;
    }
  }
  p->pos += n;
  *v = r;
  return 0;
}

static struct node *
bytes_node (struct parser *p, uint8_t *bytes, uint64_t len)
{
  struct node *n;

  if (len > MAX_LEN) {
    free (bytes);
    parse_error (p, "data too large");
    return NULL;
  }
  n = new_node (p, N_BYTES);
  if (n == NULL) {
    free (bytes);
    return NULL;
  }
  n->bytes = bytes;
  n->len = len;
  n->depth = 1;
  n->zero_run = len > 1 && is_zero (bytes, len);
  return n;
}

static struct node *
copy_bytes_node (struct parser *p, const void *buf, size_t len)
{
  uint8_t *b = malloc (len ? len : 1);

  if (b == NULL) {
    nbdkit_error ("data parameter: out of memory");
    return NULL;
  }
  memcpy (b, buf, len);
  return bytes_node (p, b, len);
}

/* A literal: bytes written in the expression, not read from a file or
 * a script.
 */
static bool
is_literal (const struct node *n)
{
  return n->kind == N_BYTES && n->source == NULL;
}

/* Room for a joined run of LEN bytes: doubling, so that a long list of
 * single bytes costs linear time.
 */
static uint64_t
join_room (uint64_t len)
{
  uint64_t r = 64;

  while (r < len)
    r *= 2;
  return r;
}

/* Literals next to each other in a list make one run of bytes, as in
 * nbdkit, where "0 0" is a run of zeroes (left a hole) while "0" alone
 * or "0 1" are bytes stored.  Returns the node to put in place of
 * PREV: PREV itself, grown, if an earlier join made it (it is in no
 * other list), else a new node, since PREV may be named and used
 * elsewhere.
 */
static struct node *
join_literals (struct parser *p, struct node *prev, const struct node *n)
{
  const uint64_t len = prev->len + n->len;
  /* Whether the run is all zero so far (zero_run is false for a
   * single byte, which is not a run).
   */
  const bool prev_zero = prev->len <= 1 ? is_zero (prev->bytes, prev->len)
                                        : prev->zero_run;
  struct node *r = prev;

  if (len > MAX_LEN || join_room (len) > SIZE_MAX) {
    parse_error (p, "data too large");
    return NULL;
  }
  if (!prev->joined || join_room (len) > join_room (prev->len)) {
    uint8_t *b = malloc (join_room (len));

    if (b == NULL) {
      nbdkit_error ("data parameter: out of memory");
      return NULL;
    }
    if (prev->len > 0)          /* an empty string has no bytes */
      memcpy (b, prev->bytes, prev->len);
    if (prev->joined) {
      free (prev->bytes);
      prev->bytes = b;
    }
    else {
      r = bytes_node (p, b, prev->len);
      if (r == NULL)
        return NULL;
      r->joined = true;
    }
  }
  if (n->len > 0)
    memcpy (r->bytes + r->len, n->bytes, n->len);
  r->zero_run = len > 1 && prev_zero && is_zero (n->bytes, n->len);
  r->len = len;
  return r;
}

/* le16:N ... be64:N, at p->pos pointing to 'l' or 'b'. */
static struct node *
parse_word (struct parser *p)
{
  const char *s = p->s + p->pos;
  bool le = s[0] == 'l';
  unsigned bits;
  uint64_t v;
  uint8_t buf[8];

  if (strncmp (s + 1, "e16:", 4) == 0)
    bits = 16;
  else if (strncmp (s + 1, "e32:", 4) == 0)
    bits = 32;
  else if (strncmp (s + 1, "e64:", 4) == 0)
    bits = 64;
  else {
    parse_error (p, "unexpected '%c'", s[0]);
    return NULL;
  }
  p->pos += 5;
  if (parse_number (p, &v, s[0] == 'l' ? "le word" : "be word") == -1)
    return NULL;
  if (bits < 64 && v >> bits) {
    parse_error (p, "%.4s: %" PRIu64 " does not fit in %u bits",
                 s, v, bits);
    return NULL;
  }
  for (unsigned i = 0; i < bits / 8; ++i) {
    uint8_t b = v >> (8 * i);
    buf[le ? i : bits / 8 - 1 - i] = b;
  }
  return copy_bytes_node (p, buf, bits / 8);
}

static int
b64_value (char c)
{
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int
data_base64_decode (const char *s, size_t n, uint8_t **out, size_t *outlen,
                    size_t *bad)
{
  size_t len = 0, pad = 0;
  uint32_t acc = 0;
  unsigned bits = 0;
  uint8_t *buf = malloc (n / 4 * 3 + 3);

  *bad = SIZE_MAX;
  if (buf == NULL) {
    errno = ENOMEM;
    return -1;
  }
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    int v;

    if (c == ' ' || c == '\n' || c == '\t' || c == '\r')
      continue;
    if (c == '=') {
      pad++;
      continue;
    }
    v = b64_value (c);
    if (v < 0 || pad > 0) {     /* a stranger, or data after padding */
      *bad = i;
      free (buf);
      errno = EINVAL;
      return -1;
    }
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      buf[len++] = acc >> bits;
    }
  }
  /* 2 or 4 leftover bits are padding and must be zero; 6 means a
   * group of one character, which encodes no byte.
   */
  if (bits == 6 || pad > 2 || (acc & ((1u << bits) - 1)) != 0) {
    free (buf);
    errno = EINVAL;
    return -1;
  }
  *out = buf;
  *outlen = len;
  return 0;
}

/* base64:TEXT, at p->pos pointing to 'b': the bytes TEXT encodes.  TEXT
 * runs to the first character outside the base64 alphabet and '=', so
 * that a following * N, [N:M] or ) ends it as it ends a number.
 */
static struct node *
parse_base64 (struct parser *p)
{
  const size_t start = p->pos + 7;  /* after "base64:" */
  const char *s = p->s + start;
  size_t n = 0, len, bad;
  uint8_t *bytes;

  while (b64_value (s[n]) >= 0 || s[n] == '=')
    n++;
  p->pos = start;
  if (n == 0) {
    parse_error (p, "base64: expected base64 text after 'base64:'");
    return NULL;
  }
  if (data_base64_decode (s, n, &bytes, &len, &bad) == -1) {
    if (errno == ENOMEM) {
      nbdkit_error ("data parameter: out of memory");
      return NULL;
    }
    if (bad != SIZE_MAX) {
      p->pos = start + bad;
      parse_error (p, "base64: '=' can only end the text");
    }
    else
      parse_error (p, "base64: '%.*s' is not valid base64 (its length "
                   "or padding is wrong)", (int) MIN (n, (size_t) 64), s);
    return NULL;
  }
  p->pos = start + n;
  if (len == 0) {               /* "====" and the like */
    free (bytes);
    parse_error (p, "base64: '%.*s' encodes no bytes", (int) n, s);
    return NULL;
  }
  return bytes_node (p, bytes, len);
}

static int
hexval (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* "STRING" with C-like escapes. */
static struct node *
parse_string (struct parser *p)
{
  byte_vector v = empty_vector;

  p->pos++;                     /* the opening quote */
  for (;;) {
    char c = p->s[p->pos];
    uint8_t b;

    if (c == '\0') {
      parse_error (p, "string not terminated");
      goto err;
    }
    p->pos++;
    if (c == '"')
      break;
    if (c != '\\')
      b = c;
    else {
      c = p->s[p->pos];
      if (c == '\0') {
        parse_error (p, "string not terminated");
        goto err;
      }
      p->pos++;
      switch (c) {
      case 'a': b = '\a'; break;
      case 'b': b = '\b'; break;
      case 'f': b = '\f'; break;
      case 'n': b = '\n'; break;
      case 'r': b = '\r'; break;
      case 't': b = '\t'; break;
      case 'v': b = '\v'; break;
      case 'x': {
        int h = hexval (p->s[p->pos]), l;

        l = h >= 0 ? hexval (p->s[p->pos + 1]) : -1;
        if (h < 0 || l < 0) {
          parse_error (p, "\\x in a string must be followed by exactly "
                       "two hexadecimal digits");
          goto err;
        }
        b = h * 16 + l;
        p->pos += 2;
        break;
      }
      case '0': case '1': case '2': case '3':
      case '4': case '5': case '6': case '7':
      case 'u': case 'U':
        parse_error (p, "octal and unicode escapes are not supported "
                     "in strings");
        goto err;
      default:                  /* \\ \" \' \? and any other: itself */
        b = c;
      }
    }
    if (byte_vector_append (&v, b) == -1) {
      nbdkit_error ("data parameter: out of memory");
      goto err;
    }
  }
  return bytes_node (p, v.ptr, v.len);
 err:
  byte_vector_reset (&v);
  return NULL;
}

/* A script's output is read at most this far unless a slice or size=
 * says how much of it is wanted: endless ones ("yes") are common, and
 * the output is held in memory before it is stored.
 */
#define MAX_SCRIPT_INPUT (UINT64_C (1) << 30)

/* Read FP until EOF or LIMIT bytes. */
static int
read_stream (FILE *fp, uint64_t limit, byte_vector *v, bool *hit_limit)
{
  *hit_limit = false;
  while (v->len < limit) {
    size_t want = MIN ((uint64_t) 65536, limit - v->len), got;

    if (byte_vector_reserve (v, want) == -1)
      return -1;
    got = fread (v->ptr + v->len, 1, want, fp);
    v->len += got;
    if (got < want) {
      if (ferror (fp))
        return -1;
      return 0;
    }
  }
  *hit_limit = true;
  return 0;
}

/* Run SCRIPT with /bin/sh, reading its output up to LIMIT bytes.  The
 * server ignores SIGPIPE; the script must not, or an endless script
 * would never notice that we stopped reading.
 */
static int
run_script (const char *script, uint64_t limit, byte_vector *v)
{
  struct subprocess sp = {
    .shell_command = script,
    .stdout_mode = SUBPROCESS_PIPE,
    .out_max = limit < SIZE_MAX ? limit : SIZE_MAX,
    .default_signals = true,
    .out = { .ptr = (char *) v->ptr, .len = v->len, .cap = v->cap },
  };
  enum subprocess_outcome r;
  bool hit;

  fflush (NULL);
  r = subprocess_run (&sp);
  v->ptr = (uint8_t *) sp.out.ptr;
  v->len = sp.out.len;
  v->cap = sp.out.cap;
  if (r != SUBPROCESS_FINISHED) {
    nbdkit_error ("data parameter: <(%s): %s: %m", script, sp.failed_call);
    return -1;
  }
  if (sp.exec_errno != 0) {
    errno = sp.exec_errno;
    nbdkit_error ("data parameter: <(%s): /bin/sh: %m", script);
    return -1;
  }
  /* Output cut at the limit is all that is wanted, however it ended. */
  hit = sp.out_overflow || v->len >= limit;
  if (!hit && (!WIFEXITED (sp.status) || WEXITSTATUS (sp.status) != 0)) {
    nbdkit_error ("data parameter: <(%s): the script failed", script);
    return -1;
  }
  return 0;
}

/* The end of the slice that follows an item, if any: a file or script
 * is read only that far (the only way to use an endless one).
 */
static uint64_t
peek_slice_end (struct parser *p)
{
  struct parser q = *p;
  uint64_t v;

  /* Errors here are only peeks: report nothing, the real parse will. */
  skip_blank (&q);
  if (q.s[q.pos] != '[')
    return MAX_LEN;
  q.pos++;
  skip_blank (&q);
  if (q.s[q.pos] != ':') {
    while (isalnum ((unsigned char) q.s[q.pos]))
      q.pos++;
    skip_blank (&q);
    if (q.s[q.pos] != ':')
      return MAX_LEN;
  }
  q.pos++;
  skip_blank (&q);
  if (!isdigit ((unsigned char) q.s[q.pos]))
    return MAX_LEN;
  /* A quiet parse_number: only digits and letters follow. */
  {
    const char *s = q.s + q.pos;
    char *end;

    errno = 0;
    v = strtoull (s, &end, 0);
    if (errno || end == s || isalnum ((unsigned char) *end) ||
        v > MAX_LEN)
      return MAX_LEN;
  }
  return v;
}

/* <FILE or <(SCRIPT). */
static struct node *
parse_input (struct parser *p)
{
  byte_vector v = empty_vector;
  char *what = NULL;
  bool script, hit;
  FILE *fp;
  int r;
  uint64_t limit, max;

  p->pos++;                     /* '<' */
  script = p->s[p->pos] == '(';
  if (script) {
    size_t start = ++p->pos;
    unsigned level = 1;

    for (;;) {
      char c = p->s[p->pos];

      if (c == '\0') {
        parse_error (p, "<( script not terminated by ')'");
        return NULL;
      }
      p->pos++;
      if (c == '(')
        level++;
      else if (c == ')' && --level == 0)
        break;
    }
    what = strndup (p->s + start, p->pos - 1 - start);
  }
  else {
    size_t start = p->pos;

    while (p->s[p->pos] && !isspace ((unsigned char) p->s[p->pos]) &&
           !strchr ("[*()", p->s[p->pos]))
      p->pos++;
    if (p->pos == start) {
      parse_error (p, "'<' must be followed by a file name or (script)");
      return NULL;
    }
    what = strndup (p->s + start, p->pos - start);
  }
  if (what == NULL) {
    nbdkit_error ("data parameter: out of memory");
    return NULL;
  }
  if (!p->opts->allow_io) {
    parse_error (p, "files and scripts are not allowed here");
    free (what);
    return NULL;
  }

  /* Read what the slice after it takes, what the disk can hold, and
   * one byte past the input limit, to tell an input that exceeds it.
   */
  limit = peek_slice_end (p);
  if (p->opts->max_read && limit > p->opts->max_read)
    limit = p->opts->max_read;
  max = p->opts->max_input;
  if (script && max > MAX_SCRIPT_INPUT)
    max = MAX_SCRIPT_INPUT;
  if (max && limit > max)
    limit = max + 1;
  if (script) {
    if (run_script (what, limit, &v) == -1)
      goto err;
  }
  else {
    struct stat st;

    fp = fopen (what, "r");
    if (fp == NULL) {
      nbdkit_error ("data parameter: <%s: %m", what);
      goto err;
    }
    /* A file says how long it is: one too long is refused unread. */
    if (fstat (fileno (fp), &st) == 0 && S_ISREG (st.st_mode) &&
        (uint64_t) st.st_size < limit)
      limit = st.st_size;
    if (max && limit > max) {
      fclose (fp);
      goto too_long;
    }
    r = read_stream (fp, limit, &v, &hit);
    if (r == -1) {
      nbdkit_error ("data parameter: <%s: read: %m", what);
      fclose (fp);
      goto err;
    }
    fclose (fp);
  }
  if (max && v.len > max) {
  too_long:
    nbdkit_error ("data parameter: %s%s%s: more than %" PRIu64 " bytes, "
                  "the most one input may give (read a slice of it, "
                  "<%s[:N], or give size=)", script ? "<(" : "<", what,
                  script ? ")" : "", max, script ? "(...)" : "FILE");
    goto err;
  }
  {
    struct node *n = bytes_node (p, v.ptr, v.len);

    if (n == NULL) {
      free (what);
      return NULL;
    }
    /* What was read is stored as it is, zeroes too (as nbdkit does);
     * the source is also what -D data.AST=1 shows.
     */
    n->zero_run = false;
    r = asprintf (&n->source, script ? "<(%s)" : "<%s", what);
    free (what);
    if (r == -1) {
      n->source = NULL;
      nbdkit_error ("data parameter: out of memory");
      return NULL;
    }
    return n;
  }
 err:
  free (what);
  byte_vector_reset (&v);
  return NULL;
}

static struct node *parse_list (struct parser *p, struct scope *up,
                                bool nested);

static size_t
name_length (const char *s, bool dash)
{
  size_t n = 0;

  while (isalnum ((unsigned char) s[n]) || s[n] == '_' ||
         (dash && s[n] == '-'))
    n++;
  return n;
}

/* \NAME: the node it was bound to, in this scope or an outer one. */
static struct node *
parse_reference (struct parser *p, struct scope *sc)
{
  size_t n = name_length (p->s + p->pos + 1, true);
  const char *name = p->s + p->pos + 1;

  if (n == 0) {
    parse_error (p, "'\\' must be followed by a name");
    return NULL;
  }
  for (; sc; sc = sc->up) {
    for (size_t i = sc->names.len; i-- > 0;) {
      if (strlen (sc->names.ptr[i].name) == n &&
          strncmp (sc->names.ptr[i].name, name, n) == 0) {
        p->pos += n + 1;
        return sc->names.ptr[i].node;
      }
    }
  }
  parse_error (p, "\\%.*s is not defined", (int) n, name);
  return NULL;
}

/* $VAR: its value, parsed as a nested group. */
static struct node *
parse_variable (struct parser *p, struct scope *sc)
{
  size_t n = name_length (p->s + p->pos + 1, false);
  const char *value = NULL;
  char *name, *where;
  struct node *r;

  if (n == 0) {
    parse_error (p, "'$' must be followed by a variable name");
    return NULL;
  }
  name = strndup (p->s + p->pos + 1, n);
  where = malloc (n + 2);
  if (name == NULL || where == NULL) {
    free (name);
    free (where);
    nbdkit_error ("data parameter: out of memory");
    return NULL;
  }
  sprintf (where, "$%s", name);
  if (p->opts->lookup)
    value = p->opts->lookup (p->opts->opaque, name);
  if (value == NULL && p->opts->allow_io)
    value = getenv (name);
  if (value == NULL) {
    parse_error (p, "$%s: variable not found", name);
    r = NULL;
  }
  else {
    struct parser q = *p;

    q.where = where;
    q.s = value;
    q.pos = 0;
    r = parse_list (&q, sc, false);
    p->pos += n + 1;
  }
  free (name);
  free (where);
  return r;
}

/* @N, @+N, @-N, @^N */
static struct node *
parse_offset (struct parser *p)
{
  enum kind kind = N_ABS;
  struct node *n;
  uint64_t v;

  p->pos++;
  switch (p->s[p->pos]) {
  case '+': kind = N_FWD; p->pos++; break;
  case '-': kind = N_BACK; p->pos++; break;
  case '^': kind = N_ALIGN; p->pos++; break;
  }
  if (parse_number (p, &v, "@offset") == -1)
    return NULL;
  if (v > MAX_LEN) {
    parse_error (p, "@ offset %" PRIu64 " is too large", v);
    return NULL;
  }
  if (kind == N_ALIGN && !is_power_of_2 (v)) {
    parse_error (p, "@^%" PRIu64 ": the alignment must be a power of 2", v);
    return NULL;
  }
  n = new_node (p, kind);
  if (n)
    n->n = v;
  return n;
}

static struct node *
parse_item (struct parser *p, struct scope *sc)
{
  char c = p->s[p->pos];

  if (isdigit ((unsigned char) c)) {
    uint64_t v;
    uint8_t b;

    if (parse_number (p, &v, "byte") == -1)
      return NULL;
    if (v > 255) {
      parse_error (p, "byte %" PRIu64 " is not in the range 0..255", v);
      return NULL;
    }
    b = v;
    return copy_bytes_node (p, &b, 1);
  }
  switch (c) {
  case 'b':
    if (strncmp (p->s + p->pos, "base64:", 7) == 0)
      return parse_base64 (p);
    return parse_word (p);
  case 'l':
    return parse_word (p);
  case '@':
    return parse_offset (p);
  case '"':
    return parse_string (p);
  case '<':
    return parse_input (p);
  case '(': {
    struct node *n;

    p->pos++;
    n = parse_list (p, sc, true);
    return n;
  }
  case '$':
    return parse_variable (p, sc);
  case '\\':
    return parse_reference (p, sc);
  case '-':
    parse_error (p, "negative numbers are not allowed");
    return NULL;
  default:
    if (isprint ((unsigned char) c))
      parse_error (p, "unexpected '%c'", c);
    else
      parse_error (p, "unexpected byte 0x%02x", (unsigned char) c);
    return NULL;
  }
}

static struct node *
make_repeat (struct parser *p, struct node *child, uint64_t count)
{
  struct node *n;
  uint64_t len;

  if (__builtin_mul_overflow (child->len, count, &len) || len > MAX_LEN) {
    parse_error (p, "*%" PRIu64 " makes the data too large", count);
    return NULL;
  }
  n = new_node (p, N_REPEAT);
  if (n == NULL)
    return NULL;
  n->child = child;
  n->n = count;
  n->len = len;
  n->depth = child->depth + 1;
  return n;
}

/* [N:M] after CHILD, p->pos at '['. */
static struct node *
parse_slice (struct parser *p, struct node *child)
{
  uint64_t start = 0, end = child->len;
  struct node *n;

  p->pos++;
  skip_blank (p);
  if (p->s[p->pos] != ':') {
    if (parse_number (p, &start, "[N:M]") == -1)
      return NULL;
    skip_blank (p);
  }
  if (p->s[p->pos] != ':') {
    parse_error (p, "expected ':' in [N:M]");
    return NULL;
  }
  p->pos++;
  skip_blank (p);
  if (p->s[p->pos] != ']') {
    if (parse_number (p, &end, "[N:M]") == -1)
      return NULL;
    skip_blank (p);
  }
  if (p->s[p->pos] != ']') {
    parse_error (p, "expected ']' after [N:M]");
    return NULL;
  }
  p->pos++;
  if (start > end || end > child->len) {
    parse_error (p, "[%" PRIu64 ":%" PRIu64 "] is not a slice of an "
                 "expression of %" PRIu64 " bytes", start, end, child->len);
    return NULL;
  }
  n = new_node (p, N_SLICE);
  if (n == NULL)
    return NULL;
  n->child = child;
  n->n = start;
  n->len = end - start;
  n->depth = child->depth + 1;
  return n;
}

/* -> \NAME after NODE, p->pos at '-'. */
static int
parse_binding (struct parser *p, struct scope *sc, struct node *node)
{
  struct binding b;
  size_t n;

  p->pos += 2;
  skip_blank (p);
  if (p->s[p->pos] != '\\') {
    parse_error (p, "'->' must be followed by \\name");
    return -1;
  }
  n = name_length (p->s + p->pos + 1, true);
  if (n == 0) {
    parse_error (p, "'->' must be followed by \\name");
    return -1;
  }
  b.name = strndup (p->s + p->pos + 1, n);
  b.node = node;
  if (b.name == NULL || binding_list_append (&sc->names, b) == -1) {
    free (b.name);
    nbdkit_error ("data parameter: out of memory");
    return -1;
  }
  p->pos += n + 1;
  return 0;
}

static void
free_scope (struct scope *sc)
{
  for (size_t i = 0; i < sc->names.len; ++i)
    free (sc->names.ptr[i].name);
  binding_list_reset (&sc->names);
}

/* The length of a list, and the check that no @-N goes below its start. */
static int
list_length (struct parser *p, struct node *list)
{
  uint64_t o = 0, size = 0;

  for (size_t i = 0; i < list->items.len; ++i) {
    struct node *it = list->items.ptr[i];

    switch (it->kind) {
    case N_ABS:
      o = it->n;
      break;
    case N_FWD:
      if (__builtin_add_overflow (o, it->n, &o) || o > MAX_LEN)
        goto too_large;
      break;
    case N_BACK:
      if (it->n > o) {
        parse_error (p, "@-%" PRIu64 " goes before the start (the offset "
                     "is %" PRIu64 ")", it->n, o);
        return -1;
      }
      o -= it->n;
      break;
    case N_ALIGN:
      if (o % it->n) {
        uint64_t up = o - o % it->n;

        if (__builtin_add_overflow (up, it->n, &o) || o > MAX_LEN)
          goto too_large;
      }
      break;
    default:
      if (__builtin_add_overflow (o, it->len, &o) || o > MAX_LEN)
        goto too_large;
    }
    size = MAX (size, o);
  }
  list->len = size;
  return 0;
 too_large:
  parse_error (p, "the data is too large");
  return -1;
}

/* A list of items up to the end of the text, or, if NESTED, to ')'. */
static struct node *
parse_list (struct parser *p, struct scope *up, bool nested)
{
  struct scope sc = { .up = up, .names = empty_vector };
  struct node *list = NULL;

  if (++p->depth > MAX_DEPTH) {
    parse_error (p, "groups or variables are nested too deeply");
    goto out;
  }
  list = new_node (p, N_LIST);
  if (list == NULL)
    goto out;
  list->depth = 1;
  for (;;) {
    struct node *n;

    skip_blank (p);
    if (p->s[p->pos] == '\0') {
      if (nested) {
        parse_error (p, "'(' without a matching ')'");
        goto fail;
      }
      break;
    }
    if (p->s[p->pos] == ')') {
      if (!nested) {
        parse_error (p, "')' without a matching '('");
        goto fail;
      }
      p->pos++;
      break;
    }
    n = parse_item (p, &sc);
    if (n == NULL)
      goto fail;

    /* Postfix operators, left to right. */
    for (;;) {
      skip_blank (p);
      char c = p->s[p->pos];

      if (c == '*' || c == '[') {
        if (!is_content (n)) {
          parse_error (p, "'%c' cannot follow an @ offset", c);
          goto fail;
        }
        if (c == '*') {
          uint64_t count;

          p->pos++;
          skip_blank (p);
          if (parse_number (p, &count, "*N") == -1)
            goto fail;
          n = make_repeat (p, n, count);
        }
        else
          n = parse_slice (p, n);
        if (n == NULL)
          goto fail;
      }
      else if (c == '-' && p->s[p->pos + 1] == '>') {
        if (!is_content (n)) {
          parse_error (p, "'->' cannot follow an @ offset");
          goto fail;
        }
        if (parse_binding (p, &sc, n) == -1)
          goto fail;
        n = NULL;               /* bound, not placed */
        break;
      }
      else
        break;
    }
    if (n == NULL)
      continue;
    if (n->depth >= MAX_DEPTH) {
      parse_error (p, "the expression is nested too deeply");
      goto fail;
    }
    if (is_literal (n) && list->items.len > 0 &&
        is_literal (list->items.ptr[list->items.len - 1])) {
      struct node **last = &list->items.ptr[list->items.len - 1];

      *last = join_literals (p, *last, n);
      if (*last == NULL)
        goto fail;
      continue;
    }
    if (node_list_append (&list->items, n) == -1) {
      nbdkit_error ("data parameter: out of memory");
      goto fail;
    }
    list->depth = MAX (list->depth, n->depth + 1);
  }
  if (list_length (p, list) == -1)
    goto fail;
  goto out;

 fail:
  list = NULL;                  /* freed with the tree */
 out:
  p->depth--;
  free_scope (&sc);
  return list;
}

struct data_tree *
data_parse (const char *text, const struct data_parse_opts *opts,
            uint64_t *size)
{
  struct data_tree *t = calloc (1, sizeof *t);
  struct parser p = { .opts = opts, .t = t, .where = "data", .s = text };

  if (t == NULL) {
    nbdkit_error ("data parameter: out of memory");
    return NULL;
  }
  t->root = parse_list (&p, NULL, false);
  if (t->root == NULL) {
    data_free (t);
    return NULL;
  }
  *size = t->root->len;
  return t;
}

void
data_free (struct data_tree *t)
{
  if (t == NULL)
    return;
  for (size_t i = 0; i < t->all.len; ++i) {
    free (t->all.ptr[i]->bytes);
    free (t->all.ptr[i]->source);
    node_list_reset (&t->all.ptr[i]->items);
    free (t->all.ptr[i]);
  }
  node_list_reset (&t->all);
  free (t);
}

