/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The extentlist filter: answer block status from a text file instead
 * of asking the plugin.  The file is read once, at configuration, into
 * a sorted vector of extents with the gaps filled by holes, so that it
 * covers every offset; the extents callback then only searches it.
 * Read-only after configuration: no locking.
 *
 * The file has one extent per line, "OFFSET LENGTH [TYPE]", and is
 * parsed strictly: any line that is not exactly that (or blank, or a
 * '#' comment) is an error naming the file and the line.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "vector.h"

#define HOLE_ZERO (NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO)

struct extent {
  uint64_t offset;
  uint64_t length;
  uint32_t type;
  size_t line;                  /* where it was read, for messages */
};
DEFINE_VECTOR_TYPE (extent_vector, struct extent);

/* The whole address space [0, INT64_MAX], in order, without gaps. */
static extent_vector extents = empty_vector;
static bool have_list = false;

static void
extentlist_unload (void)
{
  extent_vector_reset (&extents);
}

/* A size as nbdkit_parse_size takes it: digits, then at most one
 * suffix letter, optionally followed by "B" or "iB".  Checked first
 * so that a bad field gives one error that names its line.
 */
static bool
looks_like_size (const char *s)
{
  size_t digits = strspn (s, "0123456789");

  if (digits == 0)
    return false;
  s += digits;
  if (*s == '\0')
    return true;
  if (strchr ("bBsS", *s) && s[1] == '\0')
    return true;
  if (!strchr ("kKmMgGtTpPeE", *s))
    return false;
  s++;
  return *s == '\0' || strcmp (s, "B") == 0 || strcmp (s, "iB") == 0;
}

/* TYPE: a number 0-3, or comma-separated words "hole" and "zero". */
static int
parse_type (const char *s, uint32_t *type)
{
  if (isdigit ((unsigned char) s[0])) {
    if (s[1] != '\0' || s[0] > '3')
      return -1;
    *type = s[0] - '0';
    return 0;
  }
  *type = 0;
  for (;;) {
    size_t n = strcspn (s, ",");
    if (n == 4 && strncmp (s, "hole", 4) == 0)
      *type |= NBDKIT_EXTENT_HOLE;
    else if (n == 4 && strncmp (s, "zero", 4) == 0)
      *type |= NBDKIT_EXTENT_ZERO;
    else
      return -1;
    if (s[n] == '\0')
      return 0;
    s += n + 1;
  }
}

static int
compare_offsets (const void *a, const void *b)
{
  const struct extent *x = a, *y = b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Parse one line into *E; 0 if it holds an extent, 1 if it is blank or
 * a comment, -1 after an error naming FILE:LINENO.
 */
static int
parse_line (const char *file, size_t lineno, char *line, struct extent *e)
{
  char *fields[4], *save = NULL, *tok;
  size_t n = 0;
  int64_t v;

  line[strcspn (line, "\r\n")] = '\0';
  for (tok = strtok_r (line, " \t", &save); tok;
       tok = strtok_r (NULL, " \t", &save)) {
    if (n == 0 && tok[0] == '#')
      return 1;
    if (n == 3) {
      nbdkit_error ("%s:%zu: too many fields (want OFFSET LENGTH [TYPE])",
                    file, lineno);
      return -1;
    }
    fields[n++] = tok;
  }
  if (n == 0)
    return 1;
  if (n == 1) {
    nbdkit_error ("%s:%zu: no length (want OFFSET LENGTH [TYPE])",
                  file, lineno);
    return -1;
  }

  for (size_t i = 0; i < 2; i++) {
    const char *what = i == 0 ? "offset" : "length";
    if (!looks_like_size (fields[i])) {
      nbdkit_error ("%s:%zu: %s '%s' is not a size", file, lineno, what,
                    fields[i]);
      return -1;
    }
    v = nbdkit_parse_size (fields[i]);
    if (v == -1) {
      nbdkit_error ("%s:%zu: bad %s", file, lineno, what);
      return -1;
    }
    if (i == 0)
      e->offset = v;
    else
      e->length = v;
  }
  if (e->offset + e->length > INT64_MAX) {
    nbdkit_error ("%s:%zu: the extent ends beyond the largest disk",
                  file, lineno);
    return -1;
  }
  e->type = 0;
  if (n == 3 && parse_type (fields[2], &e->type) == -1) {
    nbdkit_error ("%s:%zu: type '%s' is not 0 to 3 or a list of "
                  "hole,zero", file, lineno, fields[2]);
    return -1;
  }
  e->line = lineno;
  return 0;
}

static int
read_list (const char *file)
{
  CLEANUP_FREE char *line = NULL;
  size_t cap = 0, lineno = 0;
  extent_vector list = empty_vector;
  uint64_t end = 0;
  FILE *fp;
  int r = -1;

  fp = fopen (file, "r");
  if (fp == NULL) {
    nbdkit_error ("extentlist=%s: %m", file);
    return -1;
  }
  while (getline (&line, &cap, fp) != -1) {
    struct extent e = { 0 };
    int p = parse_line (file, ++lineno, line, &e);
    if (p == -1)
      goto out;
    if (p == 1 || e.length == 0)
      continue;
    if (extent_vector_append (&list, e) == -1) {
      nbdkit_error ("realloc: %m");
      goto out;
    }
  }
  if (ferror (fp)) {
    nbdkit_error ("extentlist=%s: read: %m", file);
    goto out;
  }

  /* In order, without overlaps, the gaps filled with holes. */
  extent_vector_sort (&list, compare_offsets);
  for (size_t i = 0; i < list.len; i++) {
    const struct extent *e = &list.ptr[i];
    if (e->offset < end) {
      nbdkit_error ("%s:%zu: the extent overlaps the one on line %zu",
                    file, e->line, list.ptr[i - 1].line);
      goto out;
    }
    if (e->offset > end &&
        extent_vector_append (&extents, (struct extent) {
            .offset = end, .length = e->offset - end, .type = HOLE_ZERO
          }) == -1) {
      nbdkit_error ("realloc: %m");
      goto out;
    }
    if (extent_vector_append (&extents, *e) == -1) {
      nbdkit_error ("realloc: %m");
      goto out;
    }
    end = e->offset + e->length;
  }
  if (end < INT64_MAX &&
      extent_vector_append (&extents, (struct extent) {
          .offset = end, .length = INT64_MAX - end, .type = HOLE_ZERO
        }) == -1) {
    nbdkit_error ("realloc: %m");
    goto out;
  }
  nbdkit_debug ("extentlist: %zu extents from %zu lines of %s",
                list.len, lineno, file);
  r = 0;
 out:
  if (r == -1)
    extent_vector_reset (&extents);
  extent_vector_reset (&list);
  fclose (fp);
  return r;
}

static int
extentlist_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                   const char *key, const char *value)
{
  if (strcmp (key, "extentlist") == 0) {
    if (have_list) {
      nbdkit_error ("extentlist: the parameter may only be given once");
      return -1;
    }
    if (read_list (value) == -1)
      return -1;
    have_list = true;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
extentlist_config_complete (nbdkit_next_config_complete *next,
                            nbdkit_backend *nxdata)
{
  if (!have_list) {
    nbdkit_error ("the extentlist parameter is required "
                  "(extentlist=FILE)");
    return -1;
  }
  return next (nxdata);
}

#define extentlist_config_help \
  "extentlist=<FILENAME>  (required) File of \"offset length [type]\" lines."

static int
extentlist_can_extents (nbdkit_next *next, void *handle)
{
  return 1;
}

/* The extent holding OFFSET (the list covers every offset). */
static int
compare_holding (const void *key, const void *elem)
{
  uint64_t offset = *(const uint64_t *) key;
  const struct extent *e = elem;

  if (offset < e->offset)
    return -1;
  if (offset >= e->offset + e->length)
    return 1;
  return 0;
}

static int
extentlist_extents (nbdkit_next *next, void *handle, uint32_t count,
                    uint64_t offset, uint32_t flags,
                    struct nbdkit_extents *list, int *err)
{
  uint64_t end = offset + count;
  const struct extent *e;

  e = extent_vector_search (&extents, &offset, compare_holding);
  if (e == NULL) {              /* cannot happen: the list is complete */
    *err = EIO;
    return -1;
  }
  for (; e < extents.ptr + extents.len && e->offset < end; e++) {
    if (nbdkit_add_extent (list, e->offset, e->length, e->type) == -1) {
      *err = errno;
      return -1;
    }
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "extentlist",
  .longname = "nbdkit extentlist filter",
  .unload = extentlist_unload,
  .config = extentlist_config,
  .config_complete = extentlist_config_complete,
  .config_help = extentlist_config_help,
  .can_extents = extentlist_can_extents,
  .extents = extentlist_extents,
};

NBDKIT_REGISTER_FILTER (filter)
