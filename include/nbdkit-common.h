/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit: declarations shared by plugins and filters.
 *
 * This header is included through nbdkit-plugin.h or nbdkit-filter.h,
 * never directly.  Everything declared here is exported by the server
 * executable and resolved when a plugin or filter .so is loaded, so
 * the names, argument lists and constant values are a binary
 * interface: they match the plugin ABI that nbdkit plugins are built
 * against, and must not change.
 */
#ifndef NBDKIT_COMMON_H
#define NBDKIT_COMMON_H

#if !defined (NBDKIT_PLUGIN_H) && !defined (NBDKIT_FILTER_H)
#error "include nbdkit-plugin.h or nbdkit-filter.h, not nbdkit-common.h"
#endif

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <sys/socket.h>

#include <nbdkit-version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined (__GNUC__) || defined (__clang__)
#define ATTRIBUTE_FORMAT_PRINTF(fmtpos, argpos) \
  __attribute__ ((__format__ (__printf__, fmtpos, argpos)))
#else
#define ATTRIBUTE_FORMAT_PRINTF(fmtpos, argpos)
#endif

/* How much concurrency a plugin or filter tolerates, weakest first.
 * The server uses the weakest model of any layer in the chain.
 */
#define NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS     0
#define NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS    1
#define NBDKIT_THREAD_MODEL_SERIALIZE_REQUESTS        2
#define NBDKIT_THREAD_MODEL_PARALLEL                  3

/* Flags passed to data callbacks (API version 2 and filters). */
#define NBDKIT_FLAG_MAY_TRIM  (1 << 0)  /* zero: may leave a hole */
#define NBDKIT_FLAG_FUA       (1 << 1)  /* write through before returning */
#define NBDKIT_FLAG_REQ_ONE   (1 << 2)  /* extents: one extent is enough */
#define NBDKIT_FLAG_FAST_ZERO (1 << 3)  /* zero: fail with ENOTSUP if slow */

/* Results of can_fua and can_cache. */
#define NBDKIT_FUA_NONE       0
#define NBDKIT_FUA_EMULATE    1
#define NBDKIT_FUA_NATIVE     2
#define NBDKIT_CACHE_NONE     0
#define NBDKIT_CACHE_EMULATE  1
#define NBDKIT_CACHE_NATIVE   2

/* Extent types, bit-compatible with the NBD base:allocation flags. */
#define NBDKIT_EXTENT_HOLE    (1 << 0)
#define NBDKIT_EXTENT_ZERO    (1 << 1)

#define NBDKIT_EXTERN_DECL(ret, fn, args) extern ret fn args
#define NBDKIT_DLL_PUBLIC __attribute__ ((__visibility__ ("default")))

/* This server's additions to the interface of nbdkit 1.32 (Debian 12's
 * nbdkit, the oldest server our plugins load in) are declared with
 * NBDKIT_EXTENSION_DECL.  A plugin refers to them weakly, so that it
 * still loads in a server without them: the dynamic linker binds each
 * to the server's function where there is one and leaves it NULL
 * otherwise, and the macros of the same names at the end of this
 * header (and of nbdkit-async.h) then give a fallback instead of
 * calling NULL: ids 0, probes skipped, ... (nbdkit-plugin(3),
 * "LOADING IN OTHER NBDKIT SERVERS").  NBDKIT_SERVER_HAS (fn) tells
 * whether the running server has FN.
 *
 * The weak declarations say default visibility outright: a reference
 * made hidden (a visibility pragma, or an attribute a build adds) and
 * weak would be settled to 0 by the static linker without a word,
 * where a strong one fails the link.  -fvisibility=hidden and LTO
 * leave them as they are.
 *
 * Define NBDKIT_REQUIRE_EXTENSIONS before including the header for
 * ordinary references: the plugin then fails to load ("undefined
 * symbol") in a server without them.  The server itself, which
 * defines them, builds with NBDKIT_INTERNAL.
 */
#if defined (NBDKIT_INTERNAL) || defined (NBDKIT_REQUIRE_EXTENSIONS) \
  || !(defined (__GNUC__) || defined (__clang__))
#define NBDKIT_WEAK_EXTENSIONS 0
#define NBDKIT_EXTENSION_DECL(ret, fn, args) \
  NBDKIT_EXTERN_DECL (ret, fn, args)
#define NBDKIT_SERVER_HAS(fn) 1
#else
#define NBDKIT_WEAK_EXTENSIONS 1
#define NBDKIT_EXTENSION_DECL(ret, fn, args) \
  extern ret fn args __attribute__ ((__weak__, __visibility__ ("default")))
/* FN is not followed by "(" here, so its macro does not expand. */
#define NBDKIT_SERVER_HAS(fn) (&(fn) != 0)
#endif

/* Messages.  nbdkit_error also records the text for the client where
 * the protocol allows it; nbdkit_debug prints only with -v.
 */
NBDKIT_EXTERN_DECL (void, nbdkit_error,
                    (const char *fs, ...) ATTRIBUTE_FORMAT_PRINTF (1, 2));
NBDKIT_EXTERN_DECL (void, nbdkit_verror,
                    (const char *fs, va_list args)
                    ATTRIBUTE_FORMAT_PRINTF (1, 0));
NBDKIT_EXTERN_DECL (void, nbdkit_debug,
                    (const char *fs, ...) ATTRIBUTE_FORMAT_PRINTF (1, 2));
NBDKIT_EXTERN_DECL (void, nbdkit_vdebug,
                    (const char *fs, va_list args)
                    ATTRIBUTE_FORMAT_PRINTF (1, 0));
/* With -v: BUF as hexdump -C rows, offsets counted from START, each
 * line headed by PREFIX (may be NULL); hexdiff shows the rows where
 * BUF1 and BUF2 differ as a pair, "-" then "+" (nbdkit 1.46).
 */
NBDKIT_EXTENSION_DECL (void, nbdkit_debug_hexdump,
                    (const void *buf, size_t len, const char *prefix,
                     uint64_t start));
NBDKIT_EXTENSION_DECL (void, nbdkit_debug_hexdiff,
                    (const void *buf1, const void *buf2, size_t len,
                     const char *prefix, uint64_t start));

/* Parsing helpers for key=value parameters.  Each returns -1 and has
 * called nbdkit_error on bad input.
 */
NBDKIT_EXTERN_DECL (char *, nbdkit_absolute_path, (const char *path));
NBDKIT_EXTERN_DECL (int64_t, nbdkit_parse_size, (const char *str));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_bool, (const char *str));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_int,
                    (const char *what, const char *str, int *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_unsigned,
                    (const char *what, const char *str, unsigned *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_int8_t,
                    (const char *what, const char *str, int8_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_uint8_t,
                    (const char *what, const char *str, uint8_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_int16_t,
                    (const char *what, const char *str, int16_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_uint16_t,
                    (const char *what, const char *str, uint16_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_int32_t,
                    (const char *what, const char *str, int32_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_uint32_t,
                    (const char *what, const char *str, uint32_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_int64_t,
                    (const char *what, const char *str, int64_t *r));
NBDKIT_EXTERN_DECL (int, nbdkit_parse_uint64_t,
                    (const char *what, const char *str, uint64_t *r));
/* "0.1", "10%", "1:10", "1/10": a probability, >= 0 (nbdkit 1.36). */
NBDKIT_EXTENSION_DECL (int, nbdkit_parse_probability,
                    (const char *what, const char *str, double *r));
/* "1.5", "20ms", "3us", "9ns": a delay for nbdkit_nanosleep (1.40). */
NBDKIT_EXTENSION_DECL (int, nbdkit_parse_delay,
                    (const char *what, const char *str,
                     unsigned *sec, unsigned *nsec));
NBDKIT_EXTERN_DECL (int, nbdkit_stdio_safe, (void));
NBDKIT_EXTERN_DECL (int, nbdkit_read_password,
                    (const char *value, char **password));
NBDKIT_EXTERN_DECL (char *, nbdkit_realpath, (const char *path));
NBDKIT_EXTERN_DECL (int, nbdkit_nanosleep, (unsigned sec, unsigned nsec));

/* About the client of the current connection. */
NBDKIT_EXTERN_DECL (int, nbdkit_peer_name,
                    (struct sockaddr *addr, socklen_t *addrlen));
NBDKIT_EXTERN_DECL (int64_t, nbdkit_peer_pid, (void));
NBDKIT_EXTERN_DECL (int64_t, nbdkit_peer_uid, (void));
NBDKIT_EXTERN_DECL (int64_t, nbdkit_peer_gid, (void));
/* The client's security label (SO_PEERSEC: SELinux, Smack, AppArmor),
 * as a malloc'd string the caller frees; NULL with an error (errno
 * ENOPROTOOPT) where the kernel gives none.  As in later nbdkit.
 */
NBDKIT_EXTENSION_DECL (char *, nbdkit_peer_security_context, (void));
/* Who the client proved to be over TLS: the DN of its verified X.509
 * certificate or of the certificate's issuer, or (an extension of this
 * server) its PSK username.  Each returns a malloc'd string the caller
 * frees: "" when there is no such identity, NULL on error.
 */
NBDKIT_EXTENSION_DECL (char *, nbdkit_peer_tls_dn, (void));
NBDKIT_EXTENSION_DECL (char *, nbdkit_peer_tls_issuer_dn, (void));
NBDKIT_EXTENSION_DECL (char *, nbdkit_peer_tls_username, (void));
NBDKIT_EXTERN_DECL (void, nbdkit_shutdown, (void));
/* Ends the current connection alone: FORCE cuts it at once (no more
 * replies); otherwise requests in flight finish and later ones fail
 * with ESHUTDOWN until the client disconnects.  As in nbdkit 1.34.
 */
NBDKIT_EXTENSION_DECL (void, nbdkit_disconnect, (int force));

/* The ids the server's probes carry for the calling thread: the
 * connection's id (0 outside a connection) and the cookie of the
 * request being served (0 outside a request).  Pass them first in a
 * plugin's own probes so a tracer can join them to the server's.
 */
NBDKIT_EXTENSION_DECL (uint64_t, nbdkit_connection_id, (void));
NBDKIT_EXTENSION_DECL (uint64_t, nbdkit_request_cookie, (void));

/* Fire the server's generic probe "user" (id, cookie, name, arg1,
 * arg2, text) from any plugin or filter, whatever its language.
 * NAME and TEXT may be NULL (read as "").  Cheap when untraced.
 */
NBDKIT_EXTENSION_DECL (void, nbdkit_probe,
                    (const char *name, int64_t arg1, int64_t arg2,
                     const char *text));

/* A plugin's or filter's own counters on the --metrics page.
 * nbdkit_metric_counter declares the family nbdkit_MODULE_NAME_total
 * (NAME: [a-z_]+; LABEL: the name of one extra label, or NULL) from
 * load, config, config_complete or get_ready; it returns NULL without
 * --metrics (or in an older server), and the adds then return at once.
 * nbdkit_metric_add counts N for LABEL_VALUE on the export of the
 * calling thread's connection; nbdkit_metric_add_conn on that of the
 * connection CONNECTION_ID (nbdkit_connection_id of the thread that
 * asked), for the plugin's own threads.  Any thread; never fails.
 */
struct nbdkit_metric;
NBDKIT_EXTENSION_DECL (struct nbdkit_metric *, nbdkit_metric_counter,
                    (const char *name, const char *help,
                     const char *label));
NBDKIT_EXTENSION_DECL (void, nbdkit_metric_add,
                    (struct nbdkit_metric *m, const char *label_value,
                     uint64_t n));
NBDKIT_EXTENSION_DECL (void, nbdkit_metric_add_conn,
                    (struct nbdkit_metric *m, uint64_t connection_id,
                     const char *label_value, uint64_t n));

/* Strings that live as long as the current connection (or, outside a
 * connection, until the plugin is unloaded).
 */
NBDKIT_EXTERN_DECL (const char *, nbdkit_strdup_intern, (const char *str));
NBDKIT_EXTERN_DECL (const char *, nbdkit_strndup_intern,
                    (const char *str, size_t n));
NBDKIT_EXTERN_DECL (const char *, nbdkit_printf_intern,
                    (const char *fs, ...) ATTRIBUTE_FORMAT_PRINTF (1, 2));
NBDKIT_EXTERN_DECL (const char *, nbdkit_vprintf_intern,
                    (const char *fs, va_list args)
                    ATTRIBUTE_FORMAT_PRINTF (1, 0));

/* Lists filled in by extents and list_exports callbacks. */
struct nbdkit_extents;
NBDKIT_EXTERN_DECL (int, nbdkit_add_extent,
                    (struct nbdkit_extents *,
                     uint64_t offset, uint64_t length, uint32_t type));
struct nbdkit_exports;
NBDKIT_EXTERN_DECL (int, nbdkit_add_export,
                    (struct nbdkit_exports *,
                     const char *name, const char *description));
NBDKIT_EXTERN_DECL (int, nbdkit_use_default_export,
                    (struct nbdkit_exports *));

/* A plugin that keeps no per-connection state returns this from open. */
#define NBDKIT_HANDLE_NOT_NEEDED (&errno)

#if NBDKIT_WEAK_EXTENSIONS
/* The extensions' fallbacks where the server lacks them (see
 * NBDKIT_EXTENSION_DECL).  Each macro calls the server's function when
 * it is there; its own name inside it is not expanded again.  The
 * fallback of a call that returns a result fails it as a bad parameter
 * or a missing peer label would, with errno ENOSYS and this error.
 */
static inline int
nbdkit_missing_ (const char *fn)
{
  nbdkit_error ("%s: not in this nbdkit server (it is older than "
                "the plugin's headers)", fn);
  errno = ENOSYS;
  return -1;
}
#define NBDKIT_CALL_OR_(fn, args, fallback) \
  (NBDKIT_SERVER_HAS (fn) ? (fn) args : (fallback))

/* Ids 0, as outside a connection; probes and hexdumps skipped (their
 * arguments are then not evaluated); disconnect does nothing.
 */
#define nbdkit_connection_id() \
  NBDKIT_CALL_OR_ (nbdkit_connection_id, (), (uint64_t) 0)
#define nbdkit_request_cookie() \
  NBDKIT_CALL_OR_ (nbdkit_request_cookie, (), (uint64_t) 0)
#define nbdkit_probe(name, arg1, arg2, text) \
  NBDKIT_CALL_OR_ (nbdkit_probe, (name, arg1, arg2, text), (void) 0)
#define nbdkit_debug_hexdump(buf, len, prefix, start) \
  NBDKIT_CALL_OR_ (nbdkit_debug_hexdump, (buf, len, prefix, start), \
                   (void) 0)
#define nbdkit_debug_hexdiff(buf1, buf2, len, prefix, start) \
  NBDKIT_CALL_OR_ (nbdkit_debug_hexdiff, \
                   (buf1, buf2, len, prefix, start), (void) 0)
#define nbdkit_disconnect(force) \
  NBDKIT_CALL_OR_ (nbdkit_disconnect, (force), (void) 0)
/* No counters: NULL, and adding to NULL does nothing. */
#define nbdkit_metric_counter(name, help, label) \
  NBDKIT_CALL_OR_ (nbdkit_metric_counter, (name, help, label), \
                   (struct nbdkit_metric *) 0)
#define nbdkit_metric_add(m, label_value, n) \
  NBDKIT_CALL_OR_ (nbdkit_metric_add, (m, label_value, n), (void) 0)
#define nbdkit_metric_add_conn(m, connection_id, label_value, n) \
  NBDKIT_CALL_OR_ (nbdkit_metric_add_conn, \
                   (m, connection_id, label_value, n), (void) 0)
/* -1, or NULL, with the error above. */
#define nbdkit_parse_probability(what, str, r) \
  NBDKIT_CALL_OR_ (nbdkit_parse_probability, (what, str, r), \
                   nbdkit_missing_ ("nbdkit_parse_probability"))
#define nbdkit_parse_delay(what, str, sec, nsec) \
  NBDKIT_CALL_OR_ (nbdkit_parse_delay, (what, str, sec, nsec), \
                   nbdkit_missing_ ("nbdkit_parse_delay"))
#define NBDKIT_NULL_MISSING_(fn) \
  NBDKIT_CALL_OR_ (fn, (), (nbdkit_missing_ (#fn), (char *) 0))
#define nbdkit_peer_security_context() \
  NBDKIT_NULL_MISSING_ (nbdkit_peer_security_context)
#define nbdkit_peer_tls_dn() NBDKIT_NULL_MISSING_ (nbdkit_peer_tls_dn)
#define nbdkit_peer_tls_issuer_dn() \
  NBDKIT_NULL_MISSING_ (nbdkit_peer_tls_issuer_dn)
#define nbdkit_peer_tls_username() \
  NBDKIT_NULL_MISSING_ (nbdkit_peer_tls_username)
#endif /* NBDKIT_WEAK_EXTENSIONS */

#ifdef __cplusplus
}
#define NBDKIT_CXX_LANG_C extern "C"
#else
#define NBDKIT_CXX_LANG_C
#endif

#endif /* NBDKIT_COMMON_H */
