/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's aio=io_uring engine: one io_uring per open
 * descriptor (so per connection) and one completion thread that reaps
 * it.
 *
 * Requests enter through uring_submit, called by the server's worker
 * threads from the plugin's asynchronous callbacks: each becomes one
 * submission queue entry (a read, a write, or an fdatasync), pushed
 * to the kernel at once with io_uring_enter, and the worker goes back
 * to reading the client.  The completion thread waits on the
 * completion queue; for each completion it asks the plugin's DONE
 * hook (async.c) what the result means (it also finishes a short
 * transfer), then calls nbdkit_async_complete.  uring_free queues a
 * no-op with no request as the stop sign and joins the thread.
 *
 * Locking: sq_lock protects the submission queue (liburing's
 * submission side is not thread-safe, and several workers submit).  It
 * is a leaf: nothing else is taken under it.  The completion queue
 * belongs to the completion thread alone, which holds no lock while it
 * calls DONE or completes a request.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>            /* RWF_DSYNC */
#include <time.h>

#include <liburing.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-async.h>

#include "uring.h"

/* One operation in the kernel: the user_data of its entry. */
struct uring_op {
  struct nbdkit_async_request *req;
  enum uring_kind kind;
  bool fua;
  char *buf;
  uint32_t count;
  uint64_t offset;
};

struct uring {
  struct io_uring ring;
  uring_done_fn done;
  void *opaque;
  pthread_mutex_t sq_lock;      /* protects the submission queue */
  pthread_t reaper;
  _Atomic unsigned in_flight;   /* submitted, not yet completed */
};

/* With sq_lock held: a free submission entry.  The queue is emptied
 * by every submission and holds as many entries as requests may be in
 * flight, so it is full only if an earlier io_uring_enter failed: push
 * those once more.
 */
static struct io_uring_sqe *
get_sqe (struct uring *u)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe (&u->ring);

  if (sqe == NULL) {
    io_uring_submit (&u->ring);
    sqe = io_uring_get_sqe (&u->ring);
  }
  return sqe;
}

/* With sq_lock held: hand what is queued to the kernel.  A failure
 * leaves the entry queued, and the next submission pushes it; it can
 * only be transient here (the completion queue, twice the submission
 * queue, never overflows), so retry a little first.
 */
static void
push (struct uring *u)
{
  for (int i = 0; i < 100; i++) {
    int r = io_uring_submit (&u->ring);

    if (r >= 0 || (r != -EINTR && r != -EAGAIN && r != -EBUSY)) {
      if (r < 0)
        nbdkit_error ("io_uring_submit: %s", strerror (-r));
      return;
    }
    nanosleep (&(struct timespec) { .tv_nsec = 100000 }, NULL);
  }
  nbdkit_error ("io_uring_submit: still busy, left queued");
}

static void *
reaper (void *arg)
{
  struct uring *u = arg;
  bool stop = false;

  while (!stop) {
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    int r = io_uring_wait_cqe (&u->ring, &cqe);

    if (r == -EINTR)
      continue;
    if (r < 0) {
      /* Nothing to reap can be learned any more; do not spin. */
      nbdkit_error ("io_uring_wait_cqe: %s", strerror (-r));
      nanosleep (&(struct timespec) { .tv_nsec = 10000000 }, NULL);
      continue;
    }
    io_uring_for_each_cqe (&u->ring, head, cqe) {
      struct uring_op *op = io_uring_cqe_get_data (cqe);

      n++;
      if (op == NULL) {         /* uring_free's stop sign */
        stop = true;
        continue;
      }
      int err = u->done (u->opaque, op->kind, op->buf, op->count,
                         op->offset, op->fua, cqe->res);
      struct nbdkit_async_request *req = op->req;

      free (op);
      /* After the last of these the server may close the handle, and
       * with it call uring_free, which waits for this thread: count
       * it out first.
       */
      u->in_flight--;
      nbdkit_async_complete (req, err);
    }
    io_uring_cq_advance (&u->ring, n);
  }
  return NULL;
}

struct uring *
uring_new (int fd, uring_done_fn done, void *opaque)
{
  struct uring *u = calloc (1, sizeof *u);
  int r;

  if (u == NULL)
    return NULL;
  u->done = done;
  u->opaque = opaque;
  /* No COOP_TASKRUN: a completion must reach the worker that submitted
   * even while it sleeps reading the client.
   */
  r = io_uring_queue_init (URING_ENTRIES, &u->ring, 0);
  if (r < 0) {
    free (u);
    errno = -r;
    return NULL;
  }
  /* Every operation names the one descriptor: register it, so the
   * kernel need not look it up (and count a reference) each time.
   */
  if (io_uring_register_files (&u->ring, &fd, 1) < 0) {
    io_uring_queue_exit (&u->ring);
    free (u);
    errno = ENOTSUP;
    return NULL;
  }
  pthread_mutex_init (&u->sq_lock, NULL);
  r = pthread_create (&u->reaper, NULL, reaper, u);
  if (r != 0) {
    pthread_mutex_destroy (&u->sq_lock);
    io_uring_queue_exit (&u->ring);
    free (u);
    errno = r;
    return NULL;
  }
  return u;
}

void
uring_free (struct uring *u)
{
  struct io_uring_sqe *sqe;

  if (u == NULL)
    return;
  /* The server promises this; say so if it ever breaks the promise. */
  if (u->in_flight > 0)
    nbdkit_error ("io_uring: closed with %u requests in flight",
                  (unsigned) u->in_flight);
  pthread_mutex_lock (&u->sq_lock);
  sqe = get_sqe (u);
  if (sqe) {
    io_uring_prep_nop (sqe);
    io_uring_sqe_set_data (sqe, NULL);
    push (u);
  }
  pthread_mutex_unlock (&u->sq_lock);
  if (sqe == NULL) {
    /* Cannot happen with nothing in flight; never free a ring a thread
     * still waits on.
     */
    nbdkit_error ("io_uring: cannot stop the completion thread");
    return;
  }
  pthread_join (u->reaper, NULL);
  pthread_mutex_destroy (&u->sq_lock);
  io_uring_queue_exit (&u->ring);
  free (u);
}

int
uring_submit (struct uring *u, struct nbdkit_async_request *req,
              enum uring_kind kind, void *buf, uint32_t count,
              uint64_t offset, bool fua)
{
  struct uring_op *op = malloc (sizeof *op);
  struct io_uring_sqe *sqe;

  if (op == NULL)
    return -1;
  *op = (struct uring_op) { .req = req, .kind = kind, .fua = fua,
                            .buf = buf, .count = count, .offset = offset };
  pthread_mutex_lock (&u->sq_lock);
  sqe = get_sqe (u);
  if (sqe == NULL) {
    pthread_mutex_unlock (&u->sq_lock);
    free (op);
    errno = EAGAIN;
    return -1;
  }
  /* Index 0 of the registered files is the descriptor. */
  switch (kind) {
  case URING_READ:
    io_uring_prep_read (sqe, 0, buf, count, offset);
    break;
  case URING_WRITE:
    io_uring_prep_write (sqe, 0, buf, count, offset);
    if (fua)
      sqe->rw_flags = RWF_DSYNC;
    break;
  case URING_FDATASYNC:
    io_uring_prep_fsync (sqe, 0, IORING_FSYNC_DATASYNC);
    break;
  }
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data (sqe, op);
  u->in_flight++;
  push (u);
  pthread_mutex_unlock (&u->sq_lock);
  return 0;
}
