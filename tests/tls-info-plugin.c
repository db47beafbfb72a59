/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* A test plugin that shows a client what the server knows about its TLS
 * session.  Its 4 KiB disk holds one line of text, fixed at open:
 *
 *   tls=1 dn=CN=client.test,O=nbdkit tests issuer=CN=ca user=
 *
 * from nbdkit_is_tls, nbdkit_peer_tls_dn, nbdkit_peer_tls_issuer_dn and
 * nbdkit_peer_tls_username.  Exports are listed differently with and
 * without TLS (is_tls in list_exports), so a test can see that too.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
#define DISK_SIZE 4096

static void *
info_open (int readonly)
{
  char *disk = calloc (1, DISK_SIZE);
  char *dn = nbdkit_peer_tls_dn ();
  char *issuer = nbdkit_peer_tls_issuer_dn ();
  char *user = nbdkit_peer_tls_username ();
  int tls = nbdkit_is_tls ();

  if (disk && dn && issuer && user)
    snprintf (disk, DISK_SIZE, "tls=%d dn=%s issuer=%s user=%s\n",
              tls, dn, issuer, user);
  free (dn);
  free (issuer);
  free (user);
  if (!disk || disk[0] == '\0') {
    nbdkit_error ("could not describe the TLS session");
    free (disk);
    return NULL;
  }
  return disk;
}

static void
info_close (void *handle)
{
  free (handle);
}

static int
info_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  return nbdkit_add_export (exports, is_tls ? "secure" : "plain", NULL);
}

static int64_t
info_get_size (void *handle)
{
  return DISK_SIZE;
}

static int
info_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  memcpy (buf, (char *) handle + offset, count);
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "tlsinfo",
  .open = info_open,
  .close = info_close,
  .list_exports = info_list_exports,
  .get_size = info_get_size,
  .pread = info_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
