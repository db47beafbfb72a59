/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Unit tests of the file store: the file lands in $TMPDIR (or
 * /var/tmp) and leaves no name there, bytes read back as written
 * (through system calls, and through the mapping once sized),
 * never-written bytes (even past the end of the file) read as zeroes,
 * discarding gives the space back, and a missing directory fails with
 * errno set.
 */
#include <config.h>

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filestore.h"

enum { N = 256 * 1024 };
static unsigned char *w, *r;

/* Entries of DIR other than . and .. */
static int
count_entries (const char *dir)
{
  DIR *d = opendir (dir);
  assert (d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir (d)) != NULL)
    if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0)
      ++n;
  closedir (d);
  return n;
}

static void
check_zero (const unsigned char *buf, size_t n)
{
  for (size_t i = 0; i < n; ++i)
    assert (buf[i] == 0);
}

/* Reads, writes, overwrites and discards of store S, whose bytes from
 * 0 to END may be used.
 */
static void
exercise (struct filestore *s, uint64_t end)
{
  assert (filestore_allocated (s) == 0);

  /* Never written. */
  memset (r, 0xff, N);
  assert (filestore_read (s, r, N, 12345) == 0);
  check_zero (r, N);

  /* Written at an odd offset, read back whole and in part. */
  const uint64_t at = (UINT64_C (1) << 30) + 4097;
  assert (filestore_write (s, w, N, at) == 0);
  assert (filestore_read (s, r, N, at) == 0);
  assert (memcmp (w, r, N) == 0);
  assert (filestore_read (s, r, 100, at + 1000) == 0);
  assert (memcmp (w + 1000, r, 100) == 0);
  /* Past what was written: data, then zeroes. */
  memset (r, 0xff, N);
  assert (filestore_read (s, r, N, at + N / 2) == 0);
  assert (memcmp (w + N / 2, r, N / 2) == 0);
  check_zero (r + N / 2, N / 2);
  /* The hole before it still reads as zeroes. */
  assert (filestore_read (s, r, 4096, 1 << 29) == 0);
  check_zero (r, 4096);

  /* An overwrite of written bytes, seen by both kinds of read. */
  assert (filestore_overwrite (s, "overwritten", 11, at + 5000) == 0);
  assert (filestore_read (s, r, N, at) == 0);
  assert (memcmp (r + 5000, "overwritten", 11) == 0);
  assert (memcmp (w, r, 5000) == 0);
  assert (memcmp (w + 5011, r + 5011, N - 5011) == 0);
  assert (filestore_write (s, w + 5000, 11, at + 5000) == 0);

  /* The last bytes of the store. */
  assert (filestore_read (s, r, 10, end - 10) == 0);
  check_zero (r, 10);
  assert (filestore_write (s, w, 10, end - 10) == 0);
  assert (filestore_read (s, r, 10, end - 10) == 0);
  assert (memcmp (w, r, 10) == 0);

  uint64_t used = filestore_allocated (s);
  assert (used >= N);
  /* Only what was written takes disk. */
  assert (used < 16 * N);

  /* Discarding whole blocks gives the space back (every file system
   * Linux puts /tmp on can punch holes; the store only promises it
   * where it can).
   */
  const uint64_t blk = (at + 65535) & ~UINT64_C (65535);
  filestore_discard (s, 65536, blk);
  assert (filestore_allocated (s) < used);
  /* Bytes outside the discarded range are untouched. */
  assert (filestore_read (s, r, blk - at, at) == 0);
  assert (memcmp (w, r, blk - at) == 0);
  assert (filestore_read (s, r, 1000, blk + 65536) == 0);
  assert (memcmp (w + (blk + 65536 - at), r, 1000) == 0);
  filestore_discard (s, 0, 0);
}

int
main (void)
{
  char dir[] = "/tmp/test-filestore.XXXXXX";
  assert (mkdtemp (dir) != NULL);
  w = malloc (N);
  r = malloc (N);
  assert (w && r);
  for (size_t i = 0; i < N; ++i)
    w[i] = i * 7 + 1;

  /* TMPDIR unset or empty: nbdkit's default. */
  assert (unsetenv ("TMPDIR") == 0);
  assert (strcmp (filestore_dir (), "/var/tmp") == 0);
  assert (setenv ("TMPDIR", "", 1) == 0);
  assert (strcmp (filestore_dir (), "/var/tmp") == 0);

  /* A directory that does not exist. */
  char missing[sizeof dir + 16];
  snprintf (missing, sizeof missing, "%s/missing", dir);
  assert (setenv ("TMPDIR", missing, 1) == 0);
  errno = 0;
  assert (filestore_create () == NULL);
  assert (errno == ENOENT);

  assert (setenv ("TMPDIR", dir, 1) == 0);
  assert (strcmp (filestore_dir (), dir) == 0);

  /* Not sized: system calls only, and any offset (short of ext4's
   * largest file, 16T) can be used.
   */
  struct filestore *s = filestore_create ();
  assert (s != NULL);
  assert (count_entries (dir) == 0);
  assert (!filestore_mapped (s));
  exercise (s, UINT64_C (1) << 43);
  filestore_destroy (s);

  /* Sized: mapped where the file system allows it (the test says
   * which, as the build machine's /tmp decides).
   */
  s = filestore_create ();
  assert (s != NULL);
  const uint64_t size = (UINT64_C (1) << 32) + 4096 * 3 + 100;
  filestore_set_size (s, size);
  printf ("test-filestore: %s: sized store is %s\n", dir,
          filestore_mapped (s) ? "mapped" : "not mapped");
  exercise (s, size);
  filestore_destroy (s);
  filestore_destroy (NULL);

  assert (count_entries (dir) == 0);
  assert (rmdir (dir) == 0);
  free (w);
  free (r);
  printf ("test-filestore: ok\n");
  return 0;
}
