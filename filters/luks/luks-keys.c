/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Opening a LUKSv1 key slot with a passphrase.
 *
 * For each active slot: PBKDF2 of the passphrase with the slot's salt
 * and iteration count gives a key; that key decrypts the slot's key
 * material (key_bytes x stripes bytes, encrypted like the payload);
 * the anti-forensic merge of the stripes gives a candidate master key;
 * and PBKDF2 of the candidate with the header's digest salt must equal
 * the header's master key digest.  The first slot that passes wins.
 */
#include <config.h>

#include <endian.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "rounding.h"

#include "luks-disk.h"

/* PBKDF2 of KEY (KEY_LEN bytes) into OUT (OUT_LEN bytes). */
static int
pbkdf2 (gnutls_mac_algorithm_t mac, const void *key, size_t key_len,
        const uint8_t *salt, size_t salt_len, uint32_t iterations,
        uint8_t *out, size_t out_len)
{
  gnutls_datum_t k = { .data = (uint8_t *) key, .size = key_len };
  gnutls_datum_t s = { .data = (uint8_t *) salt, .size = salt_len };
  int r = gnutls_pbkdf2 (mac, &k, &s, iterations, out, out_len);
  if (r < 0) {
    nbdkit_error ("PBKDF2 (%s): %s", gnutls_mac_get_name (mac),
                  gnutls_strerror (r));
    return -1;
  }
  return 0;
}

/* The AF diffusion: each digest-sized block of BUF (the last one may
 * be shorter) becomes hash (be32 (block number) || block), cut to the
 * block's length.
 */
static int
diffuse (gnutls_digest_algorithm_t hash, uint8_t *buf, size_t len)
{
  size_t ds = gnutls_hash_get_len (hash);
  uint8_t in[4 + 64], out[64];

  if (ds == 0 || ds > 64)
    return -1;
  for (size_t off = 0, i = 0; off < len; off += ds, i++) {
    size_t n = len - off < ds ? len - off : ds;
    uint32_t be = htobe32 ((uint32_t) i);
    memcpy (in, &be, 4);
    memcpy (in + 4, buf + off, n);
    if (gnutls_hash_fast (hash, in, 4 + n, out) < 0)
      return -1;
    memcpy (buf + off, out, n);
  }
  return 0;
}

/* Merge STRIPES stripes of KEY_BYTES each from MATERIAL into KEY. */
static int
af_merge (gnutls_digest_algorithm_t hash, const uint8_t *material,
          uint32_t key_bytes, uint32_t stripes, uint8_t *key)
{
  memset (key, 0, key_bytes);
  for (uint32_t i = 0; i < stripes - 1; i++) {
    for (uint32_t j = 0; j < key_bytes; j++)
      key[j] ^= material[(size_t) i * key_bytes + j];
    if (diffuse (hash, key, key_bytes) == -1) {
      nbdkit_error ("AF merge: hashing failed");
      return -1;
    }
  }
  for (uint32_t j = 0; j < key_bytes; j++)
    key[j] ^= material[(size_t) (stripes - 1) * key_bytes + j];
  return 0;
}

/* Try slot I.  Returns 1 and sets D's master key if the passphrase
 * opens it, 0 if not, -1 on errors.
 */
static int
try_slot (nbdkit_next *next, struct luks_disk *d, int i,
          const char *passphrase)
{
  const struct luks_slot *s = &d->slots[i];
  uint8_t slot_key[LUKS_MAX_KEY_BYTES];
  uint8_t mk[LUKS_MAX_KEY_BYTES];
  uint8_t digest[LUKS_DIGEST_SIZE];
  struct luks_crypt c = { 0 };
  int r = -1;

  /* luks_parse_header checked that this fits between the header and
   * the payload, so it is small and inside the disk.
   */
  size_t len = (size_t) d->key_bytes * s->stripes;
  size_t sectors = ROUND_UP (len, (size_t) LUKS_SECTOR_SIZE)
    / LUKS_SECTOR_SIZE;
  CLEANUP_FREE uint8_t *material = malloc (sectors * LUKS_SECTOR_SIZE);
  if (material == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }

  if (pbkdf2 (d->hash, passphrase, strlen (passphrase), s->salt,
              LUKS_SALT_SIZE, s->iterations, slot_key, d->key_bytes) == -1)
    goto out;

  int err;
  if (next->pread (next, material, sectors * LUKS_SECTOR_SIZE,
                   (uint64_t) s->key_material_offset * LUKS_SECTOR_SIZE,
                   0, &err) == -1) {
    errno = err;
    nbdkit_error ("reading key slot %d's key material: %m", i);
    goto out;
  }
  if (luks_crypt_init (&c, d, slot_key) == -1 ||
      luks_crypt_sectors (&c, false, material, material, 0, sectors) == -1)
    goto out;
  if (af_merge ((gnutls_digest_algorithm_t) d->hash, material,
                d->key_bytes, s->stripes, mk) == -1)
    goto out;
  if (pbkdf2 (d->hash, mk, d->key_bytes, d->mk_digest_salt, LUKS_SALT_SIZE,
              d->mk_digest_iter, digest, LUKS_DIGEST_SIZE) == -1)
    goto out;

  if (gnutls_memcmp (digest, d->mk_digest, LUKS_DIGEST_SIZE) == 0) {
    memcpy (d->master_key, mk, d->key_bytes);
    d->unlocked = true;
    r = 1;
  }
  else
    r = 0;

 out:
  luks_crypt_free (&c);
  gnutls_memset (slot_key, 0, sizeof slot_key);
  gnutls_memset (mk, 0, sizeof mk);
  gnutls_memset (material, 0, sectors * LUKS_SECTOR_SIZE);
  return r;
}

int
luks_unlock (nbdkit_next *next, struct luks_disk *d, const char *passphrase)
{
  int tried = 0;

  for (int i = 0; i < LUKS_NR_SLOTS; i++) {
    if (!d->slots[i].active)
      continue;
    tried++;
    int r = try_slot (next, d, i, passphrase);
    if (r == -1)
      return -1;
    if (r == 1) {
      nbdkit_debug ("key slot %d opened (%" PRIu32 " iterations)",
                    i, d->slots[i].iterations);
      NBDKIT_PROBE (luks_unlock, i, d->slots[i].iterations);
      return 0;
    }
  }
  nbdkit_error ("passphrase: the passphrase opens none of the disk's %d "
                "active key slots (wrong passphrase?)", tried);
  return -1;
}
