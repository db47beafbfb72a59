/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nfs plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-nfs-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* After each attempt to mount the export and open the file (once at
   * start-up with id 0, then once per NBD connection, as it opens:
   * outside any request, so no cookie): the server and
   * the file as the URI names them ("" when the URI could not be
   * parsed), and 0, or -1 when it failed. Arguments: id, server, file,
   * duration ns, result. */
  probe nfs_connect (uint64_t id, const char *server, const char *file,
                     uint64_t duration_ns, int32_t result);

  /* When a libnfs call fails: the request's id and cookie (cookie 0
   * when no request made the call: at start-up, with id 0 too, or as a
   * connection opens), the call, the errno the client gets and libnfs's
   * message. Arguments: id, cookie, call, errno, message. */
  probe nfs_error (uint64_t id, uint64_t cookie, const char *call,
                   int32_t error, const char *message);
};
