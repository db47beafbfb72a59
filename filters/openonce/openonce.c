/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The openonce filter: open the layer below once per export name (and
 * access mode) and let every later client use that same open, for
 * plugins that are slow or costly to open.  The shared opens are
 * contexts not tied to any client (nbdkit_next_context_open with
 * shared set), prepared once and kept until the server exits, where
 * .cleanup finalizes and closes them.  A client's open leaves its own
 * layer below unopened and takes one of them as its handle; every
 * callback then goes to the handle's context.
 *
 * Locks: list_lock protects the list of shared opens and is held
 * across a first open, so a second client of the same export waits
 * for it instead of opening again.  Under the serialize_requests
 * thread model (one request at a time per plugin open, several opens
 * at once), clients now share one open, so each shared open's
 * request_lock keeps their requests apart; other thread models need
 * no lock of ours.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

struct shared {
  struct shared *link;
  char *exportname;
  bool readonly;
  nbdkit_next *next;            /* prepared; closed only by .cleanup */
  uint64_t opens;               /* client opens served, under list_lock */
  pthread_mutex_t request_lock;
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared *list;

/* Set once in .get_ready, before any client. */
static bool serialize_requests;

static int
openonce_get_ready (int thread_model)
{
  serialize_requests =
    thread_model == NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS;
  return 0;
}

static void
shared_free (struct shared *s)
{
  pthread_mutex_destroy (&s->request_lock);
  free (s->exportname);
  free (s);
}

static void
openonce_cleanup (nbdkit_backend *backend)
{
  LOCK_FOR_SCOPE (&list_lock);
  while (list) {
    struct shared *s = list;
    list = s->link;
    NBDKIT_PROBE (openonce_close, s->exportname, (int32_t) s->readonly,
                  s->opens);
    nbdkit_next_context_close (s->next);
    shared_free (s);
  }
}

/* Were .cleanup not reached, the opens are left alone (the layers
 * below may be gone); only our memory is freed.
 */
static void
openonce_unload (void)
{
  while (list) {
    struct shared *s = list;
    list = s->link;
    shared_free (s);
  }
}

static void *
openonce_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  LOCK_FOR_SCOPE (&list_lock);
  struct shared *s;
  bool first = false;

  for (s = list; s; s = s->link)
    if (s->readonly == !!readonly && strcmp (s->exportname, exportname) == 0)
      break;

  if (s == NULL) {
    s = calloc (1, sizeof *s);
    if (s == NULL || (s->exportname = strdup (exportname)) == NULL) {
      nbdkit_error ("openonce: %m");
      free (s);
      return NULL;
    }
    s->readonly = readonly;
    pthread_mutex_init (&s->request_lock, NULL);
    s->next = nbdkit_next_context_open (nbdkit_context_get_backend (context),
                                        readonly, exportname, 1);
    if (s->next && s->next->prepare (s->next) == -1) {
      nbdkit_next_context_close (s->next);
      s->next = NULL;
    }
    if (s->next == NULL) {
      /* Not kept: the next client tries again. */
      shared_free (s);
      return NULL;
    }
    s->link = list;
    list = s;
    first = true;
  }
  s->opens++;
  nbdkit_debug ("openonce: export \"%s\"%s: %s (client open %" PRIu64 ")",
                exportname, readonly ? " read-only" : "",
                first ? "opened" : "shared", s->opens);
  NBDKIT_PROBE (openonce_open, exportname, (int32_t) s->readonly,
                (int32_t) first, s->opens);
  return s;
}

/* The shared open is prepared once and never finalized by a client. */
static int
openonce_prepare (nbdkit_next *next, void *handle, int readonly)
{
  return 0;
}

static int
openonce_finalize (nbdkit_next *next, void *handle)
{
  return 0;
}

static int64_t
openonce_get_size (nbdkit_next *next, void *handle)
{
  struct shared *s = handle;
  return s->next->get_size (s->next);
}

static const char *
openonce_export_description (nbdkit_next *next, void *handle)
{
  struct shared *s = handle;
  return s->next->export_description (s->next);
}

static int
openonce_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                     uint32_t *preferred, uint32_t *maximum)
{
  struct shared *s = handle;
  return s->next->block_size (s->next, minimum, preferred, maximum);
}

/* The questions: the shared open keeps its own answers. */
#define QUESTION(name)                                          \
  static int                                                    \
  openonce_##name (nbdkit_next *next, void *handle)             \
  {                                                             \
    struct shared *s = handle;                                  \
    return s->next->name (s->next);                             \
  }
QUESTION (can_write)
QUESTION (can_flush)
QUESTION (is_rotational)
QUESTION (can_trim)
QUESTION (can_zero)
QUESTION (can_fast_zero)
QUESTION (can_extents)
QUESTION (can_fua)
QUESTION (can_multi_conn)
QUESTION (can_cache)

/* Hold the shared open's request lock for the scope, if needed. */
static pthread_mutex_t *
request_lock (struct shared *s)
{
  if (!serialize_requests)
    return NULL;
  pthread_mutex_lock (&s->request_lock);
  return &s->request_lock;
}

static void
request_unlock (pthread_mutex_t **lock)
{
  if (*lock)
    pthread_mutex_unlock (*lock);
}

#define REQUEST_SCOPE(s) \
  __attribute__ ((cleanup (request_unlock), unused)) pthread_mutex_t *held \
    = request_lock (s)

static int
openonce_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->pread (s->next, buf, count, offset, flags, err);
}

static int
openonce_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->pwrite (s->next, buf, count, offset, flags, err);
}

static int
openonce_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->flush (s->next, flags, err);
}

static int
openonce_trim (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->trim (s->next, count, offset, flags, err);
}

static int
openonce_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->zero (s->next, count, offset, flags, err);
}

static int
openonce_extents (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags,
                  struct nbdkit_extents *extents, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->extents (s->next, count, offset, flags, extents, err);
}

static int
openonce_cache (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  struct shared *s = handle;
  REQUEST_SCOPE (s);
  return s->next->cache (s->next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "openonce",
  .longname = "nbdkit openonce filter",
  .unload = openonce_unload,
  .get_ready = openonce_get_ready,
  .cleanup = openonce_cleanup,
  .open = openonce_open,
  .prepare = openonce_prepare,
  .finalize = openonce_finalize,
  .get_size = openonce_get_size,
  .export_description = openonce_export_description,
  .block_size = openonce_block_size,
  .can_write = openonce_can_write,
  .can_flush = openonce_can_flush,
  .is_rotational = openonce_is_rotational,
  .can_trim = openonce_can_trim,
  .can_zero = openonce_can_zero,
  .can_fast_zero = openonce_can_fast_zero,
  .can_extents = openonce_can_extents,
  .can_fua = openonce_can_fua,
  .can_multi_conn = openonce_can_multi_conn,
  .can_cache = openonce_can_cache,
  .pread = openonce_pread,
  .pwrite = openonce_pwrite,
  .flush = openonce_flush,
  .trim = openonce_trim,
  .zero = openonce_zero,
  .extents = openonce_extents,
  .cache = openonce_cache,
};

NBDKIT_REGISTER_FILTER (filter)
