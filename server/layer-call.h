/* nbdkit server: what every call into a layer does around it, shared
 * by backend.c (the calls) and context.c (opening and closing):
 * fire layer_call_start/done, take the thread model's request lock on
 * a connection's thread, and name the layer in the log.  Only those
 * two files include this.
 */
#ifndef NBDKIT_LAYER_CALL_H
#define NBDKIT_LAYER_CALL_H

#include "internal.h"

/* The cookie of the request this thread is running, 0 outside one
 * (backend.c, set by layer_set_cookie).
 */
extern __thread uint64_t layer_call_cookie;

static inline uint64_t
conn_id (const struct connection *conn)
{
  return conn ? conn->id : 0;
}

static inline void
call_start (const struct connection *conn, const struct layer *l,
            const char *cb, uint64_t offset, uint64_t count)
{
  if (NBDKIT_LAYER_CALL_START_ENABLED ())
    NBDKIT_LAYER_CALL_START (conn_id (conn), probe_u64 (layer_call_cookie),
                             (uint64_t) l->depth, l->name, cb, offset,
                             count);
}

static inline void
call_done (const struct connection *conn, const struct layer *l,
           const char *cb, int64_t err)
{
  if (NBDKIT_LAYER_CALL_DONE_ENABLED ())
    NBDKIT_LAYER_CALL_DONE (conn_id (conn), probe_u64 (layer_call_cookie),
                            (uint64_t) l->depth, l->name, cb, err);
}

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
