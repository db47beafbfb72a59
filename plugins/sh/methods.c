/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The plugin callbacks of the sh and eval plugins, each one a run of the
 * script's method (call.c), with the arguments and output formats of
 * nbdkit's sh plugin.  sh.c and eval.c own the configuration (where the
 * script is) and fill their struct nbdkit_plugin with these.
 *
 * A handle is the string the script's open method printed; it is passed
 * back as the first argument of every per-connection method.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "call.h"
#include "cleanup.h"
#include "methods.h"
#include "array-size.h"

struct script_handle {
  char *h;                      /* as printed by open, "" without open */
};

#define H(handle) (((struct script_handle *) (handle))->h)

static const char *
bool_str (int b)
{
  return b ? "true" : "false";
}

/* A method that only succeeds or fails (get_ready, flush, ...).
 * MISSING_OK: whether a missing method is a success.
 */
static int
simple_method (const char *method, const char **args, bool missing_ok)
{
  switch (script_call (method, args, NULL, 0, NULL, 0)) {
  case SCRIPT_OK:
    return 0;
  case SCRIPT_MISSING:
    if (missing_ok)
      return 0;
    nbdkit_error ("%s: the script has no %s method", method, method);
    errno = EINVAL;
    return -1;
  case SCRIPT_FALSE:
    nbdkit_error ("%s: unexpected exit code 3 (false) from the script",
                  method);
    errno = EIO;
    return -1;
  case SCRIPT_ERROR:
  default:
    return -1;
  }
}

/* A boolean method: 0 true, 3 false.  Missing: whether the method
 * IF_DEFINED (may be NULL) was given explicitly.
 */
static int
boolean_method (const char *method, void *handle, const char *if_defined)
{
  const char *args[] = { H (handle), NULL };
  switch (script_call (method, args, NULL, 0, NULL, 0)) {
  case SCRIPT_OK:
    return 1;
  case SCRIPT_FALSE:
    return 0;
  case SCRIPT_MISSING:
    return if_defined && script_hooks.defined &&
      script_hooks.defined (if_defined);
  case SCRIPT_ERROR:
  default:
    return -1;
  }
}

/* Run METHOD and return its stdout as a C string without its trailing
 * newline in OUT.  Returns the status; SCRIPT_ERROR already reported.
 */
static enum script_status
string_method (const char *method, const char **args, byte_vector *out)
{
  enum script_status r = script_call (method, args, NULL, 0, out,
                                      SCRIPT_MAX_OUTPUT);
  if (r == SCRIPT_OK && script_output_string (out) == -1) {
    nbdkit_error ("%s: %m", method);
    return SCRIPT_ERROR;
  }
  return r;
}

void
script_unload (void)
{
  script_call ("unload", NULL, NULL, 0, NULL, 0);
}

void
script_dump_plugin (void)
{
  byte_vector out = empty_vector;
  if (script_call ("dump_plugin", NULL, NULL, 0, &out,
                   SCRIPT_MAX_OUTPUT) == SCRIPT_OK && out.len > 0) {
    fwrite (out.ptr, 1, out.len, stdout);
    if (out.ptr[out.len - 1] != '\n')
      putchar ('\n');
  }
  fflush (stdout);
  byte_vector_reset (&out);
}

int
script_config_complete (void)
{
  return simple_method ("config_complete", NULL, true);
}

int
script_thread_model (void)
{
  static const struct { const char *name; int model; } models[] = {
    { "serialize_connections", NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS },
    { "serialize_all_requests",
      NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS },
    { "serialize_requests", NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS },
    { "parallel", NBDKIT_THREAD_MODEL_PARALLEL },
  };
  byte_vector out = empty_vector;
  int model = NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS;

  switch (string_method ("thread_model", NULL, &out)) {
  case SCRIPT_OK: {
    const char *s = out.ptr + strspn (out.ptr, " \t\n");
    size_t n = strcspn (s, " \t\n");
    size_t i;
    for (i = 0; i < ARRAY_SIZE (models); ++i)
      if (strlen (models[i].name) == n && strncmp (s, models[i].name, n) == 0)
        break;
    if (i < ARRAY_SIZE (models))
      model = models[i].model;
    else
      nbdkit_debug ("thread_model: ignoring unknown output \"%s\"", s);
    break;
  }
  case SCRIPT_ERROR:
    model = -1;
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return model;
}

int
script_get_ready (void)
{
  return simple_method ("get_ready", NULL, true);
}

int
script_after_fork (void)
{
  return simple_method ("after_fork", NULL, true);
}

int
script_preconnect (int readonly)
{
  const char *args[] = { bool_str (readonly), NULL };
  return simple_method ("preconnect", args, true);
}

/* Split TEXT (modified in place) into lines; the last line need not end
 * in a newline, and an empty TEXT has no lines.
 */
DEFINE_VECTOR_TYPE (line_vector, char *);

static int
split_lines (char *text, size_t len, line_vector *lines)
{
  char *p = text, *end = text + len;
  while (p < end) {
    char *nl = memchr (p, '\n', end - p);
    if (nl)
      *nl = '\0';
    if (line_vector_append (lines, p) == -1)
      return -1;
    p = nl ? nl + 1 : end;
  }
  return 0;
}

/* The export list formats of list_exports and default_export: call F
 * with each name and description (NULL: none) in order.
 */
static int
parse_exports (byte_vector *out,
               int (*f) (const char *name, const char *desc, void *opaque),
               void *opaque)
{
  line_vector lines = empty_vector;
  int r = -1;

  if (byte_vector_append (out, '\0') == -1) {
    nbdkit_error ("list_exports: %m");
    return -1;
  }
  if (split_lines (out->ptr, out->len - 1, &lines) == -1) {
    nbdkit_error ("list_exports: %m");
    goto done;
  }
  size_t first = 0;
  enum { NAMES, INTERLEAVED, NAMES_DESCRIPTIONS } mode = NAMES;
  if (lines.len > 0) {
    if (strcmp (lines.ptr[0], "NAMES") == 0)
      first = 1;
    else if (strcmp (lines.ptr[0], "INTERLEAVED") == 0)
      first = 1, mode = INTERLEAVED;
    else if (strcmp (lines.ptr[0], "NAMES+DESCRIPTIONS") == 0)
      first = 1, mode = NAMES_DESCRIPTIONS;
  }
  size_t n = lines.len - first;
  char **l = lines.ptr + first;
  switch (mode) {
  case NAMES:
    for (size_t i = 0; i < n; ++i)
      if (f (l[i], NULL, opaque) == -1)
        goto done;
    break;
  case INTERLEAVED:
    for (size_t i = 0; i < n; i += 2)
      if (f (l[i], i + 1 < n ? l[i + 1] : NULL, opaque) == -1)
        goto done;
    break;
  case NAMES_DESCRIPTIONS: {
    /* An odd count: the middle line is a name without description. */
    size_t half = (n + 1) / 2;
    for (size_t i = 0; i < half; ++i)
      if (f (l[i], half + i < n ? l[half + i] : NULL, opaque) == -1)
        goto done;
    break;
  }
  }
  r = 0;
 done:
  line_vector_reset (&lines);
  return r;
}

static int
add_export (const char *name, const char *desc, void *opaque)
{
  return nbdkit_add_export (opaque, name, desc);
}

int
script_list_exports (int readonly, int is_tls,
                     struct nbdkit_exports *exports)
{
  const char *args[] = { bool_str (readonly), bool_str (is_tls), NULL };
  byte_vector out = empty_vector;
  int r = -1;

  switch (script_call ("list_exports", args, NULL, 0, &out,
                       SCRIPT_MAX_OUTPUT)) {
  case SCRIPT_OK:
    r = parse_exports (&out, add_export, exports);
    break;
  case SCRIPT_MISSING:
    r = nbdkit_use_default_export (exports);
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("list_exports: unexpected exit code 3 (false) from the "
                  "script");
    errno = EIO;
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return r;
}

static int
first_export (const char *name, const char *desc, void *opaque)
{
  const char **ret = opaque;
  if (*ret == NULL)
    *ret = nbdkit_strdup_intern (name);
  return 0;
}

const char *
script_default_export (int readonly, int is_tls)
{
  const char *args[] = { bool_str (readonly), bool_str (is_tls), NULL };
  byte_vector out = empty_vector;
  const char *ret = NULL;

  switch (script_call ("default_export", args, NULL, 0, &out,
                       SCRIPT_MAX_OUTPUT)) {
  case SCRIPT_OK:
    if (parse_exports (&out, first_export, &ret) == 0 && ret == NULL)
      ret = "";
    break;
  case SCRIPT_MISSING:
    ret = "";
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("default_export: unexpected exit code 3 (false) from "
                  "the script");
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return ret;
}

void *
script_open (int readonly)
{
  const char *args[] = {
    bool_str (readonly), nbdkit_export_name (), bool_str (nbdkit_is_tls ()),
    NULL
  };
  byte_vector out = empty_vector;
  struct script_handle *h = calloc (1, sizeof *h);

  if (!h) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  if (args[1] == NULL)
    args[1] = "";
  switch (string_method ("open", args, &out)) {
  case SCRIPT_OK:
    h->h = out.ptr;             /* the vector's storage becomes the handle */
    return h;
  case SCRIPT_MISSING:
    byte_vector_reset (&out);
    h->h = strdup ("");
    if (h->h)
      return h;
    nbdkit_error ("strdup: %m");
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("open: unexpected exit code 3 (false) from the script");
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  free (h);
  return NULL;
}

void
script_close (void *handle)
{
  const char *args[] = { H (handle), NULL };
  script_call ("close", args, NULL, 0, NULL, 0);
  free (H (handle));
  free (handle);
}

const char *
script_export_description (void *handle)
{
  const char *args[] = { H (handle), NULL };
  byte_vector out = empty_vector;
  const char *ret = NULL;

  switch (string_method ("export_description", args, &out)) {
  case SCRIPT_OK:
    ret = nbdkit_strdup_intern (out.ptr);
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("export_description: unexpected exit code 3 (false) "
                  "from the script");
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return ret;
}

int64_t
script_get_size (void *handle)
{
  const char *args[] = { H (handle), NULL };
  byte_vector out = empty_vector;
  int64_t r = -1;

  switch (string_method ("get_size", args, &out)) {
  case SCRIPT_OK:
    /* A number: blanks around it do not matter. */
    while (out.len > 0 && (out.ptr[out.len - 1] == ' ' ||
                           out.ptr[out.len - 1] == '\t' ||
                           out.ptr[out.len - 1] == '\n'))
      out.ptr[--out.len] = '\0';
    r = nbdkit_parse_size (out.ptr + strspn (out.ptr, " \t\n"));
    if (r == -1)
      nbdkit_error ("get_size: cannot parse the size \"%s\" the script "
                    "printed", out.ptr);
    break;
  case SCRIPT_MISSING:
    nbdkit_error ("get_size: the script has no get_size method, which is "
                  "required");
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("get_size: unexpected exit code 3 (false) from the "
                  "script");
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return r;
}

int
script_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                   uint32_t *maximum)
{
  const char *args[] = { H (handle), NULL };
  byte_vector out = empty_vector;
  int r = -1;

  switch (string_method ("block_size", args, &out)) {
  case SCRIPT_OK: {
    uint32_t *dst[3] = { minimum, preferred, maximum };
    char *p = out.ptr, *save = NULL;
    int i;
    for (i = 0; i < 3; ++i) {
      char *word = strtok_r (i == 0 ? p : NULL, " \t\n", &save);
      int64_t v = word ? nbdkit_parse_size (word) : -1;
      if (v < 0 || v > UINT32_MAX)
        break;
      *dst[i] = v;
    }
    if (i == 3 && strtok_r (NULL, " \t\n", &save) == NULL)
      r = 0;
    else
      nbdkit_error ("block_size: the script must print three sizes "
                    "(minimum, preferred, maximum)");
    break;
  }
  case SCRIPT_MISSING:
    *minimum = *preferred = *maximum = 0;
    r = 0;
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("block_size: unexpected exit code 3 (false) from the "
                  "script");
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return r;
}

int
script_can_write (void *handle)
{
  return boolean_method ("can_write", handle, "pwrite");
}

int
script_can_flush (void *handle)
{
  return boolean_method ("can_flush", handle, "flush");
}

int
script_is_rotational (void *handle)
{
  return boolean_method ("is_rotational", handle, NULL);
}

int
script_can_trim (void *handle)
{
  return boolean_method ("can_trim", handle, "trim");
}

int
script_can_zero (void *handle)
{
  return boolean_method ("can_zero", handle, "zero");
}

int
script_can_extents (void *handle)
{
  return boolean_method ("can_extents", handle, "extents");
}

int
script_can_multi_conn (void *handle)
{
  return boolean_method ("can_multi_conn", handle, NULL);
}

/* can_fast_zero without the method: as for a C plugin, fast when zero
 * requests are not handled by the script (they then fail at once).
 */
int
script_can_fast_zero (void *handle)
{
  const char *args[] = { H (handle), NULL };
  switch (script_call ("can_fast_zero", args, NULL, 0, NULL, 0)) {
  case SCRIPT_OK:
    return 1;
  case SCRIPT_FALSE:
    return 0;
  case SCRIPT_MISSING: {
    int r = script_can_zero (handle);
    return r == -1 ? -1 : !r;
  }
  default:
    return -1;
  }
}

/* can_fua and can_cache print none, emulate or native. */
static int
tristate_method (const char *method, void *handle, int none, int emulate,
                 int native, int *r)
{
  const char *args[] = { H (handle), NULL };
  byte_vector out = empty_vector;
  enum script_status s = string_method (method, args, &out);
  int ret = 0;

  if (s == SCRIPT_OK) {
    const char *w = out.ptr + strspn (out.ptr, " \t\n");
    if (strcmp (w, "none") == 0)
      *r = none;
    else if (strcmp (w, "emulate") == 0)
      *r = emulate;
    else if (strcmp (w, "native") == 0)
      *r = native;
    else {
      nbdkit_error ("%s: the script must print none, emulate or native, "
                    "not \"%s\"", method, w);
      ret = -1;
    }
  }
  else if (s == SCRIPT_FALSE) {
    nbdkit_error ("%s: unexpected exit code 3 (false) from the script",
                  method);
    ret = -1;
  }
  else if (s == SCRIPT_ERROR)
    ret = -1;
  else
    ret = 1;                    /* missing: the caller decides */
  byte_vector_reset (&out);
  return ret;
}

int
script_can_fua (void *handle)
{
  int r;
  switch (tristate_method ("can_fua", handle, NBDKIT_FUA_NONE,
                           NBDKIT_FUA_EMULATE, NBDKIT_FUA_NATIVE, &r)) {
  case 0:
    return r;
  case 1:
    /* As for a C plugin: emulated with flush when there is a flush. */
    r = script_can_flush (handle);
    return r == -1 ? -1 : r ? NBDKIT_FUA_EMULATE : NBDKIT_FUA_NONE;
  default:
    return -1;
  }
}

int
script_can_cache (void *handle)
{
  int r;
  switch (tristate_method ("can_cache", handle, NBDKIT_CACHE_NONE,
                           NBDKIT_CACHE_EMULATE, NBDKIT_CACHE_NATIVE, &r)) {
  case 0:
    return r;
  case 1:
    return script_hooks.defined && script_hooks.defined ("cache")
      ? NBDKIT_CACHE_NATIVE : NBDKIT_CACHE_NONE;
  default:
    return -1;
  }
}

/* A data method with count and offset: METHOD HANDLE COUNT OFFSET
 * [FLAGS] (FLAGS NULL: no flags argument).
 */
static int
data_method (const char *method, void *handle, uint32_t count,
             uint64_t offset, const char *flags, const void *in,
             size_t inlen, int missing_errno)
{
  char cbuf[32], obuf[32];
  snprintf (cbuf, sizeof cbuf, "%" PRIu32, count);
  snprintf (obuf, sizeof obuf, "%" PRIu64, offset);
  const char *args[] = { H (handle), cbuf, obuf, flags, NULL };

  switch (script_call (method, args, in, inlen, NULL, 0)) {
  case SCRIPT_OK:
    return 0;
  case SCRIPT_MISSING:
    if (missing_errno != ENOTSUP)
      nbdkit_error ("%s: the script has no %s method", method, method);
    errno = missing_errno;
    return -1;
  case SCRIPT_FALSE:
    nbdkit_error ("%s: unexpected exit code 3 (false) from the script",
                  method);
    errno = EIO;
    return -1;
  default:
    return -1;
  }
}

int
script_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  char cbuf[32], obuf[32];
  snprintf (cbuf, sizeof cbuf, "%" PRIu32, count);
  snprintf (obuf, sizeof obuf, "%" PRIu64, offset);
  const char *args[] = { H (handle), cbuf, obuf, NULL };
  byte_vector out = empty_vector;
  int r = -1;

  switch (script_call ("pread", args, NULL, 0, &out, count)) {
  case SCRIPT_OK:
    if (out.len == count) {
      memcpy (buf, out.ptr, count);
      r = 0;
    }
    else {
      nbdkit_error ("pread: the script printed %zu bytes, expected %" PRIu32,
                    out.len, count);
      errno = EIO;
    }
    break;
  case SCRIPT_MISSING:
    nbdkit_error ("pread: the script has no pread method, which is "
                  "required");
    errno = EIO;
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("pread: unexpected exit code 3 (false) from the script");
    errno = EIO;
    break;
  default:
    break;
  }
  byte_vector_reset (&out);
  return r;
}

int
script_pwrite (void *handle, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags)
{
  return data_method ("pwrite", handle, count, offset,
                      flags & NBDKIT_FLAG_FUA ? "fua" : "", buf, count,
                      EROFS);
}

int
script_flush (void *handle, uint32_t flags)
{
  const char *args[] = { H (handle), NULL };
  return simple_method ("flush", args, false);
}

int
script_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return data_method ("trim", handle, count, offset,
                      flags & NBDKIT_FLAG_FUA ? "fua" : "", NULL, 0, EINVAL);
}

int
script_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  char f[32] = "";
  if (flags & NBDKIT_FLAG_FUA)
    strcat (f, ",fua");
  if (flags & NBDKIT_FLAG_MAY_TRIM)
    strcat (f, ",may_trim");
  if (flags & NBDKIT_FLAG_FAST_ZERO)
    strcat (f, ",fast");
  /* Missing: ENOTSUP makes the server write zeroes instead. */
  return data_method ("zero", handle, count, offset, f[0] ? f + 1 : f,
                      NULL, 0, ENOTSUP);
}

int
script_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return data_method ("cache", handle, count, offset, NULL, NULL, 0,
                      EINVAL);
}

/* One extents line: "OFFSET LENGTH [TYPE]", TYPE a number or a comma
 * list of "hole" and "zero".
 */
static int
parse_extent (char *line, struct nbdkit_extents *extents)
{
  char *save = NULL;
  char *o = strtok_r (line, " \t", &save);
  char *l = o ? strtok_r (NULL, " \t", &save) : NULL;
  char *t = l ? strtok_r (NULL, " \t", &save) : NULL;
  uint32_t type = 0;

  if (!o)
    return 0;                   /* an empty line */
  if (!l) {
    nbdkit_error ("extents: a line needs an offset and a length: \"%s\"", o);
    return -1;
  }
  int64_t offset = nbdkit_parse_size (o);
  int64_t length = nbdkit_parse_size (l);
  if (offset == -1 || length == -1) {
    nbdkit_error ("extents: cannot parse offset \"%s\" or length \"%s\"",
                  o, l);
    return -1;
  }
  if (t) {
    if (t[0] >= '0' && t[0] <= '9') {
      if (nbdkit_parse_uint32_t ("extents type", t, &type) == -1)
        return -1;
    }
    else {
      char *wsave = NULL;
      for (char *w = strtok_r (t, ",", &wsave); w;
           w = strtok_r (NULL, ",", &wsave)) {
        if (strcmp (w, "hole") == 0)
          type |= NBDKIT_EXTENT_HOLE;
        else if (strcmp (w, "zero") == 0)
          type |= NBDKIT_EXTENT_ZERO;
        else {
          nbdkit_error ("extents: unknown type \"%s\" (expected hole, zero "
                        "or a number)", w);
          return -1;
        }
      }
    }
  }
  if (strtok_r (NULL, " \t", &save) != NULL) {
    nbdkit_error ("extents: too many fields on a line");
    return -1;
  }
  return nbdkit_add_extent (extents, offset, length, type);
}

int
script_extents (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents)
{
  char cbuf[32], obuf[32];
  snprintf (cbuf, sizeof cbuf, "%" PRIu32, count);
  snprintf (obuf, sizeof obuf, "%" PRIu64, offset);
  const char *args[] = {
    H (handle), cbuf, obuf, flags & NBDKIT_FLAG_REQ_ONE ? "req_one" : "",
    NULL
  };
  byte_vector out = empty_vector;
  line_vector lines = empty_vector;
  int r = -1;

  switch (script_call ("extents", args, NULL, 0, &out, SCRIPT_MAX_OUTPUT)) {
  case SCRIPT_OK:
    if (byte_vector_append (&out, '\0') == -1 ||
        split_lines (out.ptr, out.len - 1, &lines) == -1) {
      nbdkit_error ("extents: %m");
      break;
    }
    r = 0;
    for (size_t i = 0; i < lines.len && r == 0; ++i)
      r = parse_extent (lines.ptr[i], extents);
    if (r == -1)
      errno = EIO;
    break;
  case SCRIPT_MISSING:
    nbdkit_error ("extents: the script has no extents method");
    errno = EINVAL;
    break;
  case SCRIPT_FALSE:
    nbdkit_error ("extents: unexpected exit code 3 (false) from the script");
    errno = EIO;
    break;
  default:
    break;
  }
  line_vector_reset (&lines);
  byte_vector_reset (&out);
  return r;
}
