/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* fuzzing: the transmission phase.  The first byte of an input picks a
 * valid handshake, which the harness sends before the rest of the
 * input; the rest is requests (and write payloads) in the header format
 * that handshake negotiated:
 *
 *   byte 0 & 3:  0  simple replies: NBD_OPT_GO only
 *                1  NBD_OPT_STRUCTURED_REPLY, GO
 *                2  STRUCTURED_REPLY, SET_META_CONTEXT base:allocation, GO
 *                3  EXTENDED_HEADERS, SET_META_CONTEXT base:allocation, GO
 *   byte 0 & 4:  the server runs read-only (-r)
 *
 * So one corpus covers simple, structured and extended replies and the
 * read-only checks, and mutations never waste time on the handshake.
 * fuzzing/nbdwire.py builds the same prefixes for the seeds and replays.
 */
#include <config.h>

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-harness.h"
#include "protocol.h"

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

struct prefix {
  uint8_t bytes[256];
  size_t len;
};

static void
put (struct prefix *p, const void *v, size_t len)
{
  if (len > 0)
    memcpy (p->bytes + p->len, v, len);
  p->len += len;
}

static void
put32 (struct prefix *p, uint32_t v)
{
  v = htobe32 (v);
  put (p, &v, 4);
}

static void
option (struct prefix *p, uint32_t opt, const void *payload, uint32_t len)
{
  uint64_t magic = htobe64 (NBD_NEW_VERSION);
  put (p, &magic, 8);
  put32 (p, opt);
  put32 (p, len);
  put (p, payload, len);
}

static struct prefix prefixes[4];

static void
build_prefixes (void)
{
  static const uint8_t set_meta[] = {
    0, 0, 0, 0,                 /* export name "" */
    0, 0, 0, 1,                 /* one query */
    0, 0, 0, 15, 'b', 'a', 's', 'e', ':', 'a', 'l', 'l', 'o', 'c', 'a',
    't', 'i', 'o', 'n',
  };
  static const uint8_t go[] = {
    0, 0, 0, 0,                 /* export name "" */
    0, 1, 0, NBD_INFO_BLOCK_SIZE,
  };
  for (int mode = 0; mode < 4; mode++) {
    struct prefix *p = &prefixes[mode];
    put32 (p, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
    if (mode == 1 || mode == 2)
      option (p, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
    if (mode == 3)
      option (p, NBD_OPT_EXTENDED_HEADERS, NULL, 0);
    if (mode >= 2)
      option (p, NBD_OPT_SET_META_CONTEXT, set_meta, sizeof set_meta);
    option (p, NBD_OPT_GO, go, sizeof go);
  }
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  build_prefixes ();
  fuzz_server_init ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  const struct prefix *p = &prefixes[data[0] & 3];
  bool readonly = data[0] & 4;
  uint8_t *stream = malloc (p->len + size - 1);
  if (!stream)
    abort ();
  memcpy (stream, p->bytes, p->len);
  memcpy (stream + p->len, data + 1, size - 1);
  if (!fuzz_run_connection (stream, p->len + size - 1, readonly)) {
    fprintf (stderr, "fuzz-transmission: the fixed handshake failed\n");
    abort ();
  }
  free (stream);
  return 0;
}
