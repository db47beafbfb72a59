/* nbdkit: THE list of USDT probes in the server, provider "nbdkit".
 *
 * The build turns this file into probes.h with `dtrace -h' (macros
 * NBDKIT_<NAME>(...) and NBDKIT_<NAME>_ENABLED()) and, when probes are
 * disabled, into empty macros with probes-disabled.sh.  Every
 * per-connection probe carries the connection id first; every
 * per-request probe carries the id and the request's cookie next.
 * Integers are passed as 64-bit values; strings as C strings.
 * docs/nbdkit-probes.pod holds the table a test keeps equal to this.
 */
provider nbdkit {
  /* Server started: version string, pid. */
  probe server_start (const char *version, uint64_t pid);
  /* A listening socket is ready: fd, address ("unix:PATH", "tcp:ADDR:PORT"). */
  probe listen (int64_t fd, const char *address);
  /* Server is ready to accept connections. */
  probe server_ready ();
  /* Server is shutting down: reason ("signal", "run-exited", "single-done"). */
  probe server_stop (const char *reason);

  /* A connection was accepted: id, fd, peer address, transport. */
  probe connection_accept (uint64_t id, int64_t fd, const char *peer,
                           const char *transport);
  /* A connection ended: id, reason, requests, bytes in, bytes out,
   * lifetime in ns. */
  probe connection_close (uint64_t id, const char *reason, uint64_t requests,
                          uint64_t bytes_in, uint64_t bytes_out,
                          uint64_t lifetime_ns);

  /* Negotiation begins, just before the greeting is sent: id. */
  probe handshake_start (uint64_t id);
  /* An option arrived: id, option code, option name, payload length. */
  probe handshake_option (uint64_t id, uint64_t option, const char *name,
                          uint64_t length);
  /* An option was answered: id, option code, reply type, is error. */
  probe handshake_option_reply (uint64_t id, uint64_t option,
                                uint64_t reply, int64_t error);
  /* An export was opened: id, export name, size, transmission flags. */
  probe export_select (uint64_t id, const char *export, uint64_t size,
                       uint64_t eflags);
  /* Negotiation finished: id, export name, structured replies, extended
   * headers. */
  probe handshake_done (uint64_t id, const char *export, int64_t structured,
                        int64_t extended);
  /* Negotiation failed or was abandoned: id, reason. */
  probe handshake_fail (uint64_t id, const char *reason);

  /* A request was decoded: id, cookie, command code, command name,
   * flags, offset, count. */
  probe request_start (uint64_t id, uint64_t cookie, uint64_t command,
                       const char *name, uint64_t flags, uint64_t offset,
                       uint64_t count);
  /* A request finished: id, cookie, command, errno, bytes, duration ns. */
  probe request_done (uint64_t id, uint64_t cookie, uint64_t command,
                      int64_t error, uint64_t bytes, uint64_t duration_ns);

  /* A client broke the protocol: id, what. */
  probe protocol_violation (uint64_t id, const char *what);
};

#pragma D attributes Evolving/Evolving/Common provider nbdkit provider
#pragma D attributes Private/Private/Unknown provider nbdkit module
#pragma D attributes Private/Private/Unknown provider nbdkit function
#pragma D attributes Evolving/Evolving/Common provider nbdkit name
#pragma D attributes Evolving/Evolving/Common provider nbdkit args
