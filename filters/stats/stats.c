/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The stats filter: count requests, bytes and the time spent below
 * this filter, per kind of request, and write a summary to statsfile=
 * when the server exits.  With statsthreshold= above 0 (the default is
 * 95), each kind also gets a breakdown of request sizes (by the
 * power of two below the size) and of how aligned their offsets are.
 * The summary has nbdkit 1.32's format, so scripts that read it work.
 *
 * Counting is lock-free (relaxed atomics): requests in parallel never
 * wait for each other here.
 */
#include <config.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "now-ns.h"
#include "array-size.h"

static char *statsfile;
static bool statsappend;
static unsigned threshold = 95;         /* percent; 0: no breakdown */
static FILE *fp;
static uint64_t start_ns;

#define SIZE_BITS 64            /* floor (log2 (count)): 0 .. 63 */
#define ALIGN_LEVELS 65         /* trailing zeroes of the offset; 64: offset 0 */

struct opstat {
  const char *name;
  bool sized;                   /* has a size: gets a breakdown */
  _Atomic uint64_t ops, bytes, ns;
  /* requests and bytes per size bucket, and per bucket the requests
   * whose offset has exactly N trailing zero bits
   */
  _Atomic uint64_t size_reqs[SIZE_BITS], size_bytes[SIZE_BITS];
  _Atomic uint64_t align[SIZE_BITS][ALIGN_LEVELS];
};

/* In the order of the summary. */
enum { READ, WRITE, TRIM, ZERO, EXTENTS, CACHE, FLUSH };
static struct opstat stats[] = {
  [READ] = { .name = "read", .sized = true },
  [WRITE] = { .name = "write", .sized = true },
  [TRIM] = { .name = "trim", .sized = true },
  [ZERO] = { .name = "zero", .sized = true },
  [EXTENTS] = { .name = "extents", .sized = true },
  [CACHE] = { .name = "cache", .sized = true },
  [FLUSH] = { .name = "flush" },
};

static void
record (struct opstat *s, uint64_t t0, uint32_t count, uint64_t offset)
{
  uint64_t ns = now_ns () - t0;
  atomic_fetch_add_explicit (&s->ops, 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&s->ns, ns, memory_order_relaxed);
  if (!s->sized)
    return;
  atomic_fetch_add_explicit (&s->bytes, count, memory_order_relaxed);
  if (threshold == 0)
    return;
  unsigned bits = count ? 31 - __builtin_clz (count) : 0;
  unsigned align = offset ? __builtin_ctzll (offset) : 64;
  atomic_fetch_add_explicit (&s->size_reqs[bits], 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&s->size_bytes[bits], count,
                             memory_order_relaxed);
  atomic_fetch_add_explicit (&s->align[bits][align], 1, memory_order_relaxed);
}

/* ---- the summary ---- */

/* "512 bytes", "4.00 KiB", ... up to GiB, as nbdkit prints them. */
static const char *
human (double v, char *buf, size_t len)
{
  static const char *units[] = { "bytes", "KiB", "MiB", "GiB" };
  size_t i = 0;
  while (v >= 1024 && i + 1 < ARRAY_SIZE (units)) {
    v /= 1024;
    i++;
  }
  if (i == 0)
    snprintf (buf, len, "%.0f bytes", v);
  else
    snprintf (buf, len, "%.2f %s", v, units[i]);
  return buf;
}

static void
print_rate (double bytes, double secs, char *buf, size_t len)
{
  if (secs <= 0)
    snprintf (buf, len, "(n/a)");
  else
    human (bytes / secs, buf, len);
}

/* The alignment lines of size bucket BITS, which holds N requests. */
static void
print_alignment (const struct opstat *s, unsigned bits, uint64_t n)
{
  uint64_t at_least[ALIGN_LEVELS + 1];
  at_least[ALIGN_LEVELS] = 0;
  for (int k = ALIGN_LEVELS - 1; k >= 0; k--)
    at_least[k] = at_least[k + 1] + s->align[bits][k];
  /* Offset 0 is aligned to every level: lines stop where only such
   * requests are left, or they would run to 64 bits.
   */
  uint64_t zero_offsets = s->align[bits][64];
  unsigned k = 0;
  while (k < 64 && at_least[k + 1] == n)
    k++;                        /* start at the least aligned request */
  for (; k < 64 && at_least[k] > zero_offsets; k++) {
    double pct = 100.0 * at_least[k] / n;
    if (pct < 100.0 - threshold) {
      fprintf (fp, "         %2u+ bit-aligned: %4.1f%% (%" PRIu64 ")\n",
               k, pct, at_least[k]);
      break;
    }
    fprintf (fp, "         %2u bit aligned: %5.1f%% (%" PRIu64 ")\n",
             k, pct, at_least[k]);
  }
}

static void
print_breakdown (const struct opstat *s)
{
  uint64_t total = 0;
  bool shown[SIZE_BITS] = { false };
  char buf[64];

  for (unsigned b = 0; b < SIZE_BITS; b++)
    total += s->size_reqs[b];
  if (total == 0)
    return;
  fprintf (fp, "  Request size and alignment breakdown:\n");

  /* The most common sizes first, until THRESHOLD percent of the
   * requests are shown; the rest are summed as "other sizes".
   */
  uint64_t cutoff = total * threshold / 100, printed = 0;
  uint64_t printed_bytes = 0, all_bytes = 0;
  for (unsigned b = 0; b < SIZE_BITS; b++)
    all_bytes += s->size_bytes[b];
  while (printed < cutoff) {
    int best = -1;
    for (unsigned b = 0; b < SIZE_BITS; b++)
      if (!shown[b] && s->size_reqs[b] &&
          (best == -1 || s->size_reqs[b] > s->size_reqs[best]))
        best = b;
    if (best == -1)
      break;
    shown[best] = true;
    uint64_t n = s->size_reqs[best];
    fprintf (fp, "    %2d bits: %4.1f%% (%" PRIu64 " reqs, %s total)\n",
             best, 100.0 * n / total, n,
             human (s->size_bytes[best], buf, sizeof buf));
    print_alignment (s, best, n);
    printed += n;
    printed_bytes += s->size_bytes[best];
  }
  if (printed < total)
    fprintf (fp, "    other sizes: %4.1f%% (%" PRIu64 " reqs, %s total)\n",
             100.0 * (total - printed) / total, total - printed,
             human (all_bytes - printed_bytes, buf, sizeof buf));
  fprintf (fp, "\n");
}

static void
print_summary (void)
{
  double wall = (now_ns () - start_ns) / 1e9;
  uint64_t ops = 0, bytes = 0;
  char b1[64], b2[64], b3[64];

  /* As nbdkit counts them: cache requests are not in the total, and
   * extents and cache requests move no data.
   */
  for (size_t i = 0; i < ARRAY_SIZE (stats); i++)
    if (i != CACHE)
      ops += stats[i].ops;
  bytes = stats[READ].bytes + stats[WRITE].bytes + stats[TRIM].bytes +
    stats[ZERO].bytes;
  fprintf (fp, "total: %" PRIu64 " ops, %.6f s, %s, %s/s\n", ops, wall,
           human (bytes, b1, sizeof b1),
           (print_rate (bytes, wall, b2, sizeof b2), b2));

  for (size_t i = 0; i < ARRAY_SIZE (stats); i++) {
    const struct opstat *s = &stats[i];
    if (s->ops == 0)
      continue;
    /* Times to the microsecond: a call under 1 us counts as none. */
    double secs = (double) (s->ns / 1000) / 1e6;
    print_rate (s->bytes, secs, b2, sizeof b2);
    print_rate (s->bytes, wall, b3, sizeof b3);
    fprintf (fp, "%s: %" PRIu64 " ops, %.6f s, %s, %s/s op, %s/s total\n",
             s->name, (uint64_t) s->ops, secs, human (s->bytes, b1, sizeof b1),
             b2, b3);
    if (threshold > 0 && s->sized)
      print_breakdown (s);
  }
  fflush (fp);
}

/* ---- configuration ---- */

static void
stats_unload (void)
{
  if (fp) {
    if (start_ns)
      print_summary ();
    fclose (fp);
  }
  free (statsfile);
}

static int
stats_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, "statsfile") == 0) {
    free (statsfile);
    statsfile = nbdkit_absolute_path (value);
    return statsfile ? 0 : -1;
  }
  if (strcmp (key, "statsappend") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    statsappend = r;
    return 0;
  }
  if (strcmp (key, "statsthreshold") == 0) {
    if (nbdkit_parse_unsigned ("statsthreshold", value, &threshold) == -1)
      return -1;
    if (threshold > 100) {
      nbdkit_error ("statsthreshold: must be a percentage, 0 to 100: %s",
                    value);
      return -1;
    }
    return 0;
  }
  return next (nxdata, key, value);
}

static int
stats_config_complete (nbdkit_next_config_complete *next,
                       nbdkit_backend *nxdata)
{
  if (!statsfile) {
    nbdkit_error ("statsfile=FILE is required");
    return -1;
  }
  int fd = open (statsfile, O_CREAT | O_WRONLY | O_CLOEXEC |
                 (statsappend ? O_APPEND : O_TRUNC), 0666);
  if (fd == -1) {
    nbdkit_error ("statsfile: open: %s: %m", statsfile);
    return -1;
  }
  fp = fdopen (fd, statsappend ? "a" : "w");
  if (!fp) {
    nbdkit_error ("statsfile: fdopen: %s: %m", statsfile);
    close (fd);
    return -1;
  }
  return next (nxdata);
}

#define stats_config_help \
  "statsfile=<FILE>      (required) Where to write the summary at exit.\n" \
  "statsappend=<BOOL>    Append to the file (default: replace it).\n" \
  "statsthreshold=<PCT>  Break down this percentage of request sizes\n" \
  "                      (default 95; 0: no breakdown)."

static int
stats_get_ready (int thread_model)
{
  start_ns = now_ns ();
  return 0;
}

/* ---- requests ---- */

static int
stats_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->pread (next, buf, count, offset, flags, err);
  if (r == 0)
    record (&stats[READ], t0, count, offset);
  return r;
}

static int
stats_pwrite (nbdkit_next *next, void *handle, const void *buf,
              uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->pwrite (next, buf, count, offset, flags, err);
  if (r == 0)
    record (&stats[WRITE], t0, count, offset);
  return r;
}

static int
stats_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->trim (next, count, offset, flags, err);
  if (r == 0)
    record (&stats[TRIM], t0, count, offset);
  return r;
}

static int
stats_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->zero (next, count, offset, flags, err);
  if (r == 0)
    record (&stats[ZERO], t0, count, offset);
  return r;
}

static int
stats_extents (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags,
               struct nbdkit_extents *extents, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->extents (next, count, offset, flags, extents, err);
  if (r == 0)
    record (&stats[EXTENTS], t0, count, offset);
  return r;
}

static int
stats_cache (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->cache (next, count, offset, flags, err);
  if (r == 0)
    record (&stats[CACHE], t0, count, offset);
  return r;
}

static int
stats_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  uint64_t t0 = now_ns ();
  int r = next->flush (next, flags, err);
  if (r == 0)
    record (&stats[FLUSH], t0, 0, 0);
  return r;
}

static struct nbdkit_filter filter = {
  .name = "stats",
  .longname = "nbdkit stats filter",
  .unload = stats_unload,
  .config = stats_config,
  .config_complete = stats_config_complete,
  .config_help = stats_config_help,
  .get_ready = stats_get_ready,
  .pread = stats_pread,
  .pwrite = stats_pwrite,
  .trim = stats_trim,
  .zero = stats_zero,
  .extents = stats_extents,
  .cache = stats_cache,
  .flush = stats_flush,
};

NBDKIT_REGISTER_FILTER (filter)
