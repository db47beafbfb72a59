/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* An extension of the plugin ABI between this server and the plugins
 * built with it (not part of nbdkit's ABI): a plugin that keeps its
 * data in memory may export a "const struct nbdkit_zerocopy_ops"
 * named nbdkit_zerocopy_ops.  Then, for a read on a connection with
 * no filters, the server asks it where the bytes are and sends them
 * to the client from there, instead of having them copied into its
 * own buffer first.
 *
 * map_read describes [offset, offset + count) as at most *niov
 * iovecs (on return, how many it used), and returns 0; the memory
 * they point at must stay valid, and must not be freed or cleared,
 * until the same thread calls unmap_read, which the server does
 * straight after the send (it never waits on the client in between:
 * what the socket does not take at once is copied out first).  It
 * returns -1 with errno set if it cannot (E2BIG: more pieces than
 * *niov), and then holds nothing: the server falls back to pread.
 *
 * From version 2, writes too (both pointers, or neither).  For a
 * write without FUA, map_write may hand out memory of its own, as at
 * most *niov iovecs describing [offset, offset + count), for the server
 * to receive the payload into; it holds no lock meanwhile (the server
 * may wait on the client while filling it), and the data is not the
 * plugin's yet.  Once the request runs, the server calls unmap_write
 * with the same range and iovecs: with keep = 1 the bytes become the
 * plugin's data, exactly as pwrite would have written them (-1 with
 * errno set if that fails); with keep = 0 (the payload never all
 * arrived) the memory is just given back and nothing is written.
 * map_write returns -1 with errno set, holding nothing, when it would
 * rather not (for example where the data would only be copied again):
 * the server then receives into its own buffer and calls pwrite.
 *
 * From version 3, a plugin whose data is in a file may set read_fd
 * instead of (or as well as) the others: it tells the server that
 * [offset, offset + count) are the bytes at *fd_offset of the file
 * descriptor *fd, which stays open until the connection closes, and
 * the server sends them with sendfile (so from the page cache, with
 * no copy through its own memory).  It returns -1 with errno set if it
 * cannot, and the server calls pread.  So it does, from then on, if
 * the kernel cannot splice from that descriptor.  A file that shrinks
 * under a read in flight closes the connection (the reply has begun).
 */
#ifndef NBDKIT_ZEROCOPY_H
#define NBDKIT_ZEROCOPY_H

#include <stdint.h>
#include <sys/uio.h>

#define NBDKIT_ZEROCOPY_VERSION 3

struct nbdkit_zerocopy_ops {
  uint32_t version;             /* NBDKIT_ZEROCOPY_VERSION */
  int (*map_read) (void *handle, uint32_t count, uint64_t offset,
                   struct iovec *iov, int *niov);
  void (*unmap_read) (void *handle);
  /* Version 2. */
  int (*map_write) (void *handle, uint32_t count, uint64_t offset,
                    struct iovec *iov, int *niov);
  int (*unmap_write) (void *handle, uint32_t count, uint64_t offset,
                      const struct iovec *iov, int keep);
  /* Version 3. */
  int (*read_fd) (void *handle, uint32_t count, uint64_t offset,
                  int *fd, uint64_t *fd_offset);
};

#endif /* NBDKIT_ZEROCOPY_H */
