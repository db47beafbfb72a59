/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* example4: one RAM disk shared by every client.  Read example3 first.
 *
 *   nbdkit example4 size=1M
 *
 * In nbdkit this example is a Perl script, to show plugins written in
 * a scripting language.  This server has no Perl host yet, so this is
 * the same plugin in C: a disk of SIZE bytes in memory, all zero at
 * start, that every client reads and writes; it lives as long as the
 * server and is thrown away when the server exits.
 *
 * The step up from example3:
 *
 *   - state shared by all connections that changes while serving (the
 *     disk's bytes), so it needs a lock;
 *   - get_ready, the place to make things once configuration is
 *     complete but before any client connects, and unload to free them;
 *   - a required parameter that is parsed, checked against what the
 *     machine can hold, and reported by name when wrong.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* The size, from size= (required; -1 until given). */
static int64_t size = -1;

/* The disk itself: SIZE bytes made by get_ready.  Clients read it in
 * parallel and write it one at a time: readers hold LOCK shared,
 * writers hold it exclusive, so a reader never sees half a write.
 * calloc of a large block gets pages from the kernel lazily, so a disk
 * costs memory only where it has been written.
 */
static unsigned char *disk = NULL;
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

static void
example4_unload (void)
{
  free (disk);
}

static int
example4_config (const char *key, const char *value)
{
  if (strcmp (key, "size") == 0) {
    int64_t r = nbdkit_parse_size (value);

    if (r == -1)
      return -1;
    size = r;
    return 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
example4_config_complete (void)
{
  if (size == -1) {
    nbdkit_error ("the size=SIZE parameter is required");
    return -1;
  }
  /* The disk must fit in the address space: SIZE is at most 2^63-1,
   * which on a 32-bit machine is far more than a size_t.
   */
  if ((uint64_t) size > SIZE_MAX) {
    nbdkit_error ("size: %" PRIi64 " bytes is too big for memory", size);
    return -1;
  }
  return 0;
}

#define example4_config_help \
  "size=<SIZE>         (required) Size of the shared disk."

/* Called once, after config_complete, when the server is about to
 * serve (not for --help or --dump-plugin, which never serve).  The
 * Perl version makes its disk here too.
 */
static int
example4_get_ready (void)
{
  /* calloc (0, 1) may return NULL; ask for at least one byte. */
  disk = calloc (size > 0 ? size : 1, 1);
  if (disk == NULL) {
    nbdkit_error ("size: cannot allocate %" PRIi64 " bytes: %m", size);
    return -1;
  }
  return 0;
}

/* No per-connection state at all: everything is in DISK. */
static void *
example4_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
example4_get_size (void *handle)
{
  return size;
}

/* The server has checked OFFSET + COUNT <= SIZE, so these copies stay
 * inside DISK.
 */
static int
example4_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  pthread_rwlock_rdlock (&lock);
  memcpy (buf, disk + offset, count);
  pthread_rwlock_unlock (&lock);
  return 0;
}

static int
example4_pwrite (void *handle, const void *buf, uint32_t count,
                 uint64_t offset, uint32_t flags)
{
  pthread_rwlock_wrlock (&lock);
  memcpy (disk + offset, buf, count);
  pthread_rwlock_unlock (&lock);
  return 0;
}

/* With the lock above, requests from any number of clients may run at
 * once.  Without it, the parallel model would be wrong: the server
 * would not stop a read racing a write to the same bytes.  The
 * cautious alternative is NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS
 * and no lock at all, which is what the Perl version gets.
 */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "example4",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit example4 plugin",
  .description       = "A RAM disk shared by all clients",
  .unload            = example4_unload,
  .config            = example4_config,
  .config_complete   = example4_config_complete,
  .config_help       = example4_config_help,
  .get_ready         = example4_get_ready,
  .open              = example4_open,
  .get_size          = example4_get_size,
  .pread             = example4_pread,
  .pwrite            = example4_pwrite,
};

NBDKIT_REGISTER_PLUGIN (plugin)
