/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The example filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-example-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once for each open that the layers below accepted; an open is no
   * request, so it has the connection's id but no cookie. Arguments:
   * id, export, readonly. */
  probe example_filter_open (uint64_t id, const char *export,
                             int64_t readonly);

  /* Each read once the layers below answered, only while traced (the
   * clock is read only then). Arguments: id, cookie, offset, count,
   * ns, errno. */
  probe example_filter_read_done (uint64_t id, uint64_t cookie,
                                  uint64_t offset, uint64_t count,
                                  uint64_t ns, int64_t error);

  /* Each write once the layers below answered, only while
   * traced (the clock is read only then). Arguments: id, cookie,
   * offset, count, ns, errno. */
  probe example_filter_write_done (uint64_t id, uint64_t cookie,
                                   uint64_t offset, uint64_t count,
                                   uint64_t ns, int64_t error);
};
