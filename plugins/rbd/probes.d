/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The rbd plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-rbd-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The server has joined the Ceph cluster (image is "") or opened an
   * image, or failed to; result is 0 or a negative errno from librados
   * or librbd. Fires at start-up or while a connection opens, outside
   * any request. Arguments: pool, image, duration ns, result. */
  probe rbd_connect (const char *pool, const char *image,
                     uint64_t duration_ns, int32_t result);

  /* A librbd call made for a request has completed: op is read, write,
   * discard, write_zeroes, flush or diff_iterate; latency runs from
   * the call to librbd's completion. librbd's result is not here (six
   * arguments are all bpftrace 0.17 reads): rbd_op_error carries it,
   * just before, when it is an error. Arguments: id, cookie, op,
   * offset, count, latency ns. */
  probe rbd_op_done (uint64_t id, uint64_t cookie, const char *op,
                     uint64_t offset, uint64_t count, uint64_t latency_ns);

  /* The same librbd call failed: fires just before its rbd_op_done,
   * with librbd's result (a negative errno). Arguments: id, cookie,
   * op, result. */
  probe rbd_op_error (uint64_t id, uint64_t cookie, const char *op,
                      int64_t result);
};
