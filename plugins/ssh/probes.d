/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ssh plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-ssh-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* After each attempt to open an SSH session (once at start-up with
   * id 0, then once per NBD connection, as it opens: outside any
   * request, so no cookie): result 0, or -1 when it failed. Arguments:
   * id, host, user, duration ns, result. */
  probe ssh_connect (uint64_t id, const char *host, const char *user,
                     uint64_t duration_ns, int32_t result);

  /* After each read has been served over SFTP; errno 0 on success.
   * Arguments: id, cookie, offset, count, latency ns, errno. */
  probe ssh_read_done (uint64_t id, uint64_t cookie, uint64_t offset,
                       uint32_t count, uint64_t latency_ns, int32_t error);

  /* After each write (and the fsync of a FUA write) has been served;
   * errno 0 on success. Arguments: id, cookie, offset, count, latency
   * ns, errno. */
  probe ssh_write_done (uint64_t id, uint64_t cookie, uint64_t offset,
                        uint32_t count, uint64_t latency_ns, int32_t error);

  /* After each flush (fsync@openssh.com) has been served. Arguments:
   * id, cookie, latency ns, errno. */
  probe ssh_flush_done (uint64_t id, uint64_t cookie, uint64_t latency_ns,
                        int32_t error);

  /* When an SFTP call fails; id and cookie are the request's (cookie
   * 0 outside any request: at start-up, with id 0 too, or as a
   * connection opens); status 0 when the channel or connection failed
   * below SFTP; the message is libssh's. Arguments: id, cookie, SFTP
   * status, message. */
  probe ssh_sftp_error (uint64_t id, uint64_t cookie, int32_t sftp_status,
                        const char *message);
};
