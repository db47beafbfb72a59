/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The gzip filter: serve the uncompressed content of a gzip file,
 * read-only.
 *
 * A gzip stream cannot be read at an arbitrary offset, so the first
 * connection to get past .prepare inflates the whole file, read from
 * the layer below, into an unlinked temporary file under $TMPDIR
 * (default /var/tmp).  From then on every connection reads that file
 * with pread and never touches the layer below for data.  Bad input
 * (not gzip, corrupt, truncated, or larger than gzip-max-size) fails
 * that .prepare with a clear error, and the next connection tries
 * again.
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

#include <zlib.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "filestore.h"
#include "full-rw.h"
#include "minmax.h"

/* How much compressed data is read from the layer below at a time,
 * and how much inflated data is produced between writes.
 */
#define IN_CHUNK (256 * 1024)
#define OUT_CHUNK (1024 * 1024)

/* The inflated content.  LOCK serialises the one inflation; once
 * SIZE is set (>= 0) FD and SIZE never change until .unload, so
 * readers take no lock.  SIZE is written last, under the lock, and
 * read with an acquire load.
 */
struct inflated {
  pthread_mutex_t lock;
  int fd;
  int64_t size;                 /* -1 until inflated */
};
static struct inflated store = {
  .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .size = -1,
};

/* gzip-max-size=: the largest uncompressed size accepted, or -1 for
 * no limit.  Set by .config, read-only afterwards.
 */
static int64_t max_size = -1;

static void
gzip_unload (void)
{
  if (store.fd >= 0)
    close (store.fd);
}

static int
gzip_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
             const char *key, const char *value)
{
  if (strcmp (key, "gzip-max-size") == 0) {
    max_size = nbdkit_parse_size (value);
    return max_size == -1 ? -1 : 0;
  }
  return next (nxdata, key, value);
}

#define gzip_config_help \
  "gzip-max-size=<SIZE>  Refuse content that inflates to more than SIZE."

/* The layer below is only ever read. */
static void *
gzip_open (nbdkit_next_open *next, nbdkit_context *context,
           int readonly, const char *exportname, int is_tls)
{
  if (next (context, 1, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* Does BUF (LEN bytes) start like another gzip member? */
static bool
is_gzip_magic (const unsigned char *buf, size_t len)
{
  return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

/* Inflate everything the layer below holds into FD.  Returns the
 * uncompressed size, or -1 after reporting why.  The gzip format
 * allows several members one after the other (as cat a.gz b.gz or
 * bgzip make): they are inflated in turn, as gzip -d does.  Bytes
 * after the last member that do not start another one are ignored
 * with a debug message, also as gzip -d does.
 */
static int64_t
inflate_all (nbdkit_next *next, int fd, int64_t *compressed)
{
  int64_t in_size = next->get_size (next);
  if (in_size == -1)
    return -1;

  CLEANUP_FREE unsigned char *in = malloc (IN_CHUNK);
  CLEANUP_FREE unsigned char *out = malloc (OUT_CHUNK);
  if (in == NULL || out == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }

  z_stream strm = { 0 };
  /* 16 + MAX_WBITS: a gzip header and trailer, nothing else. */
  if (inflateInit2 (&strm, 16 + MAX_WBITS) != Z_OK) {
    nbdkit_error ("inflateInit2: %s",
                  strm.msg ? strm.msg : "out of memory");
    return -1;
  }

  int64_t in_offset = 0;        /* next byte to read from below */
  int64_t consumed = 0;         /* bytes of gzip members inflated */
  int64_t out_size = 0;
  bool in_member = true;        /* inside a member, not between */
  int64_t r = -1;

  for (;;) {
    if (strm.avail_in == 0 && in_offset < in_size) {
      uint32_t n = MIN ((int64_t) IN_CHUNK, in_size - in_offset);
      int err;
      if (next->pread (next, in, n, in_offset, 0, &err) == -1) {
        errno = err;
        nbdkit_error ("reading the compressed data at %" PRIi64
                      ": %m", in_offset);
        goto out;
      }
      in_offset += n;
      strm.next_in = in;
      strm.avail_in = n;
    }

    if (!in_member) {
      /* Between members: another one, or the end. */
      if (strm.avail_in == 0)
        break;
      if (strm.avail_in == 1 && in_offset < in_size) {
        /* The magic may straddle two chunks: keep the byte. */
        memmove (in, strm.next_in, 1);
        uint32_t n = MIN ((int64_t) IN_CHUNK - 1, in_size - in_offset);
        int err;
        if (next->pread (next, in + 1, n, in_offset, 0, &err) == -1) {
          errno = err;
          nbdkit_error ("reading the compressed data at %" PRIi64
                        ": %m", in_offset);
          goto out;
        }
        in_offset += n;
        strm.next_in = in;
        strm.avail_in = n + 1;
      }
      if (!is_gzip_magic (strm.next_in, strm.avail_in)) {
        nbdkit_debug ("ignoring %" PRIi64 " bytes after the "
                      "last gzip member", in_size - consumed);
        break;
      }
      if (inflateReset (&strm) != Z_OK) {
        nbdkit_error ("inflateReset failed");
        goto out;
      }
      in_member = true;
    }

    unsigned avail_before = strm.avail_in;
    strm.next_out = out;
    strm.avail_out = OUT_CHUNK;
    int zr = inflate (&strm, Z_NO_FLUSH);
    consumed += avail_before - strm.avail_in;
    size_t produced = OUT_CHUNK - strm.avail_out;

    if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
      nbdkit_error ("the compressed data is not valid gzip "
                    "(at compressed byte %" PRIi64 "): %s",
                    consumed, strm.msg ? strm.msg : zError (zr));
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
                      "gzip-max-size=%" PRIi64, max_size);
        goto out;
      }
      if (full_pwrite (fd, out, produced, out_size) == -1) {
        nbdkit_error ("writing the temporary file: %m");
        goto out;
      }
      out_size = end;
    }
    if (zr == Z_STREAM_END) {
      in_member = false;
      continue;
    }
    /* No progress, nothing left to read: the stream was cut short. */
    if (strm.avail_in == 0 && in_offset >= in_size && produced == 0) {
      nbdkit_error ("the compressed data ends before the end of "
                    "the gzip stream (truncated file?)");
      goto out;
    }
    if (zr == Z_BUF_ERROR && strm.avail_in > 0 && produced == 0) {
      nbdkit_error ("inflate made no progress");
      goto out;
    }
  }

  *compressed = consumed;
  r = out_size;
 out:
  inflateEnd (&strm);
  return r;
}

/* The first connection inflates; later ones find it done. */
static int
gzip_prepare (nbdkit_next *next, void *handle, int readonly)
{
  if (__atomic_load_n (&store.size, __ATOMIC_ACQUIRE) >= 0)
    return 0;

  LOCK_FOR_SCOPE (&store.lock);
  if (store.size >= 0)
    return 0;

  /* An unnamed file under $TMPDIR holds the inflated content. */
  int fd = filestore_unnamed_fd ();
  if (fd == -1) {
    nbdkit_error ("cannot create a temporary file in %s (set TMPDIR?): %m",
                  filestore_dir ());
    return -1;
  }
  int64_t compressed = 0;
  int64_t size = inflate_all (next, fd, &compressed);
  if (size == -1) {
    close (fd);
    return -1;
  }
  nbdkit_debug ("%" PRIi64 " compressed bytes inflated to %" PRIi64,
                compressed, size);
  NBDKIT_PROBE (gzip_inflated, compressed, size);
  store.fd = fd;
  __atomic_store_n (&store.size, size, __ATOMIC_RELEASE);
  return 0;
}

static int64_t
gzip_get_size (nbdkit_next *next, void *handle)
{
  return __atomic_load_n (&store.size, __ATOMIC_ACQUIRE);
}

static int
gzip_can_write (nbdkit_next *next, void *handle)
{
  return 0;
}

/* What the layer below says about holes is about the compressed
 * file, not what we serve.
 */
static int
gzip_can_extents (nbdkit_next *next, void *handle)
{
  return 0;
}

/* The content never changes, so every connection sees the same. */
static int
gzip_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

/* The content is local already: the server turns cache into reads. */
static int
gzip_can_cache (nbdkit_next *next, void *handle)
{
  return NBDKIT_CACHE_EMULATE;
}

static int
gzip_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  ssize_t n = full_pread (store.fd, buf, count, offset);
  if (n == -1) {
    *err = errno;
    nbdkit_error ("pread: %m");
    return -1;
  }
  if ((size_t) n < count) {
    /* The server checked the range against the size, so the file
     * shrank under us.
     */
    *err = EIO;
    nbdkit_error ("the temporary file is shorter than expected");
    return -1;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "gzip",
  .longname = "nbdkit gzip filter",
  .unload = gzip_unload,
  .config = gzip_config,
  .config_help = gzip_config_help,
  .open = gzip_open,
  .prepare = gzip_prepare,
  .get_size = gzip_get_size,
  .can_write = gzip_can_write,
  .can_extents = gzip_can_extents,
  .can_multi_conn = gzip_can_multi_conn,
  .can_cache = gzip_can_cache,
  .pread = gzip_pread,
};

NBDKIT_REGISTER_FILTER (filter)
