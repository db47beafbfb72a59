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
 * It is also the source of every other list of the server's probes:
 * tools/probes-gen.py makes from it (and from the plugins' and
 * filters' own probes.d) the tapset, the D translators, the table of
 * nbdkit-perf-events and the argument tables of nbdkit-probes(1).  The
 * lines of a probe's comment that begin with `@' are for it: @d (the D
 * view and the member each argument fills), @d+ (a computed member),
 * @stap (flags of the tapset's alias), @stap+ (a computed variable of
 * the flat alias), @stap.alias (the hierarchical alias and its extra
 * variables), @arg (a row of the manual's table).
 * A test keeps this file and the binary's .note.stapsdt equal.  bpftrace 0.17 reads only arg0..arg5:
 * no probe here has more than six arguments (probes-gen.py refuses
 * one), and the arguments an operator needs most come first.
 */
provider nbdkit {
  /* ---- server ---- */

  /* The serving process starts (after any fork): version, pid.
   *
   * @d serverinfo sv_version sv_pid
   * @d+ sv_event = "start"
   * @stap.alias server.start
   * @arg version the server's version, e.g. "1.32.5"
   * @arg pid the serving process's id
   */
  probe server_start (const char *version, uint64_t pid);
  /* A listening socket is ready: fd, address ("unix:PATH",
   * "tcp:ADDR:PORT" or "activated").
   *
   * @d serverinfo sv_fd sv_address
   * @d+ sv_event = "listen"
   * @stap.alias server.listen
   * @arg fd the socket's file descriptor
   * @arg address "unix:PATH" (-U), "tcp:ADDRESS:PORT" with numeric address
   *     and port, one per address bound, "vsock:PORT" (--vsock), or
   *     "activated" for a socket handed over by socket activation
   */
  probe listen (int64_t fd, const char *address);
  /* The server accepts connections from now on.
   *
   * @d serverinfo
   * @d+ sv_event = "ready"
   * @stap.alias server.ready
   */
  probe server_ready ();
  /* The server stops accepting: reason ("signal", "run-exited",
   * "nbdkit_shutdown", "single-done").
   *
   * @d serverinfo sv_reason
   * @d+ sv_event = "stop"
   * @stap.alias server.stop
   * @arg reason "signal" (SIGINT, SIGTERM, SIGQUIT, SIGHUP), "run-exited"
   *     (the --run command exited), "nbdkit_shutdown" (called by a plugin or
   *     filter), "single-done" (the -s connection ended), or "unknown" if the
   *     accept loop failed
   */
  probe server_stop (const char *reason);

  /* ---- plugins and filters ---- */

  /* A plugin was loaded: name, path, API version, thread model.
   *
   * @d layerinfo ly_name ly_path ly_api_version ly_thread_model
   * @d+ ly_thread_model_name = nbdkit_thread_model_string[arg3]
   * @d+ ly_kind = "plugin"
   * @stap.alias plugin.load: thread_model_name =
   *     nbdkit_thread_model_str(thread_model)
   * @arg name the plugin's name, e.g. "memory"
   * @arg path the file it was loaded from
   * @arg api_version 1 or 2
   * @arg thread_model the model the plugin was compiled with (0 serialize
   *     connections, 1 serialize all requests, 2 serialize requests, 3
   *     parallel); its thread_model callback, which may lower it, is asked
   *     only later
   */
  probe plugin_load (const char *name, const char *path,
                     int64_t api_version, int64_t thread_model);
  /* A filter was loaded: name, path, API version, thread model.
   *
   * @d layerinfo ly_name ly_path ly_api_version ly_thread_model
   * @d+ ly_thread_model_name = nbdkit_thread_model_string[arg3]
   * @d+ ly_kind = "filter"
   * @stap.alias filter.load: thread_model_name =
   *     nbdkit_thread_model_str(thread_model)
   * @arg name the filter's name, e.g. "offset"
   * @arg path the file it was loaded from
   * @arg api_version the filter API version
   * @arg thread_model 3 (parallel) for a filter without a thread_model
   *     callback, -1 when it has one (its answer is known only after
   *     configuration)
   */
  probe filter_load (const char *name, const char *path,
                     int64_t api_version, int64_t thread_model);

  /* ---- connections ---- */

  /* A connection was accepted: id, fd, peer address, transport
   * ("unix", "tcp", "stdio", "activated"), the Unix peer's pid and uid
   * (-1 for other sockets).
   *
   * @d conninfo ci_id ci_fd ci_peer ci_transport ci_pid ci_uid
   * @stap.alias connection.accept
   * @arg id connection id
   * @arg fd the connection's file descriptor
   * @arg peer "ADDRESS:PORT" (IPv4) or "[ADDRESS]:PORT" (IPv6) for TCP,
   *     "unix" for a Unix socket, or the transport name when there is no peer
   *     (-s)
   * @arg transport "unix", "tcp", "vsock", "activated" (a socket-activated
   *     Unix socket) or "stdio" (-s)
   * @arg pid the Unix peer's process id, as in connection_info; -1 for
   *     other sockets
   * @arg uid the Unix peer's user id; -1 for other sockets
   */
  probe connection_accept (uint64_t id, int64_t fd, const char *peer,
                           const char *transport, int64_t pid,
                           int64_t uid);
  /* A connection was refused before it got an id: fd, peer address,
   * reason ("limit", "shutdown").
   *
   * @d conninfo ci_fd ci_peer ci_reason
   * @stap.alias connection.reject
   * @arg fd the refused socket's file descriptor
   * @arg peer "ADDRESS:PORT" for TCP (IPv6 addresses without brackets),
   *     "unix" for a Unix socket
   * @arg reason "limit" (B<--max-connections> clients are already
   *     connected, after a limit_hit "connections") or "shutdown" (the client
   *     was waiting when the server was told to stop)
   */
  probe connection_reject (int64_t fd, const char *peer,
                           const char *reason);
  /* A connection ended: id, reason, requests served, bytes in, bytes
   * out, lifetime in ns.
   *
   * @d conninfo ci_id ci_reason ci_requests ci_bytes_in ci_bytes_out
   *     ci_lifetime_ns
   * @stap.alias connection.close: peer = nbdkit_conn_peer(id); export =
   *     nbdkit_conn_export(id); transport = nbdkit_conn_transport(id); tls =
   *     nbdkit_conn_tls(id); lifetime_ms = lifetime_ns / 1000000
   * @arg id connection id
   * @arg reason the first reason the connection was ended for:
   *     "disconnect" (NBD_CMD_DISC), "eof" (the client closed the socket
   *     between requests), "read error", "write error", "bad request magic",
   *     "request too large", "abort" (NBD_OPT_ABORT), "handshake ended",
   *     "preconnect refused", "out of memory"
   * @arg requests requests read in full and answered or refused
   *     (NBD_CMD_DISC excluded)
   * @arg bytes_in bytes read from the client
   * @arg bytes_out bytes sent to the client
   * @arg lifetime_ns time since the connection was accepted, in
   *     nanoseconds
   */
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
   * Unix peer's pid and uid (-1 for other sockets).
   *
   * @d conninfo ci_id ci_export ci_peer ci_transport ci_pid ci_uid
   * @d+ ci_tls = index(copyinstr(arg3), "+tls") >= 0
   * @stap.alias connection.info ?
   * @arg id connection id
   * @arg export the export opened, as handshake_done names it (for the
   *     default export, the name the plugin gave it, often ""); "" while the
   *     connection is negotiating
   * @arg peer as in connection_accept: "ADDRESS:PORT" or "[ADDRESS]:PORT"
   *     for TCP, "unix" for a Unix socket, the transport's name when there is
   *     no peer (-s on a pipe)
   * @arg transport "unix", "tcp", "vsock", "activated" (a socket-activated
   *     Unix socket) or "stdio" (-s), followed by "+tls" once negotiation has
   *     ended over TLS
   * @arg pid the process at the other end of a Unix socket (SO_PEERCRED:
   *     the client that connected, or that made the socket pair of -s), as
   *     seen from the server's pid namespace (0 if it is not visible there);
   *     -1 for other sockets
   * @arg uid that process's user id; -1 for other sockets
   */
  probe connection_info (uint64_t id, const char *export, const char *peer,
                         const char *transport, int64_t pid, int64_t uid);

  /* ---- handshake ---- */

  /* Negotiation begins, just before the greeting is sent: id.
   *
   * @d hsinfo hs_id
   * @stap.alias handshake.start
   * @arg id connection id
   */
  probe handshake_start (uint64_t id);
  /* An option arrived: id, option code, option name, payload length.
   *
   * @d hsinfo hs_id hs_option hs_optname hs_length
   * @stap.alias handshake.option: option_name = nbdkit_opt_str(option)
   * @arg id connection id
   * @arg option the NBD_OPT_* code
   * @arg name "export_name", "abort", "list", "starttls", "info", "go",
   *     "structured_reply", "list_meta_context", "set_meta_context",
   *     "extended_headers", or "unknown"
   * @arg length the payload length the client announced
   */
  probe handshake_option (uint64_t id, uint64_t option, const char *name,
                          uint64_t length);
  /* An option reply was sent: id, option code, reply type, 1 if the
   * reply is an error.
   *
   * @d hsinfo hs_id hs_option hs_reply hs_error
   * @d+ hs_optname = nbdkit_opt_string[arg1]
   * @d+ hs_repname = nbdkit_rep_string[arg2]
   * @stap.alias handshake.reply: option_name = nbdkit_opt_str(option);
   *     reply_name = nbdkit_rep_str(reply)
   * @arg id connection id
   * @arg option the NBD_OPT_* code answered
   * @arg reply the NBD_REP_* type
   * @arg error 1 for an error reply (the type's top bit is set), 0
   *     otherwise
   */
  probe handshake_option_reply (uint64_t id, uint64_t option,
                                uint64_t reply, int64_t error);
  /* A meta context query was answered: id, context name, context id
   * (0 when only listed), 1 if accepted.
   *
   * @d hsinfo hs_id hs_context hs_context_id hs_accepted
   * @stap.alias handshake.meta_context
   * @arg id connection id
   * @arg name the context the client asked about
   * @arg context_id the id the server gives the context (1 for
   *     base:allocation when set), 0 when only listed or not matched
   * @arg accepted 1 if the query matched a context the server has, else 0
   */
  probe meta_context (uint64_t id, const char *name, uint64_t context_id,
                      int64_t accepted);
  /* An export was opened: id, export name, size, transmission flags.
   *
   * @d hsinfo hs_id hs_export hs_size hs_eflags
   * @d+ hs_eflagstr = nbdkit_eflags_string[arg3]
   * @stap.alias handshake.export: eflags_str = nbdkit_eflags_str(eflags)
   * @arg id connection id
   * @arg export the export's name (the default export's real name when the
   *     client asked for "")
   * @arg size the export's size in bytes
   * @arg eflags the NBD_FLAG_* transmission flags as computed then;
   *     NBD_FLAG_SEND_DF is added later if structured replies are negotiated
   *     after this point
   */
  probe export_select (uint64_t id, const char *export, uint64_t size,
                       uint64_t eflags);
  /* Negotiation finished: id, export name, structured replies, extended
   * headers.
   *
   * @d hsinfo hs_id hs_export hs_structured hs_extended
   * @stap.alias handshake.done: peer = nbdkit_conn_peer(id); transport =
   *     nbdkit_conn_transport(id)
   * @arg id connection id
   * @arg export the export selected
   * @arg structured 1 if structured replies are in use
   * @arg extended 1 if extended headers are in use
   */
  probe handshake_done (uint64_t id, const char *export, int64_t structured,
                        int64_t extended);
  /* Negotiation failed or was abandoned: id, reason.
   *
   * @d hsinfo hs_id hs_reason
   * @stap.alias handshake.fail
   * @arg id connection id
   * @arg reason "client went away", "client aborted" (NBD_OPT_ABORT),
   *     "unknown client flags", "bad option magic", "option too long", "too
   *     many options", "could not reply", "export name too long", "export
   *     could not be opened", "preconnect refused", "TLS required" (an
   *     C<NBD_OPT_EXPORT_NAME> in the clear under B<--tls=require>), "TLS
   *     handshake failed", "data after STARTTLS", "out of memory" (the
   *     connection could not be registered)
   */
  probe handshake_fail (uint64_t id, const char *reason);

  /* ---- TLS ---- */

  /* STARTTLS was accepted and the TLS handshake begins: id,
   * credentials ("x509" or "psk").
   *
   * @d hsinfo hs_id hs_credentials
   * @stap.alias tls.start
   * @arg id connection id
   * @arg credentials "x509" (B<--tls-certificates>) or "psk"
   *     (B<--tls-psk>)
   */
  probe tls_handshake_start (uint64_t id, const char *credentials);
  /* The TLS handshake ended: id, 1 if it succeeded (else 0), the
   * session's protocol and ciphers or the GnuTLS error, the peer's
   * identity (PSK username or certificate DN; "" if none).
   *
   * @d hsinfo hs_id hs_ok hs_detail hs_tls_peer
   * @stap.alias tls.done: address = nbdkit_conn_peer(id)
   * @arg id connection id
   * @arg ok 1 if the session is secured, else 0
   * @arg detail on success GnuTLS's description of the session, e.g.
   *     "(TLS1.3)-(ECDHE-SECP256R1)- (ECDSA-SECP256R1-SHA256)-(AES-256-GCM)";
   *     on failure GnuTLS's error message
   * @arg peer who the client proved to be: the PSK username, or the DN of
   *     its verified certificate ("CN=...,O=..."), or of the refused one; ""
   *     if none
   */
  probe tls_handshake_done (uint64_t id, int64_t ok, const char *detail,
                            const char *peer);

  /* ---- requests ---- */

  /* A request was decoded: id, cookie, command code, offset, count,
   * flags.  Six arguments, so bpftrace 0.17 reads them all; the
   * command's name is the tracer's to compute from its code.
   *
   * @d reqinfo rq_id rq_cookie rq_cmd rq_offset rq_count rq_flags
   * @d+ rq_cmdname = nbdkit_cmd_string[arg2]
   * @d+ rq_flagstr = nbdkit_cmd_flags_string[arg5]
   * @stap+ name = nbdkit_cmd_str(command)
   * @stap.alias request.start: cmd = name; flags_str =
   *     nbdkit_cmd_flags_str(flags); peer = nbdkit_conn_peer(id); export =
   *     nbdkit_conn_export(id); transport = nbdkit_conn_transport(id)
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg command the NBD_CMD_* code: 0 read, 1 write, 2 disc, 3 flush,
   *     4 trim, 5 cache, 6 write_zeroes, 7 block_status
   * @arg offset offset in bytes
   * @arg count length in bytes
   * @arg flags the NBD_CMD_FLAG_* bits as sent: 1 fua, 2 no_hole, 4 df,
   *     8 req_one, 0x10 fast_zero, 0x20 payload_len
   */
  probe request_start (uint64_t id, uint64_t cookie, uint64_t command,
                       uint64_t offset, uint64_t count, uint64_t flags);
  /* A valid request goes down the chain: id, cookie, ns since its
   * header was read (payload and queueing), requests in flight on the
   * connection (read, reply not yet written; this one included).
   *
   * @d reqinfo rq_id rq_cookie rq_queue_ns rq_in_flight
   * @stap.alias request.dispatch: queue_us = queue_ns / 1000
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg queue_ns nanoseconds since the header was read (reading the
   *     payload and waiting), or 0 if nobody traced request_dispatch or
   *     request_done when the request started
   * @arg in_flight requests in flight on the connection, this one
   *     included: read by the server and not yet answered (a reply held back
   *     to go out with the next ones counts until the write that carries it).
   *     Requests the client sent that still wait in the socket or the input
   *     buffer are not counted. With several workers the count is taken
   *     without a lock and may be off by the requests other workers are
   *     reading or answering at that instant.
   */
  probe request_dispatch (uint64_t id, uint64_t cookie,
                          uint64_t queue_ns, uint64_t in_flight);
  /* A request is handed to a plugin's asynchronous callback
   * (nbdkit-async(3)), after request_dispatch: id, cookie, command
   * code, offset, count.
   *
   * @d reqinfo rq_id rq_cookie rq_cmd rq_offset rq_count
   * @d+ rq_cmdname = nbdkit_cmd_string[arg2]
   * @stap.alias request.submit: cmd = nbdkit_cmd_str(command)
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg command the NBD_CMD_* code
   * @arg offset offset in bytes
   * @arg count length in bytes
   */
  probe request_submit (uint64_t id, uint64_t cookie, uint64_t command,
                        uint64_t offset, uint64_t count);
  /* A request handed to a plugin's asynchronous callback completed
   * (nbdkit_async_complete, on the plugin's thread), or the callback
   * refused it: id, cookie, errno (0 for success), ns since
   * request_submit.
   *
   * @d reqinfo rq_id rq_cookie rq_error rq_backend_ns
   * @d+ rq_errname = nbdkit_errno_string[arg2]
   * @stap.alias request.complete: errno_name = nbdkit_errno_str(error);
   *     backend_us = backend_ns / 1000
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg error 0 for success, else the errno the plugin completed it with
   * @arg backend_ns nanoseconds since request_submit, or 0 if nobody
   *     traced request_complete when the request was submitted
   */
  probe request_complete (uint64_t id, uint64_t cookie, int64_t error,
                          uint64_t backend_ns);
  /* A request finished: id, cookie, command, errno (0 for success),
   * payload bytes moved (reads and writes), ns since its header was
   * read.  Fires for NBD_CMD_DISC too, which has no reply.  Requests
   * already in flight when a tracer attaches have no start time and
   * do not fire it.
   *
   * @d reqinfo rq_id rq_cookie rq_cmd rq_error rq_bytes rq_latency_ns
   * @d+ rq_cmdname = nbdkit_cmd_string[arg2]
   * @d+ rq_errname = nbdkit_errno_string[arg3]
   * @stap.alias request.done: cmd = nbdkit_cmd_str(command); errno_name =
   *     nbdkit_errno_str(error); latency_ns = duration_ns; latency_us =
   *     duration_ns / 1000; peer = nbdkit_conn_peer(id); export =
   *     nbdkit_conn_export(id); transport = nbdkit_conn_transport(id)
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg command the NBD_CMD_* code
   * @arg error 0 for success, else the errno (the client is told the
   *     matching NBD error)
   * @arg bytes bytes read or written: the count of a successful read or
   *     write, else 0
   * @arg duration_ns nanoseconds since the header was read
   */
  probe request_done (uint64_t id, uint64_t cookie, uint64_t command,
                      int64_t error, uint64_t bytes, uint64_t duration_ns);
  /* A reply is written, in wire order (fired just before the write,
   * under the connection's write lock): id, cookie, kind ("simple",
   * "structured", "extended"), bytes on the wire, chunks.
   *
   * @d reqinfo rq_id rq_cookie rq_kind rq_wire_bytes rq_chunks
   * @stap.alias request.reply
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg kind "simple", "structured" or "extended", after the reply's
   *     header
   * @arg bytes bytes written: headers and payload
   * @arg chunks structured reply chunks sent (1 for now: every reply is a
   *     single chunk)
   */
  probe reply_send (uint64_t id, uint64_t cookie, const char *kind,
                    uint64_t bytes, uint64_t chunks);

  /* Busy-polling for input (--busy-poll) ended: id, 1 if the socket
   * turned readable (input, end of file or an error; else 0: the window
   * ran out and the reader sleeps), ns spent.
   *
   * @d reqinfo rq_id rq_poll_caught rq_poll_ns
   * @stap.alias busy_poll.done
   * @arg id connection id
   * @arg caught 1 if the socket turned readable while polling (input, or
   *     the client's end of file or an error), 0 if the window ran out
   * @arg spent_ns nanoseconds spent polling
   */
  probe busy_poll (uint64_t id, int64_t caught, uint64_t spent_ns);

  /* A wait slept to look at the client (--busy-poll): id, 1 if another
   * request was already in behind the one read (the client keeps
   * sending: the connection rests), else 0; polling waits until the
   * next look (after the rest, for 1).
   *
   * @d reqinfo rq_id rq_poll_more rq_poll_gap
   * @stap.alias busy_poll.look
   * @arg id connection id
   * @arg more 1 if another request was already in (the connection rests),
   *     else 0
   * @arg gap polling waits until the next look (for more = 1, counted
   *     after the rest)
   */
  probe busy_poll_look (uint64_t id, int64_t more, uint64_t gap);

  /* ---- stages: sockets, replies, workers, configuration, unload ---- */

  /* A reply went out: after the write that carried it returned (a
   * held reply's, after its batch's): id, cookie, bytes on the wire,
   * ns the write took (blocked on the socket included), 0 if the write
   * failed else 1.
   *
   * @d reqinfo rq_id rq_cookie rq_wire_bytes rq_write_ns rq_written
   * @stap.alias request.written ?
   * @arg id connection id
   * @arg cookie the request's cookie
   * @arg bytes bytes on the wire: headers and payload (as reply_send's)
   * @arg write_ns nanoseconds the write took, blocked on the socket
   *     included (for a read sent from a file, the header's write and the
   *     sendfile calls)
   * @arg ok 1 if the write succeeded, 0 if it failed (the connection then
   *     closes)
   */
  probe reply_written (uint64_t id, uint64_t cookie, uint64_t bytes,
                       uint64_t write_ns, int64_t ok);
  /* A read from the client's socket (or TLS session) begins: id, bytes
   * wanted.
   *
   * @d ioinfo io_id io_bytes
   * @d+ io_op = "read"
   * @stap.alias socket.read.start ?
   * @arg id connection id
   * @arg want bytes asked for
   */
  probe sock_read_start (uint64_t id, uint64_t want);
  /* It returned: id, bytes got (0 at end of file, -1 on error), errno
   * (0 unless it failed), ns it took (waiting included).
   *
   * @d ioinfo io_id io_done io_error io_ns
   * @d+ io_op = "read"
   * @d+ io_errname = nbdkit_errno_string[arg2]
   * @stap.alias socket.read.done ?: errno_name = error > 0 ?
   *     nbdkit_errno_str(error) : ""
   * @arg id connection id
   * @arg got bytes read, 0 at the client's end of file, -1 on error
   * @arg error the errno of a failed read (EINTR for a payload read woken
   *     with nothing to take, which the server then repeats), else 0
   * @arg ns nanoseconds the read took, waiting for input included
   */
  probe sock_read_done (uint64_t id, int64_t got, int64_t error,
                        uint64_t ns);
  /* A write to the client's socket (or TLS session) begins: id,
   * bytes.
   *
   * @d ioinfo io_id io_bytes
   * @d+ io_op = "write"
   * @stap.alias socket.write.start ?
   * @arg id connection id
   * @arg bytes bytes to write
   */
  probe sock_write_start (uint64_t id, uint64_t bytes);
  /* It returned: id, bytes written (-1 on error), errno, ns.
   *
   * @d ioinfo io_id io_done io_error io_ns
   * @d+ io_op = "write"
   * @d+ io_errname = nbdkit_errno_string[arg2]
   * @stap.alias socket.write.done ?: errno_name = error > 0 ?
   *     nbdkit_errno_str(error) : ""
   * @arg id connection id
   * @arg wrote bytes written (all of them, or what a write that does not
   *     wait took), -1 on error
   * @arg error the errno of a failed write, else 0
   * @arg ns nanoseconds the write took, blocked on the socket included
   */
  probe sock_write_done (uint64_t id, int64_t wrote, int64_t error,
                         uint64_t ns);
  /* A worker of a connection starts: id, worker index (0 is the
   * connection's own thread), the effective thread model's name, the
   * most workers the connection may have.
   *
   * @d ioinfo io_id io_worker io_model io_max_workers
   * @stap.alias worker.start ?
   * @arg id connection id
   * @arg worker the worker's index, from 0
   * @arg model the thread model in effect (the weakest of the plugin's and
   *     filters'): "serialize_connections", "serialize_all_requests",
   *     "serialize_requests" or "parallel"
   * @arg max_workers the most workers this connection may run:
   *     B<--threads> under the parallel model, else 1
   */
  probe worker_start (uint64_t id, uint64_t worker, const char *model,
                      uint64_t max_workers);
  /* A worker ends: id, worker index, requests it read.
   *
   * @d ioinfo io_id io_worker io_requests
   * @stap.alias worker.stop ?
   * @arg id connection id
   * @arg worker the worker's index
   * @arg requests requests this worker read (the sum over the workers is
   *     connection_close's requests)
   */
  probe worker_stop (uint64_t id, uint64_t worker, uint64_t requests);
  /* A layer is given a parameter: layer name, key, value (that of a
   * key naming a password or secret is "<hidden>").
   *
   * @d layerinfo ly_name ly_key ly_value
   * @stap.alias config.set ?
   * @arg layer the plugin's or filter's name
   * @arg key the key
   * @arg value the value, except for a key that contains "password",
   *     "passwd", "passphrase" or "secret" (in any case), whose value is
   *     always "<hidden>" (its form too: "-", "-FD" and "+FILE" are hidden
   *     alike)
   */
  probe config (const char *layer, const char *key, const char *value);
  /* The plugin was unloaded (after its unload callback): name.
   *
   * @d layerinfo ly_name
   * @d+ ly_kind = "plugin"
   * @stap.alias plugin.unload ?
   * @arg name the plugin's name
   */
  probe plugin_unload (const char *name);
  /* A filter was unloaded (after its unload callback): name.
   *
   * @d layerinfo ly_name
   * @d+ ly_kind = "filter"
   * @stap.alias filter.unload ?
   * @arg name the filter's name
   */
  probe filter_unload (const char *name);

  /* ---- layers ---- */

  /* A plugin or filter callback is called: id, cookie (0 outside a
   * request), layer name, callback name, offset, count (0 and 0 for
   * calls without a range).  No depth: six arguments fit bpftrace
   * 0.17, and layer_call_done, on the same thread, carries it.
   *
   * @d layerinfo ly_id ly_cookie ly_name ly_callback ly_offset ly_count
   * @stap defined
   * @stap.alias layer.call
   * @arg id connection id, 0 for calls outside a connection (config,
   *     config_complete, get_ready, after_fork, cleanup, unload, and contexts
   *     a filter opened shared)
   * @arg cookie the request's cookie, 0 outside a request (negotiation,
   *     close) or on a thread of the layer's own
   * @arg layer the plugin's or filter's name
   * @arg callback the callback: "config", "config_complete", "get_ready",
   *     "after_fork", "preconnect", "list_exports", "default_export", "open",
   *     "prepare", "get_size", "export_description", "block_size",
   *     "can_write", "can_flush", "is_rotational", "can_trim", "can_zero",
   *     "can_fast_zero", "can_extents", "can_fua", "can_multi_conn",
   *     "can_cache", "pread", "pwrite", "flush", "trim", "zero", "extents",
   *     "cache", "finalize", "close", "cleanup", "unload"
   * @arg offset offset of pread, pwrite, trim, zero, extents and cache; 0
   *     for other calls
   * @arg count their length; 0 for other calls
   */
  probe layer_call_start (uint64_t id, uint64_t cookie, const char *layer,
                          const char *callback, uint64_t offset,
                          uint64_t count);
  /* The same callback returned: id, cookie, depth, layer name, callback
   * name, errno (0 for success).  Only this probe has the depth: its
   * layer_call_start is the latest one on the same thread with the
   * same layer and callback and no done yet.
   *
   * @d layerinfo ly_id ly_cookie ly_depth ly_name ly_callback ly_error
   * @d+ ly_errname = nbdkit_errno_string[arg5]
   * @stap defined
   * @stap.alias layer.return: errno_name = error > 0 ?
   *     nbdkit_errno_str(error) : ""
   * @arg id connection id (0 as for layer_call_start)
   * @arg cookie the request's cookie, or 0
   * @arg depth 0 for the outermost layer, one more for each layer further
   *     in (the plugin is deepest)
   * @arg layer the plugin's or filter's name
   * @arg callback the callback's name
   * @arg error 0 for success; for a failed data callback its errno (EIO if
   *     it gave none); EIO for a failed control callback
   */
  probe layer_call_done (uint64_t id, uint64_t cookie, uint64_t depth,
                         const char *layer, const char *callback,
                         int64_t error);

  /* ---- diagnostics ---- */

  /* nbdkit_error or nbdkit_debug was called, printed or not: level
   * ("error", "debug"), origin (layer name or "nbdkit"), message,
   * connection id (0 if none), cookie (0 outside a request), where
   * ("server/FILE.c:LINE" for the server's own, "OBJECT+0xOFFSET" of
   * the caller otherwise).
   *
   * @d diaginfo dg_level dg_origin dg_message dg_id dg_cookie dg_where
   * @stap.alias log.message
   * @arg level "error" or "debug"
   * @arg origin the plugin or filter whose callback the thread is in (the
   *     server's B<-v> line for each layer call names the layer called), or
   *     "nbdkit" for the server outside any callback
   * @arg message the formatted message, without trailing newlines, cut at
   *     1023 bytes
   * @arg id the connection the thread serves, or 0
   * @arg cookie the request the thread is running, or 0 outside a request
   * @arg where where the message was written: for the server's own
   *     messages (its internal calls, and the helpers such as
   *     nbdkit_parse_size that plugins call) "server/FILE.c:LINE"; for a
   *     plugin's or filter's call, "OBJECT+0xOFFSET", the shared object's file
   *     name and the return address's offset in it, which C<addr2line -e
   *     OBJECT 0xOFFSET> turns into a file and line when the object has debug
   *     information
   */
  probe log (const char *level, const char *origin, const char *message,
             uint64_t id, uint64_t cookie, const char *where);
  /* A client broke the protocol: id, what.
   *
   * @d diaginfo dg_id dg_what
   * @stap.alias protocol.violation
   * @arg id connection id
   * @arg what "unknown client flags", "bad option magic", "option too
   *     long", "short request header", "bad request magic", "payload too
   *     large" (over 128 MiB), "write payload cut short"
   */
  probe protocol_violation (uint64_t id, const char *what);
  /* A server limit was reached: id (0 if none), kind ("connections",
   * "option_length", "options", "payload", "descriptors",
   * "handshake_timeout").
   *
   * @d diaginfo dg_id dg_kind
   * @stap.alias limit.hit
   * @arg id connection id, 0 for "connections"
   * @arg kind "connections" (a client beyond --max-connections, refused:
   *     see connection_reject), "option_length" (an option payload over 64
   *     KiB), "failed_options" (a negotiation whose options got 1024 error
   *     replies), "option_bytes" (more than 16 MiB of options in one
   *     negotiation), "payload" (a read or write over 64 MiB, refused with
   *     ENOMEM; or a payload over 128 MiB, which also ends the connection),
   *     "descriptors" (a block status reply cut to 65536 extents; the request
   *     still succeeds), "handshake_timeout" (a client still negotiating after
   *     --handshake-timeout; the connection closes)
   */
  probe limit_hit (uint64_t id, const char *kind);

  /* ---- waits ---- */

  /* A thread must wait for a lock of the server that another thread
   * holds, or for room under a connection's bound: id, cookie (0 when it
   * waits for no one request), which lock or bound.  Fires only when the
   * lock is taken or the bound reached: an uncontended lock fires
   * nothing.
   *
   * @d reqinfo rq_id rq_cookie rq_lock
   * @stap.alias wait.start ?
   * @arg id connection id
   * @arg cookie the cookie of the request that waits; 0 for "read" and
   *     "in_flight" (the next request is not read yet), "serialize_conn",
   *     a "write" of
   *     replies held back from several requests, and "serialize_all" taken
   *     for a call outside a request (open, close, the handshake's
   *     questions)
   * @arg lock "serialize_conn" (the thread model serialize_connections: a
   *     connection waits, before its handshake, for the one being served to
   *     end), "serialize_all" (serialize_all_requests or
   *     serialize_connections: a call waits for another connection's call
   *     into the plugin and filters), "write" (a reply waits for another
   *     worker's reply to go out), "read" (a worker waits for another to
   *     read a request; that one may itself be waiting for the client),
   *     "payload" (a request waits for the connection's 512 MiB of
   *     buffers in flight), "in_flight" (the asynchronous path: the
   *     connection has as many requests in the plugin as it may)
   */
  probe wait_start (uint64_t id, uint64_t cookie, const char *lock);
  /* The lock of wait_start is taken: id, cookie, lock, ns waited.
   *
   * @d reqinfo rq_id rq_cookie rq_lock rq_wait_ns
   * @stap.alias wait.done ?: wait_us = wait_ns / 1000
   * @arg id connection id
   * @arg cookie as in wait_start
   * @arg lock as in wait_start
   * @arg wait_ns nanoseconds since wait_start
   */
  probe wait_done (uint64_t id, uint64_t cookie, const char *lock,
                   uint64_t wait_ns);

  /* ---- probes from plugins and scripts ---- */

  /* A plugin, filter or script fired the generic probe (nbdkit_probe,
   * the nbdkit-probe command of the sh and eval plugins): id (0 outside
   * a connection), cookie (0 outside a request), the name the caller
   * gave, two integers and a text of its choice ("" if none).
   *
   * @d diaginfo dg_id dg_cookie dg_name dg_arg1 dg_arg2 dg_text
   * @stap optional
   * @stap.alias user.probe ?
   * @arg id connection id, 0 outside a connection (configuration, threads
   *     of the plugin's own)
   * @arg cookie the request's cookie, 0 outside a request (open, close,
   *     negotiation)
   * @arg name the name the caller gave ("" for NULL)
   * @arg arg1 an integer of the caller's choice (0 when not given)
   * @arg arg2 another (0 when not given)
   * @arg text a text of the caller's choice ("" when not given)
   */
  probe user (uint64_t id, uint64_t cookie, const char *name,
              int64_t arg1, int64_t arg2, const char *text);
};

/* The provider as a whole: the weakest stability of its probes.  Each
 * probe's own stability (the core connection and request probes are
 * Stable) is in tools/probes.stability and nbdkit-probes(1).
 */
#pragma D attributes Evolving/Evolving/Common provider nbdkit provider
#pragma D attributes Private/Private/Unknown provider nbdkit module
#pragma D attributes Private/Private/Unknown provider nbdkit function
#pragma D attributes Evolving/Evolving/Common provider nbdkit name
#pragma D attributes Evolving/Evolving/Common provider nbdkit args
