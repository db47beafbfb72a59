/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's aio=io_uring engine: see uring.c. */
#ifndef NBDKIT_FILE_URING_H
#define NBDKIT_FILE_URING_H

#include <stdbool.h>
#include <stdint.h>

struct nbdkit_async_request;

/* Submission queue entries of one ring, and so the most requests one
 * connection has in flight (nbdkit_async_ops.max_in_flight).
 */
#define URING_ENTRIES 256

enum uring_kind { URING_READ, URING_WRITE, URING_FDATASYNC };

/* Called on the ring's completion thread when an operation ends, with
 * the kernel's result RES (bytes transferred, or -errno).  Returns the
 * errno the request completes with (0: success).  It may finish a
 * short transfer itself, synchronously.
 */
typedef int (*uring_done_fn) (void *opaque, enum uring_kind kind, char *buf,
                              uint32_t count, uint64_t offset, bool fua,
                              int32_t res);

struct uring;

/* A ring on FD and its completion thread.  NULL with errno set (and
 * nothing reported) if the kernel or the process refuses io_uring.
 */
extern struct uring *uring_new (int fd, uring_done_fn done, void *opaque);
/* Nothing may be in flight (the server waits for every completion
 * before close).  Stops the thread and frees the ring.
 */
extern void uring_free (struct uring *u);
/* Start one operation for REQ; nbdkit_async_complete is called from
 * the completion thread once DONE has said how it ended.  A write
 * with FUA is durable when it completes (RWF_DSYNC).  Returns 0, or -1
 * with errno set having taken nothing (the caller serves it another
 * way).
 */
extern int uring_submit (struct uring *u, struct nbdkit_async_request *req,
                         enum uring_kind kind, void *buf, uint32_t count,
                         uint64_t offset, bool fua);

#endif /* NBDKIT_FILE_URING_H */
