/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The rbd plugin: serve a Ceph RBD image through librbd.
 *
 * This file owns the plugin's parameters, the one connection to the
 * Ceph cluster (a rados_t and the I/O context of the pool and
 * namespace), and the table of open images that the NBD connections
 * share.
 *
 * Life cycle: config and config_complete only record and check the
 * parameters.  librados starts threads, so the cluster is joined in
 * after_fork, once the server has daemonized; that is also where a
 * wrong pool, image or credential is found and reported as one line,
 * which makes the server exit 1 before it writes its pid file.
 * cleanup leaves the cluster.
 *
 * Every NBD connection asks for its image in open (the image= parameter
 * or, without it, the export name) and gets a reference on a shared
 * struct image: one librbd handle per image name and access mode for
 * the whole server, opened by the first connection and closed with the
 * last.  Sharing the handle is what makes multi-conn safe: librbd's
 * cache and the image's exclusive lock belong to the handle, so a flush
 * on one connection covers the writes of all of them, and connections
 * do not take the exclusive lock from each other on every write.
 *
 * Requests run in parallel (librbd handles are thread-safe), on one of
 * two paths, each librbd call asynchronous in both:
 *
 *  - the asynchronous path (nbdkit-async(3)): unless -D nbdkit.async=0
 *    or a filter above needs the synchronous path, the server hands
 *    read, write, flush, trim and zero to the async_* callbacks, which
 *    start the librbd call and return; librbd's completion callback
 *    (on librbd's own thread, which runs an image's callbacks one at a
 *    time) maps the result to an errno, starts the flush a FUA request
 *    still needs, and calls nbdkit_async_complete.  No thread of the
 *    server waits on the cluster, so a connection keeps as many
 *    requests in flight as the server allows.
 *  - the synchronous callbacks (plugin_*), used otherwise and for
 *    block status and emulated requests: the same librbd calls,
 *    each waited for by the request's thread; the zero fallback
 *    without rbd_aio_write_zeroes keeps several writes in flight.
 *
 * Both give the client the same bytes and errors: one function maps
 * librbd's results to the client's errno for both.  Nothing waits
 * without a bound: timeout= sets librados's mount, monitor and OSD
 * operation timeouts, so a dead cluster makes a request fail with
 * ETIMEDOUT (EIO to the client) rather than hang, and a connection
 * whose client left with requests in flight (cancel) only has to wait
 * for librbd to complete them.
 *
 * Locks: images_lock protects the table of open images and is taken
 * alone.  A synchronous call's struct aio has a lock of its own, a
 * leaf taken by its waiter and by librbd's callback.  The asynchronous
 * path takes no lock of ours: each request's state belongs to whoever
 * holds it (the submitting thread, then librbd's callback).
 *
 * Probes (provider "nbdkit", in this .so):
 *   rbd_connect (pool, image, duration_ns, result)
 *     when the cluster is joined (image is "") and each time an image
 *     is opened; result is 0 or a negative errno from librados/librbd.
 *   rbd_op_done (id, cookie, op, offset, count, latency_ns, result)
 *     when a librbd call of a request completes: op is "read",
 *     "write", "discard", "write_zeroes", "flush" or "diff_iterate";
 *     latency from the call to its completion callback.  On the
 *     asynchronous path it fires in librbd's callback with the ids
 *     recorded when the request was taken.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

/* The probes fire whether or not a tracer raised their semaphores
 * (perf does not): their arguments are a clock read or two, nothing
 * beside a round trip to the cluster.
 */
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "minmax.h"
#include "now-ns.h"
#include "vector.h"
#include "answers.h"

/* -D rbd.diff=1: log each extents query and what librbd reported. */
NBDKIT_DLL_PUBLIC int rbd_debug_diff;
/* -D rbd.no_write_zeroes=1: zero by writing zero buffers, as with a
 * librbd that lacks rbd_aio_write_zeroes.
 */
NBDKIT_DLL_PUBLIC int rbd_debug_no_write_zeroes;

/* The parameters, set by config, read-only once the server serves. */
static const char *pool = "rbd";
static const char *namespace;   /* NULL: the pool's default namespace */
static const char *image_name;  /* NULL: the export name picks the image */
static const char *snapshot;    /* NULL: the image's head, writable */
static const char *conf_file;   /* NULL: librados's search path */
static const char *client_id;   /* NULL: "admin" */
static const char *keyring;     /* NULL: from the configuration */
static unsigned timeout_secs = 60;

/* The cluster, joined in after_fork, left in cleanup. */
static rados_t cluster;
static rados_ioctx_t ioctx;
static bool have_cluster, have_ioctx;

/* An open image, shared by every connection that uses the same image
 * name in the same mode.
 */
struct image {
  char *name;
  bool readonly;
  rbd_image_t rbd;
  unsigned refs;                /* connections holding it */
  struct image *next;
};

/* Protects the list of open images and their refs.  Opening and closing
 * an image happen under it, so two connections asking for the same
 * image at once open it once.
 */
static pthread_mutex_t images_lock = PTHREAD_MUTEX_INITIALIZER;
static struct image *images;

struct handle {
  struct image *image;
};

/* A zero request without rbd_aio_write_zeroes is written as zero
 * buffers of this size, up to ZERO_DEPTH of them in flight.
 */
#define ZERO_CHUNK (1024 * 1024)
#define ZERO_DEPTH 8

/* The largest range one extents call asks librbd about.  Each object
 * in the range costs a round trip to its OSD; the client asks again
 * for the rest.
 */
#define EXTENTS_MAX (UINT64_C (1) << 30)

static int
plugin_config (const char *key, const char *value)
{
  if (strcmp (key, "pool") == 0)
    pool = value;
  else if (strcmp (key, "namespace") == 0)
    namespace = value;
  else if (strcmp (key, "image") == 0)
    image_name = value;
  else if (strcmp (key, "snapshot") == 0 || strcmp (key, "snap") == 0)
    snapshot = value;
  else if (strcmp (key, "conf") == 0)
    conf_file = value;
  else if (strcmp (key, "id") == 0) {
    /* Accept "client.NAME" as well as the bare NAME librados wants. */
    if (strncmp (value, "client.", 7) == 0)
      value += 7;
    client_id = value;
  }
  else if (strcmp (key, "keyring") == 0)
    keyring = value;
  else if (strcmp (key, "timeout") == 0) {
    if (nbdkit_parse_unsigned ("timeout", value, &timeout_secs) == -1)
      return -1;
    if (timeout_secs == 0 || timeout_secs > 86400) {
      nbdkit_error ("timeout=%s: must be from 1 to 86400 seconds", value);
      return -1;
    }
  }
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  if (value[0] == '\0' && strcmp (key, "namespace") != 0) {
    nbdkit_error ("%s= must not be empty", key);
    return -1;
  }
  return 0;
}

extern struct nbdkit_async_ops nbdkit_async_ops;

static int
plugin_config_complete (void)
{
  if (snapshot != NULL && image_name == NULL) {
    nbdkit_error ("snapshot=%s needs image=", snapshot);
    return -1;
  }
  /* The zero-buffer fallback is synchronous only: without the
   * asynchronous zero the server calls plugin_zero for it.
   */
  if (rbd_debug_no_write_zeroes)
    nbdkit_async_ops.zero = NULL;
  return 0;
}

#define plugin_config_help \
  "[image=]NAME              The RBD image (default: the export name).\n" \
  "pool=POOL                 The pool holding it (default: rbd).\n" \
  "namespace=NS              The namespace in the pool.\n" \
  "snapshot=SNAP             Serve this snapshot of the image, read-only.\n" \
  "conf=CEPH.CONF            The cluster's configuration file.\n" \
  "id=NAME                   The client name without \"client.\" (default: admin).\n" \
  "keyring=FILE              The keyring holding the client's key.\n" \
  "timeout=SECS              Bound on every wait for the cluster (default: 60)."

static void
plugin_dump_plugin (void)
{
  int maj, min, extra;

  rbd_version (&maj, &min, &extra);
  printf ("rbd_librbd_version=%d.%d.%d\n", maj, min, extra);
#if LIBRBD_SUPPORTS_WRITE_ZEROES
  printf ("rbd_write_zeroes=yes\n");
#else
  printf ("rbd_write_zeroes=no\n");
#endif
}

/* Where error messages say we are. */
static const char *
ns_desc (void)
{
  return namespace && namespace[0] ? namespace : NULL;
}

static void
report_cluster_error (const char *what, int r)
{
  nbdkit_error ("%s (conf=%s, id=%s%s%s): %s",
                what, conf_file ? conf_file : "default",
                client_id ? client_id : "admin",
                keyring ? ", keyring=" : "", keyring ? keyring : "",
                strerror (-r));
}

static int
set_option (const char *option, const char *value)
{
  int r = rados_conf_set (cluster, option, value);

  if (r < 0) {
    nbdkit_error ("cannot set the Ceph option %s=%s: %s",
                  option, value, strerror (-r));
    return -1;
  }
  return 0;
}

/* Join the cluster and open the pool's I/O context.  librados's own
 * messages go to its log, not to stderr, so what went wrong is said
 * here in one line.
 */
static int
connect_cluster (void)
{
  char secs[16];
  int r;

  r = rados_create (&cluster, client_id);
  if (r < 0) {
    report_cluster_error ("cannot create the Ceph client", r);
    return r;
  }
  have_cluster = true;

  r = rados_conf_read_file (cluster, conf_file);
  if (r < 0) {
    if (conf_file)
      nbdkit_error ("conf=%s: cannot read the Ceph configuration: %s",
                    conf_file, strerror (-r));
    else
      nbdkit_error ("no Ceph configuration found (give conf=FILE or set "
                    "CEPH_CONF): %s", strerror (-r));
    return r;
  }
  /* CEPH_ARGS and CEPH_KEYRING, as the ceph tools do; then ours. */
  r = rados_conf_parse_env (cluster, NULL);
  if (r < 0) {
    nbdkit_error ("CEPH_ARGS: %s", strerror (-r));
    return r;
  }
  if (keyring && set_option ("keyring", keyring) == -1)
    return -EINVAL;
  snprintf (secs, sizeof secs, "%u", timeout_secs);
  if (set_option ("client_mount_timeout", secs) == -1 ||
      set_option ("rados_mon_op_timeout", secs) == -1 ||
      set_option ("rados_osd_op_timeout", secs) == -1)
    return -EINVAL;
  /* librados logs to stderr by default, which is the server's. */
  if (set_option ("log_to_stderr", "false") == -1 ||
      set_option ("err_to_stderr", "false") == -1)
    return -EINVAL;

  r = rados_connect (cluster);
  if (r < 0) {
    report_cluster_error ("cannot connect to the Ceph cluster", r);
    return r;
  }

  r = rados_ioctx_create (cluster, pool, &ioctx);
  if (r < 0) {
    if (r == -ENOENT)
      nbdkit_error ("pool=%s: no such pool", pool);
    else
      nbdkit_error ("pool=%s: %s", pool, strerror (-r));
    return r;
  }
  have_ioctx = true;
  if (namespace)
    rados_ioctx_set_namespace (ioctx, namespace);
  return 0;
}

/* Open NAME in the pool; report a failure in one line. */
static int
open_rbd (const char *name, bool readonly, rbd_image_t *rbd)
{
  uint64_t start = now_ns ();
  int r;

  if (readonly || snapshot)
    r = rbd_open_read_only (ioctx, name, rbd, snapshot);
  else
    r = rbd_open (ioctx, name, rbd, NULL);
  NBDKIT_PROBE (rbd_connect, pool, name, now_ns () - start, r);

  if (r < 0) {
    if (r == -ENOENT && snapshot)
      nbdkit_error ("image '%s' or its snapshot '%s' not found "
                    "in pool '%s'%s%s",
                    name, snapshot, pool, ns_desc () ? " namespace " : "",
                    ns_desc () ? ns_desc () : "");
    else if (r == -ENOENT)
      nbdkit_error ("image '%s' not found in pool '%s'%s%s",
                    name, pool, ns_desc () ? " namespace " : "",
                    ns_desc () ? ns_desc () : "");
    else
      nbdkit_error ("image '%s' in pool '%s': cannot open: %s",
                    name, pool, strerror (-r));
    errno = -r;
    return -1;
  }
  return 0;
}

static void plugin_cleanup (void);

static int
plugin_after_fork (void)
{
  uint64_t start = now_ns ();
  rbd_image_t rbd;
  int r;

  r = connect_cluster ();
  NBDKIT_PROBE (rbd_connect, pool, "", now_ns () - start, r);
  if (r < 0)
    goto error;

  /* A named image must exist now: say so at start-up, not at the first
   * client.  It is opened read-only, which takes no lock.
   */
  if (image_name) {
    if (open_rbd (image_name, true, &rbd) == -1)
      goto error;
    rbd_close (rbd);
  }
  return 0;

 error:
  /* The server exits next, without calling cleanup: librados's threads
   * must be stopped first, or its static destructors race them.
   */
  plugin_cleanup ();
  return -1;
}

static void
plugin_cleanup (void)
{
  if (have_ioctx)
    rados_ioctx_destroy (ioctx);
  if (have_cluster)
    rados_shutdown (cluster);
  have_ioctx = have_cluster = false;
}

static int
compare_names (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Every image of the pool (and namespace) is an export, unless image=
 * names the one image served.
 */
static int
plugin_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  CLEANUP_FREE_STRING_VECTOR string_vector names = empty_vector;
  rbd_image_spec_t *specs = NULL;
  size_t max = 64, i;
  int r;

  if (image_name)
    return nbdkit_add_export (exports, "", image_name);

  for (;;) {
    specs = calloc (max, sizeof *specs);
    if (specs == NULL) {
      nbdkit_error ("calloc: %m");
      return -1;
    }
    r = rbd_list2 (ioctx, specs, &max);
    if (r != -ERANGE)
      break;
    free (specs);
  }
  if (r < 0) {
    free (specs);
    nbdkit_error ("listing the images of pool '%s': %s", pool, strerror (-r));
    return -1;
  }
  for (i = 0; i < max; ++i) {
    char *s = strdup (specs[i].name);

    if (s == NULL || string_vector_append (&names, s) == -1) {
      nbdkit_error ("strdup: %m");
      free (s);
      rbd_image_spec_list_cleanup (specs, max);
      free (specs);
      return -1;
    }
  }
  rbd_image_spec_list_cleanup (specs, max);
  free (specs);

  string_vector_sort (&names, compare_names);
  for (i = 0; i < names.len; ++i)
    if (nbdkit_add_export (exports, names.ptr[i], NULL) == -1)
      return -1;
  return 0;
}

/* The image this connection serves: image= or the export name. */
static const char *
wanted_image (void)
{
  const char *name;

  if (image_name)
    return image_name;
  name = nbdkit_export_name ();
  if (name == NULL || name[0] == '\0') {
    nbdkit_error ("no image= was given and the client asked for the "
                  "default export: ask for an image of pool '%s' by name",
                  pool);
    errno = ENOENT;
    return NULL;
  }
  return name;
}

static struct image *
image_get (const char *name, bool readonly)
{
  LOCK_FOR_SCOPE (&images_lock);
  struct image *im;

  for (im = images; im; im = im->next)
    if (im->readonly == readonly && strcmp (im->name, name) == 0) {
      im->refs++;
      return im;
    }

  im = calloc (1, sizeof *im);
  if (im == NULL || (im->name = strdup (name)) == NULL) {
    nbdkit_error ("calloc: %m");
    free (im);
    return NULL;
  }
  im->readonly = readonly;
  if (open_rbd (name, readonly, &im->rbd) == -1) {
    free (im->name);
    free (im);
    return NULL;
  }
  im->refs = 1;
  im->next = images;
  images = im;
  return im;
}

static void
image_put (struct image *im)
{
  LOCK_FOR_SCOPE (&images_lock);
  struct image **p;

  if (--im->refs > 0)
    return;
  for (p = &images; *p != im; p = &(*p)->next)
    ;
  *p = im->next;
  /* Closing writes back librbd's cache and releases the lock. */
  rbd_close (im->rbd);
  free (im->name);
  free (im);
}

static void *
plugin_open (int readonly)
{
  struct handle *h;
  const char *name = wanted_image ();

  if (name == NULL)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  h->image = image_get (name, readonly || snapshot != NULL);
  if (h->image == NULL) {
    free (h);
    return NULL;
  }
  return h;
}

static void
plugin_close (void *handle)
{
  struct handle *h = handle;

  image_put (h->image);
  free (h);
}

static const char *
plugin_export_description (void *handle)
{
  struct handle *h = handle;

  return nbdkit_printf_intern ("RBD image %s/%s%s%s", pool, h->image->name,
                               snapshot ? "@" : "",
                               snapshot ? snapshot : "");
}

static int64_t
plugin_get_size (void *handle)
{
  struct handle *h = handle;
  uint64_t size;
  int r;

  r = rbd_get_size (h->image->rbd, &size);
  if (r < 0) {
    nbdkit_error ("%s: getting the size: %s", h->image->name, strerror (-r));
    nbdkit_set_error (-r);
    return -1;
  }
  if (size > INT64_MAX) {
    nbdkit_error ("%s: size %" PRIu64 " is too large", h->image->name, size);
    nbdkit_set_error (EFBIG);
    return -1;
  }
  return size;
}

static int
plugin_can_write (void *handle)
{
  return snapshot == NULL;
}

/* --- Results, shared by both paths ----------------------------------- */

/* rbd_op_done and rbd_op_error have this one site, not one per
 * caller: perf probe makes one event of each.  The ids are passed in:
 * librbd's callback thread has no current request.
 */
static void __attribute__ ((noinline))
fire_op_done (uint64_t id, uint64_t cookie, const char *op,
              uint64_t offset, uint64_t count, uint64_t latency_ns,
              int64_t result)
{
  if (result < 0)
    NBDKIT_PROBE (rbd_op_error, id, cookie, op, result);
  NBDKIT_PROBE (rbd_op_done, id, cookie, op, offset, count, latency_ns);
}

/* The errno a client gets for librbd's result R of OP over [offset,
 * offset+count): 0 if it succeeded.  R is a negative errno, or >= 0;
 * a read (IS_READ) must have read all COUNT bytes.  A failure is
 * logged in one line.
 */
static int
result_errno (struct handle *h, const char *op, uint64_t offset,
              uint64_t count, ssize_t r, bool is_read)
{
  int err;

  if (r >= 0) {
    if (!is_read || (uint64_t) r == count)
      return 0;
    nbdkit_error ("%s: read at %" PRIu64 ": %zd of %" PRIu64 " bytes "
                  "(did the image shrink?)", h->image->name, offset,
                  r, count);
    return EIO;
  }
  err = (int) -r;
  nbdkit_error ("%s: %s at %" PRIu64 " (%" PRIu64 " bytes): %s",
                h->image->name, op, offset, count, strerror (err));
  /* librados reports an operation that outlived timeout= as
   * ETIMEDOUT; the client only has EIO for it.
   */
  if (err == ETIMEDOUT)
    err = EIO;
  return err;
}

/* A failed synchronous request (R < 0): log it, set the errno. */
static int
op_error (struct handle *h, const char *op, uint64_t offset, uint64_t count,
          ssize_t r)
{
  nbdkit_set_error (result_errno (h, op, offset, count, r < 0 ? r : -EIO,
                                  false));
  return -1;
}

/* The rbd_aio_write_zeroes flags for a zero request with FLAGS, or -1
 * (ENOTSUP set) for a fast zero librbd cannot do fast.
 */
static int
write_zeroes_flags (uint32_t flags)
{
  /* Without may_trim the range must stay allocated. */
  int zflags = (flags & NBDKIT_FLAG_MAY_TRIM) ? 0
    : RBD_WRITE_ZEROES_FLAG_THICK_PROVISION;

  /* Thick zeroing writes every byte: not faster than a write. */
  if ((flags & NBDKIT_FLAG_FAST_ZERO) && zflags) {
    nbdkit_set_error (ENOTSUP);
    return -1;
  }
  return zflags;
}

/* --- The synchronous path -------------------------------------------- */

/* One librbd call in flight: the completion callback fills in the
 * result and the time, and wakes the thread that waits in
 * aio_wait.
 */
struct aio {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool done;                    /* protected by lock */
  ssize_t result;
  uint64_t start, end;          /* now_ns () at the call, at completion */
  rbd_completion_t c;
};

static void
aio_callback (rbd_completion_t c, void *arg)
{
  struct aio *a = arg;

  pthread_mutex_lock (&a->lock);
  a->end = now_ns ();
  a->result = rbd_aio_get_return_value (c);
  a->done = true;
  pthread_cond_signal (&a->cond);
  pthread_mutex_unlock (&a->lock);
}

/* Prepare A for one call.  Returns -1 with errno set. */
static int
aio_init (struct aio *a)
{
  int r;

  memset (a, 0, sizeof *a);
  pthread_mutex_init (&a->lock, NULL);
  pthread_cond_init (&a->cond, NULL);
  r = rbd_aio_create_completion (a, aio_callback, &a->c);
  if (r < 0) {
    pthread_cond_destroy (&a->cond);
    pthread_mutex_destroy (&a->lock);
    nbdkit_error ("rbd_aio_create_completion: %s", strerror (-r));
    nbdkit_set_error (-r);
    return -1;
  }
  a->start = now_ns ();
  return 0;
}

/* After a call that did not start (SUBMIT < 0), or once it is done. */
static void
aio_free (struct aio *a)
{
  rbd_aio_release (a->c);
  pthread_cond_destroy (&a->cond);
  pthread_mutex_destroy (&a->lock);
}

/* Wait for the call started on A (whose start returned SUBMIT), fire
 * rbd_op_done and release A.  Returns the call's result: >= 0 or a
 * negative errno.  The wait ends because librados fails every
 * operation that outlives timeout=.
 */
static ssize_t
aio_finish (struct aio *a, int submit, const char *op,
            uint64_t offset, uint64_t count)
{
  ssize_t r;

  if (submit < 0) {
    r = submit;
    a->end = now_ns ();
  }
  else {
    pthread_mutex_lock (&a->lock);
    while (!a->done)
      pthread_cond_wait (&a->cond, &a->lock);
    pthread_mutex_unlock (&a->lock);
    r = a->result;
  }
  fire_op_done (nbdkit_connection_id (), nbdkit_request_cookie (),
                op, offset, count, a->end - a->start, r);
  aio_free (a);
  return r;
}

static int
do_flush (struct handle *h)
{
  struct aio a;
  ssize_t r;

  if (aio_init (&a) == -1)
    return -1;
  r = aio_finish (&a, rbd_aio_flush (h->image->rbd, a.c), "flush", 0, 0);
  if (r < 0)
    return op_error (h, "flush", 0, 0, r);
  return 0;
}

static int
plugin_flush (void *handle, uint32_t flags)
{
  return do_flush (handle);
}

static int
plugin_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  struct handle *h = handle;
  struct aio a;
  ssize_t r;
  int err;

  if (aio_init (&a) == -1)
    return -1;
  r = aio_finish (&a,
                  rbd_aio_read2 (h->image->rbd, offset, count, buf, a.c, 0),
                  "read", offset, count);
  err = result_errno (h, "read", offset, count, r, true);
  if (err) {
    nbdkit_set_error (err);
    return -1;
  }
  return 0;
}

static int
plugin_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct handle *h = handle;
  struct aio a;
  ssize_t r;

  if (aio_init (&a) == -1)
    return -1;
  r = aio_finish (&a,
                  rbd_aio_write2 (h->image->rbd, offset, count, buf, a.c, 0),
                  "write", offset, count);
  if (r < 0)
    return op_error (h, "write", offset, count, r);
  if (flags & NBDKIT_FLAG_FUA)
    return do_flush (h);
  return 0;
}

static int
plugin_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;
  struct aio a;
  ssize_t r;

  if (aio_init (&a) == -1)
    return -1;
  r = aio_finish (&a,
                  rbd_aio_discard (h->image->rbd, offset, count, a.c),
                  "discard", offset, count);
  if (r < 0)
    return op_error (h, "discard", offset, count, r);
  if (flags & NBDKIT_FLAG_FUA)
    return do_flush (h);
  return 0;
}

/* Write zero buffers over [offset, offset+count), up to ZERO_DEPTH
 * of them in flight: the way to zero without rbd_aio_write_zeroes
 * (librbd before 15), or with -D rbd.no_write_zeroes=1.
 */
static int
write_zero_buffers (struct handle *h, uint32_t count, uint64_t offset)
{
  static const char zeroes[ZERO_CHUNK];
  struct aio a[ZERO_DEPTH];
  uint64_t off[ZERO_DEPTH];
  uint32_t len[ZERO_DEPTH];
  int n, i, err = 0;

  while (count > 0 && err == 0) {
    for (n = 0; n < ZERO_DEPTH && count > 0; n++) {
      int s;

      if (aio_init (&a[n]) == -1) {
        err = EIO;
        break;
      }
      off[n] = offset;
      len[n] = MIN (count, (uint32_t) ZERO_CHUNK);
      s = rbd_aio_write2 (h->image->rbd, off[n], len[n], zeroes, a[n].c, 0);
      if (s < 0) {
        aio_finish (&a[n], s, "write", off[n], len[n]);
        err = -s;
        break;
      }
      offset += len[n];
      count -= len[n];
    }
    /* Wait for every call started, failed or not, before returning. */
    for (i = 0; i < n; i++) {
      ssize_t r = aio_finish (&a[i], 0, "write", off[i], len[i]);

      if (r < 0 && err == 0)
        err = -r;
    }
  }
  if (err)
    return op_error (h, "write (zeroes)", offset, count, -err);
  return 0;
}

static int
plugin_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct handle *h = handle;

#if LIBRBD_SUPPORTS_WRITE_ZEROES
  if (!rbd_debug_no_write_zeroes) {
    struct aio a;
    ssize_t r;
    int zflags = write_zeroes_flags (flags);

    if (zflags == -1)
      return -1;
    if (aio_init (&a) == -1)
      return -1;
    r = aio_finish (&a,
                    rbd_aio_write_zeroes (h->image->rbd, offset, count, a.c,
                                          zflags, 0),
                    "write_zeroes", offset, count);
    if (r < 0)
      return op_error (h, "write_zeroes", offset, count, r);
    if (flags & NBDKIT_FLAG_FUA)
      return do_flush (h);
    return 0;
  }
#endif
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    nbdkit_set_error (ENOTSUP);
    return -1;
  }
  if (write_zero_buffers (h, count, offset) == -1)
    return -1;
  if (flags & NBDKIT_FLAG_FUA)
    return do_flush (h);
  return 0;
}

/* --- The asynchronous path ------------------------------------------- */

enum call { CALL_READ, CALL_WRITE, CALL_DISCARD, CALL_WRITE_ZEROES,
            CALL_FLUSH };

/* The op names of rbd_op_done, as the synchronous path fires them. */
static const char *const call_names[] = {
  [CALL_READ] = "read", [CALL_WRITE] = "write", [CALL_DISCARD] = "discard",
  [CALL_WRITE_ZEROES] = "write_zeroes", [CALL_FLUSH] = "flush",
};

/* A request taken on the asynchronous path, from the async_* callback
 * that took it to its nbdkit_async_complete.  Whoever runs it (the
 * submitting thread until librbd has the call, then librbd's callback)
 * owns it alone.  The handle stays open until the completion: the
 * server calls close only after the last one.
 */
struct async_op {
  struct handle *h;
  struct nbdkit_async_request *req;
  enum call call;               /* the librbd call in flight */
  union {                       /* the request's buffer (read, write) */
    char *in;
    const char *out;
  } buf;
  uint64_t offset, count;       /* of the call in flight; 0 for flush */
  int zflags;                   /* of a write_zeroes */
  bool then_flush;              /* FUA: a flush follows the call */
  uint64_t id, cookie;          /* the request's, for rbd_op_done */
  uint64_t start;               /* now_ns () when the call started */
};

static void async_callback (rbd_completion_t c, void *arg);

/* Start O's call.  Returns >= 0 once librbd has it (O may then be
 * completed and freed at any moment: not touched again here), or a
 * negative errno if it did not start.
 */
static int
async_start (struct async_op *o)
{
  rbd_image_t rbd = o->h->image->rbd;
  rbd_completion_t c;
  int r;

  r = rbd_aio_create_completion (o, async_callback, &c);
  if (r < 0)
    return r;
  o->start = now_ns ();
  switch (o->call) {
  case CALL_READ:
    r = rbd_aio_read2 (rbd, o->offset, o->count, o->buf.in, c, 0);
    break;
  case CALL_WRITE:
    r = rbd_aio_write2 (rbd, o->offset, o->count, o->buf.out, c, 0);
    break;
  case CALL_DISCARD:
    r = rbd_aio_discard (rbd, o->offset, o->count, c);
    break;
  case CALL_WRITE_ZEROES:
#if LIBRBD_SUPPORTS_WRITE_ZEROES
    r = rbd_aio_write_zeroes (rbd, o->offset, o->count, c, o->zflags, 0);
#else
    r = -ENOTSUP;               /* never taken: async_zero is left out */
#endif
    break;
  case CALL_FLUSH:
    r = rbd_aio_flush (rbd, c);
    break;
  }
  if (r < 0)
    rbd_aio_release (c);
  return r;
}

/* The call R of O did not start: its probe and the client's errno. */
static int
async_not_started (struct async_op *o, int r)
{
  fire_op_done (o->id, o->cookie, call_names[o->call], o->offset, o->count,
                0, r);
  return result_errno (o->h, call_names[o->call], o->offset, o->count, r,
                       false);
}

/* librbd's completion of O's call, on librbd's thread: the result,
 * then the flush that a FUA request still owes, or the completion.
 */
static void
async_callback (rbd_completion_t c, void *arg)
{
  struct async_op *o = arg;
  ssize_t r = rbd_aio_get_return_value (c);
  uint64_t end = now_ns ();
  struct nbdkit_async_request *req;
  int err;

  rbd_aio_release (c);
  fire_op_done (o->id, o->cookie, call_names[o->call], o->offset, o->count,
                end - o->start, r);
  err = result_errno (o->h, call_names[o->call], o->offset, o->count, r,
                      o->call == CALL_READ);
  if (err == 0 && o->then_flush) {
    /* librbd lets a callback start another call: it runs an image's
     * callbacks from a queue of its own, holding none of its locks.
     */
    o->then_flush = false;
    o->call = CALL_FLUSH;
    o->offset = o->count = 0;
    r = async_start (o);
    if (r >= 0)
      return;
    err = async_not_started (o, r);
  }
  /* O is ours to free first: once completed, the connection may end
   * and its handle close before this returns.
   */
  req = o->req;
  free (o);
  nbdkit_async_complete (req, err);
}

/* Take a request: start its first librbd call.  Returns 0, or -1 with
 * the error set if nothing was started (then the request fails now,
 * with the errno the synchronous path gives).
 */
static int
async_take (void *handle, struct nbdkit_async_request *req, enum call call,
            const void *buf, uint32_t count, uint64_t offset, int zflags,
            uint32_t flags)
{
  struct async_op *o = malloc (sizeof *o);
  int r, err;

  if (o == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  *o = (struct async_op) {
    .h = handle, .req = req, .call = call, .buf.out = buf,
    .offset = offset, .count = count, .zflags = zflags,
    .then_flush = (flags & NBDKIT_FLAG_FUA) != 0,
    .id = nbdkit_connection_id (), .cookie = nbdkit_request_cookie (),
  };
  r = async_start (o);
  if (r >= 0)
    return 0;
  err = async_not_started (o, r);
  free (o);
  nbdkit_set_error (err);
  return -1;
}

static int
async_pread (void *handle, struct nbdkit_async_request *req, void *buf,
             uint32_t count, uint64_t offset, uint32_t flags)
{
  /* A read never flushes: FUA is not a read's flag. */
  return async_take (handle, req, CALL_READ, buf, count, offset, 0, 0);
}

static int
async_pwrite (void *handle, struct nbdkit_async_request *req,
              const void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  return async_take (handle, req, CALL_WRITE, buf, count, offset, 0, flags);
}

static int
async_flush (void *handle, struct nbdkit_async_request *req, uint32_t flags)
{
  return async_take (handle, req, CALL_FLUSH, NULL, 0, 0, 0, 0);
}

static int
async_trim (void *handle, struct nbdkit_async_request *req,
            uint32_t count, uint64_t offset, uint32_t flags)
{
  return async_take (handle, req, CALL_DISCARD, NULL, count, offset, 0,
                     flags);
}

#if LIBRBD_SUPPORTS_WRITE_ZEROES
static int
async_zero (void *handle, struct nbdkit_async_request *req,
            uint32_t count, uint64_t offset, uint32_t flags)
{
  int zflags = write_zeroes_flags (flags);

  if (zflags == -1)
    return -1;
  return async_take (handle, req, CALL_WRITE_ZEROES, NULL, count, offset,
                     zflags, flags);
}
#endif

/* Not const: config_complete drops zero for -D rbd.no_write_zeroes=1.
 * No cancel: librbd completes every call it has, within timeout=, and
 * offers no way to abandon one.
 */
NBDKIT_DLL_PUBLIC struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .pread   = async_pread,
  .pwrite  = async_pwrite,
  .flush   = async_flush,
  .trim    = async_trim,
#if LIBRBD_SUPPORTS_WRITE_ZEROES
  .zero    = async_zero,
#endif
};

/* --- Block status ---------------------------------------------------- */

struct range {
  uint64_t offset, length;
};
DEFINE_VECTOR_TYPE (range_vector, struct range);

struct diff {
  range_vector data;
  bool oom;
};

/* librbd reports the allocated ranges, not necessarily in order (it
 * asks about several objects at once): collect them.
 */
static int
diff_callback (uint64_t offset, size_t length, int exists, void *arg)
{
  struct diff *d = arg;
  struct range r = { .offset = offset, .length = length };

  if (!exists || length == 0)
    return 0;
  if (range_vector_append (&d->data, r) == -1) {
    d->oom = true;
    return -ENOMEM;
  }
  return 0;
}

static int
compare_ranges (const void *av, const void *bv)
{
  const struct range *a = av, *b = bv;

  return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static int
plugin_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents)
{
  struct handle *h = handle;
  struct diff d = { .data = empty_vector };
  uint64_t start, end = offset + count, pos = offset;
  size_t i;
  int r;

  if (count > EXTENTS_MAX)
    end = offset + EXTENTS_MAX;
  start = now_ns ();
  /* Include the parent's data for a clone; not only whole objects. */
  r = rbd_diff_iterate2 (h->image->rbd, NULL, offset, end - offset, 1, 0,
                         diff_callback, &d);
  fire_op_done (nbdkit_connection_id (), nbdkit_request_cookie (),
                "diff_iterate", offset, end - offset, now_ns () - start, r);
  if (r < 0 || d.oom) {
    free (d.data.ptr);
    return op_error (h, "diff_iterate", offset, end - offset,
                     d.oom ? -ENOMEM : r);
  }
  range_vector_sort (&d.data, compare_ranges);
  if (rbd_debug_diff)
    nbdkit_debug ("diff %" PRIu64 "+%" PRIu64 ": %zu allocated ranges",
                  offset, end - offset, d.data.len);

  /* Gaps between the allocated ranges are holes that read as zeroes. */
  for (i = 0; i < d.data.len && pos < end; i++) {
    uint64_t s = MAX (d.data.ptr[i].offset, pos);
    uint64_t e = MIN (d.data.ptr[i].offset + d.data.ptr[i].length, end);

    if (e <= s)
      continue;
    if (s > pos &&
        nbdkit_add_extent (extents, pos, s - pos,
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
      goto error;
    if (nbdkit_add_extent (extents, s, e - s, 0) == -1)
      goto error;
    pos = e;
  }
  if (pos < end &&
      nbdkit_add_extent (extents, pos, end - pos,
                         NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
    goto error;
  free (d.data.ptr);
  return 0;

 error:
  free (d.data.ptr);
  return -1;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "rbd",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit Ceph RBD plugin",
  .description        = "Serve a Ceph RBD image through librbd",
  .config             = plugin_config,
  .config_complete    = plugin_config_complete,
  .config_help        = plugin_config_help,
  .magic_config_key   = "image",
  .dump_plugin        = plugin_dump_plugin,
  .after_fork         = plugin_after_fork,
  .cleanup            = plugin_cleanup,
  .list_exports       = plugin_list_exports,
  .open               = plugin_open,
  .close              = plugin_close,
  .export_description = plugin_export_description,
  .get_size           = plugin_get_size,
  .can_write          = plugin_can_write,
  .can_flush          = answer_yes,
  .can_trim           = plugin_can_write,
  .can_zero           = plugin_can_write,
  .can_fast_zero      = answer_yes,
  .can_fua            = answer_fua_native,
  .can_multi_conn     = answer_yes,
  .can_extents        = answer_yes,
  .pread              = plugin_pread,
  .pwrite             = plugin_pwrite,
  .flush              = plugin_flush,
  .trim               = plugin_trim,
  .zero               = plugin_zero,
  .extents            = plugin_extents,
};

NBDKIT_REGISTER_PLUGIN (plugin)
