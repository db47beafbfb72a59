/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The example-async plugin: a RAM disk whose requests take DELAY
 * milliseconds and are completed from a thread of the plugin's own
 * (nbdkit-async(3)), so one connection may have many in flight while
 * the server's threads go on reading the next ones.
 *
 * It includes only installed headers, so it builds on its own with
 *
 *   gcc -fPIC -shared $(pkg-config --cflags nbdkit) example-async.c \
 *       -o nbdkit-example-async-plugin.so -pthread
 *
 * Each connection's handle owns a timer thread and a queue, in the
 * order the requests came, of what it was handed: the asynchronous
 * callbacks (async_*) queue a request due DELAY from now and return at
 * once; the timer thread waits until the oldest is due, does it on the
 * disk and calls nbdkit_async_complete.  With loop=server the handle
 * owns no thread: a timerfd set for the oldest request's time is
 * watched by the server's event loop (nbdkit_async_watch), whose
 * thread runs what is due and completes it.  The buffer of a read or a
 * write stays the plugin's until then.  A request that touches the
 * byte at fail=OFFSET completes with fail-errno instead.  cancel (the
 * client hung up with requests in flight) completes everything queued
 * at once with ESHUTDOWN, touching nothing.  close checks that nothing
 * is left in flight, which the server promises.
 *
 * The synchronous callbacks do the same on the calling thread after
 * the same delay: the server calls them for a request that takes the
 * synchronous path (a filter above that does not pass it on).
 *
 * Locking: disk_lock (read-write) protects the disk's bytes; h->lock
 * protects a handle's queue and counters, and is never held while the
 * disk lock is taken or a request completes.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/timerfd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static int64_t size = 1024 * 1024;
static unsigned delay_ms = 10;
static int64_t fail_offset = -1;
static int fail_errno = EIO;
static bool server_loop = false;        /* loop=server */

extern struct nbdkit_async_ops nbdkit_async_ops;

static char *disk;
static pthread_rwlock_t disk_lock = PTHREAD_RWLOCK_INITIALIZER;

enum op_kind { OP_READ, OP_WRITE, OP_FLUSH, OP_TRIM, OP_ZERO };

/* One request handed to us, waiting for its time. */
struct op {
  struct op *next;
  struct nbdkit_async_request *req;
  enum op_kind kind;
  void *buf;
  uint32_t count;
  uint64_t offset;
  struct timespec due;          /* CLOCK_MONOTONIC */
};

struct handle {
  pthread_mutex_t lock;         /* protects what follows */
  pthread_cond_t cond;          /* the queue changed, or stop */
  struct op *head, *tail;
  unsigned in_flight;           /* handed to us, not yet completed */
  uint64_t submitted, completed;
  bool cancel, stop;
  pthread_t thread;             /* loop=own */
  int tfd;                      /* loop=server: the timerfd */
  struct nbdkit_async_watch *watch;
};

static int
example_async_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    size = nbdkit_parse_size (value);
    return size == -1 ? -1 : 0;
  }
  if (strcmp (key, "delay") == 0)
    return nbdkit_parse_unsigned ("delay", value, &delay_ms);
  if (strcmp (key, "max-in-flight") == 0)
    return nbdkit_parse_uint32_t ("max-in-flight", value,
                                  &nbdkit_async_ops.max_in_flight);
  if (strcmp (key, "loop") == 0) {
    if (strcmp (value, "server") == 0 || strcmp (value, "own") == 0) {
      server_loop = strcmp (value, "server") == 0;
      return 0;
    }
    nbdkit_error ("loop=%s: must be own or server", value);
    return -1;
  }
  if (strcmp (key, "fail") == 0) {
    fail_offset = nbdkit_parse_size (value);
    return fail_offset == -1 ? -1 : 0;
  }
  if (strcmp (key, "fail-errno") == 0) {
    static const struct { const char *name; int e; } names[] = {
      { "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EPERM", EPERM },
      { "EINVAL", EINVAL }, { "ENOMEM", ENOMEM },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strcmp (value, names[i].name) == 0) {
        fail_errno = names[i].e;
        return 0;
      }
    nbdkit_error ("fail-errno: unknown error %s", value);
    return -1;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
example_async_get_ready (void)
{
  disk = calloc (1, size);
  if (!disk) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  return 0;
}

static void
example_async_unload (void)
{
  free (disk);
}

/* Does [offset, offset+count) hold the failing byte? */
static bool
fails (uint32_t count, uint64_t offset)
{
  return fail_offset >= 0 && (uint64_t) fail_offset >= offset &&
    (uint64_t) fail_offset - offset < count;
}

/* Do OP's work on the disk: 0 or an errno. */
static int
perform (enum op_kind kind, void *buf, uint32_t count, uint64_t offset)
{
  if (kind != OP_FLUSH && fails (count, offset))
    return fail_errno;
  switch (kind) {
  case OP_READ:
    pthread_rwlock_rdlock (&disk_lock);
    memcpy (buf, disk + offset, count);
    break;
  case OP_WRITE:
    pthread_rwlock_wrlock (&disk_lock);
    memcpy (disk + offset, buf, count);
    break;
  case OP_TRIM:
  case OP_ZERO:
    pthread_rwlock_wrlock (&disk_lock);
    memset (disk + offset, 0, count);
    break;
  case OP_FLUSH:
    return 0;
  }
  pthread_rwlock_unlock (&disk_lock);
  return 0;
}

/* Take the oldest request off H's queue, do it (or, once cancelled,
 * fail it with ESHUTDOWN untouched) and complete it.  Called and
 * returns with h->lock held, dropping it meanwhile.  Returns whether it
 * was cancelled.
 */
static bool
complete_oldest (struct handle *h)
{
  struct op *op = h->head;
  h->head = op->next;
  if (!h->head)
    h->tail = NULL;
  bool cancelled = h->cancel;
  pthread_mutex_unlock (&h->lock);

  int err = cancelled ? ESHUTDOWN
    : perform (op->kind, op->buf, op->count, op->offset);
  /* Counted before it is completed: once the last completion is
   * called, the server may close this handle at once (close then
   * waits for this thread, or unwatches the timer).
   */
  pthread_mutex_lock (&h->lock);
  h->in_flight--;
  h->completed++;
  pthread_mutex_unlock (&h->lock);
  nbdkit_async_complete (op->req, err);
  free (op);
  pthread_mutex_lock (&h->lock);
  return cancelled;
}

/* The timer thread: complete each request when it is due, in order. */
static void *
timer (void *arg)
{
  struct handle *h = arg;
  pthread_mutex_lock (&h->lock);
  for (;;) {
    struct op *op = h->head;
    if (!op) {
      if (h->stop)
        break;
      pthread_cond_wait (&h->cond, &h->lock);
      continue;
    }
    if (!h->cancel &&
        pthread_cond_timedwait (&h->cond, &h->lock, &op->due) != ETIMEDOUT)
      continue;                 /* woken: look again */
    complete_oldest (h);
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
}

/* loop=server: set the timerfd for OP's time (a time past fires at
 * once), or for now when cancelling.  With h->lock held.
 */
static void
arm (struct handle *h, const struct op *op)
{
  struct itimerspec its = { .it_value = op->due };
  if (h->cancel)
    its.it_value = (struct timespec) { .tv_nsec = 1 };
  timerfd_settime (h->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* loop=server: the timerfd fired, on the server's event thread.  Run
 * and complete every request now due (all of them if cancelled), then
 * set the timer for the next.
 */
static void
on_timer (void *opaque, int revents)
{
  struct handle *h = opaque;
  uint64_t expirations;
  ssize_t r = read (h->tfd, &expirations, sizeof expirations);
  (void) r;
  struct timespec now;
  clock_gettime (CLOCK_MONOTONIC, &now);
  unsigned cancelled_n = 0;

  pthread_mutex_lock (&h->lock);
  while (h->head &&
         (h->cancel || h->head->due.tv_sec < now.tv_sec ||
          (h->head->due.tv_sec == now.tv_sec &&
           h->head->due.tv_nsec <= now.tv_nsec))) {
    cancelled_n += complete_oldest (h);
  }
  if (h->head)
    arm (h, h->head);
  pthread_mutex_unlock (&h->lock);
  /* Logged with this plugin's name, though on the server's thread. */
  if (cancelled_n)
    nbdkit_debug ("timer: %u cancelled requests completed", cancelled_n);
}

static void *
example_async_open (int readonly)
{
  struct handle *h = calloc (1, sizeof *h);
  if (!h) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  pthread_condattr_t attr;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&h->cond, &attr);
  pthread_condattr_destroy (&attr);
  pthread_mutex_init (&h->lock, NULL);
  h->tfd = -1;
  if (server_loop) {
    h->tfd = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (h->tfd == -1)
      nbdkit_error ("timerfd_create: %m");
    else if ((h->watch = nbdkit_async_watch (h->tfd, POLLIN, on_timer, h)))
      return h;
    if (h->tfd >= 0)
      close (h->tfd);
    pthread_cond_destroy (&h->cond);
    pthread_mutex_destroy (&h->lock);
    free (h);
    return NULL;
  }
  int e = pthread_create (&h->thread, NULL, timer, h);
  if (e != 0) {
    errno = e;
    nbdkit_error ("pthread_create: %m");
    pthread_cond_destroy (&h->cond);
    pthread_mutex_destroy (&h->lock);
    free (h);
    return NULL;
  }
  return h;
}

static void
example_async_close (void *handle)
{
  struct handle *h = handle;
  pthread_mutex_lock (&h->lock);
  /* The server waits for every completion before it closes. */
  if (h->in_flight > 0)
    nbdkit_error ("close with %u requests in flight", h->in_flight);
  h->stop = true;
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
  if (server_loop) {
    nbdkit_async_unwatch (h->watch);
    close (h->tfd);
  }
  else
    pthread_join (h->thread, NULL);
  nbdkit_debug ("close: %" PRIu64 " requests submitted, %" PRIu64
                " completed", h->submitted, h->completed);
  pthread_cond_destroy (&h->cond);
  pthread_mutex_destroy (&h->lock);
  free (h);
}

static void
due_in (struct timespec *ts, unsigned ms)
{
  clock_gettime (CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long) (ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

/* Queue a request for the timer thread.  -1 (taking nothing) if out of
 * memory.
 */
static int
submit (struct handle *h, struct nbdkit_async_request *req,
        enum op_kind kind, void *buf, uint32_t count, uint64_t offset)
{
  struct op *op = malloc (sizeof *op);
  if (!op) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  *op = (struct op) { .req = req, .kind = kind, .buf = buf,
                      .count = count, .offset = offset };
  due_in (&op->due, delay_ms);
  pthread_mutex_lock (&h->lock);
  if (h->tail)
    h->tail->next = op;
  else {
    h->head = op;
    pthread_cond_signal (&h->cond);
  }
  h->tail = op;
  h->in_flight++;
  h->submitted++;
  if (server_loop && h->head == op)
    arm (h, op);
  pthread_mutex_unlock (&h->lock);
  return 0;
}

static int
async_pread (void *handle, struct nbdkit_async_request *req, void *buf,
             uint32_t count, uint64_t offset, uint32_t flags)
{
  return submit (handle, req, OP_READ, buf, count, offset);
}

static int
async_pwrite (void *handle, struct nbdkit_async_request *req,
              const void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  /* The server does not touch the buffer until the completion. */
  return submit (handle, req, OP_WRITE, (void *) buf, count, offset);
}

static int
async_flush (void *handle, struct nbdkit_async_request *req, uint32_t flags)
{
  return submit (handle, req, OP_FLUSH, NULL, 0, 0);
}

static int
async_trim (void *handle, struct nbdkit_async_request *req, uint32_t count,
            uint64_t offset, uint32_t flags)
{
  return submit (handle, req, OP_TRIM, NULL, count, offset);
}

static int
async_zero (void *handle, struct nbdkit_async_request *req, uint32_t count,
            uint64_t offset, uint32_t flags)
{
  return submit (handle, req, OP_ZERO, NULL, count, offset);
}

static void
async_cancel (void *handle)
{
  struct handle *h = handle;
  pthread_mutex_lock (&h->lock);
  nbdkit_debug ("cancel: %u requests in flight", h->in_flight);
  h->cancel = true;
  pthread_cond_signal (&h->cond);
  if (server_loop && h->head)
    arm (h, h->head);
  pthread_mutex_unlock (&h->lock);
}

/* Only the server looks this up, by name.  Not const: max-in-flight
 * sets a field (the server reads it as each connection starts).
 */
NBDKIT_DLL_PUBLIC struct nbdkit_async_ops nbdkit_async_ops = {
  .version = NBDKIT_ASYNC_VERSION,
  .pread = async_pread,
  .pwrite = async_pwrite,
  .flush = async_flush,
  .trim = async_trim,
  .zero = async_zero,
  .cancel = async_cancel,
};

/* The synchronous path (a filter above that did not pass the request
 * on): the same, on this thread.
 */
static int
sync_op (enum op_kind kind, void *buf, uint32_t count, uint64_t offset)
{
  if (delay_ms > 0 && nbdkit_nanosleep (delay_ms / 1000,
                                        (delay_ms % 1000) * 1000000) == -1)
    return -1;
  int err = perform (kind, buf, count, offset);
  if (err) {
    nbdkit_set_error (err);
    return -1;
  }
  return 0;
}

static int
example_async_pread (void *handle, void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags)
{
  return sync_op (OP_READ, buf, count, offset);
}

static int
example_async_pwrite (void *handle, const void *buf, uint32_t count,
                      uint64_t offset, uint32_t flags)
{
  return sync_op (OP_WRITE, (void *) buf, count, offset);
}

static int
example_async_flush (void *handle, uint32_t flags)
{
  return sync_op (OP_FLUSH, NULL, 0, 0);
}

static int
example_async_trim (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
  return sync_op (OP_TRIM, NULL, count, offset);
}

static int
example_async_zero (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
  return sync_op (OP_ZERO, NULL, count, offset);
}

static int64_t
example_async_get_size (void *handle)
{
  return size;
}

static int
example_async_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;     /* memory: every write is as durable as
                                 * it gets */
}

static int
example_async_can_multi_conn (void *handle)
{
  return 1;
}

static struct nbdkit_plugin plugin = {
  .name = "example-async",
  .longname = "asynchronous example plugin",
  .config = example_async_config,
  .config_help =
    "size=SIZE          Size of the RAM disk (default 1M).\n"
    "delay=MS           Each request takes MS milliseconds (default 10).\n"
    "fail=OFFSET        Requests touching this byte fail.\n"
    "fail-errno=ERRNO   ... with this error (default EIO).\n"
    "max-in-flight=N    Requests in flight per connection at most.\n"
    "loop=own|server    Complete from a thread of each connection (own,\n"
    "                   the default) or the server's event loop.",
  .get_ready = example_async_get_ready,
  .unload = example_async_unload,
  .open = example_async_open,
  .close = example_async_close,
  .get_size = example_async_get_size,
  .can_fua = example_async_can_fua,
  .can_multi_conn = example_async_can_multi_conn,
  .pread = example_async_pread,
  .pwrite = example_async_pwrite,
  .flush = example_async_flush,
  .trim = example_async_trim,
  .zero = example_async_zero,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin)
