/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* allocator=sparse: the sparse store (sparse.c) behind the allocator
 * interface, with its zero-copy loans.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "allocator.h"
#include "sparse.h"

struct sparse_allocator {
  struct allocator a;           /* first: the allocator is this struct */
  struct sparse *store;
};

static inline struct sparse *
store_of (struct allocator *a)
{
  return ((struct sparse_allocator *) a)->store;
}

static void
sa_destroy (struct allocator *a)
{
  sparse_destroy (store_of (a));
  free (a);
}

static void
sa_read (struct allocator *a, void *buf, uint32_t count, uint64_t offset)
{
  sparse_read (store_of (a), buf, count, offset);
}

static int
sa_write (struct allocator *a, const void *buf, uint32_t count,
          uint64_t offset)
{
  return sparse_write (store_of (a), buf, count, offset);
}

static void
sa_keep_zero_writes (struct allocator *a)
{
  sparse_keep_zero_writes (store_of (a));
}

static int
sa_zero (struct allocator *a, uint32_t count, uint64_t offset)
{
  sparse_zero (store_of (a), count, offset);
  return 0;
}

static int
sa_extents (struct allocator *a, uint32_t count, uint64_t offset, bool one,
            allocator_emit_fn emit, void *opaque)
{
  return sparse_extents (store_of (a), count, offset, one, emit, opaque);
}

static int
sa_map_read (struct allocator *a, uint32_t count, uint64_t offset,
             struct iovec *iov, int *niov)
{
  return sparse_map_read (store_of (a), count, offset, iov, niov);
}

static void
sa_unmap_read (struct allocator *a)
{
  sparse_unmap_read (store_of (a));
}

static int
sa_map_write (struct allocator *a, uint32_t count, uint64_t offset,
              struct iovec *iov, int *niov)
{
  return sparse_map_write (store_of (a), count, offset, iov, niov);
}

static int
sa_unmap_write (struct allocator *a, uint32_t count, uint64_t offset,
                const struct iovec *iov, bool store)
{
  return sparse_unmap_write (store_of (a), count, offset, iov, store);
}

static const struct allocator_ops sparse_ops = {
  .type = "sparse",
  .destroy = sa_destroy,
  .read = sa_read,
  .write = sa_write,
  .zero = sa_zero,
  .extents = sa_extents,
  .keep_zero_writes = sa_keep_zero_writes,
  .map_read = sa_map_read,
  .unmap_read = sa_unmap_read,
  .map_write = sa_map_write,
  .unmap_write = sa_unmap_write,
};

struct allocator *
sparse_allocator_create (uint64_t size, const char **why)
{
  struct sparse_allocator *sa = calloc (1, sizeof *sa);

  if (sa == NULL)
    return NULL;
  sa->store = sparse_create (size);
  if (sa->store == NULL) {
    int err = errno;

    free (sa);
    errno = err;
    return NULL;
  }
  sa->a.ops = &sparse_ops;
  return &sa->a;
}
