/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit: asynchronous requests, an extension of the plugin ABI that
 * this server offers and nbdkit does not.  A plugin built against
 * <nbdkit-plugin.h> alone, or for nbdkit, is unaffected: the server
 * looks for the symbol below and, without it, calls the plugin as
 * before.  nbdkit-async(3) is the reference; in short:
 *
 * A plugin that can start an operation and learn later that it ended
 * (a remote server's reply, an io_uring completion, a timer) exports
 *
 *   const struct nbdkit_async_ops nbdkit_async_ops = { ... };
 *
 * For a request it takes, the server calls the matching callback on a
 * worker thread with a request handle REQ.  The callback returns 0 if
 * it took the request: it (or any thread it owns) later calls
 * nbdkit_async_complete (REQ, ERR) exactly once, with 0 or an errno,
 * and the server answers the client then.  Until that call BUF (of a
 * pread or pwrite) stays valid and is the plugin's to fill or read;
 * after it REQ and BUF are the server's again and must not be touched.
 * Or the callback returns -1 with errno set (or nbdkit_set_error),
 * having taken nothing and without calling nbdkit_async_complete: the
 * request fails with that error.
 *
 * The worker that submitted does not wait for the completion: it reads
 * the next request.  A callback left NULL, and any request the server
 * cannot hand over as it is (a flag the plugin's can_fua or can_zero
 * asked the server to emulate, a length over 4 GiB), goes to the
 * plugin's ordinary callbacks, which it must still have.
 *
 * The server uses these only when the thread model is
 * NBDKIT_THREAD_MODEL_PARALLEL, and only through filters that pass
 * requests on (below).
 *
 * A filter between the client and such a plugin passes a request on
 * asynchronously in one of two ways.  A filter without the data
 * callback of that command (and without get_size, nor the can_*
 * callbacks that bear on it) changes nothing about it and is passed
 * through as it stands.  A filter that adjusts requests (an offset, a
 * partition) exports
 *
 *   const struct nbdkit_async_filter_ops nbdkit_async_filter_ops = ...;
 *
 * whose prepare callback, on the worker, looks at one request and
 * either passes it on (NBDKIT_ASYNC_PASS, having adjusted *count,
 * *offset and *flags for the layer below), or asks for it to take the
 * synchronous path through the filter's ordinary callbacks
 * (NBDKIT_ASYNC_SYNC), or fails it (-1 with *err set).  prepare must
 * not block, call the layer below's data functions, or keep anything:
 * a request it passes may never reach the plugin (another layer may
 * ask for the synchronous path), and one it passes is not shown to
 * the filter again.  Any other filter in the stack makes every
 * request synchronous.
 */
#ifndef NBDKIT_ASYNC_H
#define NBDKIT_ASYNC_H

#include <stdint.h>

#include <nbdkit-common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NBDKIT_ASYNC_VERSION 1

/* The server's handle for one request in flight (opaque). */
struct nbdkit_async_request;

struct nbdkit_async_ops {
  uint32_t version;             /* NBDKIT_ASYNC_VERSION */
  /* The most requests in flight on one connection; 0 for the server's
   * default (256).  When a connection has this many, the server stops
   * reading its requests until one completes.
   */
  uint32_t max_in_flight;
  int (*pread) (void *handle, struct nbdkit_async_request *req, void *buf,
                uint32_t count, uint64_t offset, uint32_t flags);
  int (*pwrite) (void *handle, struct nbdkit_async_request *req,
                 const void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags);
  int (*flush) (void *handle, struct nbdkit_async_request *req,
                uint32_t flags);
  int (*trim) (void *handle, struct nbdkit_async_request *req,
               uint32_t count, uint64_t offset, uint32_t flags);
  int (*zero) (void *handle, struct nbdkit_async_request *req,
               uint32_t count, uint64_t offset, uint32_t flags);
  /* The connection is ending with requests still in flight (the client
   * hung up, or the server stops): complete them soon, with any error.
   * Called at most once per connection, then the server waits for
   * every completion before it calls close.  May be NULL: then it just
   * waits.
   */
  void (*cancel) (void *handle);
};

/* The commands of an asynchronous request, as prepare sees them. */
#define NBDKIT_ASYNC_CMD_PREAD  0
#define NBDKIT_ASYNC_CMD_PWRITE 1
#define NBDKIT_ASYNC_CMD_FLUSH  2
#define NBDKIT_ASYNC_CMD_TRIM   3
#define NBDKIT_ASYNC_CMD_ZERO   4

/* What a filter's prepare decides for one request. */
#define NBDKIT_ASYNC_SYNC 0     /* through the filter's own callbacks */
#define NBDKIT_ASYNC_PASS 1     /* on to the layer below, as adjusted */

struct nbdkit_next_ops;         /* nbdkit_next, of <nbdkit-filter.h> */

struct nbdkit_async_filter_ops {
  uint32_t version;             /* NBDKIT_ASYNC_VERSION */
  /* CMD is NBDKIT_ASYNC_CMD_*; *count is 0 for a flush, *flags are the
   * NBDKIT_FLAG_* of the request.  The request has been checked against
   * this filter's size and capabilities already.
   */
  int (*prepare) (struct nbdkit_next_ops *next, void *handle, int cmd,
                  uint32_t *count, uint64_t *offset, uint32_t *flags,
                  int *err);
};

/* Complete REQ with ERR (0, or an errno for the client's NBD error).
 * From any thread, at most once per request, holding any lock of the
 * plugin's: it never waits on the client, only queues the reply.
 */
NBDKIT_EXTENSION_DECL (void, nbdkit_async_complete,
                    (struct nbdkit_async_request *req, int err));

/* The server's event loop, for a plugin that would rather not own a
 * thread to wait on its descriptors (a socket, a timerfd, an eventfd).
 * CB is called on the server's event thread, with the poll(2) events
 * seen (POLLIN, POLLOUT, POLLERR, POLLHUP), for as long as FD is ready
 * for EVENTS (level-triggered); it must not block, and may complete
 * requests and call the three functions below.  nbdkit_async_watch
 * returns NULL (error logged) on failure.  After nbdkit_async_unwatch
 * returns, CB is not running (unless the caller is CB) and is not
 * called again; unwatch before closing FD.
 */
struct nbdkit_async_watch;

NBDKIT_EXTENSION_DECL (struct nbdkit_async_watch *, nbdkit_async_watch,
                    (int fd, int events,
                     void (*cb) (void *opaque, int revents), void *opaque));
NBDKIT_EXTENSION_DECL (int, nbdkit_async_watch_events,
                    (struct nbdkit_async_watch *w, int events));
NBDKIT_EXTENSION_DECL (void, nbdkit_async_unwatch,
                    (struct nbdkit_async_watch *w));

/* Weak, as this server's other additions (nbdkit-common.h): a plugin
 * using them still loads in nbdkit, which never calls the callbacks
 * of struct nbdkit_async_ops, so nbdkit_async_complete is not reached
 * there.  A watch fails (NULL, or -1) and unwatch does nothing.
 */
#if NBDKIT_WEAK_EXTENSIONS
#define nbdkit_async_complete(req, err) \
  NBDKIT_CALL_OR_ (nbdkit_async_complete, (req, err), (void) 0)
#define nbdkit_async_watch(fd, events, cb, opaque) \
  NBDKIT_CALL_OR_ (nbdkit_async_watch, (fd, events, cb, opaque), \
                   (nbdkit_missing_ ("nbdkit_async_watch"), \
                    (struct nbdkit_async_watch *) 0))
#define nbdkit_async_watch_events(w, events) \
  NBDKIT_CALL_OR_ (nbdkit_async_watch_events, (w, events), \
                   nbdkit_missing_ ("nbdkit_async_watch_events"))
#define nbdkit_async_unwatch(w) \
  NBDKIT_CALL_OR_ (nbdkit_async_unwatch, (w), (void) 0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* NBDKIT_ASYNC_H */
