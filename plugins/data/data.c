/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The data plugin: a RAM disk whose first contents come from the
 * command line, as an expression (data=, parsed and rendered by
 * format-parse.c and format-render.c), as base64 (base64=) or as the bytes of the parameter
 * (raw=).
 *
 * This file owns the parameters and the nbdkit callbacks.  At
 * config_complete the initial bytes are written into an allocator
 * (common/allocators, picked by allocator=, sparse by default) that
 * serves every connection afterwards, exactly as the memory plugin's
 * does: writes go to it and are lost at exit.  The allocators lock
 * themselves, so the plugin is fully parallel.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "allocator.h"
#include "format.h"
#include "iszero.h"
#include "minmax.h"
#include "rounding.h"
#include "vector.h"
#include "answers.h"
#include "params.h"

/* nbdkit 1.32's sparse and zstd stores have 32 KiB pages and report
 * extents per page: a page never written is a hole, a written page
 * that reads as zeroes is allocated zeroes, any other is data.  Ours
 * has 4 KiB pages (zstd 32 KiB); extents are reported at this
 * granularity, so that maps match nbdkit's.
 */
#define MAP_PAGE 32768

/* -D data.AST=1: show the parsed expression in the debug log. */
NBDKIT_DLL_PUBLIC int data_debug_AST = 0;

struct var {
  char *name;
  char *value;
};
DEFINE_VECTOR_TYPE (var_list, struct var);

/* Set by config, read-only once the server starts serving. */
static const char *source_key;  /* "data", "raw" or "base64" */
static char *source;
static int64_t size = -1;       /* size=, or -1 */
static char *allocator_spec;
static var_list vars;
static struct allocator *store;
static uint64_t disk_size;

static void
data_unload (void)
{
  allocator_destroy (store);
  free (allocator_spec);
  free (source);
  for (size_t i = 0; i < vars.len; ++i) {
    free (vars.ptr[i].name);
    free (vars.ptr[i].value);
  }
  var_list_reset (&vars);
}

static bool
is_var_name (const char *s)
{
  if (*s == '\0')
    return false;
  for (; *s; ++s)
    if (!(*s == '_' || (*s >= '0' && *s <= '9') ||
          (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
      return false;
  return true;
}

static int
data_config (const char *key, const char *value)
{
  if (strcmp (key, "data") == 0 || strcmp (key, "raw") == 0 ||
      strcmp (key, "base64") == 0) {
    if (source_key) {
      nbdkit_error ("%s: only one of data=, raw= or base64= may be given",
                    key);
      return -1;
    }
    source = strdup (value);
    if (source == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    source_key = strcmp (key, "data") == 0 ? "data"
      : strcmp (key, "raw") == 0 ? "raw" : "base64";
    return 0;
  }
  if (strcmp (key, "size") == 0)
    return param_size (value, &size);
  if (strcmp (key, "allocator") == 0)
    return param_string (value, &allocator_spec);
  /* Anything else that could be a $VAR is one. */
  if (!is_var_name (key)) {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  struct var v = { .name = strdup (key), .value = strdup (value) };

  if (v.name == NULL || v.value == NULL ||
      var_list_append (&vars, v) == -1) {
    free (v.name);
    free (v.value);
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

static const char *
lookup_var (void *opaque, const char *name)
{
  /* The last NAME= given wins. */
  for (size_t i = vars.len; i-- > 0;)
    if (strcmp (vars.ptr[i].name, name) == 0)
      return vars.ptr[i].value;
  return NULL;
}

static int
store_write (void *opaque, const void *buf, uint32_t count, uint64_t offset)
{
  if (allocator_write (store, buf, count, offset) == -1) {
    nbdkit_error ("data: out of memory storing %" PRIu32 " bytes at "
                  "offset %" PRIu64, count, offset);
    return -1;
  }
  return 0;
}

static int
store_zero (void *opaque, uint32_t count, uint64_t offset)
{
  if (allocator_zero (store, count, offset) == -1) {
    nbdkit_error ("data: zeroing %" PRIu32 " bytes at offset %" PRIu64
                  ": %m", count, offset);
    return -1;
  }
  return 0;
}

static int
make_store (uint64_t sz)
{
  const char *spec = allocator_spec ? allocator_spec : "sparse";
  const char *why;

  store = allocator_create (spec, sz, nbdkit_debug, &why);
  if (store == NULL) {
    if (why)
      nbdkit_error ("allocator=%s: %s", spec, why);
    else
      nbdkit_error ("allocator=%s: %m", spec);
    return -1;
  }
  /* A written zero allocates its page, as in nbdkit: block status then
   * says "allocated zeroes", not "hole".
   */
  allocator_keep_zero_writes (store);
  return 0;
}

/* The most bytes the data plugin sets up at start-up: a quarter of
 * this machine's memory (the store is memory), eight times that with
 * allocator=zstd, which compresses.  The same bounds any one <FILE or
 * <(SCRIPT) that neither size= nor a slice bounds.  An expression can
 * describe far more (0x55*9223372036854775807 is 8 EiB of data), and
 * rendering it would fill memory at the speed of the allocator.
 */
static uint64_t
stored_limit (void)
{
  long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);
  uint64_t mem = pages > 0 && page > 0 ? (uint64_t) pages * page
                                       : UINT64_C (1) << 32;
  uint64_t limit = mem / 4;
  if (allocator_spec && strncmp (allocator_spec, "zstd", 4) == 0)
    limit *= 8;
  return limit;
}

/* N bytes in a unit a person reads: "24 GiB". */
static void
human (uint64_t n, char *buf, size_t len)
{
  static const char units[][4] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB",
                                   "EiB" };
  unsigned u = 0;
  while (n >= 1024 * 10 && u < 6) {
    n /= 1024;
    u++;
  }
  snprintf (buf, len, "%" PRIu64 " %s", n, units[u]);
}

static int
data_config_complete (void)
{
  struct data_sink sink = { .write = store_write, .zero = store_zero,
                            .starts_zero = true };
  struct timespec t0, t1;

  if (source_key == NULL) {
    nbdkit_error ("exactly one of data=, raw= or base64= must be given");
    return -1;
  }
  clock_gettime (CLOCK_MONOTONIC, &t0);

  if (strcmp (source_key, "data") == 0) {
    uint64_t limit = stored_limit ();
    struct data_parse_opts opts = {
      .allow_io = true, .lookup = lookup_var,
      .max_read = size >= 0 ? (uint64_t) size : 0,
      .max_input = limit,
    };
    struct data_tree *t;
    uint64_t len, set;
    int r;

    t = data_parse (source, &opts, &len);
    if (t == NULL)
      return -1;
    if (data_debug_AST)
      data_show (t, nbdkit_debug);
    disk_size = size >= 0 ? (uint64_t) size : len;
    set = data_stored_bytes (t, disk_size);
    if (set > limit) {
      char a[32], b[32];
      human (set, a, sizeof a);
      human (limit, b, sizeof b);
      nbdkit_error ("the expression sets %s of data, more than the "
                    "%s the plugin may keep (a quarter of this machine's "
                    "memory, eight times that with allocator=zstd); give "
                    "a smaller size= or expression", a, b);
      data_free (t);
      return -1;
    }
    r = make_store (disk_size);
    if (r == 0)
      r = data_render (t, disk_size, &sink);
    data_free (t);
    if (r == -1)
      return -1;
  }
  else {
    const uint8_t *bytes = (const uint8_t *) source;
    uint8_t *decoded = NULL;
    size_t len = strlen (source);

    if (strcmp (source_key, "base64") == 0) {
      size_t bad;

      if (data_base64_decode (source, len, &decoded, &len, &bad) == -1) {
        if (errno == ENOMEM)
          nbdkit_error ("malloc: %m");
        else if (bad == SIZE_MAX)
          nbdkit_error ("base64: invalid base64 data (bad length or "
                        "padding)");
        else
          nbdkit_error ("base64: invalid base64 data at offset %zu", bad);
        return -1;
      }
      bytes = decoded;
    }
    disk_size = size >= 0 ? (uint64_t) size : len;
    len = MIN ((uint64_t) len, disk_size);
    int r = make_store (disk_size);
    for (size_t o = 0; r == 0 && o < len; o += 1048576) {
      uint32_t n = MIN (len - o, (size_t) 1048576);

      r = store_write (NULL, bytes + o, n, o);
      sink.bytes_set += n;
    }
    free (decoded);
    if (r == -1)
      return -1;
  }

  clock_gettime (CLOCK_MONOTONIC, &t1);
  /* In registers: a tracer misreads a global's %rip-relative operand
   * in a shared object.
   */
  uint64_t probe_size = disk_size, probe_set = sink.bytes_set;
  int64_t ns = (int64_t) (t1.tv_sec - t0.tv_sec) * 1000000000
    + (t1.tv_nsec - t0.tv_nsec);
  __asm__ ("" : "+r" (probe_size), "+r" (probe_set), "+r" (ns));
  NBDKIT_PROBE (data_parsed, probe_size, probe_set, ns);
  nbdkit_debug ("data: size %" PRIu64 ", %" PRIu64 " bytes set",
                disk_size, sink.bytes_set);
  return 0;
}

#define data_config_help \
  "[data=]DATA               The data, in the data format language.\n" \
  "raw=BINARY                Or: the bytes of the parameter.\n" \
  "base64=BASE64             Or: base64-encoded bytes.\n" \
  "size=SIZE                 Truncate or extend the disk to SIZE.\n" \
  "allocator=sparse|malloc[,mlock=true]|zstd\n" \
  "                          How the disk is kept in memory (default sparse).\n" \
  "VAR=VALUE                 The value of $VAR in DATA."

static void
data_dump_plugin (void)
{
  printf ("data_base64=yes\n");
  printf ("mlock=%s\n", allocator_have_mlock () ? "yes" : "no");
  printf ("zstd=%s\n", allocator_have_zstd () ? "yes" : "no");
}

static int64_t
data_get_size (void *handle)
{
  return disk_size;
}

static int
data_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  allocator_read (store, buf, count, offset);
  return 0;
}

static int
data_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  if (allocator_write (store, buf, count, offset) == -1) {
    int err = errno;

    nbdkit_error ("pwrite: out of memory storing %" PRIu32
                  " bytes at offset %" PRIu64, count, offset);
    errno = err;
    return -1;
  }
  return 0;
}

static int
data_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return allocator_zero (store, count, offset);
}

/* Extents of a paged store, widened to MAP_PAGE: a page is a hole if
 * nothing of it is stored, else allocated, and then zero if the part
 * of it asked about reads as zeroes (as nbdkit judges it), else data.
 * The allocated runs are gathered first and read afterwards, since the
 * store may hold its lock while it walks.
 */
struct run {
  uint64_t start, end;
};
DEFINE_VECTOR_TYPE (run_list, struct run);

static int
widen_emit (void *opaque, uint64_t offset, uint64_t length, bool allocated)
{
  run_list *runs = opaque;
  uint64_t a, b;

  if (!allocated)
    return 0;
  a = ROUND_DOWN (offset, MAP_PAGE);
  b = MIN (ROUND_UP (offset + length, MAP_PAGE), disk_size);
  if (runs->len > 0 && a <= runs->ptr[runs->len - 1].end) {
    runs->ptr[runs->len - 1].end = MAX (runs->ptr[runs->len - 1].end, b);
    return 0;
  }
  return run_list_append (runs, (struct run) { a, b });
}

/* Does [A, B) read as zeroes?  Most data gives itself away in its
 * first bytes.
 */
static bool
range_is_zero (uint64_t a, uint64_t b)
{
  char buf[4096];

  for (uint32_t step = 64; a < b; step = sizeof buf) {
    uint32_t n = MIN (b - a, (uint64_t) step);

    allocator_read (store, buf, n, a);
    if (!is_zero (buf, n))
      return false;
    a += n;
  }
  return true;
}

static int
widen_extents (uint32_t count, uint64_t offset,
               struct nbdkit_extents *extents)
{
  const uint64_t end = offset + count;
  uint64_t a = ROUND_DOWN (offset, MAP_PAGE);
  uint64_t b = MIN (ROUND_UP (end, (uint64_t) MAP_PAGE), disk_size);
  uint64_t pos = offset;
  run_list runs = empty_vector;
  int r = -1;

  while (a < b) {
    uint32_t n = MIN (b - a, (uint64_t) 1 << 30);

    if (allocator_extents (store, n, a, false, widen_emit, &runs) == -1) {
      nbdkit_error ("extents: %m");
      goto out;
    }
    a += n;
  }
  for (size_t i = 0; i < runs.len && pos < end; ++i) {
    uint64_t rs = MAX (runs.ptr[i].start, offset);
    uint64_t re = MIN (runs.ptr[i].end, end);

    if (rs >= re)
      continue;
    if (rs > pos &&
        nbdkit_add_extent (extents, pos, rs - pos,
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
      goto out;
    /* Allocated: a page (or the part of it asked about) at a time. */
    for (pos = rs; pos < re;) {
      uint64_t next = MIN (ROUND_DOWN (pos, MAP_PAGE) + MAP_PAGE, re);
      uint32_t type = range_is_zero (pos, next) ? NBDKIT_EXTENT_ZERO : 0;

      if (nbdkit_add_extent (extents, pos, next - pos, type) == -1)
        goto out;
      pos = next;
    }
  }
  if (pos < end &&
      nbdkit_add_extent (extents, pos, end - pos,
                         NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
    goto out;
  r = 0;
 out:
  run_list_reset (&runs);
  return r;
}

static int
plain_emit (void *opaque, uint64_t offset, uint64_t length, bool allocated)
{
  return nbdkit_add_extent (opaque, offset, length,
                            allocated ? 0
                            : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
}

static int
data_extents (void *handle, uint32_t count, uint64_t offset,
              uint32_t flags, struct nbdkit_extents *extents)
{
  bool one = (flags & NBDKIT_FLAG_REQ_ONE) != 0;

  /* malloc: one flat buffer, all data. */
  if (strcmp (store->ops->type, "malloc") == 0)
    return allocator_extents (store, count, offset, one, plain_emit,
                              extents);

  /* Look at whole pages around the request, report the request. */
  return widen_extents (count, offset, extents);
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "data",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit data plugin",
  .description       = "A RAM disk initialised from the command line",
  .unload            = data_unload,
  .config            = data_config,
  .config_complete   = data_config_complete,
  .config_help       = data_config_help,
  .magic_config_key  = "data",
  .dump_plugin       = data_dump_plugin,
  .open              = answer_no_handle,
  .get_size          = data_get_size,
  .can_write         = answer_yes,
  .can_flush         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fast_zero     = answer_yes,
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = data_pread,
  .pwrite            = data_pwrite,
  .flush             = answer_flush_done,
  .trim              = data_zero,
  .zero              = data_zero,
  .cache             = answer_range_done,
  .extents           = data_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
