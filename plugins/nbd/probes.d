/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The nbd plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-nbd-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* After each attempt to connect to the upstream server and finish
   * its handshake; 0 on success. Fires while a connection opens (or
   * at start-up), outside any request: no cookie. The connection id is
   * 0 for shared=true's connection. Arguments: connection id,
   * upstream, duration ns, errno. */
  probe nbd_connect (uint64_t connection_id, const char *upstream,
                     uint64_t duration_ns, int64_t error);

  /* With retry=, before waiting to try again: the attempt about to be
   * made (from 1) and the error of the failed one. Fires while a
   * connection opens, outside any request: no cookie. Arguments:
   * connection id, attempt, errno. */
  probe nbd_reconnect (uint64_t connection_id, uint64_t attempt,
                       int64_t error);

  /* When the upstream has answered a request: C<pread>, C<pwrite>,
   * C<flush>, C<trim>, C<zero>, C<cache> or C<extents>, the time from
   * sending to the answer, the offset and count (0 for flush). The
   * errno is not here (six arguments are all bpftrace 0.17 reads):
   * nbd_request_error carries it, just before, when there is one.
   * Arguments: connection id, cookie, operation, latency ns, offset,
   * count. */
  probe nbd_request_done (uint64_t connection_id, uint64_t cookie,
                          const char *operation, uint64_t latency_ns,
                          uint64_t offset, uint64_t count);

  /* A request failed upstream (or could not be sent): fires just
   * before its nbd_request_done, with the error the upstream gave
   * (the client gets it if the NBD protocol has it, else EIO).
   * Arguments: connection id, cookie, operation, errno. */
  probe nbd_request_error (uint64_t connection_id, uint64_t cookie,
                           const char *operation, int64_t error);
};
