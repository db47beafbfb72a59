/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A file store: a byte range kept in a temporary file on disk rather
 * than in the process's memory, for overlays that may grow as large as
 * the disk under them (the cow filter's overlay, the cache filter's
 * cache).
 *
 * The file is made in $TMPDIR (/var/tmp when TMPDIR is unset or empty,
 * as nbdkit does) and has no name from the moment it exists: it is
 * opened with O_TMPFILE where the file system offers it, else made with
 * mkostemp and unlinked at once.  So it takes disk space only for the
 * bytes written (it is sparse), and the kernel frees it when the
 * descriptor closes, even if the process is killed.  Memory is the
 * kernel's page cache in front of the file, which the kernel writes
 * back and reclaims under pressure (a memory cgroup's limit included),
 * so the process itself holds none of the data.
 *
 * Where it is safe (filestore.c says when), the file is also mapped,
 * and reads and overwrites copy through the mapping instead of making
 * a system call each (measured on ext4 for 4 KiB: 0.5 us a copy, 1.3
 * us a pread, 3.6 us a pwrite).  Writes that may need new disk space
 * always go through pwrite, so a full file system fails them with
 * ENOSPC rather than killing the process with SIGBUS.
 *
 * The store knows nothing of nbdkit: callers keep every range inside
 * the size given to filestore_set_size, and errors are -1 (or NULL)
 * with errno set.  Every function except filestore_set_size may be
 * called from many threads at once; a read racing a write of the same
 * bytes may see either, so callers order them with their own locks.
 */
#ifndef NBDKIT_FILESTORE_H
#define NBDKIT_FILESTORE_H

#include <stdbool.h>
#include <stdint.h>

struct filestore;

/* The directory the file goes in: $TMPDIR, or /var/tmp. */
extern const char *filestore_dir (void);

/* A read-write file with no name in filestore_dir (), as the store's
 * own (O_TMPFILE, else mkostemp and unlink), for callers that only
 * need such a file (the gzip and bzip2 filters' decompressed content):
 * its descriptor, or -1 with errno set.
 */
extern int filestore_unnamed_fd (void);

/* Make an empty store (every byte reads as zeroes) in filestore_dir ().
 * NULL with errno set if the file cannot be made.
 */
extern struct filestore *filestore_create (void);

/* Say how many bytes the store holds (at most INT64_MAX), once, before
 * any other use but filestore_destroy.  The file stays sparse.  Never
 * fails: where the file cannot be mapped the store works through
 * pread and pwrite alone.
 */
extern void filestore_set_size (struct filestore *s, uint64_t size);

/* Close the file (which frees its space).  NULL is allowed. */
extern void filestore_destroy (struct filestore *s);

/* Copy COUNT bytes at OFFSET into BUF.  -1 with errno (EIO, say) if
 * the file could not be read.
 */
extern int filestore_read (struct filestore *s, void *buf, uint32_t count,
                           uint64_t offset);

/* Store COUNT bytes of BUF at OFFSET.  -1 with errno (ENOSPC when the
 * file system is full); bytes before the failure may have been
 * written.
 */
extern int filestore_write (struct filestore *s, const void *buf,
                            uint32_t count, uint64_t offset);

/* As filestore_write, for bytes that lie in whole pages the caller
 * wrote with filestore_write and has not discarded since (their disk
 * space is held), which lets the store copy through its mapping.
 * Writing any other bytes this way may kill the process with SIGBUS
 * when the disk is full.
 */
extern int filestore_overwrite (struct filestore *s, const void *buf,
                                uint32_t count, uint64_t offset);

/* The caller no longer needs the bytes of [OFFSET, OFFSET + COUNT):
 * give their disk space (and page cache) back where the file system
 * can punch holes.  Afterwards the range reads as zeroes or as it did
 * before, so callers must not rely on either.  Never fails.
 */
extern void filestore_discard (struct filestore *s, uint32_t count,
                               uint64_t offset);

/* Whether reads and overwrites go through a mapping, for debug
 * messages and tests.
 */
extern bool filestore_mapped (struct filestore *s);

/* Bytes of disk the file takes now, for debug messages and tests. */
extern uint64_t filestore_allocated (struct filestore *s);

#endif /* NBDKIT_FILESTORE_H */
