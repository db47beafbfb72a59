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
 */
#ifndef NBDKIT_ZEROCOPY_H
#define NBDKIT_ZEROCOPY_H

#include <stdint.h>
#include <sys/uio.h>

#define NBDKIT_ZEROCOPY_VERSION 1

struct nbdkit_zerocopy_ops {
  uint32_t version;             /* NBDKIT_ZEROCOPY_VERSION */
  int (*map_read) (void *handle, uint32_t count, uint64_t offset,
                   struct iovec *iov, int *niov);
  void (*unmap_read) (void *handle);
};

#endif /* NBDKIT_ZEROCOPY_H */
