/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The rate filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-rate-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A read or write must wait for its bucket ("total" or
   * "connection"), before the sleep; fires during that request.
   * Arguments: id, cookie, bucket, nanoseconds, bytes. */
  probe rate_wait (uint64_t id, uint64_t cookie, const char *bucket,
                   uint64_t nanoseconds, uint32_t bytes);
};
