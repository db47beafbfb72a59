/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit: THE list of USDT probes in the server, provider "nbdkit".
 *
 * The build turns this file into probes.h with `dtrace -h' (macros
 * NBDKIT_<NAME>(...) and NBDKIT_<NAME>_ENABLED()) and, when probes are
 * disabled, into empty macros with probes-disabled.sh.  Rules:
 *  - every per-connection probe carries the connection id first (0 when
 *    there is no connection, e.g. configuration-time layer calls);
 *  - every per-request probe carries the request's cookie second;
 *  - integers are passed as 64-bit values, strings as C strings (the
 *    Linux `dtrace -h' ignores the declared types, so call sites cast);
 *  - arguments that cost anything are computed only under _ENABLED().
 * docs/nbdkit-probes.pod holds the table; a test keeps the two and the
 * binary's .note.stapsdt equal.  bpftrace 0.17 reads only arg0..arg5:
 * the arguments an operator needs most come first.
 */
provider nbdkit {
  /* ---- server ---- */

  /* The serving process starts (after any fork): version, pid. */
  probe server_start (const char *version, uint64_t pid);
  /* A listening socket is ready: fd, address ("unix:PATH",
   * "tcp:ADDR:PORT" or "activated"). */
  probe listen (int64_t fd, const char *address);
  /* The server accepts connections from now on. */
  probe server_ready ();
  /* The server stops accepting: reason ("signal", "run-exited",
   * "nbdkit_shutdown", "single-done"). */
  probe server_stop (const char *reason);

  /* ---- plugins and filters ---- */

  /* A plugin was loaded: name, path, API version, thread model. */
  probe plugin_load (const char *name, const char *path,
                     int64_t api_version, int64_t thread_model);
  /* A filter was loaded: name, path, API version, thread model. */
  probe filter_load (const char *name, const char *path,
                     int64_t api_version, int64_t thread_model);

  /* ---- connections ---- */

  /* A connection was accepted: id, fd, peer address, transport
   * ("unix", "tcp", "stdio", "activated"), the Unix peer's pid and uid
   * (-1 for other sockets). */
  probe connection_accept (uint64_t id, int64_t fd, const char *peer,
                           const char *transport, int64_t pid,
                           int64_t uid);
  /* A connection was refused before it got an id: fd, peer address,
   * reason ("limit", "shutdown"). */
  probe connection_reject (int64_t fd, const char *peer,
                           const char *reason);
  /* A connection ended: id, reason, requests served, bytes in, bytes
   * out, lifetime in ns. */
  probe connection_close (uint64_t id, const char *reason,
                          uint64_t requests, uint64_t bytes_in,
                          uint64_t bytes_out, uint64_t lifetime_ns);

  /* ---- late attach ---- */

  /* Who a connection is, for tracers that attach after it started:
   * fired for each connection when its negotiation ends, and for every
   * live connection (negotiating, idle or busy) within 0.5 s of a
   * tracer attaching to this probe, then every 0.4 s while any tracer
   * is attached: id, export name ("" while negotiating), peer address
   * (as connection_accept), transport ("unix", "tcp", "vsock",
   * "stdio", "activated", with "+tls" once negotiated over TLS), the
   * Unix peer's pid and uid (-1 for other sockets). */
  probe connection_info (uint64_t id, const char *export, const char *peer,
                         const char *transport, int64_t pid, int64_t uid);

  /* ---- handshake ---- */

  /* Negotiation begins, just before the greeting is sent: id. */
  probe handshake_start (uint64_t id);
  /* An option arrived: id, option code, option name, payload length. */
  probe handshake_option (uint64_t id, uint64_t option, const char *name,
                          uint64_t length);
  /* An option reply was sent: id, option code, reply type, 1 if the
   * reply is an error. */
  probe handshake_option_reply (uint64_t id, uint64_t option,
                                uint64_t reply, int64_t error);
  /* A meta context query was answered: id, context name, context id
   * (0 when only listed), 1 if accepted. */
  probe meta_context (uint64_t id, const char *name, uint64_t context_id,
                      int64_t accepted);
  /* An export was opened: id, export name, size, transmission flags. */
  probe export_select (uint64_t id, const char *export, uint64_t size,
                       uint64_t eflags);
  /* Negotiation finished: id, export name, structured replies, extended
   * headers. */
  probe handshake_done (uint64_t id, const char *export, int64_t structured,
                        int64_t extended);
  /* Negotiation failed or was abandoned: id, reason. */
  probe handshake_fail (uint64_t id, const char *reason);

  /* ---- TLS ---- */

  /* STARTTLS was accepted and the TLS handshake begins: id,
   * credentials ("x509" or "psk"). */
  probe tls_handshake_start (uint64_t id, const char *credentials);
  /* The TLS handshake ended: id, 1 if it succeeded (else 0), the
   * session's protocol and ciphers or the GnuTLS error, the peer's
   * identity (PSK username or certificate DN; "" if none). */
  probe tls_handshake_done (uint64_t id, int64_t ok, const char *detail,
                            const char *peer);

  /* ---- requests ---- */

  /* A request was decoded: id, cookie, command code, command name,
   * flags, offset, count. */
  probe request_start (uint64_t id, uint64_t cookie, uint64_t command,
                       const char *name, uint64_t flags, uint64_t offset,
                       uint64_t count);
  /* A valid request goes down the chain: id, cookie, ns since its
   * header was read (payload and queueing), requests in flight on the
   * connection (read, reply not yet written; this one included). */
  probe request_dispatch (uint64_t id, uint64_t cookie,
                          uint64_t queue_ns, uint64_t in_flight);
  /* A request finished: id, cookie, command, errno (0 for success),
   * payload bytes moved (reads and writes), ns since its header was
   * read.  Fires for NBD_CMD_DISC too, which has no reply.  Requests
   * already in flight when a tracer attaches have no start time and
   * do not fire it. */
  probe request_done (uint64_t id, uint64_t cookie, uint64_t command,
                      int64_t error, uint64_t bytes, uint64_t duration_ns);
  /* A reply is written, in wire order (fired just before the write,
   * under the connection's write lock): id, cookie, kind ("simple",
   * "structured", "extended"), bytes on the wire, chunks. */
  probe reply_send (uint64_t id, uint64_t cookie, const char *kind,
                    uint64_t bytes, uint64_t chunks);

  /* Busy-polling for input (--busy-poll) ended: id, 1 if the socket
   * turned readable (input, end of file or an error; else 0: the window
   * ran out and the reader sleeps), ns spent. */
  probe busy_poll (uint64_t id, int64_t caught, uint64_t spent_ns);

  /* A wait slept to look at the client (--busy-poll): id, 1 if another
   * request was already in behind the one read (the client keeps
   * sending: the connection rests), else 0; polling waits until the
   * next look (after the rest, for 1). */
  probe busy_poll_look (uint64_t id, int64_t more, uint64_t gap);

  /* ---- stages: sockets, replies, workers, configuration, unload ---- */

  /* A reply went out: after the write that carried it returned (a
   * held reply's, after its batch's): id, cookie, bytes on the wire,
   * ns the write took (blocked on the socket included), 0 if the write
   * failed else 1. */
  probe reply_written (uint64_t id, uint64_t cookie, uint64_t bytes,
                       uint64_t write_ns, int64_t ok);
  /* A read from the client's socket (or TLS session) begins: id, bytes
   * wanted. */
  probe sock_read_start (uint64_t id, uint64_t want);
  /* It returned: id, bytes got (0 at end of file, -1 on error), errno
   * (0 unless it failed), ns it took (waiting included). */
  probe sock_read_done (uint64_t id, int64_t got, int64_t error,
                        uint64_t ns);
  /* A write to the client's socket (or TLS session) begins: id,
   * bytes. */
  probe sock_write_start (uint64_t id, uint64_t bytes);
  /* It returned: id, bytes written (-1 on error), errno, ns. */
  probe sock_write_done (uint64_t id, int64_t wrote, int64_t error,
                         uint64_t ns);
  /* A worker of a connection starts: id, worker index (0 is the
   * connection's own thread), the effective thread model's name, the
   * most workers the connection may have. */
  probe worker_start (uint64_t id, uint64_t worker, const char *model,
                      uint64_t max_workers);
  /* A worker ends: id, worker index, requests it read. */
  probe worker_stop (uint64_t id, uint64_t worker, uint64_t requests);
  /* A layer is given a parameter: layer name, key, value (that of a
   * key naming a password or secret is "<hidden>"). */
  probe config (const char *layer, const char *key, const char *value);
  /* The plugin was unloaded (after its unload callback): name. */
  probe plugin_unload (const char *name);
  /* A filter was unloaded (after its unload callback): name. */
  probe filter_unload (const char *name);

  /* ---- layers ---- */

  /* A plugin or filter callback is called: id, cookie (0 outside a
   * request), depth (0 = outermost), layer name, callback name, offset,
   * count (0 and 0 for calls without a range). */
  probe layer_call_start (uint64_t id, uint64_t cookie, uint64_t depth,
                          const char *layer, const char *callback,
                          uint64_t offset, uint64_t count);
  /* The same callback returned: id, cookie, depth, layer name, callback
   * name, errno (0 for success). */
  probe layer_call_done (uint64_t id, uint64_t cookie, uint64_t depth,
                         const char *layer, const char *callback,
                         int64_t error);

  /* ---- diagnostics ---- */

  /* nbdkit_error or nbdkit_debug was called, printed or not: level
   * ("error", "debug"), origin (layer name or "nbdkit"), message,
   * connection id (0 if none), cookie (0 outside a request), where
   * ("server/FILE.c:LINE" for the server's own, "OBJECT+0xOFFSET" of
   * the caller otherwise). */
  probe log (const char *level, const char *origin, const char *message,
             uint64_t id, uint64_t cookie, const char *where);
  /* A client broke the protocol: id, what. */
  probe protocol_violation (uint64_t id, const char *what);
  /* A server limit was reached: id (0 if none), kind ("connections",
   * "option_length", "options", "payload", "descriptors",
   * "handshake_timeout"). */
  probe limit_hit (uint64_t id, const char *kind);

  /* ---- probes from plugins and scripts ---- */

  /* A plugin, filter or script fired the generic probe (nbdkit_probe,
   * the nbdkit-probe command of the sh and eval plugins): id (0 outside
   * a connection), cookie (0 outside a request), the name the caller
   * gave, two integers and a text of its choice ("" if none). */
  probe user (uint64_t id, uint64_t cookie, const char *name,
              int64_t arg1, int64_t arg2, const char *text);
};

#pragma D attributes Evolving/Evolving/Common provider nbdkit provider
#pragma D attributes Private/Private/Unknown provider nbdkit module
#pragma D attributes Private/Private/Unknown provider nbdkit function
#pragma D attributes Evolving/Evolving/Common provider nbdkit name
#pragma D attributes Evolving/Evolving/Common provider nbdkit args
