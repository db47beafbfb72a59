/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The bzip2 filter: serve the uncompressed content of a bzip2 file,
 * read-only.
 *
 * bzip2 data can only be decompressed from the start of a stream, so,
 * as the gzip filter does, the first connection to get past .prepare
 * decompresses the whole file, read from the layer below, into an
 * unlinked temporary file under $TMPDIR (default /var/tmp).  Every
 * connection then reads that file with pread and never reads the layer
 * below again.  Bad input (not bzip2, corrupt, truncated, or larger
 * than bzip2-max-size) fails that .prepare with a clear error, and the
 * next connection tries again.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bzlib.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "filestore.h"
#include "full-rw.h"
#include "minmax.h"

/* Compressed data is read from below IN_CHUNK bytes at a time; the
 * decompressed data is written out OUT_CHUNK bytes at a time.
 */
#define IN_CHUNK (256 * 1024)
#define OUT_CHUNK (1024 * 1024)

/* A bzip2 stream starts "BZh" and a block size digit '1'..'9'. */
#define MAGIC_LEN 4

/* The decompressed content.  LOCK serialises the one decompression;
 * once SIZE is set (>= 0) FD and SIZE never change until .unload, so
 * readers take no lock.  SIZE is written last, under the lock, with a
 * release store and read with an acquire load.
 */
struct content {
  pthread_mutex_t lock;
  int fd;
  int64_t size;                 /* -1 until decompressed */
};
static struct content store = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .size = -1,
};

/* bzip2-max-size=: the largest uncompressed size accepted, or -1 for
 * no limit.  Set by .config, read-only afterwards.
 */
static int64_t max_size = -1;

static void
bzip2_unload (void)
{
  if (store.fd >= 0)
    close (store.fd);
}

static int
bzip2_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
              const char *key, const char *value)
{
  if (strcmp (key, "bzip2-max-size") == 0) {
    max_size = nbdkit_parse_size (value);
    return max_size == -1 ? -1 : 0;
  }
  return next (nxdata, key, value);
}

#define bzip2_config_help \
  "bzip2-max-size=<SIZE> Refuse content that decompresses to more than SIZE."

/* The layer below is only ever read. */
static void *
bzip2_open (nbdkit_next_open *next, nbdkit_context *context,
            int readonly, const char *exportname, int is_tls)
{
  if (next (context, 1, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static bool
is_bzip2_magic (const char *buf, size_t len)
{
  return len >= MAGIC_LEN && memcmp (buf, "BZh", 3) == 0 &&
    buf[3] >= '1' && buf[3] <= '9';
}

static const char *
bz_message (int r)
{
  switch (r) {
  case BZ_DATA_ERROR_MAGIC: return "not bzip2 data (bad magic)";
  case BZ_DATA_ERROR: return "the bzip2 data is corrupt (bad block or CRC)";
  case BZ_MEM_ERROR: return "out of memory";
  case BZ_PARAM_ERROR: return "bad parameters";
  default: return "internal libbz2 error";
  }
}

/* The compressed input: a window of IN_CHUNK bytes over the layer
 * below, refilled on demand.
 */
struct input {
  nbdkit_next *next;
  int64_t size;                 /* of the layer below */
  int64_t offset;               /* next byte to read from below */
  char *buf;
};

/* Move the LEFT unconsumed bytes at *PTR to the start of the buffer
 * and read as much more as fits.  Returns the new number of bytes in
 * the buffer (unchanged at the end of the input), or -1.
 */
static int64_t
refill (struct input *in, const char *ptr, unsigned left)
{
  memmove (in->buf, ptr, left);
  uint32_t n = MIN ((int64_t) IN_CHUNK - left, in->size - in->offset);
  if (n > 0) {
    int err;
    if (in->next->pread (in->next, in->buf + left, n, in->offset, 0,
                         &err) == -1) {
      errno = err;
      nbdkit_error ("reading the compressed data at %" PRIi64 ": %m",
                    in->offset);
      return -1;
    }
    in->offset += n;
  }
  return left + n;
}

/* Decompress everything the layer below holds into FD.  Returns the
 * uncompressed size, or -1 after reporting why.  Several bzip2 streams
 * one after the other (cat a.bz2 b.bz2, or pbzip2's output) are
 * decompressed in turn, as bzip2 -d does; bytes after the last stream
 * that do not start another one are ignored with a debug message, also
 * as bzip2 -d does.
 */
static int64_t
decompress_all (nbdkit_next *next, int fd, int64_t *compressed,
                int64_t *streams)
{
  struct input in = { .next = next, .offset = 0 };
  in.size = next->get_size (next);
  if (in.size == -1)
    return -1;

  CLEANUP_FREE char *inbuf = malloc (IN_CHUNK);
  CLEANUP_FREE char *out = malloc (OUT_CHUNK);
  if (inbuf == NULL || out == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  in.buf = inbuf;

  bz_stream strm = { 0 };
  bool open = false;            /* strm is initialised */
  int64_t consumed = 0;         /* bytes of bzip2 streams decompressed */
  int64_t out_size = 0;
  int64_t r = -1;
  *streams = 0;

  strm.next_in = in.buf;
  strm.avail_in = 0;
  for (;;) {
    if (!open) {
      /* At the start of the file or between streams: make sure the
       * whole magic is in the buffer, then another stream or the end.
       */
      if (strm.avail_in < MAGIC_LEN) {
        int64_t n = refill (&in, strm.next_in, strm.avail_in);
        if (n == -1)
          goto out;
        strm.next_in = in.buf;
        strm.avail_in = n;
      }
      if (!is_bzip2_magic (strm.next_in, strm.avail_in)) {
        if (*streams == 0) {
          nbdkit_error ("%s", strm.avail_in < MAGIC_LEN
                        ? "the compressed data ends before the end of "
                          "the bzip2 stream (truncated file?)"
                        : bz_message (BZ_DATA_ERROR_MAGIC));
          goto out;
        }
        nbdkit_debug ("ignoring %" PRIi64 " bytes after the last "
                      "bzip2 stream", in.size - consumed);
        break;
      }
      int br = BZ2_bzDecompressInit (&strm, 0, 0);
      if (br != BZ_OK) {
        nbdkit_error ("BZ2_bzDecompressInit: %s", bz_message (br));
        goto out;
      }
      open = true;
      ++*streams;
    }

    if (strm.avail_in == 0) {
      int64_t n = refill (&in, strm.next_in, 0);
      if (n == -1)
        goto out;
      strm.next_in = in.buf;
      strm.avail_in = n;
    }

    unsigned avail_before = strm.avail_in;
    strm.next_out = out;
    strm.avail_out = OUT_CHUNK;
    int br = BZ2_bzDecompress (&strm);
    consumed += avail_before - strm.avail_in;
    size_t produced = OUT_CHUNK - strm.avail_out;

    if (br != BZ_OK && br != BZ_STREAM_END) {
      nbdkit_error ("%s (bzip2 stream %" PRIi64 ", compressed byte "
                    "%" PRIi64 ")", bz_message (br), *streams, consumed);
      goto out;
    }
    if (produced > 0) {
      int64_t end;
      if (ADD_OVERFLOW (out_size, (int64_t) produced, &end)) {
        nbdkit_error ("the uncompressed data is too large");
        goto out;
      }
      if (max_size >= 0 && end > max_size) {
        nbdkit_error ("the uncompressed data is larger than "
                      "bzip2-max-size=%" PRIi64, max_size);
        goto out;
      }
      if (full_pwrite (fd, out, produced, out_size) == -1) {
        nbdkit_error ("writing the temporary file: %m");
        goto out;
      }
      out_size = end;
    }
    if (br == BZ_STREAM_END) {
      BZ2_bzDecompressEnd (&strm);
      open = false;
      continue;
    }
    /* Input used up, nothing more below, no output: cut short. */
    if (strm.avail_in == 0 && in.offset >= in.size && produced == 0) {
      nbdkit_error ("the compressed data ends before the end of "
                    "the bzip2 stream (truncated file?)");
      goto out;
    }
  }

  *compressed = consumed;
  r = out_size;
 out:
  if (open)
    BZ2_bzDecompressEnd (&strm);
  return r;
}

/* The first connection decompresses; later ones find it done. */
static int
bzip2_prepare (nbdkit_next *next, void *handle, int readonly)
{
  if (__atomic_load_n (&store.size, __ATOMIC_ACQUIRE) >= 0)
    return 0;

  LOCK_FOR_SCOPE (&store.lock);
  if (store.size >= 0)
    return 0;

  /* An unnamed file under $TMPDIR holds the decompressed content. */
  int fd = filestore_unnamed_fd ();
  if (fd == -1) {
    nbdkit_error ("cannot create a temporary file in %s (set TMPDIR?): %m",
                  filestore_dir ());
    return -1;
  }
  int64_t compressed = 0, streams = 0;
  int64_t size = decompress_all (next, fd, &compressed, &streams);
  if (size == -1) {
    close (fd);
    return -1;
  }
  nbdkit_debug ("%" PRIi64 " compressed bytes in %" PRIi64 " streams "
                "decompressed to %" PRIi64, compressed, streams, size);
  NBDKIT_PROBE (bzip2_decompressed, compressed, size, streams);
  store.fd = fd;
  __atomic_store_n (&store.size, size, __ATOMIC_RELEASE);
  return 0;
}

static int64_t
bzip2_get_size (nbdkit_next *next, void *handle)
{
  return __atomic_load_n (&store.size, __ATOMIC_ACQUIRE);
}

static int
bzip2_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

/* The layer below's holes are the compressed file's, not ours. */
static int
bzip2_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

/* The content never changes, so every connection sees the same. */
static int
bzip2_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

/* The content is local already: the server turns cache into reads. */
static int
bzip2_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

static int
bzip2_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
             uint64_t offset, uint32_t flags, int *err)
{
  ssize_t n = full_pread (store.fd, buf, count, offset);
  if (n == -1) {
    *err = errno;
    nbdkit_error ("pread: %m");
    return -1;
  }
  if ((size_t) n < count) {
    /* The server checked the range against the size, so the
     * temporary file shrank under us.
     */
    *err = EIO;
    nbdkit_error ("the temporary file is shorter than expected");
    return -1;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "bzip2",
  .longname = "nbdkit bzip2 filter",
  .unload = bzip2_unload,
  .config = bzip2_config,
  .config_help = bzip2_config_help,
  .open = bzip2_open,
  .prepare = bzip2_prepare,
  .get_size = bzip2_get_size,
  .can_write = bzip2_can_write,
  .can_extents = bzip2_can_extents,
  .can_multi_conn = bzip2_can_multi_conn,
  .can_cache = bzip2_can_cache,
  .pread = bzip2_pread,
};

NBDKIT_REGISTER_FILTER (filter)
