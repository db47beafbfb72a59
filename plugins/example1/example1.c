/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* example1: the smallest useful plugin.  Start here.
 *
 * It serves a fixed, read-only 100 MiB disk out of memory.  The disk
 * looks like a PC hard disk holding one empty Linux partition: the first
 * sector is a master boot record (a little boot code, a disk signature,
 * one partition entry and the 0x55 0xAA boot signature); every other
 * byte is zero.
 *
 * A plugin is a table of callbacks (struct nbdkit_plugin, at the end of
 * this file) that the server calls.  This one fills in only the three
 * that a read-only disk cannot do without:
 *
 *   open      called once per client connection, returns a handle
 *   get_size  how big the disk is
 *   pread     copy COUNT bytes at OFFSET into BUF
 *
 * Everything else (writes, flush, trim, block status ...) is left NULL,
 * and the server then knows the plugin cannot do it: it tells the client
 * the disk is read-only and refuses write requests itself.
 *
 * The server checks each request against the size before calling
 * pread, so OFFSET + COUNT never passes DISK_SIZE here.
 *
 * The next step, example2, serves a file given on the command line.
 */
#include <config.h>

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

/* Say which version of the plugin API this file is written for, before
 * including the header.  Version 2 passes a FLAGS argument to the data
 * callbacks.
 */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define DISK_SIZE (UINT64_C (100) * 1024 * 1024)

/* The first sector.  Bytes not listed are zero. */
static unsigned char mbr[512] = {
  /* 0x000: boot code.  It sets up the stack and segments, copies
   * itself from 0x7c00 to 0x600, finds the partition entry marked
   * active (0x80), loads that partition's first sector to 0x7c00 with
   * the BIOS and jumps to it.  Our partition is not marked active and
   * holds nothing, so the code never gets that far on a real machine:
   * it is here to make the sector look like the real thing.
   */
  0xfa, 0xb8, 0x00, 0x10, 0x8e, 0xd0, 0xbc, 0x00,
  0xb0, 0xb8, 0x00, 0x00, 0x8e, 0xd8, 0x8e, 0xc0,
  0xfb, 0xbe, 0x00, 0x7c, 0xbf, 0x00, 0x06, 0xb9,
  0x00, 0x02, 0xf3, 0xa4, 0xea, 0x21, 0x06, 0x00,
  0x00, 0xbe, 0xbe, 0x07, 0x38, 0x04, 0x75, 0x0b,
  0x83, 0xc6, 0x10, 0x81, 0xfe, 0xfe, 0x07, 0x75,
  0xf3, 0xeb, 0x16, 0xb4, 0x02, 0xb0, 0x01, 0xbb,
  0x00, 0x7c, 0xb2, 0x80, 0x8a, 0x74, 0x01, 0x8b,
  0x4c, 0x02, 0xcd, 0x13, 0xea, 0x00, 0x7c, 0x00,
  0x00, 0xeb, 0xfe,

  /* 0x1b8: the 32-bit disk signature, little-endian (0x00025be1),
   * then two reserved bytes.
   */
  [0x1b8] = 0xe1, 0x5b, 0x02, 0x00, 0x00, 0x00,

  /* 0x1be: partition entry 1 of 4, 16 bytes: status 0 (not bootable),
   * first sector in CHS form (0/2/3), type 0x83 (Linux), last sector
   * in CHS form, then the first sector as an LBA (128, i.e. 64 KiB in)
   * and the number of sectors (204545), both 32-bit little-endian.
   * Entries 2 to 4 are zero: unused.
   */
  [0x1be] = 0x00, 0x02, 0x03, 0x00, 0x83, 0xbc, 0x31, 0x0c,
  0x80, 0x00, 0x00, 0x00, 0x01, 0x1f, 0x03, 0x00,

  /* 0x1fe: the signature that marks a valid boot sector. */
  [0x1fe] = 0x55, 0xaa,
};

/* load is called once, when the plugin is loaded, before any
 * configuration.  Here it only shows where one-time set-up would go:
 * the disk needs none, because everything is in the table above.
 */
static void
example1_load (void)
{
  nbdkit_debug ("example1 loaded: a %" PRIu64 " byte disk", DISK_SIZE);
}

/* open is called for each new client.  The handle it returns is passed
 * back to every other callback for that client.  A disk that is the
 * same for every client needs no per-client state, hence
 * NBDKIT_HANDLE_NOT_NEEDED (any non-NULL pointer would do; NULL means
 * failure).  READONLY is true when the client or -r asked for a
 * read-only connection; without a pwrite callback we are read-only
 * anyway.
 */
static void *
example1_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
example1_get_size (void *handle)
{
  return DISK_SIZE;
}

/* Fill BUF with the disk's bytes from OFFSET to OFFSET + COUNT: the
 * part that falls in the first sector comes from the table, the rest
 * is zero.  Return 0 on success (or -1 after calling nbdkit_error, but
 * this cannot fail).
 */
static int
example1_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  memset (buf, 0, count);
  if (offset < sizeof mbr) {
    size_t n = sizeof mbr - offset;

    if (n > count)
      n = count;
    memcpy (buf, mbr + offset, n);
  }
  return 0;
}

/* The thread model says how many requests the server may send at once.
 * This is the most cautious one: one request at a time, across all
 * clients.  It is always safe, so simple plugins start with it; pread
 * above would in fact be safe in parallel since it only reads.
 */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

/* The plugin's table: its name (what users type after "nbdkit") and its
 * callbacks.  NBDKIT_REGISTER_PLUGIN makes the entry point the server
 * looks up when it loads the .so.
 */
static struct nbdkit_plugin plugin = {
  .name              = "example1",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit example1 plugin",
  .description       = "A fixed 100M read-only disk with one partition",
  .load              = example1_load,
  .open              = example1_open,
  .get_size          = example1_get_size,
  .pread             = example1_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
