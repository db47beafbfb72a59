/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the counters behind --metrics and their text.
 *
 * Data enters from the request path (metrics_request_done: relaxed
 * atomic adds on the connection's own record, no lock) and from the
 * connection's life (open, ready, close, handshake failures, TLS
 * sessions: under metrics_lock, off the request path).  A closing
 * connection's counts are folded into its export's totals, so a scrape
 * (metrics-http.c, under metrics_lock) sums the totals and the open
 * connections and every request is counted exactly once.  Text leaves
 * as OpenMetrics 1.0 or the Prometheus text format 0.0.4.
 *
 * Plugins and filters add families of their own through the public
 * nbdkit_metric_* calls (the end of the counters' part below).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "metrics.h"
#include "metrics-int.h"
#include "protocol.h"
#include "include/array-size.h"

/* Commands as labelled; an unknown command type counts as "other". */
static const char *const command_names[M_NCMD] = {
  "read", "write", "zero", "trim", "flush", "block_status", "cache", "other",
};

/* The errnos a request can end with once mapped for the reply
 * (tx_layer_error_for_reply); anything else counts as "other".
 */
static const int errnos[M_NERR - 1] = {
  EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ENOTSUP, ESHUTDOWN,
};
static const char *const errno_names[M_NERR] = {
  "EPERM", "EIO", "ENOMEM", "EINVAL", "ENOSPC", "EOVERFLOW", "ENOTSUP",
  "ESHUTDOWN", "other",
};

/* How many label sets of each kind are kept: a client picks export
 * names and a failing peer picks nothing, but neither may make a scrape
 * grow without bound.  Beyond the limit they share one entry.
 */
#define MAX_EXPORTS 256
#define MAX_REASONS 64
#define MAX_TLS 32
#define MAX_LISTED_CONNS 256
#define OVERFLOW_LABEL "(other)"

struct metrics_conn {
  struct metrics_conn *prev, *next;     /* the live list, under the lock */
  uint64_t id;
  char peer[128];
  struct connection *conn;              /* for its requests read */
  struct export_totals *exp;            /* NULL until the handshake is done */
  bool handshake_ended;                 /* counted in handshakes */
  struct counts c;                      /* relaxed atomics */
};

struct export_totals {
  char *name;
  size_t index;                         /* in exports[] */
  struct counts c;                      /* closed connections', locked */
};

struct named_count {
  char *a, *b;                          /* label values */
  uint64_t n;
};
DEFINE_VECTOR_TYPE (named_counts, struct named_count);

/* Everything below is guarded by metrics_lock, taken alone (never
 * under a connection's locks, never around a call out of this file).
 */
static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static bool enabled;                    /* --metrics given: fixed at start */
static struct metrics_conn *live;
static struct export_totals *exports[MAX_EXPORTS];
static size_t n_exports;
static uint64_t opened, closed, handshakes;
static named_counts fail_reasons, tls_sessions;
static struct nbdkit_metric *module_metrics, **module_metrics_tail =
  &module_metrics;
static size_t n_module_metrics;
static time_t start_time;

void
metrics_enable (void)
{
  enabled = true;
  start_time = time (NULL);
}

/* ---- the request path ---- */

static unsigned
command_index (uint16_t type)
{
  switch (type) {
  case NBD_CMD_READ: return 0;
  case NBD_CMD_WRITE: return 1;
  case NBD_CMD_WRITE_ZEROES: return 2;
  case NBD_CMD_TRIM: return 3;
  case NBD_CMD_FLUSH: return 4;
  case NBD_CMD_BLOCK_STATUS: return 5;
  case NBD_CMD_CACHE: return 6;
  default: return 7;
  }
}

static unsigned
errno_index (int err)
{
  for (unsigned i = 0; i < M_NERR - 1; i++)
    if (errnos[i] == err)
      return i;
  return M_NERR - 1;
}

/* The smallest bucket j whose bound, 2^(j-20) seconds, is at least NS
 * nanoseconds; M_NBUCKETS - 1 is +Inf.  Compared in units of 2^-20 ns
 * so that every bound is an integer (10^9 << j).
 */
static unsigned
bucket_index (uint64_t ns)
{
  if (ns >= UINT64_C (1) << 43)         /* over 2^4 s anyway */
    return M_NBUCKETS - 1;
  uint64_t q = ((ns << 20) + 999999999) / 1000000000;  /* ceil */
  unsigned j = q <= 1 ? 0 : 64 - __builtin_clzll (q - 1);
  return j < M_NBUCKETS - 1 ? j : M_NBUCKETS - 1;
}

#define ADD(field, v) __atomic_fetch_add (&(field), (v), __ATOMIC_RELAXED)
#define GET(field) __atomic_load_n (&(field), __ATOMIC_RELAXED)

void
metrics_request_done (struct metrics_conn *m, uint16_t type, int err,
                      uint64_t bytes, uint64_t start_ns)
{
  struct cmd_counts *c = &m->c.cmd[command_index (type)];
  uint64_t ns = start_ns ? now_ns () - start_ns : 0;

  ADD (c->requests, 1);
  ADD (c->bytes, bytes);
  ADD (c->sum_ns, ns);
  ADD (c->buckets[bucket_index (ns)], 1);
  if (err)
    ADD (c->errors[errno_index (err)], 1);
}

/* ---- a connection's life ---- */

static void
add_counts (struct counts *to, struct counts *from)
{
  for (unsigned i = 0; i < M_NCMD; i++) {
    struct cmd_counts *t = &to->cmd[i], *f = &from->cmd[i];
    t->requests += GET (f->requests);
    t->bytes += GET (f->bytes);
    t->sum_ns += GET (f->sum_ns);
    for (unsigned j = 0; j < M_NBUCKETS; j++)
      t->buckets[j] += GET (f->buckets[j]);
    for (unsigned j = 0; j < M_NERR; j++)
      t->errors[j] += GET (f->errors[j]);
  }
}

struct metrics_conn *
metrics_conn_open (uint64_t id, const char *peer, struct connection *conn)
{
  if (!enabled)
    return NULL;
  struct metrics_conn *m = calloc (1, sizeof *m);
  if (!m)
    return NULL;
  m->id = id;
  m->conn = conn;
  snprintf (m->peer, sizeof m->peer, "%s", peer);
  LOCK_FOR_SCOPE (&metrics_lock);
  m->next = live;
  if (live)
    live->prev = m;
  live = m;
  opened++;
  return m;
}

static struct export_totals *
find_export (const char *name)
{
  for (size_t i = 0; i < n_exports; i++)
    if (strcmp (exports[i]->name, name) == 0)
      return exports[i];
  if (n_exports == MAX_EXPORTS - 1)
    name = OVERFLOW_LABEL;              /* the last slot is shared */
  else if (n_exports == MAX_EXPORTS)
    return find_export (OVERFLOW_LABEL);
  struct export_totals *e = calloc (1, sizeof *e);
  if (!e || !(e->name = strdup (name))) {
    free (e);
    return NULL;
  }
  e->index = n_exports;
  exports[n_exports++] = e;
  return e;
}

void
metrics_conn_ready (struct metrics_conn *m, const char *exportname)
{
  if (!m)
    return;
  LOCK_FOR_SCOPE (&metrics_lock);
  if (!m->handshake_ended)
    handshakes++;
  m->handshake_ended = true;
  /* Released: a module's counter reads it without the lock. */
  __atomic_store_n (&m->exp, find_export (exportname ? exportname : ""),
                    __ATOMIC_RELEASE);
}

void
metrics_conn_close (struct metrics_conn *m)
{
  if (!m)
    return;
  {
    LOCK_FOR_SCOPE (&metrics_lock);
    if (m->exp)
      add_counts (&m->exp->c, &m->c);
    if (m->prev)
      m->prev->next = m->next;
    else
      live = m->next;
    if (m->next)
      m->next->prev = m->prev;
    closed++;
  }
  free (m);
}

/* Count one more for the label pair (A, B) in V. */
static void
count_named (named_counts *v, size_t max, const char *a, const char *b)
{
  for (size_t i = 0; i < v->len; i++)
    if (strcmp (v->ptr[i].a, a) == 0 && strcmp (v->ptr[i].b, b) == 0) {
      v->ptr[i].n++;
      return;
    }
  if (v->len >= max - 1) {
    if (strcmp (a, OVERFLOW_LABEL) != 0 || strcmp (b, OVERFLOW_LABEL) != 0)
      count_named (v, max + 1, OVERFLOW_LABEL, OVERFLOW_LABEL);
    return;
  }
  struct named_count n = { .a = strdup (a), .b = strdup (b), .n = 1 };
  if (!n.a || !n.b || named_counts_append (v, n) == -1) {
    free (n.a);
    free (n.b);
  }
}

void
metrics_handshake_fail (struct metrics_conn *m, const char *reason)
{
  if (!m)
    return;
  /* A negotiation counts once, by the first reason it failed for. */
  LOCK_FOR_SCOPE (&metrics_lock);
  if (m->handshake_ended)
    return;
  m->handshake_ended = true;
  handshakes++;
  count_named (&fail_reasons, MAX_REASONS, reason, "");
}

void
metrics_tls_session (const char *version, const char *cipher)
{
  if (!enabled)
    return;
  LOCK_FOR_SCOPE (&metrics_lock);
  count_named (&tls_sessions, MAX_TLS, version ? version : "unknown",
               cipher ? cipher : "unknown");
}

/* ---- modules' own counters (nbdkit_metric_*) ---- */

/* A module's family holds one cell per (export, label value) pair seen,
 * on a list that only grows: cells are appended under metrics_lock and
 * published with a release store, so that an add finds its cell with
 * acquire loads and counts with a relaxed add, without the lock.  The
 * label values a module gives are bounded (a web server picks the HTTP
 * statuses curl sees), and so are the exports.
 */
#define MAX_MODULE_METRICS 64
#define MAX_LABEL_VALUES 32
#define NONE_LABEL "(none)"             /* outside any connection */

struct metric_cell {
  struct metric_cell *next;             /* acquire/release */
  struct export_totals *exp;            /* NULL: NONE_LABEL */
  const char *value;                    /* "" without a label */
  uint64_t n;                           /* relaxed atomics */
};

struct nbdkit_metric {
  struct nbdkit_metric *next;           /* module_metrics, locked */
  char *name;                           /* nbdkit_MODULE_NAME */
  char *help;
  char *label;                          /* NULL: no extra label */
  struct metric_cell *cells, **tail;
  size_t n_values;                      /* distinct label values */
};

/* The families the server writes itself: a module's may not take
 * their names.
 */
static const char *const server_families[] = {
  "nbdkit_requests", "nbdkit_request_bytes", "nbdkit_request_errors",
  "nbdkit_request_duration_seconds", "nbdkit_requests_in_flight",
  "nbdkit_connections_opened", "nbdkit_connections_closed",
  "nbdkit_connections", "nbdkit_connection_requests",
  "nbdkit_connection_bytes", "nbdkit_handshakes",
  "nbdkit_handshake_failures", "nbdkit_tls_sessions",
  "nbdkit_start_time_seconds", "nbdkit_build",
};

static bool
is_lower_snake (const char *s)
{
  if (!s || !*s || strlen (s) > 64 || s[0] == '_')
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
      return false;
  return true;
}

/* A help text goes into a HELP line as it is: one line, and none of the
 * characters that the two formats would need escaped.
 */
static bool
is_plain_line (const char *s)
{
  for (; *s; s++)
    if ((unsigned char) *s < 0x20 || *s == 0x7f || *s == '\\' || *s == '"')
      return false;
  return true;
}

static bool
suffix_at (const char *s, const char *suffix)
{
  size_t n = strlen (s), k = strlen (suffix);
  return n >= k && strcmp (s + n - k, suffix) == 0;
}

NBDKIT_DLL_PUBLIC struct nbdkit_metric *
nbdkit_metric_counter (const char *name, const char *help, const char *label)
{
  const struct config *cfg = server_config ();
  if (!cfg || !cfg->metrics)
    return NULL;
  const char *module = log_layer_of_caller (__builtin_return_address (0));
  if (!module) {
    nbdkit_error ("nbdkit_metric_counter: not called by a plugin or filter");
    return NULL;
  }
  if (!is_lower_snake (name) || suffix_at (name, "_total")) {
    nbdkit_error ("nbdkit_metric_counter: bad name \"%s\": [a-z_]+, "
                  "without _total", name ? name : "(null)");
    return NULL;
  }
  if (label && (!is_lower_snake (label) || strcmp (label, "export") == 0)) {
    nbdkit_error ("nbdkit_metric_counter: bad label \"%s\": [a-z_]+, "
                  "not \"export\"", label);
    return NULL;
  }
  if (!help)
    help = "";
  if (!is_plain_line (help)) {
    nbdkit_error ("nbdkit_metric_counter: %s: the help must be one line, "
                  "without \\ or \"", name);
    return NULL;
  }

  /* nbdkit_MODULE_NAME, the module's name in lower case with anything
   * but letters and digits as "_": "retry-request" -> retry_request.
   */
  char *full;
  if (asprintf (&full, "nbdkit_%s_%s", module, name) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  for (char *p = full + 7; *p; p++)
    if (*p >= 'A' && *p <= 'Z')
      *p += 'a' - 'A';
    else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
      *p = '_';
  for (size_t i = 0; i < ARRAY_SIZE (server_families); i++)
    if (strcmp (full, server_families[i]) == 0) {
      nbdkit_error ("nbdkit_metric_counter: %s is the server's", full);
      free (full);
      return NULL;
    }

  LOCK_FOR_SCOPE (&metrics_lock);
  /* The same counter asked for twice (a filter twice in the chain, or a
   * plugin's load and get_ready) is one family.
   */
  for (struct nbdkit_metric *m = module_metrics; m; m = m->next)
    if (strcmp (m->name, full) == 0) {
      free (full);
      if (label ? m->label && strcmp (m->label, label) == 0 : !m->label)
        return m;
      nbdkit_error ("nbdkit_metric_counter: %s declared again with "
                    "another label", m->name);
      return NULL;
    }
  if (n_module_metrics >= MAX_MODULE_METRICS) {
    nbdkit_error ("nbdkit_metric_counter: %s: more than %d counters",
                  full, MAX_MODULE_METRICS);
    free (full);
    return NULL;
  }
  struct nbdkit_metric *m = calloc (1, sizeof *m);
  if (!m || !(m->help = strdup (help)) ||
      (label && !(m->label = strdup (label)))) {
    nbdkit_error ("malloc: %m");
    if (m)
      free (m->help);
    free (m);
    free (full);
    return NULL;
  }
  m->name = full;
  m->tail = &m->cells;
  *module_metrics_tail = m;
  module_metrics_tail = &m->next;
  n_module_metrics++;
  return m;
}

/* The cell of (EXP, VALUE), made under the lock if it is new, or NULL
 * if out of memory.
 */
static struct metric_cell *
find_cell (struct nbdkit_metric *m, struct export_totals *exp,
           const char *value)
{
  for (struct metric_cell *c = __atomic_load_n (&m->cells, __ATOMIC_ACQUIRE);
       c; c = __atomic_load_n (&c->next, __ATOMIC_ACQUIRE))
    if (c->exp == exp && strcmp (c->value, value) == 0)
      return c;
  return NULL;
}

static struct metric_cell *
new_cell (struct nbdkit_metric *m, struct export_totals *exp,
          const char *value)
{
  struct metric_cell *c;
  bool known = false;
  for (c = m->cells; c && !known; c = c->next)
    known = strcmp (c->value, value) == 0;
  if (!known && m->n_values >= MAX_LABEL_VALUES - 1 &&
      strcmp (value, OVERFLOW_LABEL) != 0) {
    /* The last value is shared by all the later ones. */
    value = OVERFLOW_LABEL;
    for (c = m->cells; c && !known; c = c->next)
      known = strcmp (c->value, value) == 0;
  }
  if ((c = find_cell (m, exp, value)) != NULL)
    return c;
  c = calloc (1, sizeof *c);
  if (!c || !(c->value = strdup (value))) {
    free (c);
    return NULL;
  }
  c->exp = exp;
  m->n_values += !known;
  __atomic_store_n (m->tail, c, __ATOMIC_RELEASE);
  m->tail = &c->next;
  return c;
}

/* Count N for VALUE in M on export EXP (NULL: outside any
 * connection).
 */
static void
metric_count (struct nbdkit_metric *m, struct export_totals *exp,
              const char *value, uint64_t n)
{
  if (!m->label || !value)
    value = "";
  struct metric_cell *c = find_cell (m, exp, value);
  if (!c) {
    LOCK_FOR_SCOPE (&metrics_lock);
    c = new_cell (m, exp, value);
    if (!c)
      return;
  }
  ADD (c->n, n);
}

/* The export of connection MC, under metrics_lock.  During the
 * handshake (a module's open) it is the one the client asked for,
 * which the handshake set before calling the layers and does not
 * change while they run.  NULL if out of memory.
 */
static struct export_totals *
conn_export (struct metrics_conn *mc)
{
  if (mc->exp)
    return mc->exp;
  const char *name = mc->conn->nego.exportname;
  return find_export (name ? name : "");
}

NBDKIT_DLL_PUBLIC void
nbdkit_metric_add (struct nbdkit_metric *m, const char *label_value,
                   uint64_t n)
{
  if (!m || n == 0)
    return;
  struct connection *conn = conn_current ();
  struct export_totals *exp = NULL;
  if (conn) {
    struct metrics_conn *mc = conn->metrics;
    if (!mc)
      return;               /* no record (out of memory): not counted */
    exp = __atomic_load_n (&mc->exp, __ATOMIC_ACQUIRE);
    if (!exp) {
      LOCK_FOR_SCOPE (&metrics_lock);
      exp = conn_export (mc);
      if (!exp)
        return;
    }
  }
  metric_count (m, exp, label_value, n);
}

NBDKIT_DLL_PUBLIC void
nbdkit_metric_add_conn (struct nbdkit_metric *m, uint64_t connection_id,
                        const char *label_value, uint64_t n)
{
  if (!m || n == 0)
    return;
  struct connection *conn = conn_current ();
  if (connection_id == 0 || (conn && conn->id == connection_id)) {
    nbdkit_metric_add (m, label_value, n);
    return;
  }
  /* Another thread's connection, found on the live list (exports are
   * never freed, connections are).  One that has closed since counts
   * as outside any connection.
   */
  struct export_totals *exp = NULL;
  {
    LOCK_FOR_SCOPE (&metrics_lock);
    struct metrics_conn *mc;
    for (mc = live; mc && mc->id != connection_id; mc = mc->next)
      ;
    if (mc && !(exp = conn_export (mc)))
      return;
  }
  metric_count (m, exp, label_value, n);
}

/* ---- the text ---- */

/* Write S as a label value: UTF-8 as it is, with \, " and newline
 * escaped as both formats say; bytes that are not UTF-8 (an export name
 * is whatever the client sent) and other control characters become
 * '?', since a scraper rejects the whole page for one bad byte.
 */
static void
put_label_value (FILE *fp, const char *s)
{
  const unsigned char *p = (const unsigned char *) s;
  while (*p) {
    unsigned n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1
      : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : 4;
    bool ok = n < 4 && (n == 0 || *p >= 0xc2);
    for (unsigned i = 1; ok && i <= n; i++)
      ok = (p[i] & 0xc0) == 0x80;
    if (!ok) {
      fputc ('?', fp);
      p++;
    }
    else if (*p == '\\')
      fputs ("\\\\", fp), p++;
    else if (*p == '"')
      fputs ("\\\"", fp), p++;
    else if (*p == '\n')
      fputs ("\\n", fp), p++;
    else if (*p < 0x20 || *p == 0x7f)
      fputc ('?', fp), p++;
    else {
      fwrite (p, 1, n + 1, fp);
      p += n + 1;
    }
  }
}

/* One sample: NAME, then up to three label pairs (a NULL key ends
 * them), then the value.
 */
static void
sample (FILE *fp, const char *name, const char *suffix,
        const char *k1, const char *v1, const char *k2, const char *v2,
        const char *k3, const char *v3, uint64_t value)
{
  const char *k[3] = { k1, k2, k3 }, *v[3] = { v1, v2, v3 };
  fprintf (fp, "%s%s", name, suffix);
  for (int i = 0; i < 3 && k[i]; i++) {
    fprintf (fp, "%s%s=\"", i ? "," : "{", k[i]);
    put_label_value (fp, v[i]);
    fputc ('"', fp);
  }
  fprintf (fp, "%s %" PRIu64 "\n", k1 ? "}" : "", value);
}

/* A family's metadata.  OpenMetrics names the family without _total or
 * _info and has UNIT lines; the Prometheus format names it as its
 * samples are named and has no info type.
 */
static void
family (FILE *fp, bool om, const char *name, const char *type,
        const char *unit, const char *help)
{
  const char *suffix = "";
  if (!om && strcmp (type, "counter") == 0)
    suffix = "_total";
  else if (!om && strcmp (type, "info") == 0) {
    suffix = "_info";
    type = "gauge";
  }
  fprintf (fp, "# HELP %s%s %s\n", name, suffix, help);
  fprintf (fp, "# TYPE %s%s %s\n", name, suffix, type);
  if (om && unit)
    fprintf (fp, "# UNIT %s %s\n", name, unit);
}

/* A family of one sample without labels. */
static void
single (FILE *fp, bool om, const char *name, const char *type,
        const char *unit, const char *help, uint64_t value)
{
  family (fp, om, name, type, unit, help);
  sample (fp, name, strcmp (type, "counter") == 0 ? "_total" : "",
          NULL, NULL, NULL, NULL, NULL, NULL, value);
}

/* A bucket's bound, 2^(j-20) seconds, as the le label: "0.5", "1.0". */
static void
bucket_label (char *buf, size_t n, unsigned j)
{
  if (j == M_NBUCKETS - 1)
    snprintf (buf, n, "+Inf");
  else if (j >= 20)
    snprintf (buf, n, "%u.0", 1u << (j - 20));
  else
    snprintf (buf, n, "%.17g", 1.0 / (double) (1u << (20 - j)));
}

static void
put_export_families (FILE *fp, bool om, struct counts *sums)
{
  for (int f = 0; f < 2; f++) {
    const char *name = f ? "nbdkit_request_bytes" : "nbdkit_requests";
    family (fp, om, name, "counter", f ? "bytes" : NULL,
            f ? "Data bytes read or written by requests that succeeded."
            : "Requests answered, by export and command.");
    for (size_t e = 0; e < n_exports; e++)
      for (unsigned i = 0; i < M_NCMD; i++)
        sample (fp, name, "_total",
                "export", exports[e]->name, "command", command_names[i],
                NULL, NULL,
                f ? sums[e].cmd[i].bytes : sums[e].cmd[i].requests);
  }
  family (fp, om, "nbdkit_request_errors", "counter", NULL,
          "Requests answered with an error, by errno.");
  for (size_t e = 0; e < n_exports; e++)
    for (unsigned i = 0; i < M_NCMD; i++)
      for (unsigned j = 0; j < M_NERR; j++)
        if (sums[e].cmd[i].errors[j])
          sample (fp, "nbdkit_request_errors", "_total",
                  "export", exports[e]->name, "command", command_names[i],
                  "errno", errno_names[j], sums[e].cmd[i].errors[j]);
  family (fp, om, "nbdkit_request_duration_seconds", "histogram", "seconds",
          "Time from reading a request to answering it.");
  for (size_t e = 0; e < n_exports; e++)
    for (unsigned i = 0; i < M_NCMD; i++) {
      struct cmd_counts *c = &sums[e].cmd[i];
      const char *name = exports[e]->name, *cmd = command_names[i];
      uint64_t cum = 0;
      for (unsigned j = 0; j < M_NBUCKETS; j++) {
        char le[32];
        bucket_label (le, sizeof le, j);
        cum += c->buckets[j];
        sample (fp, "nbdkit_request_duration_seconds", "_bucket",
                "export", name, "command", cmd, "le", le, cum);
      }
      sample (fp, "nbdkit_request_duration_seconds", "_count",
              "export", name, "command", cmd, NULL, NULL, cum);
      fprintf (fp, "nbdkit_request_duration_seconds_sum{export=\"");
      put_label_value (fp, name);
      fprintf (fp, "\",command=\"%s\"} %" PRIu64 ".%09" PRIu64 "\n", cmd,
               c->sum_ns / 1000000000, c->sum_ns % 1000000000);
    }
}

/* A live connection's requests (or BYTES) over all commands. */
static uint64_t
conn_total (struct metrics_conn *m, bool bytes)
{
  uint64_t n = 0;
  for (unsigned i = 0; i < M_NCMD; i++)
    n += bytes ? GET (m->c.cmd[i].bytes) : GET (m->c.cmd[i].requests);
  return n;
}

static void
put_connection_families (FILE *fp, bool om)
{
  /* Requests read but not yet answered: answered is read first, so the
   * difference is never negative.
   */
  uint64_t in_flight = 0;
  for (struct metrics_conn *m = live; m; m = m->next) {
    uint64_t done = conn_total (m, false);
    uint64_t read = m->conn->requests;
    in_flight += read > done ? read - done : 0;
  }
  single (fp, om, "nbdkit_requests_in_flight", "gauge", NULL,
          "Requests read from clients and not yet answered.", in_flight);
  single (fp, om, "nbdkit_connections_opened", "counter", NULL,
          "Connections accepted.", opened);
  single (fp, om, "nbdkit_connections_closed", "counter", NULL,
          "Connections closed.", closed);
  single (fp, om, "nbdkit_connections", "gauge", NULL,
          "Connections open now.", opened - closed);

  /* The newest MAX_LISTED_CONNS open connections (the live list is
   * newest first), listed oldest first.
   */
  struct metrics_conn *listed[MAX_LISTED_CONNS];
  size_t n = 0;
  for (struct metrics_conn *m = live; m && n < MAX_LISTED_CONNS; m = m->next)
    listed[n++] = m;
  static const char *const what[2][3] = {
    { "nbdkit_connection_requests", NULL,
      "Requests answered on an open connection." },
    { "nbdkit_connection_bytes", "bytes",
      "Data bytes moved by an open connection's requests." },
  };
  for (int f = 0; f < 2; f++) {
    family (fp, om, what[f][0], "counter", what[f][1], what[f][2]);
    for (size_t i = n; i-- > 0;) {
      struct metrics_conn *m = listed[i];
      char id[32];
      snprintf (id, sizeof id, "%" PRIu64, m->id);
      sample (fp, what[f][0], "_total", "id", id,
              "export", m->exp ? m->exp->name : "", "peer", m->peer,
              conn_total (m, f == 1));
    }
  }
}

static void
put_server_families (FILE *fp, bool om)
{
  single (fp, om, "nbdkit_handshakes", "counter", NULL,
          "Negotiations that ended, in success or failure.", handshakes);
  family (fp, om, "nbdkit_handshake_failures", "counter", NULL,
          "Negotiations that failed, by the handshake_fail probe's reason.");
  for (size_t i = 0; i < fail_reasons.len; i++)
    sample (fp, "nbdkit_handshake_failures", "_total",
            "reason", fail_reasons.ptr[i].a, NULL, NULL, NULL, NULL,
            fail_reasons.ptr[i].n);
  family (fp, om, "nbdkit_tls_sessions", "counter", NULL,
          "TLS sessions set up, by protocol version and cipher.");
  for (size_t i = 0; i < tls_sessions.len; i++)
    sample (fp, "nbdkit_tls_sessions", "_total",
            "version", tls_sessions.ptr[i].a,
            "cipher", tls_sessions.ptr[i].b, NULL, NULL,
            tls_sessions.ptr[i].n);
  for (struct nbdkit_metric *m = module_metrics; m; m = m->next) {
    family (fp, om, m->name, "counter", NULL, m->help);
    for (struct metric_cell *c = m->cells; c; c = c->next)
      sample (fp, m->name, "_total",
              "export", c->exp ? c->exp->name : NONE_LABEL,
              m->label, c->value, NULL, NULL, GET (c->n));
  }
  single (fp, om, "nbdkit_start_time_seconds", "gauge", "seconds",
          "When the server started, in seconds since the Unix epoch.",
          (uint64_t) start_time);
  family (fp, om, "nbdkit_build", "info", NULL, "The server's version.");
  sample (fp, "nbdkit_build", "_info", "version", PACKAGE_VERSION,
          NULL, NULL, NULL, NULL, 1);
}

char *
metrics_text (bool om, size_t *len)
{
  char *buf = NULL;
  FILE *fp = open_memstream (&buf, len);
  if (!fp)
    return NULL;
  {
    LOCK_FOR_SCOPE (&metrics_lock);
    /* Each export's closed connections plus its open ones. */
    struct counts *sums = calloc (n_exports ? n_exports : 1, sizeof *sums);
    if (sums) {
      for (size_t e = 0; e < n_exports; e++)
        sums[e] = exports[e]->c;
      for (struct metrics_conn *m = live; m; m = m->next)
        if (m->exp)
          add_counts (&sums[m->exp->index], &m->c);
      put_export_families (fp, om, sums);
      free (sums);
    }
    put_connection_families (fp, om);
    put_server_families (fp, om);
  }
  if (om)
    fputs ("# EOF\n", fp);
  if (fclose (fp) != 0) {
    free (buf);
    return NULL;
  }
  return buf;
}
