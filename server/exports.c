/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: export lists, filled by list_exports callbacks and
 * read by the handshake (NBD_OPT_LIST) and by filters.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "protocol.h"

/* A list longer than this is almost certainly a mistake, and each entry
 * costs a reply to NBD_OPT_LIST.
 */
#define MAX_EXPORTS 10000

DEFINE_VECTOR_TYPE (export_list, struct nbdkit_export);

struct nbdkit_exports {
  export_list v;
  bool use_default;
};

struct nbdkit_exports *
nbdkit_exports_new (void)
{
  struct nbdkit_exports *e = calloc (1, sizeof *e);
  if (!e)
    nbdkit_error ("calloc: %m");
  return e;
}

void
nbdkit_exports_free (struct nbdkit_exports *e)
{
  if (!e)
    return;
  for (size_t i = 0; i < e->v.len; i++) {
    free (e->v.ptr[i].name);
    free (e->v.ptr[i].description);
  }
  export_list_reset (&e->v);
  free (e);
}

size_t
nbdkit_exports_count (const struct nbdkit_exports *e)
{
  return e->v.len;
}

struct nbdkit_export
nbdkit_get_export (const struct nbdkit_exports *e, size_t i)
{
  return e->v.ptr[i];
}

int
nbdkit_add_export (struct nbdkit_exports *e, const char *name,
                   const char *description)
{
  if (e->v.len >= MAX_EXPORTS) {
    nbdkit_error ("nbdkit_add_export: too many exports");
    errno = E2BIG;
    return -1;
  }
  if (strlen (name) > NBD_MAX_STRING ||
      (description && strlen (description) > NBD_MAX_STRING)) {
    nbdkit_error ("nbdkit_add_export: name or description too long");
    errno = EINVAL;
    return -1;
  }
  if (export_list_reserve (&e->v, 1) == -1) {
    nbdkit_error ("realloc: %m");
    return -1;
  }
  char *n = strdup (name);
  char *d = description ? strdup (description) : NULL;
  if (!n || (description && !d)) {
    free (n);
    free (d);
    nbdkit_error ("strdup: %m");
    return -1;
  }
  export_list_append (&e->v, (struct nbdkit_export) { .name = n,
                                                       .description = d });
  return 0;
}

int
nbdkit_use_default_export (struct nbdkit_exports *e)
{
  e->use_default = true;
  return 0;
}

bool
exports_has_default (const struct nbdkit_exports *e)
{
  return e->use_default;
}

/* Take the nbdkit_use_default_export mark off E: true if it was there. */
bool
exports_take_default (struct nbdkit_exports *e)
{
  bool was = e->use_default;
  e->use_default = false;
  return was;
}
