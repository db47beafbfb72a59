/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The spinning filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-spinning-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A request moves a simulated head further than a track, and the
   * filter sleeps for the seek before passing it on: from is the disk
   * offset the head was over, to the request's offset. Fires during
   * that request. Arguments: id, cookie, head, from, to, delay_ns. */
  probe spinning_seek (uint64_t id, uint64_t cookie, uint32_t head,
                       uint64_t from, uint64_t to, uint64_t delay_ns);
};
