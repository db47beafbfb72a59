/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin: what its two files share.
 *
 * nbd.c owns the configuration, connecting to the upstream server (with
 * retries and a deadline) and the per-connection metadata callbacks;
 * io.c owns a connected upstream's background poller and the data
 * callbacks that run through it.
 */
#ifndef NBDKIT_NBD_PLUGIN_H
#define NBDKIT_NBD_PLUGIN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

/* One connection to the upstream server.  In shared mode one of these
 * serves every client; otherwise each client connection has its own.
 * libnbd's handle does its own locking, so any number of worker threads
 * issue commands on it at once while the poller thread moves the bytes.
 */
struct upstream {
  struct nbd_handle *nbd;
  int wake[2];                  /* pipe: a worker kicks the poller */
  pthread_t poller;
  bool poller_running;
  atomic_bool stopping;         /* the poller should return */
  unsigned request_timeout;     /* seconds, 0 = wait for ever */
};

/* The plugin's handle: one or more connections to the same export
 * (more only to an upstream that allows multi-conn, so that what one
 * connection wrote the others read, and one flush covers them all).
 * Requests go round the connections in turn; the handshake's answers
 * come from the first.
 */
struct proxy {
  unsigned n;
  atomic_uint next;
  struct upstream *up[];
};

/* io.c: the poller, and the data callbacks (their handle is a struct
 * proxy).
 */
extern int nbd_up_start_poller (struct upstream *up);
extern void nbd_up_stop_poller (struct upstream *up);
extern int nbd_io_pread (void *handle, void *buf, uint32_t count,
                         uint64_t offset, uint32_t flags);
extern int nbd_io_pwrite (void *handle, const void *buf, uint32_t count,
                          uint64_t offset, uint32_t flags);
extern int nbd_io_flush (void *handle, uint32_t flags);
extern int nbd_io_trim (void *handle, uint32_t count, uint64_t offset,
                        uint32_t flags);
extern int nbd_io_zero (void *handle, uint32_t count, uint64_t offset,
                        uint32_t flags);
extern int nbd_io_cache (void *handle, uint32_t count, uint64_t offset,
                         uint32_t flags);
struct nbdkit_extents;
extern int nbd_io_extents (void *handle, uint32_t count, uint64_t offset,
                           uint32_t flags, struct nbdkit_extents *extents);

#endif /* NBDKIT_NBD_PLUGIN_H */
