/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The retry-request filter's USDT probes, provider "nbdkit", fired
 * with NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-retry-request-
 * filter.so.  Not compiled: the declarations, in the syntax of
 * server/probes.d, are what tools/probes-gen.py turns into the
 * tapset's aliases, the D translators, the perf events' argument names
 * and the tables of nbdkit-probes(1); tests/test-probes-declared.sh
 * keeps them equal to the notes in the built .so.
 */
provider nbdkit {
  /* Before each retry's wait, during the request that failed: its
   * connection id and cookie. Command "open" is a retry of the
   * connection's open, outside any request: cookie 0. Arguments: id,
   * cookie, command, attempt, delay ns. */
  probe retry_request_attempt (uint64_t id, uint64_t cookie,
                               const char *command, uint32_t attempt,
                               uint64_t delay_ns);
};
