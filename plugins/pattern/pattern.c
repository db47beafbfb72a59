/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The pattern plugin: a read-only disk in which every 8-byte word
 * holds its own offset, as a big-endian 64-bit integer.
 *
 * This file owns the size parameter and the read path.  The bytes are
 * a pure function of the offset, so there is no state, no locking and
 * every request runs in parallel.  Reads fill the caller's buffer a
 * word at a time from a table made at load (see low_words); only a read
 * that starts or ends inside a word copies a part of one.
 */
#include <config.h>

#include <stdint.h>
#include <string.h>
#include <endian.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "minmax.h"
#include "isaligned.h"
#include "rounding.h"
#include "answers.h"
#include "params.h"

/* Set by config, read-only once the server starts serving; -1 = unset. */
static int64_t size = -1;

static int
pattern_config (const char *key, const char *value)
{
  return param_size_only (key, value, &size);
}

/* Without size= the disk is empty, as nbdkit 1.32 serves it (its page
 * calls the size required; clients and scripts rely on what it does).
 */
static int
pattern_config_complete (void)
{
  if (size == -1)
    size = 0;
  return 0;
}

#define pattern_config_help \
  "[size=]SIZE               Size of the disk (default 0)."

static int64_t
pattern_get_size (void *handle)
{
  return size;
}

/* The big-endian encodings of the offsets 0, 8, ..., 64 KiB - 8.  The
 * bits of an offset below 64 KiB and those above do not overlap, so
 * neither do their byte-swapped forms: the word at OFFSET is
 * htobe64 (OFFSET & ~0xffff) | low_words[(OFFSET & 0xffff) / 8].  That
 * turns the fill into a load, an OR and a store per word, which the
 * compiler vectorises, where a byte swap per word does not.  Filled by
 * load, read-only after.
 */
#define LOW_BITS 16
#define LOW_WORDS ((1 << LOW_BITS) / 8)
static uint64_t low_words[LOW_WORDS];

static void
pattern_load (void)
{
  size_t i;

  for (i = 0; i < LOW_WORDS; i++)
    low_words[i] = htobe64 ((uint64_t) i * 8);
}

/* The word of the pattern that starts at OFFSET (a multiple of 8), in
 * memory order.
 */
static inline uint64_t
word_at (uint64_t offset)
{
  return htobe64 (offset);
}

static int
pattern_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  unsigned char *p = buf;
  uint64_t w;

  /* A head that starts inside a word: copy its tail part. */
  if (!IS_ALIGNED (offset, 8)) {
    uint64_t start = ROUND_DOWN (offset, 8);
    uint32_t skip = offset - start;
    uint32_t n = MIN (count, 8 - skip);

    w = word_at (start);
    memcpy (p, (unsigned char *) &w + skip, n);
    p += n;
    offset += n;
    count -= n;
  }

  /* Whole words, in runs that stay inside one 64 KiB-aligned block, so
   * that the high part is the same for the whole run.  The buffer may
   * be unaligned: memcpy is one unaligned store.
   */
  while (count >= 8) {
    const uint64_t high = word_at (offset & ~(uint64_t) 0xffff);
    const uint64_t *low = &low_words[(offset & 0xffff) / 8];
    uint32_t n = MIN (count / 8, LOW_WORDS - (uint32_t) (offset & 0xffff) / 8);
    uint32_t i;

    for (i = 0; i < n; i++) {
      w = high | low[i];
      memcpy (p + (size_t) i * 8, &w, 8);
    }
    p += (size_t) n * 8;
    offset += (uint64_t) n * 8;
    count -= n * 8;
  }

  /* A tail that ends inside a word: its first bytes. */
  if (count > 0) {
    w = word_at (offset);
    memcpy (p, &w, count);
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "pattern",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit pattern plugin",
  .description       = "A read-only disk whose every 8-byte word is its "
                       "own offset, big endian",
  .load              = pattern_load,
  .config            = pattern_config,
  .config_complete   = pattern_config_complete,
  .config_help       = pattern_config_help,
  .magic_config_key  = "size",
  .open              = answer_no_handle,
  .get_size          = pattern_get_size,
  .can_multi_conn    = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = pattern_pread,
  .cache             = answer_range_done, /* the data never changes */
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
