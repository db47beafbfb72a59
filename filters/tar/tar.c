/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tar filter: serve one member (tar-entry=) of an uncompressed tar
 * archive that the layer below holds, as if it were the whole disk.
 *
 * The member is found once, by the first connection's .prepare, by
 * walking the archive's headers through the layer below (tar_find):
 * POSIX ustar and pax (extended 'x' headers with path= and size=),
 * GNU (long names in 'L' headers, base-256 sizes) and old v7 headers.
 * Every header's checksum, number and length is checked, and nothing
 * is read beyond the end of the archive or the tar-limit= bound, so a
 * hostile or truncated archive fails with an error, never a crash.
 * Afterwards each request is shifted by the member's data offset,
 * like the offset filter; writes stay inside the member.
 *
 * Locks: find_lock protects the search and its result (found, entry
 * offset and size); a handle copies the result under it in .prepare
 * and reads only its copy afterwards.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>
#include <nbdkit-probe.h>

#include "checked-overflow.h"
#include "cleanup.h"
#include "cleanup-extents.h"
#include "rounding.h"

#define BLOCK 512

/* Long names and extended headers bigger than this are refused. */
#define MAX_EXTENSION (1024 * 1024)

/* Parameters, set by .config and read-only afterwards. */
static char *entry;             /* tar-entry= */
static uint64_t tar_limit;      /* tar-limit=, 0 for none */

static pthread_mutex_t find_lock = PTHREAD_MUTEX_INITIALIZER;
static bool found;
static uint64_t entry_offset, entry_size;

struct handle {
  uint64_t offset, size;        /* the member's data in the archive */
};

static void
tar_unload (void)
{
  free (entry);
}

static int
tar_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  if (strcmp (key, "tar-entry") == 0) {
    if (entry) {
      nbdkit_error ("tar-entry: only one tar-entry parameter can be given");
      return -1;
    }
    if (value[0] == '\0') {
      nbdkit_error ("tar-entry: the name must not be empty");
      return -1;
    }
    entry = strdup (value);
    if (entry == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "tar") == 0) {
    /* nbdkit 1.32 ran GNU tar to list the archive; headers are read
     * here directly, so the program is not needed.
     */
    nbdkit_debug ("tar: tar=%s is ignored: no tar program is run", value);
    return 0;
  }
  if (strcmp (key, "tar-limit") == 0) {
    int64_t r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    tar_limit = r;
    return 0;
  }
  return next (nxdata, key, value);
}

static int
tar_config_complete (nbdkit_next_config_complete *next,
                     nbdkit_backend *nxdata)
{
  if (entry == NULL) {
    nbdkit_error ("tar-entry: you must supply the tar-entry=<FILENAME> "
                  "parameter");
    return -1;
  }
  return next (nxdata);
}

#define tar_config_help \
  "tar-entry=<FILENAME>  (required) The member of the archive to serve.\n" \
  "tar-limit=<SIZE>      Read at most SIZE bytes looking for it (0: any)."

/* ---- reading the archive ---- */

/* The layout shared by ustar, GNU and v7 headers, as far as used. */
struct header {
  char name[100];
  char mode[8];
  char uid[8];
  char gid[8];
  char size[12];
  char mtime[12];
  char chksum[8];
  char typeflag;
  char linkname[100];
  char magic[6];                /* "ustar\0" POSIX, "ustar " GNU */
  char version[2];
  char uname[32];
  char gname[32];
  char devmajor[8];
  char devminor[8];
  char prefix[155];             /* POSIX only; GNU keeps other data here */
  char pad[12];
};
_Static_assert (sizeof (struct header) == BLOCK, "tar header size");

/* GNU sparse headers ('S') say at this byte whether extension blocks
 * follow, and each extension block says so at ISEXTENDED_EXT.
 */
#define ISEXTENDED_GNU 482
#define ISEXTENDED_EXT 504

/* What the walk has learnt about the archive. */
struct walk {
  nbdkit_next *next;
  uint64_t archive_size;
  uint64_t limit;               /* read nothing at or beyond this */
};

/* Read [offset, offset+len) of the archive, refusing to go past its
 * end or the tar-limit.
 */
static int
read_archive (struct walk *w, void *buf, uint32_t len, uint64_t offset,
              const char *what)
{
  uint64_t end;
  int err;

  if (ADD_OVERFLOW (offset, (uint64_t) len, &end) ||
      end > w->archive_size) {
    nbdkit_error ("tar: %s at offset %" PRIu64 " is beyond the end of the "
                  "archive (truncated?)", what, offset);
    return -1;
  }
  if (end > w->limit) {
    nbdkit_error ("tar: tar-entry %s not found in the first %" PRIu64
                  " bytes of the archive (tar-limit)", entry, w->limit);
    return -1;
  }
  if (w->next->pread (w->next, buf, len, offset, 0, &err) == -1) {
    errno = err;
    nbdkit_error ("tar: reading the archive at %" PRIu64 ": %m", offset);
    return -1;
  }
  return 0;
}

/* A numeric header field: octal digits, optionally led by spaces and
 * ended by NUL or space; or GNU's base-256 (high bit of the first byte
 * set, positive only).  At most INT64_MAX.
 */
static int
parse_number (const char *field, size_t len, uint64_t *out)
{
  const unsigned char *p = (const unsigned char *) field;
  uint64_t v = 0;
  size_t i = 0;

  if (p[0] & 0x80) {
    if (p[0] != 0x80)
      return -1;                /* negative, or too big */
    for (i = 1; i < len; i++) {
      if (v > (INT64_MAX >> 8))
        return -1;
      v = (v << 8) | p[i];
    }
    *out = v;
    return 0;
  }
  while (i < len && p[i] == ' ')
    i++;
  if (i == len || p[i] < '0' || p[i] > '7')
    return -1;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; i++) {
    if (v > (INT64_MAX >> 3))
      return -1;
    v = (v << 3) | (p[i] - '0');
  }
  /* What follows the digits may only be NULs and spaces. */
  for (; i < len; i++)
    if (p[i] != ' ' && p[i] != '\0')
      return -1;
  *out = v;
  return 0;
}

static bool
checksum_ok (const struct header *h)
{
  const unsigned char *u = (const unsigned char *) h;
  const signed char *s = (const signed char *) h;
  const size_t ck = offsetof (struct header, chksum);
  uint64_t want;
  int64_t usum = 0, ssum = 0;

  if (parse_number (h->chksum, sizeof h->chksum, &want) == -1)
    return false;
  for (size_t i = 0; i < BLOCK; i++) {
    bool in_field = i >= ck && i < ck + sizeof h->chksum;
    usum += in_field ? ' ' : u[i];
    ssum += in_field ? ' ' : s[i];
  }
  /* Some old tars summed signed chars; GNU tar accepts both. */
  return (int64_t) want == usum || (int64_t) want == ssum;
}

static bool
all_zero (const void *buf, size_t len)
{
  const unsigned char *p = buf;
  for (size_t i = 0; i < len; i++)
    if (p[i])
      return false;
  return true;
}

/* Extended information for the next real header. */
struct pending {
  char *name;                   /* from 'L' or pax path=, or NULL */
  bool have_size;               /* pax size= */
  uint64_t size;
  bool sparse;                  /* pax GNU.sparse.* */
};

static void
pending_clear (struct pending *p)
{
  free (p->name);
  *p = (struct pending) { .name = NULL };
}

static int
set_name (struct pending *p, const char *s, size_t len)
{
  char *name = strndup (s, len);
  if (name == NULL) {
    nbdkit_error ("strndup: %m");
    return -1;
  }
  free (p->name);
  p->name = name;
  return 0;
}

/* Parse pax records "LEN KEY=VALUE\n" in DATA[0..len). */
static int
parse_pax (const char *data, size_t len, uint64_t offset, struct pending *p)
{
  size_t i = 0;

  while (i < len) {
    const char *rec = &data[i];
    size_t avail = len - i, reclen = 0, j = 0;
    const char *key, *eq, *value, *end;

    /* A zero byte ends the records (GNU tar pads this way). */
    if (rec[0] == '\0' && all_zero (rec, avail))
      break;
    while (j < avail && rec[j] >= '0' && rec[j] <= '9' && j < 8) {
      reclen = reclen * 10 + (rec[j] - '0');
      j++;
    }
    if (j == 0 || j >= avail || rec[j] != ' ' || reclen > avail ||
        reclen < j + 4 || rec[reclen - 1] != '\n')
      goto bad;
    key = &rec[j + 1];
    end = &rec[reclen - 1];
    eq = memchr (key, '=', end - key);
    if (eq == NULL || eq == key || memchr (key, '\0', end - key))
      goto bad;
    value = eq + 1;

#define KEY_IS(k) ((size_t) (eq - key) == strlen (k) && \
                   memcmp (key, k, strlen (k)) == 0)
    if (KEY_IS ("path") || KEY_IS ("GNU.sparse.name")) {
      if (KEY_IS ("GNU.sparse.name"))
        p->sparse = true;
      if (value < end && set_name (p, value, end - value) == -1)
        return -1;
    }
    else if (KEY_IS ("size")) {
      uint64_t v = 0;
      const char *q;
      if (value == end)
        goto bad;
      for (q = value; q < end; q++) {
        if (*q < '0' || *q > '9' || v > (INT64_MAX - 9) / 10)
          goto bad;
        v = v * 10 + (*q - '0');
      }
      p->have_size = true;
      p->size = v;
    }
    else if ((size_t) (eq - key) > 11 && memcmp (key, "GNU.sparse.", 11) == 0)
      p->sparse = true;
#undef KEY_IS
    i += reclen;
  }
  return 0;

 bad:
  nbdkit_error ("tar: bad pax extended header record in the header at "
                "offset %" PRIu64, offset);
  return -1;
}

/* Read the LEN bytes of an extension header's data at OFFSET. */
static char *
read_extension (struct walk *w, uint64_t len, uint64_t offset,
                const char *what)
{
  char *data;

  if (len > MAX_EXTENSION) {
    nbdkit_error ("tar: %s at offset %" PRIu64 " is too large (%" PRIu64
                  " bytes)", what, offset, len);
    return NULL;
  }
  data = malloc (len + 1);
  if (data == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  if (read_archive (w, data, len, offset, what) == -1) {
    free (data);
    return NULL;
  }
  data[len] = '\0';
  return data;
}

/* The name a POSIX ustar header gives, prefix and all. */
static int
header_name (const struct header *h, struct pending *p)
{
  size_t nlen = strnlen (h->name, sizeof h->name);
  size_t plen = 0;

  if (memcmp (h->magic, "ustar\0", 6) == 0)
    plen = strnlen (h->prefix, sizeof h->prefix);
  if (plen == 0)
    return set_name (p, h->name, nlen);

  char *name = malloc (plen + 1 + nlen + 1);
  if (name == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  memcpy (name, h->prefix, plen);
  name[plen] = '/';
  memcpy (name + plen + 1, h->name, nlen);
  name[plen + 1 + nlen] = '\0';
  free (p->name);
  p->name = name;
  return 0;
}

/* Walk the headers until the member named ENTRY; set *offset and
 * *size to its data.
 */
static int
tar_find (nbdkit_next *next, uint64_t *offset_r, uint64_t *size_r)
{
  struct walk w = { .next = next };
  struct pending p = { .name = NULL };
  uint64_t offset = 0;
  int64_t r;
  int ret = -1;

  r = next->get_size (next);
  if (r == -1)
    return -1;
  w.archive_size = r;
  w.limit = tar_limit ? tar_limit : UINT64_MAX;

  for (;;) {
    struct header h;
    uint64_t size, data_offset, next_offset;

    if (offset == w.archive_size) {
      nbdkit_error ("tar: tar-entry %s not found: the archive ends without "
                    "an end-of-archive block", entry);
      goto out;
    }
    if (read_archive (&w, &h, BLOCK, offset, "header") == -1)
      goto out;
    if (all_zero (&h, BLOCK)) {
      nbdkit_error ("tar: tar-entry %s not found in the archive "
                    "(check the name with tar tf)", entry);
      goto out;
    }
    if (!checksum_ok (&h)) {
      if (offset == 0)
        nbdkit_error ("tar: not a tar archive (bad header checksum at "
                      "offset 0)");
      else
        nbdkit_error ("tar: bad header checksum at offset %" PRIu64,
                      offset);
      goto out;
    }
    if (parse_number (h.size, sizeof h.size, &size) == -1) {
      nbdkit_error ("tar: bad size field in the header at offset %" PRIu64,
                    offset);
      goto out;
    }
    data_offset = offset + BLOCK;

    /* GNU sparse headers may be followed by extension blocks. */
    if (h.typeflag == 'S') {
      unsigned char ext[BLOCK];
      bool more = ((unsigned char *) &h)[ISEXTENDED_GNU] != 0;
      while (more) {
        if (read_archive (&w, ext, BLOCK, data_offset,
                          "sparse extension header") == -1)
          goto out;
        data_offset += BLOCK;
        more = ext[ISEXTENDED_EXT] != 0;
      }
    }

    switch (h.typeflag) {
    case 'L':                   /* GNU long name for the next header */
    case 'x': {                 /* pax extended header for the next */
      CLEANUP_FREE char *data =
        read_extension (&w, size, data_offset,
                        h.typeflag == 'L' ? "long name" : "pax header");
      if (data == NULL)
        goto out;
      if (h.typeflag == 'L') {
        size_t len = strnlen (data, size);
        if (len == 0) {
          nbdkit_error ("tar: empty long name at offset %" PRIu64, offset);
          goto out;
        }
        if (set_name (&p, data, len) == -1)
          goto out;
      }
      else if (parse_pax (data, size, offset, &p) == -1)
        goto out;
      break;
    }

    case 'K':                   /* GNU long link name */
    case 'g':                   /* pax global header */
      /* Nothing in them changes where members are; their data is
       * skipped like any other.
       */
      break;

    default: {
      bool no_data = h.typeflag == '1' || h.typeflag == '2' ||
        h.typeflag == '5';
      bool regular = h.typeflag == '0' || h.typeflag == '\0' ||
        h.typeflag == '7';

      if (p.have_size)
        size = p.size;
      if (no_data)
        size = 0;
      if (p.name == NULL && header_name (&h, &p) == -1)
        goto out;

      if (strcmp (p.name, entry) == 0) {
        uint64_t end;
        if (p.sparse || h.typeflag == 'S') {
          nbdkit_error ("tar: tar-entry %s is a sparse file, which this "
                        "filter cannot serve", entry);
          goto out;
        }
        if (!regular) {
          nbdkit_error ("tar: tar-entry %s is not a regular file "
                        "(type '%c')", entry,
                        h.typeflag >= 0x20 && h.typeflag < 0x7f ?
                        h.typeflag : '?');
          goto out;
        }
        if (ADD_OVERFLOW (data_offset, size, &end) ||
            end > w.archive_size) {
          nbdkit_error ("tar: tar-entry %s extends beyond the end of the "
                        "archive (truncated?)", entry);
          goto out;
        }
        *offset_r = data_offset;
        *size_r = size;
        ret = 0;
        goto out;
      }
      pending_clear (&p);
      break;
    }
    }

    /* On to the next header, after this one's data. */
    if (size > INT64_MAX - (BLOCK - 1) ||
        ADD_OVERFLOW (data_offset, ROUND_UP (size, BLOCK), &next_offset) ||
        next_offset > w.archive_size) {
      nbdkit_error ("tar: the member at offset %" PRIu64 " extends beyond "
                    "the end of the archive (truncated?)", offset);
      goto out;
    }
    offset = next_offset;
  }

 out:
  pending_clear (&p);
  return ret;
}

/* ---- serving the member ---- */

static void *
tar_open (nbdkit_next_open *next, nbdkit_context *context,
          int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (next (context, readonly, exportname) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  return h;
}

static void
tar_close (void *handle)
{
  free (handle);
}

static int
tar_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  LOCK_FOR_SCOPE (&find_lock);

  if (!found) {
    if (tar_find (next, &entry_offset, &entry_size) == -1)
      return -1;
    found = true;
    {
      /* Globals would be passed to the probe as %rip-relative memory
       * operands, which tracers cannot read in a shared object: hand
       * it registers instead.
       */
      uint64_t off = entry_offset, size = entry_size;
      const char *name = entry;
      __asm__ ("" : "+r" (off), "+r" (size), "+r" (name));
      NBDKIT_PROBE (tar_entry_found, off, size, name);
    }
    nbdkit_debug ("tar: %s found at offset %" PRIu64 ", size %" PRIu64,
                  entry, entry_offset, entry_size);
  }
  h->offset = entry_offset;
  h->size = entry_size;
  return 0;
}

static int64_t
tar_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  int64_t size = next->get_size (next);

  if (size == -1)
    return -1;
  if ((uint64_t) size < h->offset || (uint64_t) size - h->offset < h->size) {
    nbdkit_error ("tar: the archive shrank: tar-entry %s no longer fits",
                  entry);
    return -1;
  }
  return h->size;
}

static int
tar_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
           uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->pread (next, buf, count, offs + h->offset, flags, err);
}

static int
tar_pwrite (nbdkit_next *next, void *handle, const void *buf,
            uint32_t count, uint64_t offs, uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->pwrite (next, buf, count, offs + h->offset, flags, err);
}

static int
tar_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offs,
          uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->trim (next, count, offs + h->offset, flags, err);
}

static int
tar_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offs,
          uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->zero (next, count, offs + h->offset, flags, err);
}

static int
tar_cache (nbdkit_next *next, void *handle, uint32_t count, uint64_t offs,
           uint32_t flags, int *err)
{
  struct handle *h = handle;
  return next->cache (next, count, offs + h->offset, flags, err);
}

static int
tar_extents (nbdkit_next *next, void *handle, uint32_t count,
             uint64_t offs, uint32_t flags,
             struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  CLEANUP_EXTENTS_FREE struct nbdkit_extents *below =
    nbdkit_extents_new (offs + h->offset, h->offset + h->size);

  if (below == NULL) {
    *err = errno;
    return -1;
  }
  if (next->extents (next, count, offs + h->offset, flags, below,
                     err) == -1)
    return -1;
  for (size_t i = 0; i < nbdkit_extents_count (below); i++) {
    struct nbdkit_extent e = nbdkit_get_extent (below, i);
    if (nbdkit_add_extent (extents, e.offset - h->offset, e.length,
                           e.type) == -1) {
      *err = errno;
      return -1;
    }
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "tar",
  .longname = "nbdkit tar filter",
  .unload = tar_unload,
  .config = tar_config,
  .config_complete = tar_config_complete,
  .config_help = tar_config_help,
  .open = tar_open,
  .close = tar_close,
  .prepare = tar_prepare,
  .get_size = tar_get_size,
  .pread = tar_pread,
  .pwrite = tar_pwrite,
  .trim = tar_trim,
  .zero = tar_zero,
  .cache = tar_cache,
  .extents = tar_extents,
};

NBDKIT_REGISTER_FILTER (filter)
