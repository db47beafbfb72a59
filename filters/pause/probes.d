/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The pause filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-pause-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A pause takes effect, before 'P' is sent on the control socket.
   * Both pause probes fire in the control socket's thread, for no
   * request: no id, no cookie. Arguments: requests in flight. */
  probe pause_paused (uint64_t requests_in_flight);

  /* Requests resume, before 'R' is sent. Arguments: requests held. */
  probe pause_resumed (uint64_t requests_held);
};
