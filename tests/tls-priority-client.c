/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* tls-priority-client: an NBD client that upgrades to TLS with a
 * GnuTLS priority string of its choosing, to offer the server what
 * libnbd never would (only NULL, RC4, 3DES or anonymous suites).
 *
 *   tls-priority-client SOCKET PRIORITY psk USER HEXKEY
 *   tls-priority-client SOCKET PRIORITY x509 CADIR
 *   tls-priority-client SOCKET PRIORITY anon
 *
 * It reads the newstyle greeting, sends NBD_OPT_STARTTLS, runs the
 * handshake, and on success prints GnuTLS's description of the session
 * and sends NBD_OPT_ABORT through it.  Exit status: 0 secured, 1 the
 * handshake failed (the error on stderr), 2 anything else (the server
 * misbehaved before TLS, or this GnuTLS cannot build PRIORITY), so a
 * test can tell a refusal from a client that never offered.  Called by
 * test-tls-suites.sh.
 */

#include <config.h>

#include <endian.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

#include "protocol.h"

static void __attribute__ ((noreturn))
die (const char *what)
{
  fprintf (stderr, "tls-priority-client: %s\n", what);
  exit (2);
}

static void
read_exact (int fd, void *buf, size_t n)
{
  char *p = buf;
  while (n > 0) {
    ssize_t r = read (fd, p, n);
    if (r <= 0)
      die ("server closed or read failed before TLS");
    p += r;
    n -= r;
  }
}

static void
write_exact (int fd, const void *buf, size_t n)
{
  if (write (fd, buf, n) != (ssize_t) n)
    die ("write failed before TLS");
}

/* The option header: magic, option, length (big endian). */
static void
option_bytes (unsigned char out[16], uint32_t opt)
{
  uint64_t magic = htobe64 (NBD_NEW_VERSION);
  uint32_t o = htobe32 (opt), len = 0;
  memcpy (out, &magic, 8);
  memcpy (out + 8, &o, 4);
  memcpy (out + 12, &len, 4);
}

static int
starttls (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen (path) >= sizeof sun.sun_path)
    die ("socket path too long");
  strcpy (sun.sun_path, path);
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 || connect (fd, (struct sockaddr *) &sun, sizeof sun) == -1)
    die ("cannot connect");
  struct timeval tv = { .tv_sec = 10 };
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  unsigned char greeting[18];
  uint64_t magic, version;
  read_exact (fd, greeting, sizeof greeting);
  memcpy (&magic, greeting, 8);
  memcpy (&version, greeting + 8, 8);
  if (be64toh (magic) != NBD_MAGIC || be64toh (version) != NBD_NEW_VERSION)
    die ("not a newstyle greeting");

  uint32_t cflags = htobe32 (NBD_FLAG_C_FIXED_NEWSTYLE |
                             NBD_FLAG_C_NO_ZEROES);
  unsigned char opt[16];
  write_exact (fd, &cflags, 4);
  option_bytes (opt, NBD_OPT_STARTTLS);
  write_exact (fd, opt, sizeof opt);

  unsigned char reply[20];
  uint32_t type, len;
  read_exact (fd, reply, sizeof reply);
  memcpy (&magic, reply, 8);
  memcpy (&type, reply + 12, 4);
  memcpy (&len, reply + 16, 4);
  if (be64toh (magic) != NBD_REP_MAGIC || be32toh (type) != NBD_REP_ACK ||
      len != 0)
    die ("STARTTLS was not acknowledged");
  return fd;
}

int
main (int argc, char *argv[])
{
  if (argc < 4)
    die ("usage: SOCKET PRIORITY psk USER HEXKEY | x509 CADIR | anon");
  const char *kind = argv[3];
  gnutls_session_t s;
  gnutls_psk_client_credentials_t psk = NULL;
  gnutls_certificate_credentials_t x509 = NULL;
  gnutls_anon_client_credentials_t anon = NULL;
  const char *err_pos = NULL;
  int r;

  /* The server may hang up once it has the NBD_OPT_ABORT. */
  signal (SIGPIPE, SIG_IGN);
  if (gnutls_global_init () < 0 || gnutls_init (&s, GNUTLS_CLIENT) < 0)
    die ("cannot initialize GnuTLS");
  r = gnutls_priority_set_direct (s, argv[2], &err_pos);
  if (r < 0) {
    fprintf (stderr, "tls-priority-client: priority \"%s\" at \"%s\": %s\n",
             argv[2], err_pos ? err_pos : "", gnutls_strerror (r));
    exit (2);
  }
  if (strcmp (kind, "psk") == 0 && argc == 6) {
    gnutls_datum_t key = {
      .data = (unsigned char *) argv[5], .size = strlen (argv[5])
    };
    if (gnutls_psk_allocate_client_credentials (&psk) < 0 ||
        gnutls_psk_set_client_credentials (psk, argv[4], &key,
                                           GNUTLS_PSK_KEY_HEX) < 0 ||
        gnutls_credentials_set (s, GNUTLS_CRD_PSK, psk) < 0)
      die ("bad PSK credentials");
  }
  else if (strcmp (kind, "x509") == 0 && argc == 5) {
    char ca[4096];
    snprintf (ca, sizeof ca, "%s/ca-cert.pem", argv[4]);
    if (gnutls_certificate_allocate_credentials (&x509) < 0 ||
        gnutls_certificate_set_x509_trust_file (x509, ca,
                                                GNUTLS_X509_FMT_PEM) <= 0 ||
        gnutls_credentials_set (s, GNUTLS_CRD_CERTIFICATE, x509) < 0)
      die ("bad X.509 credentials");
    gnutls_session_set_verify_cert (s, "localhost", 0);
  }
  else if (strcmp (kind, "anon") == 0 && argc == 4) {
    if (gnutls_anon_allocate_client_credentials (&anon) < 0 ||
        gnutls_credentials_set (s, GNUTLS_CRD_ANON, anon) < 0)
      die ("bad anonymous credentials");
  }
  else
    die ("usage: SOCKET PRIORITY psk USER HEXKEY | x509 CADIR | anon");

  int fd = starttls (argv[1]);
  gnutls_transport_set_int (s, fd);
  gnutls_handshake_set_timeout (s, 10000);
  do
    r = gnutls_handshake (s);
  while (r < 0 && !gnutls_error_is_fatal (r));
  if (r < 0) {
    fprintf (stderr, "tls-priority-client: handshake: %s\n",
             gnutls_strerror (r));
    exit (1);
  }
  char *desc = gnutls_session_get_desc (s);
  printf ("%s\n", desc);
  gnutls_free (desc);

  unsigned char opt[16];
  option_bytes (opt, NBD_OPT_ABORT);
  gnutls_record_send (s, opt, sizeof opt);
  gnutls_bye (s, GNUTLS_SHUT_WR);
  close (fd);
  gnutls_deinit (s);
  if (psk)
    gnutls_psk_free_client_credentials (psk);
  if (x509)
    gnutls_certificate_free_credentials (x509);
  if (anon)
    gnutls_anon_free_client_credentials (anon);
  gnutls_global_deinit ();
  return 0;
}
