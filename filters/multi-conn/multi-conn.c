/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The multi-conn filter: decide whether multi-conn is advertised, and
 * make it true for a plugin that lacks it by turning a flush on one
 * connection into a flush on every connection that may hold unflushed
 * or stale data ("emulate").  Dirty tracking skips flushes that
 * cannot matter.
 *
 * Connections are kept in groups: one group for all of them, or one
 * per export name with multi-conn-exportname=true.  A connection joins
 * its group in .prepare and leaves it in .finalize; `lock' guards the
 * group list and each group's member list, and is held across a
 * fan-out so that no member is finalized while it is being flushed.
 * The dirty bits are atomics, set by requests without the lock: the
 * NBD protocol leaves unspecified what a flush does for requests still
 * in flight when it was sent, so no ordering beyond atomicity is
 * needed.
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "vector.h"

enum mc_mode { MODE_AUTO, MODE_EMULATE, MODE_PLUGIN, MODE_DISABLE,
               MODE_UNSAFE };
enum track_mode { TRACK_CONNECTION, TRACK_FAST, TRACK_OFF };

/* Set by config (mode also by get_ready); read-only afterwards. */
static enum mc_mode mode = MODE_AUTO;
static enum track_mode track = TRACK_CONNECTION;
static bool by_name = false;

/* What a connection may hold that a flush would settle. */
#define DIRTY_WRITE 1           /* written since its last flush */
#define DIRTY_READ  2           /* read, so may cache stale data */

struct group;

struct handle {
  nbdkit_next *next;            /* set in .prepare */
  enum mc_mode mode;            /* never MODE_AUTO after .prepare */
  atomic_uint dirty;            /* DIRTY_* bits */
  char *name;                   /* export name, if by_name */
  struct group *group;          /* NULL unless prepared */
};

DEFINE_VECTOR_TYPE (handle_list, struct handle *);

struct group {
  handle_list conns;
  char *name;                   /* export name, or NULL */
  atomic_bool dirty;            /* any member written since a flush */
};

DEFINE_VECTOR_TYPE (group_list, struct group *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static group_list groups = empty_vector;

static int
multi_conn_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                   const char *key, const char *value)
{
  if (strcmp (key, "multi-conn-mode") == 0) {
    if (strcmp (value, "auto") == 0)
      mode = MODE_AUTO;
    else if (strcmp (value, "emulate") == 0)
      mode = MODE_EMULATE;
    else if (strcmp (value, "plugin") == 0)
      mode = MODE_PLUGIN;
    else if (strcmp (value, "disable") == 0)
      mode = MODE_DISABLE;
    else if (strcmp (value, "unsafe") == 0)
      mode = MODE_UNSAFE;
    else {
      nbdkit_error ("%s: unknown mode '%s' (expecting auto, emulate, "
                    "plugin, disable or unsafe)", key, value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "multi-conn-track-dirty") == 0) {
    if (strcmp (value, "connection") == 0 || strcmp (value, "conn") == 0)
      track = TRACK_CONNECTION;
    else if (strcmp (value, "fast") == 0)
      track = TRACK_FAST;
    else if (strcmp (value, "off") == 0)
      track = TRACK_OFF;
    else {
      nbdkit_error ("%s: unknown level '%s' (expecting connection, "
                    "fast or off)", key, value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "multi-conn-exportname") == 0 ||
      strcmp (key, "multi-conn-export-name") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    by_name = r;
    return 0;
  }
  return next (nxdata, key, value);
}

#define multi_conn_config_help \
  "multi-conn-mode=<MODE>         auto (default), emulate, plugin,\n" \
  "                               disable or unsafe.\n" \
  "multi-conn-track-dirty=<LEVEL> connection (default), fast or off.\n" \
  "multi-conn-exportname=<BOOL>   Flush only connections to the same\n" \
  "                               export (default false)."

/* One connection at a time needs no flush consistency. */
static int
multi_conn_get_ready (int thread_model)
{
  if (mode == MODE_AUTO &&
      thread_model == NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS)
    mode = MODE_DISABLE;
  return 0;
}

static void
multi_conn_unload (void)
{
  /* Every connection has left its group by now. */
  group_list_reset (&groups);
}

static void *
multi_conn_open (nbdkit_next_open *next, nbdkit_context *nxdata,
                 int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (next (nxdata, readonly, exportname) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  if (by_name) {
    h->name = strdup (exportname);
    if (h->name == NULL) {
      nbdkit_error ("strdup: %m");
      free (h);
      return NULL;
    }
  }
  return h;
}

static void
multi_conn_close (void *handle)
{
  struct handle *h = handle;

  free (h->name);
  free (h);
}

/* The group of connections to export NAME (NULL: the only group),
 * created if need be.  Called with the lock held.
 */
static struct group *
find_group (const char *name)
{
  struct group *g;
  size_t i;

  for (i = 0; i < groups.len; i++) {
    g = groups.ptr[i];
    if (name == NULL || strcmp (g->name, name) == 0)
      return g;
  }
  g = calloc (1, sizeof *g);
  if (g == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  if (name && (g->name = strdup (name)) == NULL) {
    nbdkit_error ("strdup: %m");
    free (g);
    return NULL;
  }
  if (group_list_append (&groups, g) == -1) {
    nbdkit_error ("realloc: %m");
    free (g->name);
    free (g);
    return NULL;
  }
  return g;
}

/* Drop G if it has no members.  Called with the lock held. */
static void
drop_group_if_empty (struct group *g)
{
  size_t i;

  if (g->conns.len > 0)
    return;
  for (i = 0; i < groups.len; i++) {
    if (groups.ptr[i] == g) {
      group_list_remove (&groups, i);
      break;
    }
  }
  handle_list_reset (&g->conns);
  free (g->name);
  free (g);
}

static int
multi_conn_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  struct group *g;
  int r;

  h->next = next;
  h->mode = mode;
  if (mode == MODE_AUTO) {
    r = next->can_multi_conn (next);
    if (r == -1)
      return -1;
    h->mode = r ? MODE_PLUGIN : MODE_EMULATE;
  }
  if (h->mode == MODE_EMULATE) {
    r = next->can_flush (next);
    if (r == -1)
      return -1;
    if (r == 0) {
      nbdkit_error ("multi-conn-mode: emulating multi-conn needs a "
                    "plugin that can flush");
      return -1;
    }
  }

  LOCK_FOR_SCOPE (&lock);
  g = find_group (h->name);
  if (g == NULL)
    return -1;
  if (handle_list_append (&g->conns, h) == -1) {
    nbdkit_error ("realloc: %m");
    drop_group_if_empty (g);
    return -1;
  }
  h->group = g;
  return 0;
}

static int
multi_conn_finalize (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  struct group *g = h->group;
  size_t i;

  if (g == NULL)
    return 0;
  LOCK_FOR_SCOPE (&lock);
  for (i = 0; i < g->conns.len; i++) {
    if (g->conns.ptr[i] == h) {
      handle_list_remove (&g->conns, i);
      break;
    }
  }
  drop_group_if_empty (g);
  h->group = NULL;
  return 0;
}

/* With a flush on every connection behind each FUA, native FUA would
 * not be enough: ask for it to be emulated (by a flush, which we fan
 * out).
 */
static int
multi_conn_can_fua (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  int r = next->can_fua (next);

  if (r == NBDKIT_FUA_NATIVE && h->mode == MODE_EMULATE)
    return NBDKIT_FUA_EMULATE;
  return r;
}

static int
multi_conn_can_multi_conn (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  switch (h->mode) {
  case MODE_PLUGIN:
    return next->can_multi_conn (next);
  case MODE_DISABLE:
    return 0;
  default:                      /* emulate, unsafe */
    return 1;
  }
}

static void
mark_dirty (struct handle *h, unsigned what)
{
  switch (track) {
  case TRACK_CONNECTION:
    atomic_fetch_or (&h->dirty, what);
    /* fallthrough */
  case TRACK_FAST:
    if (what == DIRTY_WRITE)
      atomic_store (&h->group->dirty, true);
    break;
  case TRACK_OFF:
    break;
  }
}

/* Fires multi_conn_flush for the request being served: a flush, or
 * the FUA write whose flush is emulated.
 */
static void
probe_flush (int32_t flushed, int32_t connections)
{
  NBDKIT_PROBE (multi_conn_flush, nbdkit_connection_id (),
                nbdkit_request_cookie (), flushed, connections);
}

static int
multi_conn_flush (nbdkit_next *next, void *handle, uint32_t flags,
                  int *err)
{
  struct handle *h = handle;
  struct group *g = h->group;
  unsigned flushed = 0, members;
  size_t i;

  if (h->mode == MODE_EMULATE) {
    LOCK_FOR_SCOPE (&lock);
    bool group_dirty = atomic_load (&g->dirty);
    members = g->conns.len;
    for (i = 0; i < g->conns.len; i++) {
      struct handle *m = g->conns.ptr[i];
      unsigned d = atomic_load (&m->dirty);
      /* Written since its flush, or may have read what others wrote. */
      if (track == TRACK_OFF || (d & DIRTY_WRITE) ||
          (group_dirty && (track == TRACK_FAST || (d & DIRTY_READ)))) {
        if (m->next->flush (m->next, flags, err) == -1) {
          probe_flush (flushed, members);
          return -1;
        }
        flushed++;
        atomic_store (&m->dirty, 0);
      }
    }
    atomic_store (&g->dirty, false);
    probe_flush (flushed, members);
    return 0;
  }

  /* Not emulating: pass the flush on, unless nothing anywhere was
   * written since the last one.
   */
  if (track != TRACK_OFF && !atomic_load (&g->dirty)) {
    probe_flush (0, 1);
    return 0;
  }
  if (next->flush (next, flags, err) == -1)
    return -1;
  probe_flush (1, 1);
  switch (track) {
  case TRACK_CONNECTION:
    if (next->can_multi_conn (next) == 1) {
      /* One flush settles every connection. */
      LOCK_FOR_SCOPE (&lock);
      for (i = 0; i < g->conns.len; i++)
        atomic_store (&g->conns.ptr[i]->dirty, 0);
      atomic_store (&g->dirty, false);
    }
    else
      atomic_store (&h->dirty, 0);
    break;
  case TRACK_FAST:
    atomic_store (&g->dirty, false);
    break;
  case TRACK_OFF:
    break;
  }
  return 0;
}

/* A write, trim or zero: dirty, unless FUA made it durable already.
 * Emulating, FUA must reach every connection: it is dropped and a
 * fanned-out flush follows (our server normally does this for us, as
 * can_fua answers "emulate"; this is the safeguard).  Returns the flags
 * to pass down and sets *FLUSH.
 */
static uint32_t
before_write (struct handle *h, uint32_t flags, bool *flush)
{
  *flush = false;
  if (!(flags & NBDKIT_FLAG_FUA)) {
    mark_dirty (h, DIRTY_WRITE);
    return flags;
  }
  if (h->mode != MODE_EMULATE)
    return flags;
  mark_dirty (h, DIRTY_WRITE);
  *flush = true;
  return flags & ~NBDKIT_FLAG_FUA;
}

static int
multi_conn_pwrite (nbdkit_next *next, void *handle, const void *buf,
                   uint32_t count, uint64_t offset, uint32_t flags,
                   int *err)
{
  bool flush;

  flags = before_write (handle, flags, &flush);
  if (next->pwrite (next, buf, count, offset, flags, err) == -1)
    return -1;
  return flush ? multi_conn_flush (next, handle, 0, err) : 0;
}

static int
multi_conn_trim (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  bool flush;

  flags = before_write (handle, flags, &flush);
  if (next->trim (next, count, offset, flags, err) == -1)
    return -1;
  return flush ? multi_conn_flush (next, handle, 0, err) : 0;
}

static int
multi_conn_zero (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags, int *err)
{
  bool flush;

  flags = before_write (handle, flags, &flush);
  if (next->zero (next, count, offset, flags, err) == -1)
    return -1;
  return flush ? multi_conn_flush (next, handle, 0, err) : 0;
}

static int
multi_conn_pread (nbdkit_next *next, void *handle, void *buf,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  mark_dirty (handle, DIRTY_READ);
  return next->pread (next, buf, count, offset, flags, err);
}

static int
multi_conn_cache (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags, int *err)
{
  mark_dirty (handle, DIRTY_READ);
  return next->cache (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "multi-conn",
  .longname = "nbdkit multi-conn filter",
  .unload = multi_conn_unload,
  .config = multi_conn_config,
  .config_help = multi_conn_config_help,
  .get_ready = multi_conn_get_ready,
  .open = multi_conn_open,
  .close = multi_conn_close,
  .prepare = multi_conn_prepare,
  .finalize = multi_conn_finalize,
  .can_fua = multi_conn_can_fua,
  .can_multi_conn = multi_conn_can_multi_conn,
  .pread = multi_conn_pread,
  .pwrite = multi_conn_pwrite,
  .trim = multi_conn_trim,
  .zero = multi_conn_zero,
  .cache = multi_conn_cache,
  .flush = multi_conn_flush,
};

NBDKIT_REGISTER_FILTER (filter)
