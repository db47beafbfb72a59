/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The example plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-example-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once for each key=value parameter, before the plugin parses it.
   * It fires at start-up, outside any request: no id, no cookie.
   * Arguments: key, value. */
  probe example_config (const char *key, const char *value);

  /* Once for each read that reaches the plugin. Arguments: id, cookie,
   * offset, count. */
  probe example_read (uint64_t id, uint64_t cookie, uint64_t offset,
                      uint64_t count);

  /* Once for each write that reaches the plugin. Arguments: id,
   * cookie, offset, count. */
  probe example_write (uint64_t id, uint64_t cookie, uint64_t offset,
                       uint64_t count);

  /* Once for each trim or zero request. Arguments: id, cookie, offset,
   * count. */
  probe example_zero (uint64_t id, uint64_t cookie, uint64_t offset,
                      uint64_t count);

  /* Once for each flush, only while traced (blocks used is costly to
   * count). Arguments: id, cookie, reads, writes, blocks used. */
  probe example_flush (uint64_t id, uint64_t cookie, uint64_t reads,
                       uint64_t writes, uint64_t blocks_used);
};
