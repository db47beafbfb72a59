/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The lua plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-lua-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Before each call into a function of the script (id and cookie 0
   * outside a connection or request). Arguments: id, cookie, callback. */
  probe lua_call_start (uint64_t id, uint64_t cookie, const char *callback);

  /* After the function returned: errno 0 and "" if it succeeded, else
   * the errno the client gets and the error. Arguments: id, cookie,
   * callback, duration ns, errno, error text. */
  probe lua_call_done (uint64_t id, uint64_t cookie, const char *callback,
                       uint64_t duration_ns, int32_t error,
                       const char *error_text);
};
