/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The file plugin's cache=none: see evict.c. */
#ifndef NBDKIT_FILE_EVICT_H
#define NBDKIT_FILE_EVICT_H

#include <pthread.h>
#include <stdint.h>

/* Writes whose pages are dropped once written back, this many writes
 * later (by then their writeback has usually finished).
 */
#define EVICT_WINDOW 8

struct evict_range {
  uint64_t offset;
  uint32_t count;               /* 0: empty */
};

struct evict_file;

/* One per open descriptor (connection) of a cache=none server. */
struct evict {
  int fd;
  struct evict_file *file;      /* shared with the file's other users;
                                 * NULL: reads drop their range at once */
  pthread_mutex_t lock;         /* protects the two fields below */
  struct evict_range writes[EVICT_WINDOW];
  unsigned next;
};

/* FD is open on a regular file or block device of SIZE bytes. */
extern void evict_init (struct evict *e, int fd, uint64_t size);
/* Drops what is left of this descriptor's pages; before close (FD). */
extern void evict_fini (struct evict *e);
/* After a successful read or write of [OFFSET, OFFSET + COUNT). */
extern void evict_after_read (struct evict *e, uint64_t offset,
                              uint32_t count);
extern void evict_after_write (struct evict *e, uint64_t offset,
                               uint32_t count);

#endif /* NBDKIT_FILE_EVICT_H */
