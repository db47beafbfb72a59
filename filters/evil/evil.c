/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The evil filter: corrupt the data that reads return, to test what
 * checks data (filesystem checksums, say).  Writes pass untouched, so
 * the plugin keeps the right data.  Three modes:
 *
 *   cosmic-rays   each bit read flips with probability P, afresh at
 *                 every read;
 *   stuck-bits    each bit of the disk is stuck (high or low) with
 *                 probability P, the same bits at every read;
 *   stuck-wires   each bit position of a read's buffer is stuck with
 *                 probability P, the same positions in every read
 *                 wherever it lands on the disk.
 *
 * Hits are found by skipping: the gap before the next hit is drawn
 * from the geometric distribution, so a read costs in proportion to
 * the hits in it rather than to its bits.  Stuck bits are drawn from a
 * generator seeded by evil-seed and the block of the disk (stuck
 * wires: by the seed alone), so the same bits come out every time
 * whatever the reads' sizes and alignment.  A stuck bit shows its
 * stuck value with probability evil-stuck-probability at each read.
 *
 * Settings are filled by config and read-only afterwards.  The
 * cosmic-rays generator is shared and behind cosmic_lock, so one seed
 * gives one sequence of flips; each thread has its own generator for
 * whether a stuck bit shows.
 */
#include <config.h>

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"

enum mode { COSMIC_RAYS, STUCK_BITS, STUCK_WIRES };
static const char *const mode_names[] = {
  [COSMIC_RAYS] = "cosmic-rays",
  [STUCK_BITS] = "stuck-bits",
  [STUCK_WIRES] = "stuck-wires",
};

static enum mode mode = STUCK_BITS;
static double probability = -1;         /* -1 until set: per mode */
static double stuck_probability = 1;
static uint64_t seed;
static bool seed_set;

/* stuck-bits: the disk is drawn in blocks of this many bytes (a power
 * of 2), sized so that a block holds a few dozen stuck bits.
 */
static uint64_t block_bytes;

/* splitmix64: small, fast, and good enough to place bit errors. */
struct rng {
  uint64_t state;
};

static uint64_t
rng_next (struct rng *r)
{
  uint64_t z = (r->state += UINT64_C (0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so its log is finite. */
static double
rng_unit (struct rng *r)
{
  return ((rng_next (r) >> 11) + 1) * 0x1.0p-53;
}

/* A generator for one block of the disk (or, with block 0 and no
 * disk, for the stuck wires): the same stream every time.
 */
static struct rng
rng_for (uint64_t block)
{
  struct rng r = { .state = seed ^ (block * UINT64_C (0xd1b54a32d192ed03)) };
  rng_next (&r);
  return r;
}

/* How many bits to pass over before the next hit. */
static uint64_t
gap (struct rng *r)
{
  if (probability >= 1)
    return 0;
  double g = floor (log (rng_unit (r)) / log1p (-probability));
  /* Far beyond any read: keeps the callers' sums from overflowing. */
  return g < 0x1.0p40 ? (uint64_t) g : UINT64_C (1) << 40;
}

static pthread_mutex_t cosmic_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rng cosmic_rng;

/* Whether a stuck bit shows at this read. */
static bool
stuck_shows (void)
{
  static _Atomic uint64_t threads;
  static __thread struct rng r;
  static __thread bool seeded;

  if (stuck_probability >= 1)
    return true;
  if (!seeded) {
    r = rng_for ((UINT64_C (1) << 63) + atomic_fetch_add (&threads, 1));
    seeded = true;
  }
  return rng_unit (&r) <= stuck_probability;
}

/* Set bit BIT of buf (counted from its start) to VALUE, or flip it if
 * VALUE is -1.  Only a bit that changes is reported.
 */
static void
set_bit (uint8_t *buf, uint64_t offset, uint64_t bit, int value)
{
  uint8_t mask = 1u << (bit % 8);
  uint8_t *byte = &buf[bit / 8];
  int old = (*byte & mask) != 0;
  int new = value < 0 ? !old : value;

  if (new == old)
    return;
  *byte ^= mask;
  NBDKIT_PROBE (evil_corrupt, nbdkit_connection_id (),
                nbdkit_request_cookie (), mode_names[mode], offset + bit / 8,
                (uint32_t) (bit % 8), (uint32_t) new);
}

static void
cosmic_rays (uint8_t *buf, uint32_t count, uint64_t offset)
{
  uint64_t nbits = (uint64_t) count * 8;
  LOCK_FOR_SCOPE (&cosmic_lock);

  for (uint64_t bit = gap (&cosmic_rng); bit < nbits;
       bit += 1 + gap (&cosmic_rng))
    set_bit (buf, offset, bit, -1);
}

static void
stuck_bits (uint8_t *buf, uint32_t count, uint64_t offset)
{
  uint64_t block_bits = block_bytes * 8;
  uint64_t last = (offset + count - 1) / block_bytes;

  for (uint64_t block = offset / block_bytes; block <= last; block++) {
    struct rng r = rng_for (block);
    uint64_t start = block * block_bytes;

    for (uint64_t bit = gap (&r); bit < block_bits; bit += 1 + gap (&r)) {
      /* Drawn for every stuck bit, read or not, so each keeps its
       * value whatever the reads around it.
       */
      int value = rng_next (&r) & 1;
      uint64_t at = start + bit / 8;

      if (at < offset)
        continue;
      if (at - offset >= count)
        break;
      if (stuck_shows ())
        set_bit (buf, offset, (at - offset) * 8 + bit % 8, value);
    }
  }
}

static void
stuck_wires (uint8_t *buf, uint32_t count, uint64_t offset)
{
  uint64_t nbits = (uint64_t) count * 8;
  struct rng r = rng_for (0);

  for (uint64_t bit = gap (&r); bit < nbits; bit += 1 + gap (&r)) {
    int value = rng_next (&r) & 1;
    if (stuck_shows ())
      set_bit (buf, offset, bit, value);
  }
}

/* A probability that must also be at most 1. */
static int
parse_chance (const char *key, const char *value, double *ret)
{
  if (nbdkit_parse_probability (key, value, ret) == -1)
    return -1;
  if (*ret > 1) {
    nbdkit_error ("%s: a probability above 1 makes no sense here: %s",
                  key, value);
    return -1;
  }
  return 0;
}

static int
evil_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "evil") == 0) {
    for (size_t i = 0; i < sizeof mode_names / sizeof mode_names[0]; i++)
      if (strcmp (value, mode_names[i]) == 0) {
        mode = i;
        return 0;
      }
    nbdkit_error ("%s: unknown mode \"%s\" (cosmic-rays, stuck-bits or "
                  "stuck-wires)", key, value);
    return -1;
  }
  if (strcmp (key, "evil-probability") == 0)
    return parse_chance (key, value, &probability);
  if (strcmp (key, "evil-stuck-probability") == 0)
    return parse_chance (key, value, &stuck_probability);
  if (strcmp (key, "evil-seed") == 0) {
    if (nbdkit_parse_uint64_t (key, value, &seed) == -1)
      return -1;
    seed_set = true;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
evil_config_complete (nbdkit_next_config_complete *next,
                      nbdkit_backend *nxdata)
{
  if (probability < 0)
    probability = mode == STUCK_WIRES ? 1e-6 : 1e-8;
  if (!seed_set)
    seed = (uint64_t) time (NULL) ^ ((uint64_t) getpid () << 32);
  cosmic_rng = rng_for (UINT64_MAX);

  /* About 64 stuck bits a block: few enough to skip over cheaply,
   * blocks large enough that a read seldom spans many.
   */
  block_bytes = 512;
  while (block_bytes < (UINT64_C (1) << 30) &&
         probability * block_bytes * 8 < 64)
    block_bytes *= 2;

  nbdkit_debug ("evil: mode %s, probability %g, stuck probability %g, "
                "seed %" PRIu64 ", block %" PRIu64 " bytes",
                mode_names[mode], probability, stuck_probability, seed,
                block_bytes);
  return next (nxdata);
}

#define evil_config_help \
  "evil=cosmic-rays|stuck-bits|stuck-wires\n" \
  "                            The kind of corruption (default stuck-bits).\n" \
  "evil-probability=PROB       Chance that a bit is hit (default 1e-8,\n" \
  "                            stuck-wires 1e-6).\n" \
  "evil-stuck-probability=PROB Chance a stuck bit shows (default 1).\n" \
  "evil-seed=N                 Seed (default: from the clock)."

static int
evil_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  if (next->pread (next, buf, count, offset, flags, err) == -1)
    return -1;
  if (probability <= 0 || stuck_probability <= 0)
    return 0;
  switch (mode) {
  case COSMIC_RAYS: cosmic_rays (buf, count, offset); break;
  case STUCK_BITS: stuck_bits (buf, count, offset); break;
  case STUCK_WIRES: stuck_wires (buf, count, offset); break;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "evil",
  .longname = "nbdkit evil filter",
  .config = evil_config,
  .config_complete = evil_config_complete,
  .config_help = evil_config_help,
  .pread = evil_pread,
};

NBDKIT_REGISTER_FILTER (filter)
