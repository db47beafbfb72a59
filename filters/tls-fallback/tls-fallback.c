/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tls-fallback filter: under --tls=on, a client that did not
 * negotiate TLS never reaches the layers below.  It sees one export,
 * "", whatever name it asks for: 512 read-only bytes holding a message
 * (tlsreadme=), padded with zeroes.  A TLS client passes through.
 *
 * The decision is made in .open from is_tls and kept in the handle:
 * PLAINTEXT (the layer below is never opened, so next is NULL and
 * must not be touched) or SECURE (every callback passes through).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "minmax.h"

#define SIZE 512

/* Set by config, read-only afterwards: the whole export plaintext
 * clients see.
 */
static char readme[SIZE] =
  "This NBD server requires TLS authentication before it will serve "
  "useful data.\n";

/* The two handles; only their addresses matter. */
static char plaintext_handle, secure_handle;
#define PLAINTEXT ((void *) &plaintext_handle)
#define SECURE ((void *) &secure_handle)

static int
fallback_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "tlsreadme") == 0) {
    /* As nbdkit 1.32: the export stays 512 bytes; a longer message is
     * cut, a shorter one padded with zeroes.
     */
    memset (readme, 0, SIZE);
    memcpy (readme, value, MIN (strlen (value), (size_t) SIZE));
    return 0;
  }
  return next (nxdata, key, value);
}

#define fallback_config_help \
  "tlsreadme=MESSAGE   What clients without TLS read (512 bytes at most)."

/* A plaintext client holding its connection forever would keep every
 * other client out under this model.
 */
static int
fallback_get_ready (int thread_model)
{
  if (thread_model == NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS) {
    nbdkit_error ("the plugin serves one connection at a time, so one "
                  "plaintext client could lock out every TLS client: "
                  "refusing to start");
    return -1;
  }
  return 0;
}

static int
fallback_list_exports (nbdkit_next_list_exports *next,
                       nbdkit_backend *nxdata, int readonly, int is_tls,
                       struct nbdkit_exports *exports)
{
  if (!is_tls)
    return nbdkit_add_export (exports, "", NULL);
  return next (nxdata, readonly, exports);
}

static const char *
fallback_default_export (nbdkit_next_default_export *next,
                         nbdkit_backend *nxdata, int readonly, int is_tls)
{
  if (!is_tls)
    return "";
  return next (nxdata, readonly);
}

static void *
fallback_open (nbdkit_next_open *next, nbdkit_context *context,
               int readonly, const char *exportname, int is_tls)
{
  if (!is_tls) {
    NBDKIT_PROBE (tls_fallback_plaintext, exportname);
    nbdkit_debug ("client without TLS asked for export \"%s\": serving "
                  "the readme instead", exportname);
    return PLAINTEXT;
  }
  if (next (context, readonly, exportname) == -1)
    return NULL;
  return SECURE;
}

static int64_t
fallback_get_size (nbdkit_next *next, void *handle)
{
  if (handle == PLAINTEXT)
    return SIZE;
  return next->get_size (next);
}

static const char *
fallback_export_description (nbdkit_next *next, void *handle)
{
  if (handle == PLAINTEXT)
    return NULL;
  return next->export_description (next);
}

static int
fallback_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                     uint32_t *preferred, uint32_t *maximum)
{
  if (handle == PLAINTEXT) {
    *minimum = *preferred = *maximum = 0;   /* no constraints */
    return 0;
  }
  return next->block_size (next, minimum, preferred, maximum);
}

/* Every capability is off for plaintext clients. */
#define CAPABILITY(name)                                        \
  static int                                                    \
  fallback_##name (nbdkit_next *next, void *handle)             \
  {                                                             \
    if (handle == PLAINTEXT)                                    \
      return 0;                                                 \
    return next->name (next);                                   \
  }
CAPABILITY (can_write)
CAPABILITY (can_flush)
CAPABILITY (is_rotational)
CAPABILITY (can_trim)
CAPABILITY (can_zero)
CAPABILITY (can_fast_zero)
CAPABILITY (can_extents)
CAPABILITY (can_fua)
CAPABILITY (can_multi_conn)
CAPABILITY (can_cache)

static int
fallback_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  if (handle == PLAINTEXT) {
    /* The server checked the range against the size; check anyway. */
    if (offset > SIZE || count > SIZE - offset) {
      *err = EINVAL;
      return -1;
    }
    memcpy (buf, readme + offset, count);
    return 0;
  }
  return next->pread (next, buf, count, offset, flags, err);
}

/* The server refuses these for a read-only export without writes,
 * trims, zeroes, flush, extents or cache; a plaintext client that
 * reached one would be a server bug, and still gets nothing.
 */
static int
refused (int *err)
{
  *err = EPERM;
  return -1;
}

static int
fallback_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (handle == PLAINTEXT)
    return refused (err);
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
fallback_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  if (handle == PLAINTEXT)
    return refused (err);
  return next->flush (next, flags, err);
}

static int
fallback_trim (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  if (handle == PLAINTEXT)
    return refused (err);
  return next->trim (next, count, offset, flags, err);
}

static int
fallback_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  if (handle == PLAINTEXT)
    return refused (err);
  return next->zero (next, count, offset, flags, err);
}

static int
fallback_extents (nbdkit_next *next, void *handle, uint32_t count,
                  uint64_t offset, uint32_t flags,
                  struct nbdkit_extents *extents, int *err)
{
  if (handle == PLAINTEXT)
    return refused (err);
  return next->extents (next, count, offset, flags, extents, err);
}

static int
fallback_cache (nbdkit_next *next, void *handle, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  if (handle == PLAINTEXT)
    return refused (err);
  return next->cache (next, count, offset, flags, err);
}

static struct nbdkit_filter filter = {
  .name = "tls-fallback",
  .longname = "nbdkit tls-fallback filter",
  .config = fallback_config,
  .config_help = fallback_config_help,
  .get_ready = fallback_get_ready,
  .list_exports = fallback_list_exports,
  .default_export = fallback_default_export,
  .open = fallback_open,
  .get_size = fallback_get_size,
  .export_description = fallback_export_description,
  .block_size = fallback_block_size,
  .can_write = fallback_can_write,
  .can_flush = fallback_can_flush,
  .is_rotational = fallback_is_rotational,
  .can_trim = fallback_can_trim,
  .can_zero = fallback_can_zero,
  .can_fast_zero = fallback_can_fast_zero,
  .can_extents = fallback_can_extents,
  .can_fua = fallback_can_fua,
  .can_multi_conn = fallback_can_multi_conn,
  .can_cache = fallback_can_cache,
  .pread = fallback_pread,
  .pwrite = fallback_pwrite,
  .flush = fallback_flush,
  .trim = fallback_trim,
  .zero = fallback_zero,
  .extents = fallback_extents,
  .cache = fallback_cache,
};

NBDKIT_REGISTER_FILTER (filter)
