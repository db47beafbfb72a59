/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Sector encryption for the luks filter, as dm-crypt and qemu do it:
 * each 512-byte sector is encrypted on its own, with an IV made from
 * its sector number (counted from the start of the payload, or of a
 * key slot's key material).
 *
 *   plain     the number's low 32 bits, little-endian, zero-padded
 *   plain64   the whole 64-bit number, little-endian, zero-padded
 *   essiv     plain64 encrypted with AES keyed by hash(key)
 *   (ecb)     no IV: every 16-byte block on its own
 *
 * In CTR mode the IV is the first counter block, incremented as a
 * 128-bit big-endian number for each 16-byte block of the sector, and
 * the data is XORed with the encrypted counters (so encrypting and
 * decrypting are the same).
 *
 * gnutls has no ECB or CTR mode; one block of CBC with a zero IV is
 * ECB, and CTR is built from that.  A gnutls cipher handle carries
 * its IV between calls, so each struct luks_crypt serves one request
 * in one thread.
 */
#include <config.h>

#include <endian.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "luks-disk.h"

#define AES_BLOCK 16

int
luks_crypt_init (struct luks_crypt *c, const struct luks_disk *d,
                 const uint8_t *key)
{
  int r;

  memset (c, 0, sizeof *c);
  c->d = d;
  c->iv_size = gnutls_cipher_get_iv_size (d->cipher);

  gnutls_datum_t k = { .data = (uint8_t *) key, .size = d->key_bytes };
  uint8_t zero_iv[AES_BLOCK] = { 0 };
  gnutls_datum_t iv = { .data = zero_iv, .size = c->iv_size };
  r = gnutls_cipher_init (&c->cipher, d->cipher, &k, &iv);
  if (r < 0) {
    nbdkit_error ("gnutls_cipher_init (%s): %s",
                  gnutls_cipher_get_name (d->cipher), gnutls_strerror (r));
    c->cipher = NULL;
    return -1;
  }

  if (d->ivgen == LUKS_IVGEN_ESSIV) {
    uint8_t salt[64];
    size_t len = gnutls_hash_get_len (d->essiv_hash);
    r = gnutls_hash_fast (d->essiv_hash, key, d->key_bytes, salt);
    if (r < 0) {
      nbdkit_error ("gnutls_hash_fast: %s", gnutls_strerror (r));
      luks_crypt_free (c);
      return -1;
    }
    gnutls_datum_t ek = { .data = salt, .size = len };
    gnutls_datum_t eiv = { .data = zero_iv, .size = AES_BLOCK };
    r = gnutls_cipher_init (&c->essiv, d->essiv_cipher, &ek, &eiv);
    gnutls_memset (salt, 0, sizeof salt);
    if (r < 0) {
      nbdkit_error ("gnutls_cipher_init (ESSIV): %s", gnutls_strerror (r));
      c->essiv = NULL;
      luks_crypt_free (c);
      return -1;
    }
  }
  return 0;
}

void
luks_crypt_free (struct luks_crypt *c)
{
  if (c->cipher)
    gnutls_cipher_deinit (c->cipher);
  if (c->essiv)
    gnutls_cipher_deinit (c->essiv);
  c->cipher = c->essiv = NULL;
}

/* One block of ECB with a CBC handle. */
static int
ecb_block (gnutls_cipher_hd_t h, bool encrypt, const uint8_t *in,
           uint8_t *out)
{
  static const uint8_t zero_iv[AES_BLOCK];
  gnutls_cipher_set_iv (h, (void *) zero_iv, AES_BLOCK);
  return encrypt ?
    gnutls_cipher_encrypt2 (h, in, AES_BLOCK, out, AES_BLOCK) :
    gnutls_cipher_decrypt2 (h, in, AES_BLOCK, out, AES_BLOCK);
}

static int
make_iv (struct luks_crypt *c, uint64_t sector, uint8_t *iv)
{
  memset (iv, 0, c->iv_size);
  switch (c->d->ivgen) {
  case LUKS_IVGEN_NONE:
    return 0;
  case LUKS_IVGEN_PLAIN: {
    uint32_t v = htole32 ((uint32_t) sector);
    memcpy (iv, &v, sizeof v);
    return 0;
  }
  case LUKS_IVGEN_PLAIN64:
  case LUKS_IVGEN_ESSIV: {
    uint64_t v = htole64 (sector);
    memcpy (iv, &v, sizeof v);
    if (c->d->ivgen == LUKS_IVGEN_ESSIV) {
      int r = ecb_block (c->essiv, true, iv, iv);
      if (r < 0) {
        nbdkit_error ("ESSIV: %s", gnutls_strerror (r));
        return -1;
      }
    }
    return 0;
  }
  }
  abort ();
}

/* Add 1 to the big-endian 128-bit number at CTR. */
static void
increment_be128 (uint8_t *ctr)
{
  for (int i = AES_BLOCK - 1; i >= 0; i--)
    if (++ctr[i] != 0)
      break;
}

static int
ctr_sector (gnutls_cipher_hd_t h, const uint8_t *iv, const uint8_t *in,
            uint8_t *out)
{
  uint8_t ctr[AES_BLOCK], ks[AES_BLOCK];

  memcpy (ctr, iv, AES_BLOCK);
  for (size_t b = 0; b < LUKS_SECTOR_SIZE; b += AES_BLOCK) {
    int r = ecb_block (h, true, ctr, ks);
    if (r < 0)
      return r;
    for (size_t i = 0; i < AES_BLOCK; i++)
      out[b + i] = in[b + i] ^ ks[i];
    increment_be128 (ctr);
  }
  return 0;
}

int
luks_crypt_sectors (struct luks_crypt *c, bool encrypt, const void *in,
                    void *out, uint64_t sector, size_t nr_sectors)
{
  const uint8_t *src = in;
  uint8_t *dst = out;
  uint8_t iv[AES_BLOCK];

  for (size_t i = 0; i < nr_sectors; i++) {
    int r = 0;
    if (c->d->ecb) {
      for (size_t b = 0; r >= 0 && b < LUKS_SECTOR_SIZE; b += AES_BLOCK)
        r = ecb_block (c->cipher, encrypt, src + b, dst + b);
    }
    else if (c->d->ctr) {
      if (make_iv (c, sector + i, iv) == -1)
        return -1;
      r = ctr_sector (c->cipher, iv, src, dst);
    }
    else {
      if (make_iv (c, sector + i, iv) == -1)
        return -1;
      gnutls_cipher_set_iv (c->cipher, iv, c->iv_size);
      r = encrypt ?
        gnutls_cipher_encrypt2 (c->cipher, src, LUKS_SECTOR_SIZE,
                                dst, LUKS_SECTOR_SIZE) :
        gnutls_cipher_decrypt2 (c->cipher, src, LUKS_SECTOR_SIZE,
                                dst, LUKS_SECTOR_SIZE);
    }
    if (r < 0) {
      nbdkit_error ("%s sector %" PRIu64 ": %s",
                    encrypt ? "encrypting" : "decrypting", sector + i,
                    gnutls_strerror (r));
      return -1;
    }
    src += LUKS_SECTOR_SIZE;
    dst += LUKS_SECTOR_SIZE;
  }
  return 0;
}
