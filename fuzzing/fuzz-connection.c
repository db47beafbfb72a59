/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzzing: the whole connection.  The fuzzer's bytes are what the
 * client sends, from the flags after the greeting on: options, then
 * (if an export is chosen) requests.  Everything the server answers
 * goes through the reply checker (reply-checker.c).
 */
#include <config.h>

#include <stddef.h>
#include <stdint.h>

#include "fuzz-harness.h"

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_server_init ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_run_connection (data, size, false);
  return 0;
}
