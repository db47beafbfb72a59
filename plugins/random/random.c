/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The random plugin: a disk of random bytes, the same for the same seed.
 *
 * This file owns the two parameters and the rule that makes each byte:
 * the byte at offset O is computed from seed + O alone, so any range
 * can be read without generating what comes before it, and requests
 * run in parallel with no state.  The rule is nbdkit 1.32's, so the
 * same seed gives the same disk under either server: seed the
 * generator of prng.h with seed + O, draw three times, keep the low
 * byte of the third draw.
 *
 * Nothing written is kept: a write must match the bytes already there
 * (EIO otherwise), so that a copy from the disk onto itself checks the
 * copying tool.  Trim and zero always fail, as the disk is not sparse.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "prng.h"
#include "answers.h"
#include "params.h"

/* Set by config, read-only once the server serves. */
static int64_t size = 0;
static uint32_t seed;

static void
random_load (void)
{
  /* A random seed unless the user gives one. */
  seed = (uint32_t) time (NULL);
}

static int
random_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0)
    return param_size (value, &size);
  if (strcmp (key, "seed") == 0)
    return nbdkit_parse_uint32_t ("seed", value, &seed);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

#define random_config_help \
  "[size=]SIZE               Size of the disk (required).\n" \
  "seed=SEED                 Random seed (default: chosen at start-up)."

static int64_t
random_get_size (void *handle)
{
  return size;
}

static inline uint8_t
byte_at (uint64_t offset)
{
  struct prng rng;

  prng_seed (&rng, seed + offset);
  prng_next (&rng);
  prng_next (&rng);
  return prng_next (&rng) & 0xff;
}

static int
random_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  uint8_t *p = buf;
  uint32_t i;

  for (i = 0; i < count; ++i)
    p[i] = byte_at (offset + i);
  return 0;
}

static int
random_pwrite (void *handle, const void *buf, uint32_t count,
               uint64_t offset, uint32_t flags)
{
  const uint8_t *p = buf;
  uint32_t i;

  for (i = 0; i < count; ++i) {
    if (p[i] != byte_at (offset + i)) {
      nbdkit_error ("random: data written at offset %" PRIu64
                    " does not match the disk", offset + i);
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

static int
random_trim_zero (void *handle, uint32_t count, uint64_t offset,
                  uint32_t flags)
{
  nbdkit_error ("random: cannot trim or zero a disk that has no holes");
  errno = EIO;
  return -1;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "random",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit random plugin",
  .description       = "A disk of random bytes, repeatable by seed",
  .load              = random_load,
  .config            = random_config,
  .config_help       = random_config_help,
  .magic_config_key  = "size",
  .open              = answer_no_handle,
  .get_size          = random_get_size,
  .can_write         = answer_yes,
  .can_trim          = answer_yes,
  .can_zero          = answer_yes,
  .can_multi_conn    = answer_yes,
  .can_cache         = answer_cache_native,
  .pread             = random_pread,
  .pwrite            = random_pwrite,
  .trim              = random_trim_zero,
  .zero              = random_trim_zero,
  .cache             = answer_range_done,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
