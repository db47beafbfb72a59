/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The info plugin: a read-only disk whose content is something about
 * the client or the server, for testing clients and measuring latency.
 *
 * This file owns the mode (config, read-only afterwards) and, per
 * connection, the disk's bytes.  The export name, its base64 decoding
 * and the client's address are fixed when the connection opens; the
 * three clock modes build their 12 bytes (64 bit seconds and 32 bit
 * microseconds, big endian) at each read, so a client reading all 12
 * in one request sees one consistent moment.  The layouts are nbdkit
 * 1.32's.  No state is shared between requests, so they run in
 * parallel.
 */
#include <config.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <linux/vm_sockets.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include "answers.h"
#include "include/array-size.h"

enum mode {
  MODE_EXPORTNAME,
  MODE_BASE64EXPORTNAME,
  MODE_ADDRESS,
  MODE_TIME,
  MODE_UPTIME,
  MODE_CONNTIME,
};

static const char *const mode_names[] = {
  [MODE_EXPORTNAME] = "exportname",
  [MODE_BASE64EXPORTNAME] = "base64exportname",
  [MODE_ADDRESS] = "address",
  [MODE_TIME] = "time",
  [MODE_UPTIME] = "uptime",
  [MODE_CONNTIME] = "conntime",
};
#define NR_MODES (ARRAY_SIZE (mode_names))

/* Set by config, read-only once the server serves. */
static enum mode mode = MODE_EXPORTNAME;
/* When the plugin was loaded, for uptime (monotonic clock). */
static struct timespec load_time;

/* The clock modes serve this many bytes. */
#define TIME_SIZE 12

struct handle {
  uint8_t *data;                /* the disk, in the fixed modes */
  size_t len;
  struct timespec open_time;    /* for conntime (monotonic clock) */
};

static void
info_load (void)
{
  clock_gettime (CLOCK_MONOTONIC, &load_time);
}

static int
info_config (const char *key, const char *value)
{
  if (strcmp (key, "mode") == 0) {
    for (size_t i = 0; i < NR_MODES; ++i) {
      if (strcasecmp (value, mode_names[i]) == 0) {
        mode = i;
        return 0;
      }
    }
    nbdkit_error ("mode: unknown mode '%s' (expected exportname, "
                  "base64exportname, address, time, uptime or conntime)",
                  value);
    return -1;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

#define info_config_help \
  "[mode=]exportname|base64exportname|address|time|uptime|conntime\n" \
  "                          What the disk holds (default exportname)."

static void
info_dump_plugin (void)
{
  printf ("info_address=yes\n");
  printf ("info_base64=yes\n");
}

/* Base64 (RFC 4648, standard alphabet) as nbdkit 1.32 decodes export
 * names: spaces, tabs and line breaks are dropped, a '-' ends the
 * input, the rest must be whole groups of four with '=' padding only
 * at the very end, and the bits the padding drops must be zero.
 * Returns the decoded bytes (malloc'd, *LEN set) or NULL with errno
 * EINVAL (bad input) or ENOMEM.
 */
static int
base64_value (char c)
{
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

static uint8_t *
base64_decode (const char *in, size_t *len)
{
  const size_t in_len = strlen (in);
  char *s;                      /* IN without the dropped characters */
  uint8_t *out;
  size_t n = 0, i, o = 0;

  s = malloc (in_len + 1);
  out = malloc (in_len / 4 * 3 + 1);
  if (s == NULL || out == NULL)
    goto nomem;
  for (i = 0; i < in_len && in[i] != '-'; ++i)
    if (!strchr (" \t\r\n", in[i]))
      s[n++] = in[i];

  if (n % 4 != 0)
    goto bad;
  for (i = 0; i < n; i += 4) {
    const bool last = i + 4 == n;
    int v[4], pad = 0;
    uint32_t bits = 0;

    for (int j = 0; j < 4; ++j) {
      if (s[i + j] == '=' && last && j >= 2) {
        v[j] = 0;
        pad++;
      }
      else if (pad > 0 || (v[j] = base64_value (s[i + j])) == -1)
        goto bad;
      bits = bits << 6 | v[j];
    }
    /* The bits under the padding must be zero. */
    if ((pad == 1 && (bits & 0xff)) || (pad == 2 && (bits & 0xffff)))
      goto bad;
    out[o++] = bits >> 16;
    if (pad < 2)
      out[o++] = bits >> 8 & 0xff;
    if (pad < 1)
      out[o++] = bits & 0xff;
  }
  free (s);
  *len = o;
  return out;

 bad:
  free (s);
  free (out);
  errno = EINVAL;
  return NULL;
 nomem:
  free (s);
  free (out);
  errno = ENOMEM;
  return NULL;
}

/* The client's address as text: "IP:PORT", "[IPv6]:PORT", "unix" (so
 * that no host path leaks), "vsock:CID:PORT".  NULL on error.
 */
static char *
format_address (void)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char ip[INET6_ADDRSTRLEN];
  char *ret = NULL;

  if (nbdkit_peer_name ((struct sockaddr *) &ss, &len) == -1)
    return NULL;

  switch (ss.ss_family) {
  case AF_INET: {
    const struct sockaddr_in *sin = (const struct sockaddr_in *) &ss;

    if (inet_ntop (AF_INET, &sin->sin_addr, ip, sizeof ip) == NULL ||
        asprintf (&ret, "%s:%d", ip, ntohs (sin->sin_port)) == -1)
      goto err;
    break;
  }
  case AF_INET6: {
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) &ss;

    if (inet_ntop (AF_INET6, &sin6->sin6_addr, ip, sizeof ip) == NULL ||
        asprintf (&ret, "[%s]:%d", ip, ntohs (sin6->sin6_port)) == -1)
      goto err;
    break;
  }
  case AF_UNIX:
    ret = strdup ("unix");
    if (ret == NULL)
      goto err;
    break;
  case AF_VSOCK: {
    const struct sockaddr_vm *svm = (const struct sockaddr_vm *) &ss;

    if (asprintf (&ret, "vsock:%" PRIu32 ":%" PRIu32,
                  (uint32_t) svm->svm_cid, (uint32_t) svm->svm_port) == -1)
      goto err;
    break;
  }
  default:
    nbdkit_error ("address: unknown address family %d", ss.ss_family);
    return NULL;
  }
  return ret;

 err:
  nbdkit_error ("address: %m");
  return NULL;
}

static void *
info_open (int readonly)
{
  struct handle *h = calloc (1, sizeof *h);
  const char *name;

  if (h == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  clock_gettime (CLOCK_MONOTONIC, &h->open_time);

  switch (mode) {
  case MODE_EXPORTNAME:
    name = nbdkit_export_name ();
    h->len = name ? strlen (name) : 0;
    h->data = (uint8_t *) strdup (name ? name : "");
    if (h->data == NULL) {
      nbdkit_error ("strdup: %m");
      goto err;
    }
    break;
  case MODE_BASE64EXPORTNAME:
    name = nbdkit_export_name ();
    h->data = base64_decode (name ? name : "", &h->len);
    if (h->data == NULL) {
      if (errno == EINVAL)
        nbdkit_error ("base64exportname: the export name is not valid "
                      "base64");
      else
        nbdkit_error ("base64exportname: %m");
      goto err;
    }
    break;
  case MODE_ADDRESS:
    h->data = (uint8_t *) format_address ();
    if (h->data == NULL)
      goto err;
    h->len = strlen ((char *) h->data);
    break;
  case MODE_TIME:
  case MODE_UPTIME:
  case MODE_CONNTIME:
    h->len = TIME_SIZE;
    break;
  }
  return h;

 err:
  free (h);
  return NULL;
}

static void
info_close (void *handle)
{
  struct handle *h = handle;

  free (h->data);
  free (h);
}

static int64_t
info_get_size (void *handle)
{
  struct handle *h = handle;

  return h->len;
}

static int
info_can_multi_conn (void *handle)
{
  /* Only the export name modes give every connection the same disk. */
  return mode == MODE_EXPORTNAME || mode == MODE_BASE64EXPORTNAME;
}

/* The time since START on the monotonic clock. */
static void
elapsed (const struct timespec *start, uint64_t *sec, uint32_t *usec)
{
  struct timespec now;
  int64_t ns;

  clock_gettime (CLOCK_MONOTONIC, &now);
  ns = (int64_t) (now.tv_sec - start->tv_sec) * 1000000000
       + (now.tv_nsec - start->tv_nsec);
  if (ns < 0)
    ns = 0;
  *sec = ns / 1000000000;
  *usec = ns % 1000000000 / 1000;
}

static void
clock_bytes (struct handle *h, uint8_t out[TIME_SIZE])
{
  uint64_t sec = 0;
  uint32_t usec = 0;
  struct timeval tv;

  switch (mode) {
  case MODE_TIME:
    gettimeofday (&tv, NULL);
    sec = tv.tv_sec;
    usec = tv.tv_usec;
    break;
  case MODE_UPTIME:
    elapsed (&load_time, &sec, &usec);
    break;
  case MODE_CONNTIME:
    elapsed (&h->open_time, &sec, &usec);
    break;
  default:
    abort ();
  }
  sec = htobe64 (sec);
  usec = htobe32 (usec);
  memcpy (out, &sec, 8);
  memcpy (out + 8, &usec, 4);
}

static int
info_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  struct handle *h = handle;
  uint8_t t[TIME_SIZE];
  const uint8_t *src = h->data;

  /* The server keeps requests within the size. */
  if (offset > h->len || count > h->len - offset) {
    nbdkit_error ("read beyond the end of the disk");
    errno = EIO;
    return -1;
  }
  if (mode == MODE_TIME || mode == MODE_UPTIME || mode == MODE_CONNTIME) {
    clock_bytes (h, t);
    src = t;
  }
  memcpy (buf, src + offset, count);
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name              = "info",
  .version           = PACKAGE_VERSION,
  .longname          = "nbdkit info plugin",
  .description       = "Serve information about the client or the server",
  .load              = info_load,
  .config            = info_config,
  .config_help       = info_config_help,
  .magic_config_key  = "mode",
  .dump_plugin       = info_dump_plugin,
  .open              = info_open,
  .close             = info_close,
  .get_size          = info_get_size,
  .can_multi_conn    = info_can_multi_conn,
  .can_cache         = answer_cache_native,
  .pread             = info_pread,
  .cache             = answer_range_done,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
