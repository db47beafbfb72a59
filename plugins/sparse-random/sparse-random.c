/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The sparse-random plugin: a disk of runs of random data and runs of
 * holes, the same for the same seed, shaped like a real VM disk.
 *
 * This file owns the parameters, the map of which 4 KiB blocks hold
 * data (a bitmap built once in get_ready and read-only afterwards, so
 * every request runs in parallel), and the content of a data block.
 * Writes are accepted only if they write what a read would return,
 * so a copy from the disk to itself checks the copying tool.
 *
 * Layout and content follow nbdkit 1.32 exactly, so that the same
 * seed gives the same bytes and map under either server:
 *
 * - The map is a two-state Markov chain walked over the blocks from
 *   block 0, starting in a hole: each block takes the current state,
 *   then one draw decides whether the next block changes state.  The
 *   chance of leaving data is BLOCKSIZE / runlength, and the chance of
 *   leaving a hole is set so that PERCENT of the blocks hold data.
 *
 * - A request is served in pieces that do not cross a block boundary.
 *   A data piece starting at offset O is cut from a block's worth of
 *   bytes generated from seed + O (so a piece starting mid-block sees
 *   different bytes from a read of the whole block: nbdkit does the
 *   same).  Without random-content the block is one byte repeated,
 *   the low byte of the first draw (0 becomes 1, so data is never
 *   zero); with it, byte i is the low byte of draw i.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "bitmap.h"
#include "include/minmax.h"
#include "prng.h"
#include "answers.h"
#include "params.h"

#define BLOCKSIZE 4096

/* Parameters: set by config, read-only once the server serves. */
static int64_t size = 0;
static uint32_t seed;
static double percent = 10;
static int64_t runlength = 16 * 1024 * 1024;
static bool random_content = false;

/* Which blocks hold data (1) or are holes (0): built in get_ready. */
static struct bitmap bm;

static void
sparse_random_load (void)
{
  /* A random seed unless the user gives one. */
  seed = (uint32_t) time (NULL);
}

static void
sparse_random_unload (void)
{
  bitmap_free (&bm);
}

/* A percentage between 0 and 100, possibly fractional, with an
 * optional trailing '%' (nbdkit accepts "10%").
 */
static int
parse_percent (const char *value, double *ret)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (value, &end);
  if (errno != 0 || end == value || (*end != '\0' && strcmp (end, "%") != 0)
      || !(d >= 0 && d <= 100)) {
    nbdkit_error ("percent: expected a number between 0 and 100: '%s'",
                  value);
    return -1;
  }
  *ret = d;
  return 0;
}

static int
sparse_random_config (const char *key, const char *value)
{
  int64_t r;

  if (strcmp (key, "size") == 0) {
    r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    size = r;
  }
  else if (strcmp (key, "seed") == 0) {
    if (nbdkit_parse_uint32_t ("seed", value, &seed) == -1)
      return -1;
  }
  else if (strcmp (key, "percent") == 0) {
    if (parse_percent (value, &percent) == -1)
      return -1;
  }
  else if (strcmp (key, "runlength") == 0) {
    r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    if (r == 0) {
      nbdkit_error ("runlength: must be greater than 0");
      return -1;
    }
    runlength = r;
  }
  else if (strcmp (key, "random-content") == 0)
    return param_bool (value, &random_content);
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

#define sparse_random_config_help \
  "[size=]SIZE               Size of the disk (required).\n" \
  "seed=SEED                 Random seed (default: chosen at start-up).\n" \
  "percent=N                 Percentage of the disk holding data (10).\n" \
  "runlength=N               Average length of a run of data (16M).\n" \
  "random-content=true       Random bytes in each block, not one byte."

/* Walk the Markov chain over the blocks; see the top of the file. */
static int
sparse_random_get_ready (void)
{
  struct prng rng;
  double p_leave_data, p_leave_hole;
  uint64_t blk, run_start = 0, data_blocks = 0;
  bool in_data = false;

  if (bitmap_init (&bm, BLOCKSIZE, 1) == -1 ||
      bitmap_resize (&bm, size) == -1) {
    nbdkit_error ("sparse-random: bitmap for %" PRIi64 " bytes: %m", size);
    return -1;
  }

  if (percent == 0)
    return 0;
  if (percent == 100)
    return bitmap_set_range (&bm, 0, bm.nr_blocks, 1);

  p_leave_data = (double) BLOCKSIZE / runlength;
  p_leave_hole = p_leave_data * (percent / 100) / (1 - percent / 100);
  nbdkit_debug ("sparse-random: percent %g, runlength %" PRIi64
                ", P(data->hole) %g, P(hole->data) %g",
                percent, runlength, p_leave_data, p_leave_hole);

  prng_seed (&rng, seed);
  for (blk = 0; blk < bm.nr_blocks; ++blk) {
    /* Block BLK is in the current state; the draw decides the next.
     * The comparison is in double, as nbdkit makes it.
     */
    const uint64_t draw = prng_next (&rng);
    const double limit = (in_data ? p_leave_data : p_leave_hole) * UINT64_MAX;

    if ((double) draw <= limit) {
      if (in_data) {
        bitmap_set_range (&bm, run_start, blk + 1 - run_start, 1);
        data_blocks += blk + 1 - run_start;
      }
      else
        run_start = blk + 1;
      in_data = !in_data;
    }
  }
  if (in_data && run_start < bm.nr_blocks) {
    bitmap_set_range (&bm, run_start, bm.nr_blocks - run_start, 1);
    data_blocks += bm.nr_blocks - run_start;
  }

  nbdkit_debug ("sparse-random: %" PRIu64 " of %" PRIu64
                " blocks hold data (%g%%)",
                data_blocks, bm.nr_blocks,
                bm.nr_blocks ? 100.0 * data_blocks / bm.nr_blocks : 0.0);
  return 0;
}

static int64_t
sparse_random_get_size (void *handle)
{
  return size;
}

/* Fill BUF with the N bytes a piece of a request starting at OFFSET
 * reads; the piece lies within one block.
 */
static void
piece_content (uint8_t *buf, uint32_t n, uint64_t offset)
{
  const uint32_t blkoffs = offset % BLOCKSIZE;
  struct prng rng;
  uint32_t i;

  if (bitmap_get_blk (&bm, offset / BLOCKSIZE) == 0) {
    memset (buf, 0, n);
    return;
  }

  prng_seed (&rng, seed + offset);
  if (!random_content) {
    uint8_t c = prng_next (&rng) & 0xff;

    memset (buf, c ? c : 1, n);
    return;
  }
  /* Byte i of the block is draw i: skip the draws before the piece. */
  for (i = 0; i < blkoffs; ++i)
    prng_next (&rng);
  for (i = 0; i < n; ++i)
    buf[i] = prng_next (&rng) & 0xff;
}

/* Length of the piece of a request at OFFSET with COUNT bytes left. */
static uint32_t
piece_length (uint64_t offset, uint32_t count)
{
  return MIN ((uint64_t) count, BLOCKSIZE - offset % BLOCKSIZE);
}

static int
sparse_random_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                     uint32_t flags)
{
  uint8_t *p = buf;

  while (count > 0) {
    const uint32_t n = piece_length (offset, count);

    piece_content (p, n, offset);
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

static int
sparse_random_pwrite (void *handle, const void *buf, uint32_t count,
                      uint64_t offset, uint32_t flags)
{
  const uint8_t *p = buf;
  uint8_t expected[BLOCKSIZE];

  while (count > 0) {
    const uint32_t n = piece_length (offset, count);

    piece_content (expected, n, offset);
    if (memcmp (p, expected, n) != 0) {
      nbdkit_error ("sparse-random: data written at offset %" PRIu64
                    " does not match the disk", offset);
      errno = EIO;
      return -1;
    }
    p += n;
    offset += n;
    count -= n;
  }
  return 0;
}

/* Trim and zero succeed only where the disk is all holes already. */
static int
sparse_random_trim_zero (void *handle, uint32_t count, uint64_t offset,
                         uint32_t flags)
{
  int64_t next;

  if (count == 0)
    return 0;
  next = bitmap_next (&bm, offset / BLOCKSIZE);
  if (next >= 0 && (uint64_t) next <= (offset + count - 1) / BLOCKSIZE) {
    nbdkit_error ("sparse-random: cannot trim or zero data at offset %"
                  PRIu64, (uint64_t) next * BLOCKSIZE);
    errno = EIO;
    return -1;
  }
  return 0;
}

static int
sparse_random_cache (void *handle, uint32_t count, uint64_t offset,
                     uint32_t flags)
{
  return 0;
}

/* Report runs of data and holes from OFFSET to the end of the request. */
static int
sparse_random_extents (void *handle, uint32_t count, uint64_t offset,
                       uint32_t flags, struct nbdkit_extents *extents)
{
  const uint64_t end = offset + count;
  uint64_t blk = offset / BLOCKSIZE;

  while (offset < end) {
    const unsigned v = bitmap_get_blk (&bm, blk);
    const int64_t next = bitmap_next_value (&bm, blk, !v);
    uint64_t run_end;

    run_end = next == -1 ? end : MIN (end, (uint64_t) next * BLOCKSIZE);
    if (nbdkit_add_extent (extents, offset, run_end - offset,
                           v ? 0 : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO)
        == -1)
      return -1;
    if (next == -1)
      break;
    offset = run_end;
    blk = next;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "sparse-random",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit sparse random plugin",
  .description       = "Sparse disk of runs of random data, repeatable by seed",
  .load              = sparse_random_load,
  .unload            = sparse_random_unload,
  .config            = sparse_random_config,
  .config_help       = sparse_random_config_help,
  .magic_config_key  = "size",
  .get_ready         = sparse_random_get_ready,
  .open              = answer_no_handle,
  .get_size          = sparse_random_get_size,
  .can_write         = answer_yes,
  .can_flush         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
  .can_extents       = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = sparse_random_pread,
  .pwrite            = sparse_random_pwrite,
  .flush             = answer_flush_done,
  .trim              = sparse_random_trim_zero,
  .zero              = sparse_random_trim_zero,
  .cache             = sparse_random_cache,
  .extents           = sparse_random_extents,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
