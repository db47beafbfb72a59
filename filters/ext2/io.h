/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* An ext2fs I/O manager whose channel reads and writes the filesystem
 * image through the layer below the filter (nbdkit_next), so libext2fs
 * never touches a file descriptor of its own.
 */
#ifndef NBDKIT_EXT2_IO_H
#define NBDKIT_EXT2_IO_H

#include <ext2fs/ext2fs.h>

#include <nbdkit-filter.h>

extern io_manager ext2_nbdkit_io_manager;

/* The name to pass to ext2fs_open with ext2_nbdkit_io_manager so that
 * the channel uses NEXT: a malloc'd string, or NULL with errno set.
 */
extern char *ext2_io_name (nbdkit_next *next);

#endif /* NBDKIT_EXT2_IO_H */
