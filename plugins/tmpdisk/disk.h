/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Disk files made by a shell command and served from a descriptor:
 * the part that the tmpdisk and ondemand plugins share (ondemand
 * compiles this directory's disk.c too).
 *
 * disk_vars_*: the parameters given to the plugin, kept in order and
 * handed to the command as shell variables.  disk_run_command: run the
 * command that creates a disk file.  disk_*_fd: the data callbacks of
 * a plugin whose handle is an open file descriptor; each uses only
 * pread/pwrite-style calls on it, so they may run in parallel.
 */
#ifndef NBDKIT_DISK_H
#define NBDKIT_DISK_H

#include <stdint.h>

/* The mkfs command used when command= is not given.  It reads $type,
 * $label, $size and $disk.
 */
extern const char disk_default_command[];

/* Record KEY=VALUE given on the command line as a shell variable for
 * the command.  Refuses a key that is not a shell variable name, or
 * one of RESERVED (a NULL-terminated list: the variables the plugin
 * sets itself).  A key given twice keeps its last value.
 */
extern int disk_vars_add (const char *key, const char *value,
                          const char *const *reserved);
extern const char *disk_vars_get (const char *key);
extern void disk_vars_free (void);

/* Run COMMAND under /bin/sh with every recorded variable set, then
 * disk=DISK and size=SIZE.  stdin and stdout are /dev/null; stderr is
 * the server's.  Returns the exit status, 128+N if signal N killed
 * it, or -1 if it could not be run (reported).  *DURATION_NS is the
 * wall time it took.  Only a status of 0 is success; the caller
 * reports any other.
 */
extern int disk_run_command (const char *command, const char *disk,
                             int64_t size, uint64_t *duration_ns);

/* Report a non-zero status from disk_run_command as an error, after
 * "WHAT: " unless WHAT is NULL.
 */
extern void disk_command_error (const char *what, int status);

/* Remove the directory DIR and the files in it (only those: a command
 * that makes subdirectories leaves them, and DIR, with a debug line).
 */
extern void disk_remove_dir (const char *dir);

/* The data callbacks, given the handle's open descriptor.  Each
 * returns -1 (reported, errno set) on error as the callbacks must.
 */
/* The per-connection callbacks: the handle is the disk's descriptor
 * (disk_handle_new closes FD if it fails).
 */
extern void *disk_handle_new (int fd);
extern void disk_close (void *handle);
extern int64_t disk_get_size (void *handle);
extern int disk_can_yes (void *handle);
extern int disk_can_fua (void *handle);
extern int disk_pread (void *handle, void *buf, uint32_t count,
                       uint64_t offset, uint32_t flags);
extern int disk_pwrite (void *handle, const void *buf, uint32_t count,
                        uint64_t offset, uint32_t flags);
extern int disk_flush (void *handle, uint32_t flags);
extern int disk_trim (void *handle, uint32_t count, uint64_t offset,
                      uint32_t flags);
extern int disk_zero (void *handle, uint32_t count, uint64_t offset,
                      uint32_t flags);
struct nbdkit_extents;
extern int disk_extents (void *handle, uint32_t count, uint64_t offset,
                         uint32_t flags, struct nbdkit_extents *extents);

#endif /* NBDKIT_DISK_H */
