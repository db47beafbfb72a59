/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: a connection's input side, owned by conn-io.c.  Only
 * the files that read requests off the wire include this (the
 * handshake and the transmission phase, through tx.h); the layers never
 * see it.
 */
#ifndef NBDKIT_CONN_IO_H
#define NBDKIT_CONN_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"

/* Used under the connection's read lock only. */
struct conn_input {
  char *buf;                    /* CONN_INBUF_SIZE bytes, or NULL */
  size_t pos, len;              /* unread bytes: buf[pos, +len) */
  int lowat;                    /* SO_RCVLOWAT as set (TCP), 0: never set */
  uint64_t poll_ns;             /* --busy-poll window; 0: never poll */
  unsigned poll_waits;          /* polling waits since the last sample */
  unsigned poll_every;          /* a sample every this many waits */
  unsigned poll_misses;         /* windows in a row that ran out */
  unsigned poll_skip;           /* waits left to sleep without polling */
  bool poll_slept;              /* a wait slept: see conn_poll_feedback */
  bool poll_sampled;            /* ... and it was a sample */
};

/* Bytes the client sent that sit in the input buffer, unread. */
static inline size_t
conn_buffered_input (const struct connection *conn)
{
  return conn->in->len;
}

#endif /* NBDKIT_CONN_IO_H */
