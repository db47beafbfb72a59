/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The LUKSv1 header: 592 bytes at the start of the disk, read into a
 * struct luks_disk with every field checked, since the disk may come
 * from anyone.  Also the map from the names the header uses
 * ("aes", "xts-plain64", "cbc-essiv:sha256", "sha256") to gnutls's
 * algorithms.
 *
 * Layout (big-endian integers, names NUL-padded):
 *     0  magic "LUKS\xba\xbe"       6
 *     6  version (1)                2
 *     8  cipher name               32
 *    40  cipher mode               32
 *    72  hash spec                 32
 *   104  payload offset (sectors)   4
 *   108  master key bytes           4
 *   112  master key digest         20
 *   132  digest salt               32
 *   164  digest iterations          4
 *   168  uuid                      40
 *   208  8 key slots of 48 bytes: active, iterations, salt (32),
 *        key material offset (sectors), stripes
 */
#include <config.h>

#include <endian.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checked-overflow.h"
#include "rounding.h"

#include "luks-disk.h"
#include "array-size.h"

#define SLOT_ENABLED 0x00AC71F3
#define SLOT_DISABLED 0x0000DEAD
#define SLOTS_START 208
#define SLOT_SIZE 48

/* Anti-forensic stripes: cryptsetup and qemu write 4000.  The bound
 * keeps a hostile header from making us read and merge a huge key
 * material area.
 */
#define MAX_STRIPES 65536

static uint32_t
get_be32 (const uint8_t *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return be32toh (v);
}

/* Copy a NUL-padded name field, refusing one without a NUL. */
static int
get_name (const uint8_t *p, char *out, const char *what)
{
  if (memchr (p, '\0', LUKS_NAME_SIZE) == NULL) {
    nbdkit_error ("LUKS header: the %s field is not terminated", what);
    return -1;
  }
  memcpy (out, p, LUKS_NAME_SIZE);
  out[LUKS_NAME_SIZE] = '\0';
  return 0;
}

static const struct {
  const char *name;
  gnutls_mac_algorithm_t mac;   /* equal to the gnutls_digest_algorithm_t */
} hashes[] = {
  { "sha1", GNUTLS_MAC_SHA1 },
  { "sha224", GNUTLS_MAC_SHA224 },
  { "sha256", GNUTLS_MAC_SHA256 },
  { "sha384", GNUTLS_MAC_SHA384 },
  { "sha512", GNUTLS_MAC_SHA512 },
  { "md5", GNUTLS_MAC_MD5 },
};

static int
lookup_hash (const char *name, gnutls_mac_algorithm_t *mac)
{
  for (size_t i = 0; i < ARRAY_SIZE (hashes); i++) {
    if (strcmp (name, hashes[i].name) == 0) {
      *mac = hashes[i].mac;
      return 0;
    }
  }
  return -1;
}

/* AES in CBC mode with a key of BYTES bytes (CBC also serves ECB, one
 * block at a time with a zero IV).
 */
static int
aes_cbc (size_t bytes, gnutls_cipher_algorithm_t *alg)
{
  switch (bytes) {
  case 16: *alg = GNUTLS_CIPHER_AES_128_CBC; return 0;
  case 24: *alg = GNUTLS_CIPHER_AES_192_CBC; return 0;
  case 32: *alg = GNUTLS_CIPHER_AES_256_CBC; return 0;
  default: return -1;
  }
}

/* The cipher mode "MODE[-IVGEN[:HASH]]" with cipher "aes" and the
 * header's key size.
 */
static int
lookup_cipher (struct luks_disk *d)
{
  if (strcmp (d->cipher_name, "aes") != 0) {
    nbdkit_error ("LUKS header: cipher '%s' is not supported "
                  "(only aes is)", d->cipher_name);
    return -1;
  }

  char mode[LUKS_NAME_SIZE + 1];
  memcpy (mode, d->cipher_mode, sizeof mode);
  char *ivgen = strchr (mode, '-');
  char *ivhash = NULL;
  if (ivgen) {
    *ivgen++ = '\0';
    ivhash = strchr (ivgen, ':');
    if (ivhash)
      *ivhash++ = '\0';
  }

  if (strcmp (mode, "xts") == 0) {
    if (d->key_bytes == 32)
      d->cipher = GNUTLS_CIPHER_AES_128_XTS;
    else if (d->key_bytes == 64)
      d->cipher = GNUTLS_CIPHER_AES_256_XTS;
    else {
      nbdkit_error ("LUKS header: aes-xts with a %" PRIu32 "-byte key is "
                    "not supported (32 or 64 bytes are)", d->key_bytes);
      return -1;
    }
  }
  else if (strcmp (mode, "cbc") == 0 || strcmp (mode, "ecb") == 0 ||
           strcmp (mode, "ctr") == 0) {
    d->ecb = strcmp (mode, "ecb") == 0;
    d->ctr = strcmp (mode, "ctr") == 0;
    if (aes_cbc (d->key_bytes, &d->cipher) == -1) {
      nbdkit_error ("LUKS header: aes-%s with a %" PRIu32 "-byte key is "
                    "not supported (16, 24 or 32 bytes are)",
                    mode, d->key_bytes);
      return -1;
    }
  }
  else {
    nbdkit_error ("LUKS header: cipher mode '%s' is not supported "
                  "(xts, cbc and ecb are)", d->cipher_mode);
    return -1;
  }

  /* ECB uses no IV, but qemu still names one ("ecb-plain64"). */
  if (d->ecb) {
    d->ivgen = LUKS_IVGEN_NONE;
    return 0;
  }
  if (ivgen == NULL) {
    nbdkit_error ("LUKS header: cipher mode '%s' names no IV generator",
                  d->cipher_mode);
    return -1;
  }
  if (strcmp (ivgen, "plain") == 0)
    d->ivgen = LUKS_IVGEN_PLAIN;
  else if (strcmp (ivgen, "plain64") == 0)
    d->ivgen = LUKS_IVGEN_PLAIN64;
  else if (strcmp (ivgen, "essiv") == 0)
    d->ivgen = LUKS_IVGEN_ESSIV;
  else {
    nbdkit_error ("LUKS header: IV generator '%s' is not supported "
                  "(plain, plain64 and essiv are)", ivgen);
    return -1;
  }

  if (d->ivgen != LUKS_IVGEN_ESSIV) {
    if (ivhash) {
      nbdkit_error ("LUKS header: cipher mode '%s': only essiv takes a "
                    "hash", d->cipher_mode);
      return -1;
    }
    return 0;
  }
  /* ESSIV: the IV is the sector number encrypted with AES keyed by
   * the hash of the key, so the hash's size picks the AES key size.
   */
  gnutls_mac_algorithm_t mac;
  if (ivhash == NULL || lookup_hash (ivhash, &mac) == -1) {
    nbdkit_error ("LUKS header: cipher mode '%s': essiv needs a known "
                  "hash", d->cipher_mode);
    return -1;
  }
  d->essiv_hash = (gnutls_digest_algorithm_t) mac;
  if (aes_cbc (gnutls_hash_get_len (d->essiv_hash),
               &d->essiv_cipher) == -1) {
    nbdkit_error ("LUKS header: cipher mode '%s': the %s digest is not "
                  "an AES key size", d->cipher_mode, ivhash);
    return -1;
  }
  return 0;
}

int
luks_parse_header (const uint8_t *buf, int64_t disk_size,
                   struct luks_disk *d)
{
  memset (d, 0, sizeof *d);
  memcpy (d->raw, buf, LUKS_HEADER_SIZE);

  if (memcmp (buf, "LUKS\xba\xbe", 6) != 0) {
    nbdkit_error ("this disk has no LUKS header (wrong magic)");
    return -1;
  }
  uint16_t version = (uint16_t) buf[6] << 8 | buf[7];
  if (version != 1) {
    nbdkit_error ("LUKS header: version %" PRIu16 " is not supported "
                  "(only LUKSv1 is)", version);
    return -1;
  }
  if (get_name (buf + 8, d->cipher_name, "cipher name") == -1 ||
      get_name (buf + 40, d->cipher_mode, "cipher mode") == -1 ||
      get_name (buf + 72, d->hash_spec, "hash spec") == -1)
    return -1;
  d->payload_offset = get_be32 (buf + 104);
  d->key_bytes = get_be32 (buf + 108);
  memcpy (d->mk_digest, buf + 112, LUKS_DIGEST_SIZE);
  memcpy (d->mk_digest_salt, buf + 132, LUKS_SALT_SIZE);
  d->mk_digest_iter = get_be32 (buf + 164);

  if (d->key_bytes == 0 || d->key_bytes > LUKS_MAX_KEY_BYTES) {
    nbdkit_error ("LUKS header: master key size %" PRIu32 " is out of "
                  "range", d->key_bytes);
    return -1;
  }
  if (d->mk_digest_iter == 0) {
    nbdkit_error ("LUKS header: master key digest iterations is 0");
    return -1;
  }
  if (lookup_hash (d->hash_spec, &d->hash) == -1) {
    nbdkit_error ("LUKS header: hash '%s' is not supported", d->hash_spec);
    return -1;
  }
  if (lookup_cipher (d) == -1)
    return -1;

  /* The payload lies after the header and inside the disk. */
  uint64_t payload_start = (uint64_t) d->payload_offset * LUKS_SECTOR_SIZE;
  if (payload_start < LUKS_HEADER_SIZE ||
      payload_start > (uint64_t) disk_size) {
    nbdkit_error ("LUKS header: payload offset %" PRIu32 " sectors lies "
                  "outside the disk (%" PRIi64 " bytes)",
                  d->payload_offset, disk_size);
    return -1;
  }

  int nr_active = 0;
  for (int i = 0; i < LUKS_NR_SLOTS; i++) {
    const uint8_t *p = buf + SLOTS_START + i * SLOT_SIZE;
    struct luks_slot *s = &d->slots[i];
    uint32_t active = get_be32 (p);

    if (active == SLOT_DISABLED)
      continue;
    if (active != SLOT_ENABLED) {
      nbdkit_error ("LUKS header: key slot %d is corrupt (state 0x%08"
                    PRIx32 ")", i, active);
      return -1;
    }
    s->active = true;
    s->iterations = get_be32 (p + 4);
    memcpy (s->salt, p + 8, LUKS_SALT_SIZE);
    s->key_material_offset = get_be32 (p + 40);
    s->stripes = get_be32 (p + 44);
    if (s->iterations == 0 || s->stripes == 0 || s->stripes > MAX_STRIPES) {
      nbdkit_error ("LUKS header: key slot %d has %" PRIu32 " iterations "
                    "and %" PRIu32 " stripes", i, s->iterations, s->stripes);
      return -1;
    }
    /* Its key material lies between the header and the payload.  The
     * numbers are small enough (32-bit sectors, bounded stripes) for
     * 64-bit arithmetic not to overflow.
     */
    uint64_t start = (uint64_t) s->key_material_offset * LUKS_SECTOR_SIZE;
    uint64_t len = ROUND_UP ((uint64_t) d->key_bytes * s->stripes,
                             (uint64_t) LUKS_SECTOR_SIZE);
    if (start < LUKS_HEADER_SIZE || start + len > payload_start) {
      nbdkit_error ("LUKS header: key slot %d's key material (sectors %"
                    PRIu32 " to %" PRIu64 ") overlaps the header or the "
                    "payload", i, s->key_material_offset,
                    (start + len) / LUKS_SECTOR_SIZE);
      return -1;
    }
    nr_active++;
  }
  if (nr_active == 0) {
    nbdkit_error ("LUKS header: no key slot is in use");
    return -1;
  }

  nbdkit_debug ("cipher %s-%s, %" PRIu32 "-byte key, hash %s, "
                "payload at sector %" PRIu32 ", %d active key slots",
                d->cipher_name, d->cipher_mode, d->key_bytes, d->hash_spec,
                d->payload_offset, nr_active);
  return 0;
}
