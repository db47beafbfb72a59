/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The swab filter: reverse the bytes of every 2-, 4- or 8-byte word
 * between the plugin and the client (disks from controllers wired the
 * wrong way round, big-endian patterns read as little-endian).  Reads
 * are swapped in the client's buffer after reading; writes are swapped
 * into a bounce buffer of their own, since the client's is const.
 * Requests must be aligned to the word; the size is rounded down to it.
 * No state beyond the parameter, so no locking.
 */
#include <config.h>

#include <byteswap.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "cleanup.h"
#include "isaligned.h"
#include "minmax.h"
#include "rounding.h"

/* Word size in bytes: 1 (no swapping), 2, 4 or 8.  Set by config. */
static unsigned word = 2;

static int
swab_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "swab-bits") == 0) {
    unsigned bits;
    if (nbdkit_parse_unsigned ("swab-bits", value, &bits) == -1)
      return -1;
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64) {
      nbdkit_error ("swab-bits=%s: must be 8, 16, 32 or 64", value);
      return -1;
    }
    word = bits / 8;
    return 0;
  }
  return next (nxdata, key, value);
}

#define swab_config_help \
  "swab-bits=8|16|32|64   Size of the words to byte-swap (default 16)."

/* Reverse each word of BUF (LEN bytes, a multiple of the word) from
 * SRC; SRC may be BUF.  Words are copied through memcpy: buffers need
 * not be aligned.
 */
#define SWAP_LOOP(type, swap)                                           \
  for (size_t i = 0; i < len; i += sizeof (type)) {                     \
    type w;                                                             \
    memcpy (&w, s + i, sizeof w);                                       \
    w = swap (w);                                                       \
    memcpy (d + i, &w, sizeof w);                                       \
  }

static void
swap_words (void *dst, const void *src, size_t len)
{
  uint8_t *d = dst;
  const uint8_t *s = src;

  switch (word) {
  case 2: SWAP_LOOP (uint16_t, bswap_16); break;
  case 4: SWAP_LOOP (uint32_t, bswap_32); break;
  case 8: SWAP_LOOP (uint64_t, bswap_64); break;
  default:
    if (d != s)
      memcpy (d, s, len);
  }
}

/* Refuse a request that splits a word. */
static int
check_aligned (const char *command, uint32_t count, uint64_t offset,
               int *err)
{
  if (IS_ALIGNED (count, word) && IS_ALIGNED (offset, word))
    return 0;
  nbdkit_error ("swab: %s of %" PRIu32 " bytes at offset %" PRIu64
                " is not aligned to %u-byte words", command, count, offset,
                word);
  *err = EINVAL;
  return -1;
}

static int64_t
swab_get_size (nbdkit_next *next, void *handle)
{
  int64_t size = next->get_size (next);

  return size == -1 ? -1 : ROUND_DOWN (size, (int64_t) word);
}

/* Clients must send whole words. */
static int
swab_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                 uint32_t *preferred, uint32_t *maximum)
{
  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;
  if (*minimum == 0) {          /* the layer below has no constraints */
    *minimum = 1;
    *preferred = 512;
    *maximum = UINT32_MAX;
  }
  *minimum = MAX (*minimum, (uint32_t) word);
  *preferred = MAX (*preferred, *minimum);
  return 0;
}

static int
swab_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  if (check_aligned ("pread", count, offset, err) == -1 ||
      next->pread (next, buf, count, offset, flags, err) == -1)
    return -1;
  swap_words (buf, buf, count);
  return 0;
}

static int
swab_pwrite (nbdkit_next *next, void *handle, const void *buf,
             uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  CLEANUP_FREE void *swapped = NULL;

  if (check_aligned ("pwrite", count, offset, err) == -1)
    return -1;
  if (word == 1)
    return next->pwrite (next, buf, count, offset, flags, err);
  swapped = malloc (count);
  if (swapped == NULL) {
    *err = errno;
    nbdkit_error ("malloc: %m");
    return -1;
  }
  swap_words (swapped, buf, count);
  return next->pwrite (next, swapped, count, offset, flags, err);
}

/* Zeroes, trims and cache do not move bytes within words: only the
 * alignment is checked.
 */
static int
swab_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  if (check_aligned ("zero", count, offset, err) == -1)
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
swab_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  if (check_aligned ("trim", count, offset, err) == -1)
    return -1;
  return next->trim (next, count, offset, flags, err);
}

static int
swab_cache (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  if (check_aligned ("cache", count, offset, err) == -1)
    return -1;
  return next->cache (next, count, offset, flags, err);
}

/* Block status in whole words: the minimum block size advertised is a
 * word, and the protocol wants every extent to be a multiple of it.  A
 * word that the layer below describes in pieces gets the type all of
 * them share.
 */
static int
swab_extents (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents, int *err)
{
  if (check_aligned ("extents", count, offset, err) == -1)
    return -1;
  if (word == 1)
    return next->extents (next, count, offset, flags, extents, err);
  return nbdkit_extents_aligned (next, count, offset, flags, word, extents,
                                 err);
}

static struct nbdkit_filter filter = {
  .name = "swab",
  .longname = "nbdkit byte-swapping filter",
  .config = swab_config,
  .config_help = swab_config_help,
  .get_size = swab_get_size,
  .block_size = swab_block_size,
  .pread = swab_pread,
  .pwrite = swab_pwrite,
  .zero = swab_zero,
  .trim = swab_trim,
  .cache = swab_cache,
  .extents = swab_extents,
};

NBDKIT_REGISTER_FILTER (filter)
