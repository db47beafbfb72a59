/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The sh plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-sh-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* After each run of the script (a killed script reports 128+signal;
   * errno 0 unless the run failed); id and cookie are those of the
   * request the method serves, cookie 0 for a method run outside any
   * request (open, get_size ...), and both 0 for one that is not run
   * for a connection (config, thread_model ...). Arguments: id,
   * cookie, method, exit code, duration ns, errno. */
  probe sh_script (uint64_t id, uint64_t cookie, const char *method,
                   int32_t exit_code, int64_t duration_ns, int32_t error);
};
