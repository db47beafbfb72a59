/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/*
 * nbdkit_translators.d: a D library for nbdkit's USDT probes (provider
 * "nbdkit", server/probes.d), for DTrace on illumos, FreeBSD and Linux
 * (Oracle's dtrace-utils).  Installed where dtrace(1) reads libraries
 * (configure --with-dtracelibdir), so every D script can use it without
 * -L.  It gives the probes' raw arguments stable, symbolic names:
 *
 *  - constants for the protocol's numbers (NBD_CMD_*, NBD_OPT_*,
 *    NBD_REP_*, NBD_FLAG_*, NBD_CMD_FLAG_*, NBDKIT_THREAD_MODEL_*);
 *  - inline arrays that name them: nbdkit_cmd_string[cmd],
 *    nbdkit_opt_string[opt], nbdkit_rep_string[reply],
 *    nbdkit_eflags_string[flags] ("has_flags|send_flush|..."),
 *    nbdkit_cmd_flags_string[flags] ("fua|df"),
 *    nbdkit_errno_string[errno] ("EIO"), nbdkit_thread_model_string[m];
 *  - seven stable views, nbdkit_serverinfo_t, nbdkit_layerinfo_t,
 *    nbdkit_conninfo_t (peer, export, transport, TLS, the Unix peer's
 *    pid and uid), nbdkit_hsinfo_t, nbdkit_reqinfo_t, nbdkit_ioinfo_t and
 *    nbdkit_diaginfo_t, with one translator per probe and, for each
 *    probe NAME, an inline nbdkit_NAME that is the translated view of
 *    the probe being handled:
 *
 *      nbdkit*:::request_done
 *      {
 *              @lat[nbdkit_request_done->rq_cmdname,
 *                  nbdkit_request_done->rq_errname] =
 *                  quantize(nbdkit_request_done->rq_latency_ns / 1000);
 *      }
 *
 *      nbdkit*:::connection_accept
 *      {
 *              peer[pid, arg0] = nbdkit_connection_accept->ci_peer;
 *      }
 *
 * A view reads the arguments of the probe it is named after (arg0 ...,
 * strings with copyinstr()): use nbdkit_NAME only in a clause for
 * nbdkit*:::NAME.  Members a probe does not carry have no translation
 * and are an error at compile time.  The connection probes carry the
 * conninfo fields they know (connection_accept: peer, transport and
 * the Unix peer's pid and uid;
 * export_select and handshake_done: the export; connection_info, on
 * servers that have it: all of them, also for connections opened
 * before tracing began); a script keeps them by connection id, as
 * tools/nbdkit.d does.
 *
 * tests/test-tool-dtrace.sh checks with tools/probes-check.py that
 * every probe of server/probes.d has its translator, that each reads
 * only arguments the probe has, strings with copyinstr() and only
 * those, and that the names here agree with the server's.
 */

inline uint64_t NBD_CMD_READ = 0;
inline uint64_t NBD_CMD_WRITE = 1;
inline uint64_t NBD_CMD_DISC = 2;
inline uint64_t NBD_CMD_FLUSH = 3;
inline uint64_t NBD_CMD_TRIM = 4;
inline uint64_t NBD_CMD_CACHE = 5;
inline uint64_t NBD_CMD_WRITE_ZEROES = 6;
inline uint64_t NBD_CMD_BLOCK_STATUS = 7;

/* The same words as request_start's name argument. */
inline string nbdkit_cmd_string[uint64_t c] =
	c == 0 ? "read" :
	c == 1 ? "write" :
	c == 2 ? "disc" :
	c == 3 ? "flush" :
	c == 4 ? "trim" :
	c == 5 ? "cache" :
	c == 6 ? "write_zeroes" :
	c == 7 ? "block_status" :
	"unknown";

inline uint64_t NBD_OPT_EXPORT_NAME = 1;
inline uint64_t NBD_OPT_ABORT = 2;
inline uint64_t NBD_OPT_LIST = 3;
inline uint64_t NBD_OPT_STARTTLS = 5;
inline uint64_t NBD_OPT_INFO = 6;
inline uint64_t NBD_OPT_GO = 7;
inline uint64_t NBD_OPT_STRUCTURED_REPLY = 8;
inline uint64_t NBD_OPT_LIST_META_CONTEXT = 9;
inline uint64_t NBD_OPT_SET_META_CONTEXT = 10;
inline uint64_t NBD_OPT_EXTENDED_HEADERS = 11;

/* The same words as handshake_option's name argument. */
inline string nbdkit_opt_string[uint64_t o] =
	o == 1 ? "export_name" :
	o == 2 ? "abort" :
	o == 3 ? "list" :
	o == 5 ? "starttls" :
	o == 6 ? "info" :
	o == 7 ? "go" :
	o == 8 ? "structured_reply" :
	o == 9 ? "list_meta_context" :
	o == 10 ? "set_meta_context" :
	o == 11 ? "extended_headers" :
	"unknown";

inline uint64_t NBD_REP_ACK = 1;
inline uint64_t NBD_REP_SERVER = 2;
inline uint64_t NBD_REP_INFO = 3;
inline uint64_t NBD_REP_META_CONTEXT = 4;

/* Option reply types; errors have the top bit set. */
inline string nbdkit_rep_string[uint64_t r] =
	r == 1 ? "ack" :
	r == 2 ? "server" :
	r == 3 ? "info" :
	r == 4 ? "meta_context" :
	r == 0x80000001 ? "err_unsup" :
	r == 0x80000002 ? "err_policy" :
	r == 0x80000003 ? "err_invalid" :
	r == 0x80000004 ? "err_platform" :
	r == 0x80000005 ? "err_tls_reqd" :
	r == 0x80000006 ? "err_unknown" :
	r == 0x80000007 ? "err_shutdown" :
	r == 0x80000008 ? "err_block_size_reqd" :
	r == 0x80000009 ? "err_too_big" :
	r == 0x8000000a ? "err_ext_header_reqd" :
	"unknown";

inline uint64_t NBD_FLAG_HAS_FLAGS = 0x1;
inline uint64_t NBD_FLAG_READ_ONLY = 0x2;
inline uint64_t NBD_FLAG_SEND_FLUSH = 0x4;
inline uint64_t NBD_FLAG_SEND_FUA = 0x8;
inline uint64_t NBD_FLAG_ROTATIONAL = 0x10;
inline uint64_t NBD_FLAG_SEND_TRIM = 0x20;
inline uint64_t NBD_FLAG_SEND_WRITE_ZEROES = 0x40;
inline uint64_t NBD_FLAG_SEND_DF = 0x80;
inline uint64_t NBD_FLAG_CAN_MULTI_CONN = 0x100;
inline uint64_t NBD_FLAG_SEND_CACHE = 0x400;
inline uint64_t NBD_FLAG_SEND_FAST_ZERO = 0x800;

/* Transmission flags (export_select's eflags), "|" between names. */
inline string nbdkit_eflags_string[uint64_t f] = substr(strjoin(
	f & 0x1 ? "|has_flags" : "", strjoin(
	f & 0x2 ? "|read_only" : "", strjoin(
	f & 0x4 ? "|send_flush" : "", strjoin(
	f & 0x8 ? "|send_fua" : "", strjoin(
	f & 0x10 ? "|rotational" : "", strjoin(
	f & 0x20 ? "|send_trim" : "", strjoin(
	f & 0x40 ? "|send_write_zeroes" : "", strjoin(
	f & 0x80 ? "|send_df" : "", strjoin(
	f & 0x100 ? "|can_multi_conn" : "", strjoin(
	f & 0x400 ? "|send_cache" : "",
	f & 0x800 ? "|send_fast_zero" : "")))))))))), 1);

inline uint64_t NBD_CMD_FLAG_FUA = 0x1;
inline uint64_t NBD_CMD_FLAG_NO_HOLE = 0x2;
inline uint64_t NBD_CMD_FLAG_DF = 0x4;
inline uint64_t NBD_CMD_FLAG_REQ_ONE = 0x8;
inline uint64_t NBD_CMD_FLAG_FAST_ZERO = 0x10;
inline uint64_t NBD_CMD_FLAG_PAYLOAD_LEN = 0x20;

/* Command flags (request_start's flags), "|" between names. */
inline string nbdkit_cmd_flags_string[uint64_t f] = substr(strjoin(
	f & 0x1 ? "|fua" : "", strjoin(
	f & 0x2 ? "|no_hole" : "", strjoin(
	f & 0x4 ? "|df" : "", strjoin(
	f & 0x8 ? "|req_one" : "", strjoin(
	f & 0x10 ? "|fast_zero" : "",
	f & 0x20 ? "|payload_len" : ""))))), 1);

/* The errnos the server reports (request_done, layer_call_done), ""
 * for 0 (success); others as "errno". */
inline string nbdkit_errno_string[int64_t e] =
	e == 0 ? "" :
	e == 1 ? "EPERM" :
	e == 2 ? "ENOENT" :
	e == 5 ? "EIO" :
	e == 9 ? "EBADF" :
	e == 12 ? "ENOMEM" :
	e == 13 ? "EACCES" :
	e == 22 ? "EINVAL" :
	e == 27 ? "EFBIG" :
	e == 28 ? "ENOSPC" :
	e == 30 ? "EROFS" :
	e == 75 ? "EOVERFLOW" :
	e == 95 ? "ENOTSUP" :
	e == 108 ? "ESHUTDOWN" :
	"errno";

inline int64_t NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS = 0;
inline int64_t NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS = 1;
inline int64_t NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS = 2;
inline int64_t NBDKIT_THREAD_MODEL_PARALLEL = 3;

inline string nbdkit_thread_model_string[int64_t m] =
	m == 0 ? "serialize_connections" :
	m == 1 ? "serialize_all_requests" :
	m == 2 ? "serialize_requests" :
	m == 3 ? "parallel" :
	"unknown";

/* The server process: the event ("start", "listen", "ready",
 * "stop"), version, pid, listening sockets, why it stops. */
typedef struct nbdkit_serverinfo {
	string sv_event;
	string sv_version;
	uint64_t sv_pid;
	int64_t sv_fd;
	string sv_address;
	string sv_reason;
} nbdkit_serverinfo_t;

/* A plugin or filter: loaded (name, path, API version, thread model),
 * configured (key, value), unloaded, or called (connection id,
 * cookie, depth, callback, range, errno). */
typedef struct nbdkit_layerinfo {
	string ly_name;
	string ly_path;
	int64_t ly_api_version;
	int64_t ly_thread_model;
	string ly_thread_model_name;
	string ly_kind;
	string ly_key;
	string ly_value;
	uint64_t ly_id;
	uint64_t ly_cookie;
	uint64_t ly_depth;
	string ly_callback;
	uint64_t ly_offset;
	uint64_t ly_count;
	int64_t ly_error;
	string ly_errname;
} nbdkit_layerinfo_t;

/* A connection: who (peer address, transport, the Unix peer's pid and
 * uid), what (export), and how it ended (reason, requests, bytes,
 * lifetime).  Fields a probe does not carry are not translated. */
typedef struct nbdkit_conninfo {
	uint64_t ci_id;
	int64_t ci_fd;
	string ci_peer;
	string ci_transport;
	string ci_reason;
	uint64_t ci_requests;
	uint64_t ci_bytes_in;
	uint64_t ci_bytes_out;
	uint64_t ci_lifetime_ns;
	string ci_export;
	int ci_tls;
	int64_t ci_pid;
	int64_t ci_uid;
} nbdkit_conninfo_t;

/* One step of negotiation: options and replies (codes and names),
 * meta contexts, the export and its transmission flags, TLS, outcome. */
typedef struct nbdkit_hsinfo {
	uint64_t hs_id;
	uint64_t hs_option;
	string hs_optname;
	uint64_t hs_length;
	uint64_t hs_reply;
	string hs_repname;
	int64_t hs_error;
	string hs_context;
	uint64_t hs_context_id;
	int64_t hs_accepted;
	string hs_export;
	uint64_t hs_size;
	uint64_t hs_eflags;
	string hs_eflagstr;
	int64_t hs_structured;
	int64_t hs_extended;
	string hs_reason;
	string hs_credentials;
	int64_t hs_ok;
	string hs_detail;
	string hs_tls_peer;
} nbdkit_hsinfo_t;

/* A request: connection id, cookie, command (code and name), flags
 * (and their names), range, errno (and its name), payload bytes,
 * latency; its reply; busy-polling on its connection. */
typedef struct nbdkit_reqinfo {
	uint64_t rq_id;
	uint64_t rq_cookie;
	uint64_t rq_cmd;
	string rq_cmdname;
	uint64_t rq_flags;
	string rq_flagstr;
	uint64_t rq_offset;
	uint64_t rq_count;
	uint64_t rq_queue_ns;
	uint64_t rq_in_flight;
	int64_t rq_error;
	string rq_errname;
	uint64_t rq_bytes;
	uint64_t rq_latency_ns;
	string rq_kind;
	uint64_t rq_wire_bytes;
	uint64_t rq_chunks;
	uint64_t rq_write_ns;
	int64_t rq_written;
	int64_t rq_poll_caught;
	uint64_t rq_poll_ns;
	int64_t rq_poll_more;
	uint64_t rq_poll_gap;
} nbdkit_reqinfo_t;

/* The connection's socket (reads and writes: bytes, errno, time) and
 * its workers (index, thread model, requests read). */
typedef struct nbdkit_ioinfo {
	uint64_t io_id;
	string io_op;
	uint64_t io_bytes;
	int64_t io_done;
	int64_t io_error;
	string io_errname;
	uint64_t io_ns;
	uint64_t io_worker;
	string io_model;
	uint64_t io_max_workers;
	uint64_t io_requests;
} nbdkit_ioinfo_t;

/* Diagnostics: log messages, protocol violations, limits, and the
 * probes plugins and scripts fire with nbdkit_probe() ("user"). */
typedef struct nbdkit_diaginfo {
	string dg_level;
	string dg_origin;
	string dg_message;
	uint64_t dg_id;
	uint64_t dg_cookie;
	string dg_where;
	string dg_what;
	string dg_kind;
	string dg_name;
	int64_t dg_arg1;
	int64_t dg_arg2;
	string dg_text;
} nbdkit_diaginfo_t;

/* ---- server ---- */

typedef uintptr_t nbdkit_server_start_t;
#pragma D binding "1.0" translator
translator nbdkit_serverinfo_t < nbdkit_server_start_t *a > {
	sv_event = "start";
	sv_version = copyinstr(arg0);
	sv_pid = arg1;
};
inline nbdkit_serverinfo_t *nbdkit_server_start =
    xlate <nbdkit_serverinfo_t *> ((nbdkit_server_start_t *)NULL);

typedef uintptr_t nbdkit_listen_t;
#pragma D binding "1.0" translator
translator nbdkit_serverinfo_t < nbdkit_listen_t *a > {
	sv_event = "listen";
	sv_fd = (int64_t)arg0;
	sv_address = copyinstr(arg1);
};
inline nbdkit_serverinfo_t *nbdkit_listen =
    xlate <nbdkit_serverinfo_t *> ((nbdkit_listen_t *)NULL);

typedef uintptr_t nbdkit_server_ready_t;
#pragma D binding "1.0" translator
translator nbdkit_serverinfo_t < nbdkit_server_ready_t *a > {
	sv_event = "ready";
};
inline nbdkit_serverinfo_t *nbdkit_server_ready =
    xlate <nbdkit_serverinfo_t *> ((nbdkit_server_ready_t *)NULL);

typedef uintptr_t nbdkit_server_stop_t;
#pragma D binding "1.0" translator
translator nbdkit_serverinfo_t < nbdkit_server_stop_t *a > {
	sv_event = "stop";
	sv_reason = copyinstr(arg0);
};
inline nbdkit_serverinfo_t *nbdkit_server_stop =
    xlate <nbdkit_serverinfo_t *> ((nbdkit_server_stop_t *)NULL);

/* ---- layers ---- */

typedef uintptr_t nbdkit_plugin_load_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_plugin_load_t *a > {
	ly_name = copyinstr(arg0);
	ly_path = copyinstr(arg1);
	ly_api_version = (int64_t)arg2;
	ly_thread_model = (int64_t)arg3;
	ly_thread_model_name = nbdkit_thread_model_string[arg3];
	ly_kind = "plugin";
};
inline nbdkit_layerinfo_t *nbdkit_plugin_load =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_plugin_load_t *)NULL);

typedef uintptr_t nbdkit_filter_load_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_filter_load_t *a > {
	ly_name = copyinstr(arg0);
	ly_path = copyinstr(arg1);
	ly_api_version = (int64_t)arg2;
	ly_thread_model = (int64_t)arg3;
	ly_thread_model_name = nbdkit_thread_model_string[arg3];
	ly_kind = "filter";
};
inline nbdkit_layerinfo_t *nbdkit_filter_load =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_filter_load_t *)NULL);

typedef uintptr_t nbdkit_plugin_unload_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_plugin_unload_t *a > {
	ly_name = copyinstr(arg0);
	ly_kind = "plugin";
};
inline nbdkit_layerinfo_t *nbdkit_plugin_unload =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_plugin_unload_t *)NULL);

typedef uintptr_t nbdkit_filter_unload_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_filter_unload_t *a > {
	ly_name = copyinstr(arg0);
	ly_kind = "filter";
};
inline nbdkit_layerinfo_t *nbdkit_filter_unload =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_filter_unload_t *)NULL);

typedef uintptr_t nbdkit_config_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_config_t *a > {
	ly_name = copyinstr(arg0);
	ly_key = copyinstr(arg1);
	ly_value = copyinstr(arg2);
};
inline nbdkit_layerinfo_t *nbdkit_config =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_config_t *)NULL);

typedef uintptr_t nbdkit_layer_call_start_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_layer_call_start_t *a > {
	ly_id = arg0;
	ly_cookie = arg1;
	ly_depth = arg2;
	ly_name = copyinstr(arg3);
	ly_callback = copyinstr(arg4);
	ly_offset = arg5;
	ly_count = arg6;
};
inline nbdkit_layerinfo_t *nbdkit_layer_call_start =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_layer_call_start_t *)NULL);

typedef uintptr_t nbdkit_layer_call_done_t;
#pragma D binding "1.0" translator
translator nbdkit_layerinfo_t < nbdkit_layer_call_done_t *a > {
	ly_id = arg0;
	ly_cookie = arg1;
	ly_depth = arg2;
	ly_name = copyinstr(arg3);
	ly_callback = copyinstr(arg4);
	ly_error = (int64_t)arg5;
	ly_errname = nbdkit_errno_string[arg5];
};
inline nbdkit_layerinfo_t *nbdkit_layer_call_done =
    xlate <nbdkit_layerinfo_t *> ((nbdkit_layer_call_done_t *)NULL);

/* ---- connections ---- */

typedef uintptr_t nbdkit_connection_accept_t;
#pragma D binding "1.0" translator
translator nbdkit_conninfo_t < nbdkit_connection_accept_t *a > {
	ci_id = arg0;
	ci_fd = (int64_t)arg1;
	ci_peer = copyinstr(arg2);
	ci_transport = copyinstr(arg3);
	ci_pid = (int64_t)arg4;
	ci_uid = (int64_t)arg5;
};
inline nbdkit_conninfo_t *nbdkit_connection_accept =
    xlate <nbdkit_conninfo_t *> ((nbdkit_connection_accept_t *)NULL);

typedef uintptr_t nbdkit_connection_reject_t;
#pragma D binding "1.0" translator
translator nbdkit_conninfo_t < nbdkit_connection_reject_t *a > {
	ci_fd = (int64_t)arg0;
	ci_peer = copyinstr(arg1);
	ci_reason = copyinstr(arg2);
};
inline nbdkit_conninfo_t *nbdkit_connection_reject =
    xlate <nbdkit_conninfo_t *> ((nbdkit_connection_reject_t *)NULL);

typedef uintptr_t nbdkit_connection_close_t;
#pragma D binding "1.0" translator
translator nbdkit_conninfo_t < nbdkit_connection_close_t *a > {
	ci_id = arg0;
	ci_reason = copyinstr(arg1);
	ci_requests = arg2;
	ci_bytes_in = arg3;
	ci_bytes_out = arg4;
	ci_lifetime_ns = arg5;
};
inline nbdkit_conninfo_t *nbdkit_connection_close =
    xlate <nbdkit_conninfo_t *> ((nbdkit_connection_close_t *)NULL);

typedef uintptr_t nbdkit_connection_info_t;
#pragma D binding "1.0" translator
translator nbdkit_conninfo_t < nbdkit_connection_info_t *a > {
	ci_id = arg0;
	ci_export = copyinstr(arg1);
	ci_peer = copyinstr(arg2);
	ci_transport = copyinstr(arg3);
	ci_tls = index(copyinstr(arg3), "+tls") >= 0;
	ci_pid = (int64_t)arg4;
	ci_uid = (int64_t)arg5;
};
inline nbdkit_conninfo_t *nbdkit_connection_info =
    xlate <nbdkit_conninfo_t *> ((nbdkit_connection_info_t *)NULL);

/* ---- handshake ---- */

typedef uintptr_t nbdkit_handshake_start_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_handshake_start_t *a > {
	hs_id = arg0;
};
inline nbdkit_hsinfo_t *nbdkit_handshake_start =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_handshake_start_t *)NULL);

typedef uintptr_t nbdkit_handshake_option_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_handshake_option_t *a > {
	hs_id = arg0;
	hs_option = arg1;
	hs_optname = copyinstr(arg2);
	hs_length = arg3;
};
inline nbdkit_hsinfo_t *nbdkit_handshake_option =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_handshake_option_t *)NULL);

typedef uintptr_t nbdkit_handshake_option_reply_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_handshake_option_reply_t *a > {
	hs_id = arg0;
	hs_option = arg1;
	hs_optname = nbdkit_opt_string[arg1];
	hs_reply = arg2;
	hs_repname = nbdkit_rep_string[arg2];
	hs_error = (int64_t)arg3;
};
inline nbdkit_hsinfo_t *nbdkit_handshake_option_reply =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_handshake_option_reply_t *)NULL);

typedef uintptr_t nbdkit_meta_context_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_meta_context_t *a > {
	hs_id = arg0;
	hs_context = copyinstr(arg1);
	hs_context_id = arg2;
	hs_accepted = (int64_t)arg3;
};
inline nbdkit_hsinfo_t *nbdkit_meta_context =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_meta_context_t *)NULL);

typedef uintptr_t nbdkit_export_select_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_export_select_t *a > {
	hs_id = arg0;
	hs_export = copyinstr(arg1);
	hs_size = arg2;
	hs_eflags = arg3;
	hs_eflagstr = nbdkit_eflags_string[arg3];
};
inline nbdkit_hsinfo_t *nbdkit_export_select =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_export_select_t *)NULL);

typedef uintptr_t nbdkit_handshake_done_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_handshake_done_t *a > {
	hs_id = arg0;
	hs_export = copyinstr(arg1);
	hs_structured = (int64_t)arg2;
	hs_extended = (int64_t)arg3;
};
inline nbdkit_hsinfo_t *nbdkit_handshake_done =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_handshake_done_t *)NULL);

typedef uintptr_t nbdkit_handshake_fail_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_handshake_fail_t *a > {
	hs_id = arg0;
	hs_reason = copyinstr(arg1);
};
inline nbdkit_hsinfo_t *nbdkit_handshake_fail =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_handshake_fail_t *)NULL);

typedef uintptr_t nbdkit_tls_handshake_start_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_tls_handshake_start_t *a > {
	hs_id = arg0;
	hs_credentials = copyinstr(arg1);
};
inline nbdkit_hsinfo_t *nbdkit_tls_handshake_start =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_tls_handshake_start_t *)NULL);

typedef uintptr_t nbdkit_tls_handshake_done_t;
#pragma D binding "1.0" translator
translator nbdkit_hsinfo_t < nbdkit_tls_handshake_done_t *a > {
	hs_id = arg0;
	hs_ok = (int64_t)arg1;
	hs_detail = copyinstr(arg2);
	hs_tls_peer = copyinstr(arg3);
};
inline nbdkit_hsinfo_t *nbdkit_tls_handshake_done =
    xlate <nbdkit_hsinfo_t *> ((nbdkit_tls_handshake_done_t *)NULL);

/* ---- requests ---- */

typedef uintptr_t nbdkit_request_start_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_request_start_t *a > {
	rq_id = arg0;
	rq_cookie = arg1;
	rq_cmd = arg2;
	rq_cmdname = copyinstr(arg3);
	rq_flags = arg4;
	rq_flagstr = nbdkit_cmd_flags_string[arg4];
	rq_offset = arg5;
	rq_count = arg6;
};
inline nbdkit_reqinfo_t *nbdkit_request_start =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_request_start_t *)NULL);

typedef uintptr_t nbdkit_request_dispatch_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_request_dispatch_t *a > {
	rq_id = arg0;
	rq_cookie = arg1;
	rq_queue_ns = arg2;
	rq_in_flight = arg3;
};
inline nbdkit_reqinfo_t *nbdkit_request_dispatch =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_request_dispatch_t *)NULL);

typedef uintptr_t nbdkit_request_done_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_request_done_t *a > {
	rq_id = arg0;
	rq_cookie = arg1;
	rq_cmd = arg2;
	rq_cmdname = nbdkit_cmd_string[arg2];
	rq_error = (int64_t)arg3;
	rq_errname = nbdkit_errno_string[arg3];
	rq_bytes = arg4;
	rq_latency_ns = arg5;
};
inline nbdkit_reqinfo_t *nbdkit_request_done =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_request_done_t *)NULL);

typedef uintptr_t nbdkit_reply_send_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_reply_send_t *a > {
	rq_id = arg0;
	rq_cookie = arg1;
	rq_kind = copyinstr(arg2);
	rq_wire_bytes = arg3;
	rq_chunks = arg4;
};
inline nbdkit_reqinfo_t *nbdkit_reply_send =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_reply_send_t *)NULL);

typedef uintptr_t nbdkit_reply_written_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_reply_written_t *a > {
	rq_id = arg0;
	rq_cookie = arg1;
	rq_wire_bytes = arg2;
	rq_write_ns = arg3;
	rq_written = (int64_t)arg4;
};
inline nbdkit_reqinfo_t *nbdkit_reply_written =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_reply_written_t *)NULL);

typedef uintptr_t nbdkit_busy_poll_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_busy_poll_t *a > {
	rq_id = arg0;
	rq_poll_caught = (int64_t)arg1;
	rq_poll_ns = arg2;
};
inline nbdkit_reqinfo_t *nbdkit_busy_poll =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_busy_poll_t *)NULL);

typedef uintptr_t nbdkit_busy_poll_look_t;
#pragma D binding "1.0" translator
translator nbdkit_reqinfo_t < nbdkit_busy_poll_look_t *a > {
	rq_id = arg0;
	rq_poll_more = (int64_t)arg1;
	rq_poll_gap = arg2;
};
inline nbdkit_reqinfo_t *nbdkit_busy_poll_look =
    xlate <nbdkit_reqinfo_t *> ((nbdkit_busy_poll_look_t *)NULL);

/* ---- sockets and workers ---- */

typedef uintptr_t nbdkit_sock_read_start_t;
#pragma D binding "1.0" translator
translator nbdkit_ioinfo_t < nbdkit_sock_read_start_t *a > {
	io_id = arg0;
	io_op = "read";
	io_bytes = arg1;
};
inline nbdkit_ioinfo_t *nbdkit_sock_read_start =
    xlate <nbdkit_ioinfo_t *> ((nbdkit_sock_read_start_t *)NULL);

typedef uintptr_t nbdkit_sock_read_done_t;
#pragma D binding "1.0" translator
translator nbdkit_ioinfo_t < nbdkit_sock_read_done_t *a > {
	io_id = arg0;
	io_op = "read";
	io_done = (int64_t)arg1;
	io_error = (int64_t)arg2;
	io_errname = nbdkit_errno_string[arg2];
	io_ns = arg3;
};
inline nbdkit_ioinfo_t *nbdkit_sock_read_done =
    xlate <nbdkit_ioinfo_t *> ((nbdkit_sock_read_done_t *)NULL);

typedef uintptr_t nbdkit_sock_write_start_t;
#pragma D binding "1.0" translator
translator nbdkit_ioinfo_t < nbdkit_sock_write_start_t *a > {
	io_id = arg0;
	io_op = "write";
	io_bytes = arg1;
};
inline nbdkit_ioinfo_t *nbdkit_sock_write_start =
    xlate <nbdkit_ioinfo_t *> ((nbdkit_sock_write_start_t *)NULL);

typedef uintptr_t nbdkit_sock_write_done_t;
#pragma D binding "1.0" translator
translator nbdkit_ioinfo_t < nbdkit_sock_write_done_t *a > {
	io_id = arg0;
	io_op = "write";
	io_done = (int64_t)arg1;
	io_error = (int64_t)arg2;
	io_errname = nbdkit_errno_string[arg2];
	io_ns = arg3;
};
inline nbdkit_ioinfo_t *nbdkit_sock_write_done =
    xlate <nbdkit_ioinfo_t *> ((nbdkit_sock_write_done_t *)NULL);

typedef uintptr_t nbdkit_worker_start_t;
#pragma D binding "1.0" translator
translator nbdkit_ioinfo_t < nbdkit_worker_start_t *a > {
	io_id = arg0;
	io_worker = arg1;
	io_model = copyinstr(arg2);
	io_max_workers = arg3;
};
inline nbdkit_ioinfo_t *nbdkit_worker_start =
    xlate <nbdkit_ioinfo_t *> ((nbdkit_worker_start_t *)NULL);

typedef uintptr_t nbdkit_worker_stop_t;
#pragma D binding "1.0" translator
translator nbdkit_ioinfo_t < nbdkit_worker_stop_t *a > {
	io_id = arg0;
	io_worker = arg1;
	io_requests = arg2;
};
inline nbdkit_ioinfo_t *nbdkit_worker_stop =
    xlate <nbdkit_ioinfo_t *> ((nbdkit_worker_stop_t *)NULL);

/* ---- diagnostics ---- */

typedef uintptr_t nbdkit_log_t;
#pragma D binding "1.0" translator
translator nbdkit_diaginfo_t < nbdkit_log_t *a > {
	dg_level = copyinstr(arg0);
	dg_origin = copyinstr(arg1);
	dg_message = copyinstr(arg2);
	dg_id = arg3;
	dg_cookie = arg4;
	dg_where = copyinstr(arg5);
};
inline nbdkit_diaginfo_t *nbdkit_log =
    xlate <nbdkit_diaginfo_t *> ((nbdkit_log_t *)NULL);

typedef uintptr_t nbdkit_protocol_violation_t;
#pragma D binding "1.0" translator
translator nbdkit_diaginfo_t < nbdkit_protocol_violation_t *a > {
	dg_id = arg0;
	dg_what = copyinstr(arg1);
};
inline nbdkit_diaginfo_t *nbdkit_protocol_violation =
    xlate <nbdkit_diaginfo_t *> ((nbdkit_protocol_violation_t *)NULL);

typedef uintptr_t nbdkit_limit_hit_t;
#pragma D binding "1.0" translator
translator nbdkit_diaginfo_t < nbdkit_limit_hit_t *a > {
	dg_id = arg0;
	dg_kind = copyinstr(arg1);
};
inline nbdkit_diaginfo_t *nbdkit_limit_hit =
    xlate <nbdkit_diaginfo_t *> ((nbdkit_limit_hit_t *)NULL);

typedef uintptr_t nbdkit_user_t;
#pragma D binding "1.0" translator
translator nbdkit_diaginfo_t < nbdkit_user_t *a > {
	dg_id = arg0;
	dg_cookie = arg1;
	dg_name = copyinstr(arg2);
	dg_arg1 = (int64_t)arg3;
	dg_arg2 = (int64_t)arg4;
	dg_text = copyinstr(arg5);
};
inline nbdkit_diaginfo_t *nbdkit_user =
    xlate <nbdkit_diaginfo_t *> ((nbdkit_user_t *)NULL);
