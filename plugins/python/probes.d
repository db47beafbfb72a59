/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The python plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-python-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* The plugin is about to call the script's function C<callback>
   * (C<"pread">, C<"open">, ...), with the GIL held. Arguments: id,
   * cookie, callback. */
  probe python_call_start (uint64_t id, uint64_t cookie,
                           const char *callback);

  /* The call returned: the time spent in the interpreter, the errno
   * given to the server (0 on success), and C<"TYPE: MESSAGE"> of the
   * exception or the reason the answer was refused (C<""> on success).
   * Arguments: id, cookie, callback, duration ns, errno, exception. */
  probe python_call_done (uint64_t id, uint64_t cookie, const char *callback,
                          uint64_t duration_ns, int32_t error,
                          const char *exception);
};
