/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 *
 * bench/libnbd-allow-local.c: an LD_PRELOAD shim for the TLS rows of
 * bench/compare.sh.  fio's nbd engine connects with nbd_connect_uri,
 * and libnbd refuses a URI naming a local file (tls-psk-file=,
 * tls-certificates=) unless the program called
 * nbd_set_uri_allow_local_file, which fio does not.  This wraps
 * nbd_create so that every handle allows it, and changes nothing else.
 *
 *   cc -O2 -shared -fPIC -o libnbd-allow-local.so libnbd-allow-local.c -lnbd -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <libnbd.h>

struct nbd_handle *
nbd_create (void)
{
  static struct nbd_handle *(*next) (void);
  struct nbd_handle *h;

  if (next == NULL)
    next = (struct nbd_handle *(*) (void)) dlsym (RTLD_NEXT, "nbd_create");
  if (next == NULL)
    return NULL;
  h = next ();
  if (h != NULL)
    nbd_set_uri_allow_local_file (h, true);
  return h;
}
