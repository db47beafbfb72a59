/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Whole reads and writes: loops over read/write and pread/pwrite that
 * carry on after short transfers and EINTR, so callers see all or
 * nothing.
 *
 * The read functions return the number of bytes read, which is less
 * than COUNT only at end of file; the write functions return COUNT.
 * All return -1 with errno set on error (EIO for a write that makes no
 * progress).  Bytes moved before an error are not reported.
 */
#ifndef NBDKIT_FULL_RW_H
#define NBDKIT_FULL_RW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern ssize_t full_read (int fd, void *buf, size_t count);
extern ssize_t full_write (int fd, const void *buf, size_t count);
extern ssize_t full_pread (int fd, void *buf, size_t count, uint64_t offset);
extern ssize_t full_pwrite (int fd, const void *buf, size_t count,
                            uint64_t offset);

#endif /* NBDKIT_FULL_RW_H */
