/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The eval plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-eval-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* After each run of a method's fragment (missing= runs too); id and
   * cookie as in sh_script (cookie 0 outside any request, both 0
   * outside any connection). Arguments: id, cookie, method, exit code,
   * duration ns, errno. */
  probe eval_script (uint64_t id, uint64_t cookie, const char *method,
                     int32_t exit_code, int64_t duration_ns, int32_t error);
};
