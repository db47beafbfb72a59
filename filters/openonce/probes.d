/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The openonce filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-openonce-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A client's open got the layer below: opened now (first = 1) or
   * shared with earlier clients (first = 0); opens counts the client
   * opens it has served, this one included. It fires as the client
   * opens the export, outside any request: no id, no cookie.
   * Arguments: export name, readonly, first, opens. */
  probe openonce_open (const char *exportname, int32_t readonly,
                       int32_t first, uint64_t opens);
  /* A shared open of the layer below is finalized and closed as the
   * server exits (outside any request: no id, no cookie). Arguments:
   * export name, readonly, client opens it served. */
  probe openonce_close (const char *exportname, int32_t readonly,
                        uint64_t opens);
};
