/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzzing: a strict client-side parser of everything the server sends.
 *
 * Given the client's whole byte stream up front, the checker is fed the
 * server's bytes as they arrive and calls abort() (a crash to libFuzzer)
 * on anything a correct server must not send.  reply-checker.c says
 * what it checks.
 */
#ifndef NBDKIT_FUZZ_REPLY_CHECKER_H
#define NBDKIT_FUZZ_REPLY_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct checker;

/* CLIENT (LEN bytes) must stay valid until checker_free. */
extern struct checker *checker_new (const uint8_t *client, size_t len);
extern void checker_feed (struct checker *c, const uint8_t *buf, size_t len);
/* The server closed the connection: check nothing is cut short or
 * missing.
 */
extern void checker_finish (struct checker *c);
/* Did the conversation get as far as transmission? */
extern bool checker_in_transmission (const struct checker *c);
extern void checker_free (struct checker *c);

#endif /* NBDKIT_FUZZ_REPLY_CHECKER_H */
