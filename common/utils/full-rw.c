/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Whole reads and writes (see full-rw.h). */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "full-rw.h"

/* One loop for all four: POSITIONAL picks pread/pwrite at OFFSET. */
static ssize_t
transfer (int fd, void *buf, size_t count, uint64_t offset,
          bool writing, bool positional)
{
  char *p = buf;
  size_t done = 0;

  if (count > SSIZE_MAX || (positional && offset > INT64_MAX)) {
    errno = EINVAL;
    return -1;
  }
  while (done < count) {
    size_t n = count - done;
    ssize_t r;

    if (writing)
      r = positional ? pwrite (fd, p + done, n, offset + done)
                     : write (fd, p + done, n);
    else
      r = positional ? pread (fd, p + done, n, offset + done)
                     : read (fd, p + done, n);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0) {
      if (writing) {
        errno = EIO;
        return -1;
      }
      break;                    /* end of file */
    }
    done += r;
  }
  return done;
}

ssize_t
full_read (int fd, void *buf, size_t count)
{
  return transfer (fd, buf, count, 0, false, false);
}

ssize_t
full_write (int fd, const void *buf, size_t count)
{
  return transfer (fd, (void *) buf, count, 0, true, false);
}

ssize_t
full_pread (int fd, void *buf, size_t count, uint64_t offset)
{
  return transfer (fd, buf, count, offset, false, true);
}

ssize_t
full_pwrite (int fd, const void *buf, size_t count, uint64_t offset)
{
  return transfer (fd, (void *) buf, count, offset, true, true);
}
