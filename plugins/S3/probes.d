/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-S3-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Each HTTP request to the store (each retry too) as it starts:
   * method C<GET>, C<PUT>, C<HEAD> or C<DELETE>; the object's name
   * (empty for the bucket, as in a listing); the offset of a ranged
   * read in the object; the bytes asked for or sent. Arguments: id,
   * cookie, method, object, offset, count. */
  probe s3_request_start (uint64_t id, uint64_t cookie, const char *method,
                          const char *object, uint64_t offset,
                          uint64_t count);

  /* The same request, ended: the status (0 if no reply came back), the
   * body bytes sent or received, its duration. Arguments: id, cookie,
   * method, HTTP status, bytes, latency ns. */
  probe s3_request_done (uint64_t id, uint64_t cookie, const char *method,
                         int64_t http_status, uint64_t bytes,
                         uint64_t latency_ns);

  /* A write or zero covers part of an object, which is read, merged
   * and put back. Arguments: id, cookie, object number, offset in
   * object, count. */
  probe s3_rmw (uint64_t id, uint64_t cookie, uint64_t object_number,
                uint64_t offset_in_object, uint64_t count);

  /* A request waited this long for a free connection of the pool.
   * Arguments: id, cookie, wait ns. */
  probe s3_pool_wait (uint64_t id, uint64_t cookie, uint64_t wait_ns);
};
