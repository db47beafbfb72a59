/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test plugin whose connection threads carry thread-local state with
 * a destructor, as libraries under plugins do (OpenSSL under libssh or
 * libcurl keeps per-thread state freed this way).  The first read on a
 * thread sets it; when the thread exits, the destructor sleeps 200 ms
 * (a slow free) and then appends "destructor ran" to the file named by
 * file=.  test-thread-exit.sh checks the line is there once the server
 * has exited: a server that exits without joining its connection
 * threads ends the process while the destructor still runs.
 */
#include <config.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static const char *file;
static pthread_key_t key;

static void
destructor (void *p)
{
  struct timespec ts = { .tv_sec = 0, .tv_nsec = 200000000 };
  nanosleep (&ts, NULL);
  int fd = open (file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const char msg[] = "destructor ran\n";
    if (write (fd, msg, sizeof msg - 1) == -1)
      abort ();
    close (fd);
  }
  free (p);
}

static void
te_load (void)
{
  if (pthread_key_create (&key, destructor) != 0)
    abort ();
}

static int
te_config (const char *k, const char *v)
{
  if (strcmp (k, "file") != 0) {
    nbdkit_error ("unknown parameter %s", k);
    return -1;
  }
  file = nbdkit_strdup_intern (v);
  return file ? 0 : -1;
}

static void *
te_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
te_get_size (void *h)
{
  return 1048576;
}

static int
te_pread (void *h, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  if (file && pthread_getspecific (key) == NULL) {
    void *p = malloc (64);
    if (p == NULL || pthread_setspecific (key, p) != 0) {
      free (p);
      nbdkit_error ("thread-local state: %m");
      return -1;
    }
  }
  memset (buf, 0, count);
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "thread-exit",
  .load = te_load,
  .config = te_config,
  .open = te_open,
  .get_size = te_get_size,
  .pread = te_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
