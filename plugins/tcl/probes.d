/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tcl plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-tcl-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Before each call into the Tcl script (id and cookie 0 outside a
   * connection or a request). Arguments: id, cookie, proc. */
  probe tcl_call_start (uint64_t id, uint64_t cookie, const char *proc);

  /* After the call returns (errno 0 and "" unless the proc raised an
   * error). Arguments: id, cookie, proc, duration ns, errno, error
   * message. */
  probe tcl_call_done (uint64_t id, uint64_t cookie, const char *proc,
                       int64_t duration_ns, int32_t error,
                       const char *error_message);
};
