/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: what every call into a layer does around it, shared
 * by backend.c (the calls) and context.c (opening and closing):
 * fire layer_call_start/done, take the thread model's request lock on
 * a connection's thread, and name the layer in the log.  Only those
 * two files include this.
 */
#ifndef NBDKIT_LAYER_CALL_H
#define NBDKIT_LAYER_CALL_H

#include "internal.h"

/* Fire layer_call_start and layer_call_done (backend.c).  Each is one
 * out-of-line function, so each probe has one site whose arguments sit
 * in the same places every time: perf refuses a probe whose sites
 * disagree (a site inlined with a constant offset records "$0").
 */
extern void layer_trace_start (const struct connection *conn,
                               const struct layer *l, const char *cb,
                               uint64_t offset, uint64_t count);
extern void layer_trace_done (const struct connection *conn,
                              const struct layer *l, const char *cb,
                              int64_t err);

/* Control calls answer -1 for failure with no errno of their own. */
static inline int64_t
ctl_err (int64_t r)
{
  return r == -1 ? EIO : 0;
}

/* Around one call into a layer: the request lock if this thread serves
 * a connection, the layer's name in the log.  Returns the name to put
 * back.
 */
struct call_scope {
  const char *outer_name;
  bool locked;
};

static inline struct call_scope
enter (const struct layer *l)
{
  struct call_scope s = { .locked = conn_current () != NULL };
  if (s.locked)
    layer_requests_lock ();
  s.outer_name = log_swap_layer_name (l->name);
  return s;
}

static inline void
leave (struct call_scope s)
{
  log_swap_layer_name (s.outer_name);
  if (s.locked)
    layer_requests_unlock ();
}

#endif /* NBDKIT_LAYER_CALL_H */
