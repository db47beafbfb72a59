/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ruby plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-ruby-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Before each call into the Ruby script, in the VM thread (id and
   * cookie of the server thread that made the callback; 0 outside a
   * connection or a request). Arguments: id, cookie, method. */
  probe ruby_call_start (uint64_t id, uint64_t cookie, const char *method);

  /* After the call returns (errno 0 and "" unless the method raised).
   * Arguments: id, cookie, method, duration ns, errno, error message. */
  probe ruby_call_done (uint64_t id, uint64_t cookie, const char *method,
                        int64_t duration_ns, int32_t error,
                        const char *error_message);
};
