/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The floppy plugin: one directory's FAT entries.
 *
 * A FAT directory is an array of 32 byte entries.  Each file or
 * subdirectory has one "short" entry holding an 8.3 upper-case name,
 * its attributes, timestamps, first cluster and size.  A name that is
 * not already a valid 8.3 name also gets "long file name" (VFAT LFN)
 * entries just before the short one: each carries 13 UTF-16 characters
 * of the real name, a sequence number and a checksum of the short name
 * that ties them to it.  The short name is made from the long one,
 * with a "~N" tail where that is needed to keep it unique in the
 * directory.
 *
 * vf_dir_make_entries writes the entries once the tree is scanned;
 * cluster numbers are not known yet, so it remembers where each short
 * entry is and vf_dir_set_clusters fills them in after layout.
 */
#include <config.h>

#include <errno.h>
#include <search.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-plugin.h>

#include "rounding.h"
#include "virtual-floppy.h"

/* Attribute bits of a directory entry. */
#define ATTR_READ_ONLY 0x01
#define ATTR_VOLUME_ID 0x08
#define ATTR_DIRECTORY 0x10
#define ATTR_ARCHIVE   0x20
#define ATTR_LFN       0x0f     /* read-only|hidden|system|volume */

/* Long name entries: 13 UTF-16 units each, at these byte offsets. */
#define LFN_CHARS 13
#define LFN_LAST  0x40          /* flag on the sequence number */
#define MAX_LFN   255           /* UTF-16 units in a long name */
static const uint8_t lfn_offsets[LFN_CHARS] = {
  1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30
};

/* --- timestamps ------------------------------------------------------- */

/* FAT stores local time: date = years since 1980, month, day; time =
 * hours, minutes, seconds / 2.  Times outside 1980 to 2107 are clamped.
 */
static void
dos_time (const struct timespec *ts, uint16_t *date, uint16_t *time,
          uint8_t *tenths)
{
  struct tm tm;
  time_t t = ts->tv_sec;

  if (localtime_r (&t, &tm) == NULL || tm.tm_year < 80) {
    *date = (0 << 9) | (1 << 5) | 1;    /* 1980-01-01 00:00:00 */
    *time = 0;
    *tenths = 0;
    return;
  }
  if (tm.tm_year > 207) {
    *date = (127 << 9) | (12 << 5) | 31;        /* 2107-12-31 23:59:58 */
    *time = (23 << 11) | (59 << 5) | 29;
    *tenths = 100;
    return;
  }
  *date = ((tm.tm_year - 80) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday;
  *time = (tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2);
  /* The creation time has 10 ms units for the odd second. */
  *tenths = (tm.tm_sec % 2) * 100 + ts->tv_nsec / 10000000;
}

/* --- names ------------------------------------------------------------ */

/* Decode the host name (UTF-8) into UTF-16 for the long name entries.
 * A byte that is not valid UTF-8 is taken as Latin-1, so that any name
 * survives and distinct names stay distinct.  -1 if the name is too
 * long for FAT or has a character FAT forbids.
 */
static int
to_utf16 (const char *name, uint16_t *out, size_t *len)
{
  const unsigned char *p = (const unsigned char *) name;
  size_t n = 0;

  while (*p) {
    uint32_t c = *p;
    size_t extra = 0;

    if (c >= 0xf0 && c <= 0xf4) { extra = 3; c &= 0x07; }
    else if (c >= 0xe0 && c <= 0xef) { extra = 2; c &= 0x0f; }
    else if (c >= 0xc2 && c <= 0xdf) { extra = 1; c &= 0x1f; }
    for (size_t i = 1; i <= extra; i++) {
      if ((p[i] & 0xc0) != 0x80) {
        extra = 0;              /* not UTF-8: the lead byte as Latin-1 */
        c = *p;
        break;
      }
      c = (c << 6) | (p[i] & 0x3f);
    }
    /* Overlong forms and surrogates are not valid UTF-8 either. */
    if ((extra == 2 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
        (extra == 3 && (c < 0x10000 || c > 0x10ffff))) {
      extra = 0;
      c = *p;
    }
    p += 1 + extra;

    if (c < 0x20 || (c < 0x80 && strchr ("\\/:*?\"<>|", c) != NULL))
      return -1;
    if (c >= 0x10000) {         /* a surrogate pair */
      if (n + 2 > MAX_LFN)
        return -1;
      c -= 0x10000;
      out[n++] = 0xd800 | (c >> 10);
      out[n++] = 0xdc00 | (c & 0x3ff);
    }
    else {
      if (n + 1 > MAX_LFN)
        return -1;
      out[n++] = c;
    }
  }
  *len = n;
  return 0;
}

/* The characters an 8.3 name may hold besides A-Z and 0-9. */
static bool
short_char_ok (int c)
{
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
    (c != '\0' && strchr ("!#$%&'()-@^_`{}~", c) != NULL);
}

/* Is NAME exactly a valid 8.3 name (upper case, at most one dot)? */
static bool
is_exact_short_name (const char *name, char out[11])
{
  const char *dot = strchr (name, '.');
  size_t base = dot ? (size_t) (dot - name) : strlen (name);
  size_t ext = dot ? strlen (dot + 1) : 0;

  if (base == 0 || base > 8 || ext > 3 || (dot && ext == 0))
    return false;
  for (const char *p = name; *p; p++)
    if (p != dot && !short_char_ok (*p))
      return false;
  memset (out, ' ', 11);
  memcpy (out, name, base);
  if (dot)
    memcpy (out + 8, dot + 1, ext);
  return true;
}

/* Short names taken in the directory being built, in a tree (tsearch)
 * so that big directories stay fast.
 */
static int
compare_short (const void *a, const void *b)
{
  return memcmp (a, b, 11);
}

/* NAME's short name, unique among USED (and added to it), into OUT.
 * *NEED_LFN says whether long name entries must go with it.
 *
 * Other names: spaces and leading dots dropped, the part after the
 * last dot as the extension (3 characters), the rest as the base,
 * upper case, any other character as '_'.  If that lost nothing but
 * case and is free, it is the name; otherwise the base is cut short to
 * make room for ~1, ~2, ... until a free one is found.
 */
static int
make_short_name (const char *name, void **used, char out[11],
                 bool *need_lfn)
{
  char base[256], ext[4];
  size_t nbase = 0, next = 0;
  bool lossy = false;
  const char *start = name, *last_dot;
  char *copy;

  *need_lfn = !is_exact_short_name (name, out);
  if (!*need_lfn && tfind (out, used, compare_short) == NULL)
    goto found;
  *need_lfn = true;

  while (*start == '.')
    start++;
  last_dot = strrchr (start, '.');
  for (const char *p = start; *p; p++) {
    int c = (unsigned char) *p;

    if (c == ' ' || (last_dot && p >= last_dot)) {
      lossy = lossy || c == ' ';
      continue;
    }
    if (c >= 'a' && c <= 'z')
      c -= 'a' - 'A';
    else if (c == '.' || !short_char_ok (c)) {
      c = '_';
      lossy = true;
    }
    if (nbase < sizeof base)
      base[nbase++] = c;
  }
  if (last_dot) {
    for (const char *p = last_dot + 1; *p; p++) {
      int c = (unsigned char) *p;

      if (c == ' ')
        continue;
      if (next == 3) {
        lossy = true;
        break;
      }
      if (c >= 'a' && c <= 'z')
        c -= 'a' - 'A';
      else if (!short_char_ok (c)) {
        c = '_';
        lossy = true;
      }
      ext[next++] = c;
    }
  }
  if (nbase == 0) {
    base[nbase++] = '_';
    lossy = true;
  }
  if (nbase > 8)
    lossy = true;

  memset (out, ' ', 11);
  memcpy (out + 8, ext, next);
  if (!lossy) {
    memcpy (out, base, nbase);
    if (tfind (out, used, compare_short) == NULL)
      goto found;
  }
  for (unsigned n = 1; n <= 999999; n++) {
    char tail[8];
    int ntail = snprintf (tail, sizeof tail, "~%u", n);
    size_t keep = nbase < 8 - (size_t) ntail ? nbase : 8 - (size_t) ntail;

    memset (out, ' ', 8);
    memcpy (out, base, keep);
    memcpy (out + keep, tail, ntail);
    if (tfind (out, used, compare_short) == NULL)
      goto found;
  }
  nbdkit_error ("dir: %s: no free short name for it", name);
  return -1;

 found:
  copy = malloc (11);
  if (copy == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  memcpy (copy, out, 11);
  if (tsearch (copy, used, compare_short) == NULL) {
    free (copy);
    nbdkit_error ("tsearch: %m");
    return -1;
  }
  return 0;
}

/* The checksum of a short name that each of its long name entries
 * carries: rotate right one bit, add the next byte.
 */
static uint8_t
lfn_checksum (const char name[11])
{
  uint8_t sum = 0;

  for (size_t i = 0; i < 11; i++)
    sum = ((sum & 1) << 7) + (sum >> 1) + (uint8_t) name[i];
  return sum;
}

/* --- entries ---------------------------------------------------------- */

/* Append one zeroed entry to the directory; its address, or NULL. */
static uint8_t *
new_entry (struct vf_dir *d)
{
  if (d->dirents.len / DIRENT_SIZE >= MAX_DIRENTS) {
    nbdkit_error ("dir: %s: too many entries for a FAT directory "
                  "(at most %d, counting long name entries)",
                  d->host_path, MAX_DIRENTS);
    return NULL;
  }
  if (byte_vector_reserve (&d->dirents, DIRENT_SIZE) == -1) {
    nbdkit_error ("realloc: %m");
    return NULL;
  }
  d->dirents.len += DIRENT_SIZE;
  return memset (d->dirents.ptr + d->dirents.len - DIRENT_SIZE, 0,
                 DIRENT_SIZE);
}

static void
fill_short (uint8_t *e, const char name[11], uint8_t attr,
            const struct stat *st, uint32_t size)
{
  uint16_t date, time;
  uint8_t tenths;

  memcpy (e, name, 11);
  e[11] = attr;
  dos_time (&st->st_mtim, &date, &time, &tenths);
  e[13] = tenths;               /* created: we use the modification time */
  put_le16 (e + 14, time);
  put_le16 (e + 16, date);
  put_le16 (e + 22, time);      /* last written */
  put_le16 (e + 24, date);
  dos_time (&st->st_atim, &date, &time, &tenths);
  put_le16 (e + 18, date);      /* last accessed: a date only */
  put_le32 (e + 28, size);
}

/* The long name entries for NAME (LEN units), last part first, as they
 * go on disk.
 */
static int
add_lfn (struct vf_dir *d, const uint16_t *name, size_t len,
         const char short_name[11])
{
  size_t count = DIV_ROUND_UP (len, LFN_CHARS);
  uint8_t sum = lfn_checksum (short_name);

  for (size_t seq = count; seq >= 1; seq--) {
    uint8_t *e = new_entry (d);

    if (e == NULL)
      return -1;
    e[0] = seq | (seq == count ? LFN_LAST : 0);
    e[11] = ATTR_LFN;
    e[13] = sum;
    /* A name that does not fill its last entry ends with one 0 unit,
     * and the rest is 0xffff.
     */
    for (size_t i = 0; i < LFN_CHARS; i++) {
      size_t k = (seq - 1) * LFN_CHARS + i;
      uint16_t c = k < len ? name[k] : k == len ? 0 : 0xffff;

      put_le16 (e + lfn_offsets[i], c);
    }
  }
  return 0;
}

static void
free_name (void *p)
{
  free (p);
}

int
vf_dir_make_entries (struct virtual_floppy *vf, size_t i, const char label[11])
{
  struct vf_dir *d = &vf->dirs.ptr[i];
  void *used = NULL;
  uint8_t *e;
  int r = -1;

  if (i == 0) {
    /* The root holds the volume label as an entry too. */
    if ((e = new_entry (d)) == NULL)
      goto out;
    fill_short (e, label, ATTR_VOLUME_ID, &d->st, 0);
  }
  else {
    /* "." and "..": clusters filled in later. */
    if ((e = new_entry (d)) == NULL)
      goto out;
    fill_short (e, ".          ", ATTR_DIRECTORY, &d->st, 0);
    if ((e = new_entry (d)) == NULL)
      goto out;
    fill_short (e, "..         ", ATTR_DIRECTORY, &d->st, 0);
  }

  for (size_t j = 0; j < d->entries.len; j++) {
    struct vf_entry *ent = &d->entries.ptr[j];
    uint16_t name16[MAX_LFN];
    size_t len16;
    char short_name[11];
    bool need_lfn;
    uint8_t attr;
    uint32_t size = 0;

    if (to_utf16 (ent->name, name16, &len16) == -1) {
      nbdkit_error ("dir: %s/%s: the name is too long for FAT or has a "
                    "character FAT does not allow (\\/:*?\"<>| or a "
                    "control character)", d->host_path, ent->name);
      goto out;
    }
    if (make_short_name (ent->name, &used, short_name, &need_lfn) == -1)
      goto out;
    if (need_lfn && add_lfn (d, name16, len16, short_name) == -1)
      goto out;
    if ((e = new_entry (d)) == NULL)
      goto out;
    ent->short_entry = e - d->dirents.ptr;
    if (ent->is_dir)
      attr = ATTR_DIRECTORY;
    else {
      attr = ATTR_ARCHIVE;
      size = vf->files.ptr[ent->index].size;
    }
    if (!(ent->st.st_mode & S_IWUSR))
      attr |= ATTR_READ_ONLY;
    fill_short (e, short_name, attr, &ent->st, size);
  }
  r = 0;

 out:
  tdestroy (used, free_name);
  return r;
}

static void
set_cluster (uint8_t *e, uint32_t cluster)
{
  put_le16 (e + 20, cluster >> 16);
  put_le16 (e + 26, cluster & 0xffff);
}

void
vf_dir_set_clusters (struct virtual_floppy *vf, size_t i)
{
  struct vf_dir *d = &vf->dirs.ptr[i];

  if (i > 0) {
    /* ".." of a directory in the root says 0, not the root's cluster. */
    size_t parent = d->parent;

    set_cluster (d->dirents.ptr, d->first_cluster);
    set_cluster (d->dirents.ptr + DIRENT_SIZE,
                 parent == 0 ? 0 : vf->dirs.ptr[parent].first_cluster);
  }
  for (size_t j = 0; j < d->entries.len; j++) {
    const struct vf_entry *ent = &d->entries.ptr[j];
    uint32_t c = ent->is_dir
      ? vf->dirs.ptr[ent->index].first_cluster
      : vf->files.ptr[ent->index].first_cluster;

    set_cluster (d->dirents.ptr + ent->short_entry, c);
  }
}
