/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: the one list of per-connection layer callbacks.
 *
 * Each list below is an X-macro: a caller defines X to say what one
 * entry expands to, and the list writes it out once per callback.
 * internal.h uses them for struct layer_ops, the per-context cache and
 * the layer_* declarations; backend.c for the nbdkit_next table handed
 * to filters; filters.c for the pass-through adapters of callbacks a
 * filter leaves out.  Adding a callback here reaches all of them; the
 * checked layer_* wrappers in backend.c are written by hand, because
 * each has its own preconditions.
 */
#ifndef NBDKIT_LAYER_OPS_H
#define NBDKIT_LAYER_OPS_H

/* Questions asked once per context and cached in struct context:
 *   X (name, type, kind)
 * kind says how an answer is normalised: BOOL (any positive answer is
 * 1), MODE (one of the NBDKIT_*_NONE/EMULATE/NATIVE values, kept as
 * is) or SIZE (a byte count, kept as is).  -1 is an error in every
 * case and is not cached.
 */
#define LAYER_QUERIES(X)                        \
  X (get_size, int64_t, SIZE)                   \
  X (can_write, int, BOOL)                      \
  X (can_flush, int, BOOL)                      \
  X (is_rotational, int, BOOL)                  \
  X (can_trim, int, BOOL)                       \
  X (can_zero, int, MODE)                       \
  X (can_fast_zero, int, BOOL)                  \
  X (can_extents, int, BOOL)                    \
  X (can_fua, int, MODE)                        \
  X (can_multi_conn, int, BOOL)                 \
  X (can_cache, int, MODE)

/* Data calls: X (name, (parameters after the context), (arguments)).
 * Every one of them ends in `int *err' and returns 0 or -1.
 * LAYER_UNPAREN params drops the parentheses around a list.
 */
#define LAYER_UNPAREN(...) __VA_ARGS__

#define LAYER_DATA_CALLS(X)                                             \
  X (pread,                                                             \
     (void *buf, uint32_t count, uint64_t offset, uint32_t flags,       \
      int *err),                                                        \
     (buf, count, offset, flags, err))                                  \
  X (pwrite,                                                            \
     (const void *buf, uint32_t count, uint64_t offset, uint32_t flags, \
      int *err),                                                        \
     (buf, count, offset, flags, err))                                  \
  X (flush, (uint32_t flags, int *err), (flags, err))                   \
  X (trim,                                                              \
     (uint32_t count, uint64_t offset, uint32_t flags, int *err),       \
     (count, offset, flags, err))                                       \
  X (zero,                                                              \
     (uint32_t count, uint64_t offset, uint32_t flags, int *err),       \
     (count, offset, flags, err))                                       \
  X (extents,                                                           \
     (uint32_t count, uint64_t offset, uint32_t flags,                  \
      struct nbdkit_extents *extents, int *err),                        \
     (count, offset, flags, extents, err))                              \
  X (cache,                                                             \
     (uint32_t count, uint64_t offset, uint32_t flags, int *err),       \
     (count, offset, flags, err))

#endif /* NBDKIT_LAYER_OPS_H */
