/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The luks filter: serve the decrypted payload of a LUKSv1 disk, and
 * encrypt what clients write.
 *
 * At .prepare each connection reads the 592-byte header from the layer
 * below and opens a key slot with the passphrase (luks-header.c,
 * luks-keys.c).  Opening a slot costs a deliberately slow PBKDF2, so
 * the last disk opened is remembered: a connection that finds the same
 * header bytes copies its master key instead (the header holds the
 * master key's digest, so equal headers mean an equal master key).
 * Each connection then holds its own read-only copy of the disk.
 *
 * Requests are turned into whole 512-byte sectors of the payload,
 * each decrypted or encrypted with a cipher made for that request
 * (luks-crypt.c), so requests run in parallel.  A write that covers
 * part of a sector reads, decrypts, patches and re-encrypts it under
 * rmw_lock, so two such writes to one sector do not undo each other.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "isaligned.h"
#include "minmax.h"
#include "rounding.h"

#include "luks-disk.h"

/* Writes and reads larger than this are encrypted in pieces through a
 * buffer of this size.
 */
#define CHUNK (1024 * 1024)

/* Set by .config, read-only once connections start. */
static char *passphrase = NULL;

/* The last disk opened (see above). */
static pthread_mutex_t remembered_lock = PTHREAD_MUTEX_INITIALIZER;
static struct luks_disk *remembered = NULL;

/* Serialises read-modify-write of partial sectors. */
static pthread_mutex_t rmw_lock = PTHREAD_MUTEX_INITIALIZER;

struct handle {
  struct luks_disk disk;
  uint64_t payload_start;       /* bytes */
};

static void
forget_disk (struct luks_disk *d)
{
  if (d) {
    gnutls_memset (d, 0, sizeof *d);
    free (d);
  }
}

static void
luks_unload (void)
{
  if (passphrase) {
    gnutls_memset (passphrase, 0, strlen (passphrase));
    free (passphrase);
  }
  forget_disk (remembered);
}

static int
luks_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "passphrase") == 0) {
    if (passphrase) {
      nbdkit_error ("passphrase: given more than once");
      return -1;
    }
    /* nbdkit_read_password's own message would not name the key. */
    if (value[0] == '+' && access (&value[1], R_OK) == -1) {
      nbdkit_error ("passphrase: %s: %m", &value[1]);
      return -1;
    }
    if (nbdkit_read_password (value, &passphrase) == -1)
      return -1;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
luks_config_complete (nbdkit_next_config_complete *next,
                      nbdkit_backend *nxdata)
{
  if (passphrase == NULL) {
    nbdkit_error ("passphrase: the parameter is required "
                  "(passphrase=SECRET, +FILE, -FD or -)");
    return -1;
  }
  return next (nxdata);
}

#define luks_config_help \
  "passphrase=<SECRET>  Passphrase of the LUKS disk (also +FILE, -FD, -)."

static void *
luks_open (nbdkit_next_open *next, nbdkit_context *context,
           int readonly, const char *exportname, int is_tls)
{
  if (next (context, readonly, exportname) == -1)
    return NULL;
  struct handle *h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  return h;
}

static void
luks_close (void *handle)
{
  struct handle *h = handle;
  gnutls_memset (h, 0, sizeof *h);
  free (h);
}

static int
luks_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  uint8_t header[LUKS_HEADER_SIZE];
  int err;

  int64_t size = next->get_size (next);
  if (size == -1)
    return -1;
  if (size < LUKS_HEADER_SIZE) {
    nbdkit_error ("the disk (%" PRIi64 " bytes) is too small to hold a "
                  "LUKS header", size);
    return -1;
  }
  if (next->pread (next, header, sizeof header, 0, 0, &err) == -1) {
    errno = err;
    nbdkit_error ("reading the LUKS header: %m");
    return -1;
  }

  LOCK_FOR_SCOPE (&remembered_lock);
  if (remembered && memcmp (remembered->raw, header, sizeof header) == 0) {
    /* The payload offset was checked against this disk's size. */
    if ((uint64_t) remembered->payload_offset * LUKS_SECTOR_SIZE
        <= (uint64_t) size) {
      h->disk = *remembered;
      h->payload_start =
        (uint64_t) h->disk.payload_offset * LUKS_SECTOR_SIZE;
      return 0;
    }
  }

  if (luks_parse_header (header, size, &h->disk) == -1 ||
      luks_unlock (next, &h->disk, passphrase) == -1)
    return -1;
  h->payload_start = (uint64_t) h->disk.payload_offset * LUKS_SECTOR_SIZE;

  struct luks_disk *copy = malloc (sizeof *copy);
  if (copy) {
    *copy = h->disk;
    forget_disk (remembered);
    remembered = copy;
  }
  return 0;
}

/* The payload, in whole sectors: a partial sector at the end cannot
 * be decrypted, so it is not served.
 */
static int64_t
luks_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  int64_t size = next->get_size (next);
  if (size == -1)
    return -1;
  if ((uint64_t) size < h->payload_start) {
    nbdkit_error ("the disk shrank below the LUKS payload offset");
    return -1;
  }
  return ROUND_DOWN ((uint64_t) size - h->payload_start,
                     (uint64_t) LUKS_SECTOR_SIZE);
}

/* Clients should send whole sectors; others are served, at the cost
 * of read-modify-write for writes.
 */
static int
luks_block_size (nbdkit_next *next, void *handle, uint32_t *minimum,
                 uint32_t *preferred, uint32_t *maximum)
{
  if (next->block_size (next, minimum, preferred, maximum) == -1)
    return -1;
  if (*minimum == 0) {
    *minimum = LUKS_SECTOR_SIZE;
    *preferred = MAX (*preferred, (uint32_t) LUKS_SECTOR_SIZE);
    *maximum = 0xffffffff;
  }
  else {
    *minimum = MAX (*minimum, (uint32_t) LUKS_SECTOR_SIZE);
    *preferred = MAX (*preferred, *minimum);
  }
  return 0;
}

/* Holes below are holes in the ciphertext, which decrypts to noise. */
static int
luks_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

/* A trimmed sector below would decrypt to noise, not zeroes. */
static int
luks_can_trim (nbdkit_next *next, void *handle)
{
  return 0;
}

/* Zeroes must be encrypted too: the server writes them through
 * .pwrite.
 */
static int
luks_can_zero (nbdkit_next *next, void *handle)
{
  return NBDKIT_ZERO_EMULATE;
}

static int
luks_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 0;
}

/* Read whole sectors [SECTOR, SECTOR + N) of the payload into BUF,
 * decrypted.
 */
static int
read_sectors (nbdkit_next *next, struct handle *h, struct luks_crypt *c,
              uint8_t *buf, uint64_t sector, size_t n, uint32_t flags,
              int *err)
{
  if (next->pread (next, buf, n * LUKS_SECTOR_SIZE,
                   h->payload_start + sector * LUKS_SECTOR_SIZE,
                   flags, err) == -1)
    return -1;
  if (luks_crypt_sectors (c, false, buf, buf, sector, n) == -1) {
    *err = EIO;
    return -1;
  }
  return 0;
}

/* Encrypt N sectors from BUF into BOUNCE and write them. */
static int
write_sectors (nbdkit_next *next, struct handle *h, struct luks_crypt *c,
               const uint8_t *buf, uint8_t *bounce, uint64_t sector,
               size_t n, uint32_t flags, int *err)
{
  if (luks_crypt_sectors (c, true, buf, bounce, sector, n) == -1) {
    *err = EIO;
    return -1;
  }
  return next->pwrite (next, bounce, n * LUKS_SECTOR_SIZE,
                       h->payload_start + sector * LUKS_SECTOR_SIZE,
                       flags, err);
}

static int
luks_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  struct luks_crypt c;
  uint8_t *p = buf;
  int r = 0;

  if (luks_crypt_init (&c, &h->disk, h->disk.master_key) == -1) {
    *err = EIO;
    return -1;
  }
  while (r == 0 && count > 0) {
    uint64_t sector = offset / LUKS_SECTOR_SIZE;
    uint32_t skip = offset % LUKS_SECTOR_SIZE;
    uint32_t n;
    if (skip != 0 || count < LUKS_SECTOR_SIZE) {
      /* A piece of one sector. */
      uint8_t tmp[LUKS_SECTOR_SIZE];
      n = MIN (count, LUKS_SECTOR_SIZE - skip);
      r = read_sectors (next, h, &c, tmp, sector, 1, flags, err);
      if (r == 0)
        memcpy (p, tmp + skip, n);
    }
    else {
      /* Whole sectors, decrypted in place. */
      n = ROUND_DOWN (count, (uint32_t) LUKS_SECTOR_SIZE);
      r = read_sectors (next, h, &c, p, sector, n / LUKS_SECTOR_SIZE,
                        flags, err);
    }
    p += n;
    offset += n;
    count -= n;
  }
  luks_crypt_free (&c);
  return r;
}

/* Write N bytes of BUF at byte SKIP of SECTOR, keeping the rest. */
static int
write_partial (nbdkit_next *next, struct handle *h, struct luks_crypt *c,
               const uint8_t *buf, uint64_t sector, uint32_t skip,
               uint32_t n, uint32_t flags, int *err)
{
  uint8_t tmp[LUKS_SECTOR_SIZE];

  NBDKIT_PROBE (luks_rmw, nbdkit_connection_id (), nbdkit_request_cookie (),
                sector * LUKS_SECTOR_SIZE + skip, n);
  LOCK_FOR_SCOPE (&rmw_lock);
  if (read_sectors (next, h, c, tmp, sector, 1, 0, err) == -1)
    return -1;
  memcpy (tmp + skip, buf, n);
  return write_sectors (next, h, c, tmp, tmp, sector, 1, flags, err);
}

static int
luks_pwrite (nbdkit_next *next, void *handle, const void *buf,
             uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  struct luks_crypt c;
  const uint8_t *p = buf;
  CLEANUP_FREE uint8_t *bounce = NULL;
  int r = 0;

  if (luks_crypt_init (&c, &h->disk, h->disk.master_key) == -1) {
    *err = EIO;
    return -1;
  }
  while (r == 0 && count > 0) {
    uint64_t sector = offset / LUKS_SECTOR_SIZE;
    uint32_t skip = offset % LUKS_SECTOR_SIZE;
    uint32_t n;
    if (skip != 0 || count < LUKS_SECTOR_SIZE) {
      n = MIN (count, LUKS_SECTOR_SIZE - skip);
      r = write_partial (next, h, &c, p, sector, skip, n, flags, err);
    }
    else {
      n = MIN (ROUND_DOWN (count, (uint32_t) LUKS_SECTOR_SIZE),
               (uint32_t) CHUNK);
      if (bounce == NULL) {
        bounce = malloc (MIN (ROUND_DOWN (count, (uint32_t) LUKS_SECTOR_SIZE),
                              (uint32_t) CHUNK));
        if (bounce == NULL) {
          *err = errno;
          nbdkit_error ("malloc: %m");
          r = -1;
          break;
        }
      }
      r = write_sectors (next, h, &c, p, bounce, sector,
                         n / LUKS_SECTOR_SIZE, flags, err);
    }
    p += n;
    offset += n;
    count -= n;
  }
  luks_crypt_free (&c);
  return r;
}

/* Cache the ciphertext that the range decrypts from. */
static int
luks_cache (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  uint64_t start = ROUND_DOWN (offset, (uint64_t) LUKS_SECTOR_SIZE);
  uint64_t end = ROUND_UP (offset + count, (uint64_t) LUKS_SECTOR_SIZE);

  /* Rounding out may take the range past 32 bits: ask in pieces. */
  while (start < end) {
    uint32_t n = MIN (end - start, (uint64_t) 1 << 30);
    if (next->cache (next, n, h->payload_start + start, flags, err) == -1)
      return -1;
    start += n;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "luks",
  .longname = "nbdkit luks filter",
  .unload = luks_unload,
  .config = luks_config,
  .config_complete = luks_config_complete,
  .config_help = luks_config_help,
  .open = luks_open,
  .close = luks_close,
  .prepare = luks_prepare,
  .get_size = luks_get_size,
  .block_size = luks_block_size,
  .can_extents = luks_can_extents,
  .can_trim = luks_can_trim,
  .can_zero = luks_can_zero,
  .can_fast_zero = luks_can_fast_zero,
  .pread = luks_pread,
  .pwrite = luks_pwrite,
  .cache = luks_cache,
};

NBDKIT_REGISTER_FILTER (filter)
