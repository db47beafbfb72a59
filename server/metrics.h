/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: live metrics (--metrics, metrics.c).  The request
 * path counts into its connection's struct metrics_conn with relaxed
 * atomics, and only when --metrics is given (conn->metrics is NULL
 * otherwise); metrics.c folds a closing connection's counts into its
 * export's totals and serves them over HTTP from a thread of its own.
 */
#ifndef NBDKIT_METRICS_H
#define NBDKIT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

struct config;
struct connection;
struct metrics_conn;

/* main.c: bind the endpoint before the server daemonises or drops
 * privileges (-1 on error, reported); start its thread in the process
 * that serves; stop it (and remove a Unix socket) at exit.
 */
extern int metrics_bind (const char *spec);
extern int metrics_start (void);
extern void metrics_stop (void);

/* connection.c: a connection's record, or NULL without --metrics (or
 * out of memory: the connection is then simply not counted).
 */
extern struct metrics_conn *metrics_conn_open (uint64_t id, const char *peer,
                                               struct connection *conn);
extern void metrics_conn_ready (struct metrics_conn *m, const char *exportname);
extern void metrics_conn_close (struct metrics_conn *m);

/* The handshake failed for REASON (the handshake_fail probe's string);
 * a TLS session was set up with VERSION and CIPHER (gnutls' names).
 */
extern void metrics_handshake_fail (struct metrics_conn *m,
                                    const char *reason);
extern void metrics_tls_session (const char *version, const char *cipher);

/* The request path: a request of TYPE (NBD_CMD_*) ended with ERR (an
 * errno or 0), moving BYTES of data, read at START_NS (now_ns).
 */
extern void metrics_request_done (struct metrics_conn *m, uint16_t type,
                                  int err, uint64_t bytes, uint64_t start_ns);

#endif /* NBDKIT_METRICS_H */
