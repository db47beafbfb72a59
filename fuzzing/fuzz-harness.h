/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzzing: the server set up once, one connection per fuzz input.
 *
 * fuzz-harness.c owns the server configuration the targets share (the
 * memory plugin, loaded from the instrumented copy built next to the
 * fuzzer, configured as "nbdkit memory FUZZ_DISK_SIZE" would be) and
 * runs one client byte stream through the real connection code, with
 * every server byte going through the reply checker.
 */
#ifndef NBDKIT_FUZZ_HARNESS_H
#define NBDKIT_FUZZ_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Not a multiple of the page size, so the store's last page is partial. */
#define FUZZ_DISK_SIZE "1049810"

/* Load and configure the plugin, as main() does.  Exits on failure. */
extern void fuzz_server_init (void);

/* Serve one connection whose client sends exactly DATA, then closes
 * its side.  READONLY is -r.  Returns whether the conversation reached
 * transmission.  The disk is empty again afterwards.
 */
extern bool fuzz_run_connection (const uint8_t *data, size_t len,
                                 bool readonly);

#endif /* NBDKIT_FUZZ_HARNESS_H */
