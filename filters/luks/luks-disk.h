/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The luks filter's view of a LUKSv1 disk, shared by its three parts:
 *
 *   luks-header.c  reads the on-disk header into a struct luks_disk,
 *                  checking every field, and maps the cipher, mode,
 *                  IV generator and hash named there to gnutls's
 *   luks-keys.c    unlocks a key slot with the passphrase (PBKDF2,
 *                  anti-forensic merge, master key digest check)
 *   luks-crypt.c   encrypts and decrypts runs of 512-byte sectors
 *
 * luks.c, the filter, calls these and owns locking: a struct
 * luks_disk is filled by one thread and read-only afterwards, and a
 * struct luks_crypt belongs to one request.
 */
#ifndef NBDKIT_LUKS_DISK_H
#define NBDKIT_LUKS_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>

#include <nbdkit-filter.h>

/* The unit of encryption: each sector has its own IV. */
#define LUKS_SECTOR_SIZE 512

/* Fixed sizes of the LUKSv1 on-disk header (all integers big-endian). */
#define LUKS_HEADER_SIZE 592
#define LUKS_NR_SLOTS 8
#define LUKS_DIGEST_SIZE 20
#define LUKS_SALT_SIZE 32
#define LUKS_NAME_SIZE 32

/* The largest master key we handle: AES-256 in XTS mode. */
#define LUKS_MAX_KEY_BYTES 64

struct luks_slot {
  bool active;
  uint32_t iterations;
  uint8_t salt[LUKS_SALT_SIZE];
  uint32_t key_material_offset;         /* in sectors */
  uint32_t stripes;
};

enum luks_ivgen {
  LUKS_IVGEN_NONE,              /* ecb: no IV */
  LUKS_IVGEN_PLAIN,             /* sector number, low 32 bits, LE */
  LUKS_IVGEN_PLAIN64,           /* sector number, 64 bits, LE */
  LUKS_IVGEN_ESSIV,             /* plain64 encrypted with hash(key) */
};

struct luks_disk {
  /* The header as read, to recognise the same disk again. */
  uint8_t raw[LUKS_HEADER_SIZE];

  /* Fields of the header. */
  char cipher_name[LUKS_NAME_SIZE + 1];
  char cipher_mode[LUKS_NAME_SIZE + 1];
  char hash_spec[LUKS_NAME_SIZE + 1];
  uint32_t payload_offset;              /* in sectors */
  uint32_t key_bytes;
  uint8_t mk_digest[LUKS_DIGEST_SIZE];
  uint8_t mk_digest_salt[LUKS_SALT_SIZE];
  uint32_t mk_digest_iter;
  struct luks_slot slots[LUKS_NR_SLOTS];

  /* What those names mean to gnutls. */
  gnutls_cipher_algorithm_t cipher;     /* the payload cipher (CBC or XTS) */
  bool ecb;                             /* cipher is CBC used block by block */
  bool ctr;                             /* CTR made from ECB blocks */
  enum luks_ivgen ivgen;
  gnutls_digest_algorithm_t essiv_hash; /* with LUKS_IVGEN_ESSIV */
  gnutls_cipher_algorithm_t essiv_cipher;
  gnutls_mac_algorithm_t hash;          /* PBKDF2 and the AF merge */

  /* Set by luks_unlock. */
  bool unlocked;
  uint8_t master_key[LUKS_MAX_KEY_BYTES];
};

/* luks-header.c: parse the LUKS_HEADER_SIZE bytes at BUF of a disk of
 * DISK_SIZE bytes into D, checking every field against the disk.
 * Returns -1 after nbdkit_error on anything wrong or unsupported.
 */
extern int luks_parse_header (const uint8_t *buf, int64_t disk_size,
                              struct luks_disk *d);

/* luks-keys.c: find the key slot that PASSPHRASE opens, reading its
 * key material through NEXT, and set D's master key.  Returns -1 after
 * nbdkit_error if no slot opens or on I/O errors.
 */
extern int luks_unlock (nbdkit_next *next, struct luks_disk *d,
                        const char *passphrase);

/* luks-crypt.c: a cipher keyed for one request. */
struct luks_crypt {
  const struct luks_disk *d;
  gnutls_cipher_hd_t cipher;
  gnutls_cipher_hd_t essiv;             /* NULL unless ESSIV */
  size_t iv_size;
};

/* Key C with KEY (d->key_bytes bytes): the master key for the payload,
 * a slot's derived key for its key material.  Returns -1 after
 * nbdkit_error.  luks_crypt_free frees what init made.
 */
extern int luks_crypt_init (struct luks_crypt *c, const struct luks_disk *d,
                            const uint8_t *key);
extern void luks_crypt_free (struct luks_crypt *c);

/* Encrypt (or decrypt) NR_SECTORS sectors from IN into OUT (which may
 * be IN), the first being sector number SECTOR for the IVs.  Returns
 * -1 after nbdkit_error.
 */
extern int luks_crypt_sectors (struct luks_crypt *c, bool encrypt,
                               const void *in, void *out, uint64_t sector,
                               size_t nr_sectors);

#endif /* NBDKIT_LUKS_DISK_H */
