/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit server: TLS with GnuTLS.
 *
 * tls_load reads the credentials once at start-up (before privileges
 * are dropped): X.509 certificates from a directory, or a psktool key
 * file.  A connection switches to TLS when the client sends
 * NBD_OPT_STARTTLS: tls_start runs the TLS handshake on the
 * connection's socket, and from then on conn_recv and conn_sendv go
 * through tls_recv and tls_sendv.
 *
 * The session reads and writes the socket through our own transport
 * functions, so that the handshake deadline (--handshake-timeout)
 * covers every byte of the TLS handshake and of the options after it,
 * however slowly a client sends them, and so that writes never raise
 * SIGPIPE.
 *
 * One thread receives (under the read lock) while another sends (under
 * the write lock); GnuTLS allows one of each on a session at a time.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "include/array-size.h"

#ifdef HAVE_GNUTLS

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

/* A connection's TLS state: only this file sees inside it. */
struct conn_tls {
  gnutls_session_t session;
  char *out;                    /* records of a large reply, batched */
  size_t out_len;               /* bytes in out */
  bool batching;                /* transport_push appends to out */
  char *in;                     /* bytes read ahead from the socket */
  size_t in_pos, in_len;        /* ... the next one, and the end */
};

static enum { CREDS_NONE, CREDS_X509, CREDS_PSK } creds_type;
static gnutls_certificate_credentials_t x509_creds;
static gnutls_psk_server_credentials_t psk_creds;
static gnutls_priority_t priority;
static bool verify_peer;

/* The default policy (replaced whole by --tls-priority): GnuTLS's
 * NORMAL without TLS 1.0 and 1.1, which RFC 8996 deprecates.  NULL,
 * RC4, 3DES and anonymous suites are not in NORMAL.  TLS 1.2's CBC
 * suites stay (encrypt-then-MAC, GnuTLS's Lucky13 countermeasures):
 * they are a fallback, since every current client also offers GCM.
 * PSK needs its key exchanges added.
 */
#define PRIORITY_BASE "NORMAL:-VERS-TLS1.1:-VERS-TLS1.0"
#define PRIORITY_PSK_KX ":+ECDHE-PSK:+DHE-PSK:+PSK"
/* Where the CPU has AES-NI and carry-less multiply, AES-GCM is the
 * fastest AEAD, so the server's order wins over a client that lists
 * ChaCha20 first: NORMAL's ciphers, the same set, with both AES-GCM
 * sizes first (a TLS 1.3 PSK binds SHA-256, which rules out
 * AES-256-GCM; NORMAL has ChaCha20 before AES-128-GCM).  Elsewhere
 * the client's order stands: it knows better what is cheap for it.
 */
#define PRIORITY_SERVER_ORDER                                        \
  ":-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:+CHACHA20-POLY1305"        \
  ":+AES-256-CCM:+AES-128-CCM:+AES-256-CBC:+AES-128-CBC"              \
  ":%SERVER_PRECEDENCE"

/* Under --tls-verify-peer a client certificate that names its
 * purposes (extended key usage) must name TLS client authentication;
 * one without the extension passes.  GnuTLS keeps a pointer to this.
 */
static gnutls_typed_vdata_st client_purpose[] = {
  { .type = GNUTLS_DT_KEY_PURPOSE_OID,
    .data = (unsigned char *) GNUTLS_KP_TLS_WWW_CLIENT },
};

bool
tls_available (void)
{
  return true;
}

static const char *
credentials_name (void)
{
  return creds_type == CREDS_PSK ? "psk" : "x509";
}

static bool
readable (const char *path)
{
  return access (path, R_OK) == 0;
}

/* The certificate directory: --tls-certificates, or the default
 * (/etc/pki/nbdkit for root, $HOME/.pki/nbdkit for anyone else).
 * Returns a malloc'd path.
 */
static char *
certificates_dir (const struct config *cfg)
{
  char *dir = NULL;
  if (cfg->tls_certificates)
    return strdup (cfg->tls_certificates);
  if (geteuid () == 0)
    return strdup (SYSCONFDIR "/pki/nbdkit");
  const char *home = getenv ("HOME");
  if (home && asprintf (&dir, "%s/.pki/nbdkit", home) == -1)
    dir = NULL;
  return dir;
}

static int
load_x509 (const struct config *cfg)
{
  char *dir = certificates_dir (cfg);
  char ca[PATH_MAX], crl[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
  int r;

  if (!dir) {
    nbdkit_error ("TLS: no certificate directory: use --tls-certificates");
    return -1;
  }
  snprintf (ca, sizeof ca, "%s/ca-cert.pem", dir);
  snprintf (crl, sizeof crl, "%s/ca-crl.pem", dir);
  snprintf (cert, sizeof cert, "%s/server-cert.pem", dir);
  snprintf (key, sizeof key, "%s/server-key.pem", dir);

  if (!readable (cert) || !readable (key)) {
    nbdkit_error ("TLS: %s must hold server-cert.pem and server-key.pem "
                  "(see nbdkit-security(1))", dir);
    free (dir);
    return -1;
  }
  if (cfg->tls_verify_peer && !readable (ca)) {
    nbdkit_error ("TLS: --tls-verify-peer needs %s", ca);
    free (dir);
    return -1;
  }

  r = gnutls_certificate_allocate_credentials (&x509_creds);
  if (r < 0)
    goto gnutls_fail;
  if (readable (ca)) {
    r = gnutls_certificate_set_x509_trust_file (x509_creds, ca,
                                                GNUTLS_X509_FMT_PEM);
    if (r < 0) {
      nbdkit_error ("TLS: %s: %s", ca, gnutls_strerror (r));
      goto fail;
    }
  }
  if (readable (crl)) {
    r = gnutls_certificate_set_x509_crl_file (x509_creds, crl,
                                              GNUTLS_X509_FMT_PEM);
    if (r < 0) {
      nbdkit_error ("TLS: %s: %s", crl, gnutls_strerror (r));
      goto fail;
    }
  }
  r = gnutls_certificate_set_x509_key_file (x509_creds, cert, key,
                                            GNUTLS_X509_FMT_PEM);
  if (r < 0) {
    nbdkit_error ("TLS: %s, %s: %s", cert, key, gnutls_strerror (r));
    goto fail;
  }
  gnutls_certificate_set_known_dh_params (x509_creds,
                                          GNUTLS_SEC_PARAM_MEDIUM);
  nbdkit_debug ("TLS: X.509 certificates loaded from %s", dir);
  free (dir);
  creds_type = CREDS_X509;
  return 0;

 gnutls_fail:
  nbdkit_error ("TLS: %s", gnutls_strerror (r));
 fail:
  free (dir);
  return -1;
}

/* The PSK keys, read once at start-up: GnuTLS's own file callback
 * would reopen the file on every handshake, after -u has dropped the
 * right to read it.
 */
struct psk_key {
  char *user;
  unsigned char *key;
  size_t len;
};
DEFINE_VECTOR_TYPE (psk_key_list, struct psk_key);
static psk_key_list psk_keys = empty_vector;

static int
hexval (int c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int
psk_lookup (gnutls_session_t s, const char *user, gnutls_datum_t *key)
{
  for (size_t i = 0; i < psk_keys.len; i++)
    if (strcmp (psk_keys.ptr[i].user, user) == 0) {
      key->data = gnutls_malloc (psk_keys.ptr[i].len);
      if (!key->data)
        return -1;
      memcpy (key->data, psk_keys.ptr[i].key, psk_keys.ptr[i].len);
      key->size = psk_keys.ptr[i].len;
      return 0;
    }
  return -1;                    /* unknown user: the handshake fails */
}

/* psktool's format: one "username:hexkey" per line. */
static int
load_psk (const struct config *cfg)
{
  FILE *fp = fopen (cfg->tls_psk, "r");
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  unsigned lineno = 0;

  if (!fp) {
    nbdkit_error ("TLS: --tls-psk: %s: %m", cfg->tls_psk);
    return -1;
  }
  while ((len = getline (&line, &cap, fp)) != -1) {
    lineno++;
    while (len > 0 && (line[len-1] == '\n' || line[len-1] == '\r'))
      line[--len] = '\0';
    if (len == 0 || line[0] == '#')
      continue;
    char *colon = strchr (line, ':');
    size_t hexlen = colon ? strlen (colon + 1) : 0;
    if (!colon || colon == line || hexlen == 0 || hexlen % 2 != 0) {
      nbdkit_error ("TLS: %s:%u: expected username:hexkey",
                    cfg->tls_psk, lineno);
      goto fail;
    }
    struct psk_key k = { .len = hexlen / 2 };
    k.user = strndup (line, colon - line);
    k.key = malloc (k.len);
    if (!k.user || !k.key || psk_key_list_reserve (&psk_keys, 1) == -1) {
      nbdkit_error ("TLS: out of memory");
      free (k.user);
      free (k.key);
      goto fail;
    }
    for (size_t i = 0; i < k.len; i++) {
      int hi = hexval (colon[1 + 2*i]), lo = hexval (colon[2 + 2*i]);
      if (hi < 0 || lo < 0) {
        nbdkit_error ("TLS: %s:%u: the key is not hexadecimal",
                      cfg->tls_psk, lineno);
        free (k.user);
        free (k.key);
        goto fail;
      }
      k.key[i] = hi << 4 | lo;
    }
    psk_key_list_append (&psk_keys, k);   /* cannot fail: reserved */
  }
  free (line);
  line = NULL;
  fclose (fp);
  fp = NULL;
  if (psk_keys.len == 0) {
    nbdkit_error ("TLS: %s holds no keys", cfg->tls_psk);
    return -1;
  }

  int r = gnutls_psk_allocate_server_credentials (&psk_creds);
  if (r < 0) {
    nbdkit_error ("TLS: %s", gnutls_strerror (r));
    return -1;
  }
  gnutls_psk_set_server_credentials_function (psk_creds, psk_lookup);
  gnutls_psk_set_server_known_dh_params (psk_creds, GNUTLS_SEC_PARAM_MEDIUM);
  nbdkit_debug ("TLS: %zu PSK key(s) loaded from %s", psk_keys.len,
                cfg->tls_psk);
  creds_type = CREDS_PSK;
  return 0;

 fail:
  free (line);
  if (fp)
    fclose (fp);
  return -1;
}

/* -D nbdkit.tls.log=N: GnuTLS's own messages, as debug lines. */
static void
gnutls_log (int level, const char *msg)
{
  nbdkit_debug ("gnutls: %d: %s", level, msg);
}

/* --tls=on with no certificates where they are looked for: as nbdkit
 * does, say so and serve without TLS (STARTTLS is then refused).
 * --tls=require would be useless without them, so it fails later.
 */
static bool
certificates_missing (const struct config *cfg)
{
  char *dir = certificates_dir (cfg);
  char cert[PATH_MAX], key[PATH_MAX];
  bool missing = true;
  if (dir) {
    snprintf (cert, sizeof cert, "%s/server-cert.pem", dir);
    snprintf (key, sizeof key, "%s/server-key.pem", dir);
    missing = !readable (cert) || !readable (key);
  }
  free (dir);
  return missing;
}

static bool
cpu_has_fast_aes_gcm (void)
{
#if (defined (__x86_64__) || defined (__i386__)) && defined (__GNUC__)
  __builtin_cpu_init ();
  return __builtin_cpu_supports ("aes") && __builtin_cpu_supports ("pclmul");
#else
  return false;
#endif
}

/* Whether the policy has a PSK key exchange: without one a PSK server
 * can complete no handshake, which is better said at start-up.
 */
static bool
priority_has_psk_kx (gnutls_priority_t p)
{
  const unsigned int *kx;
  int n = gnutls_priority_kx_list (p, &kx);
  for (int i = 0; i < n; i++)
    if (kx[i] == GNUTLS_KX_PSK || kx[i] == GNUTLS_KX_DHE_PSK ||
        kx[i] == GNUTLS_KX_ECDHE_PSK)
      return true;
  return false;
}

static int
load_priority (const struct config *cfg)
{
  char def[256];
  const char *str = cfg->tls_priority;
  const char *err_pos = NULL;

  if (!str) {
    snprintf (def, sizeof def, "%s%s%s", PRIORITY_BASE,
              creds_type == CREDS_PSK ? PRIORITY_PSK_KX : "",
              cpu_has_fast_aes_gcm () ? PRIORITY_SERVER_ORDER : "");
    str = def;
  }
  int r = gnutls_priority_init (&priority, str, &err_pos);
  if (r < 0) {
    if (cfg->tls_priority && err_pos)
      nbdkit_error ("--tls-priority: invalid GnuTLS priority string at "
                    "position %td (\"%s\"): %s", err_pos - str, err_pos,
                    gnutls_strerror (r));
    else
      nbdkit_error ("TLS: gnutls_priority_init: \"%s\": %s",
                    str, gnutls_strerror (r));
    return -1;
  }
  if (creds_type == CREDS_PSK && !priority_has_psk_kx (priority)) {
    nbdkit_error ("--tls-priority: \"%s\" enables no PSK key exchange; "
                  "with --tls-psk add :+ECDHE-PSK:+DHE-PSK:+PSK", str);
    gnutls_priority_deinit (priority);
    priority = NULL;
    return -1;
  }
  nbdkit_debug ("TLS: priority \"%s\"", str);
  return 0;
}

int
tls_load (struct config *cfg)
{
  if (cfg->tls == TLS_ON && !cfg->tls_psk && certificates_missing (cfg)) {
    /* Without --tls, TLS is on only because --tls-certificates named
     * a directory: that is where the certificates were missing.
     */
    fprintf (stderr, "%s: warning: %s but no TLS certificates were "
             "found (server-cert.pem and server-key.pem); TLS is disabled "
             "and clients asking for it are refused.  Use "
             "--tls-certificates=DIR (see nbdkit(1)).\n", cfg->program,
             cfg->tls_given ? "--tls=on" : "--tls-certificates was given");
    cfg->tls = TLS_OFF;
    return 0;
  }
  if (cfg->tls == TLS_OFF)
    return 0;
  int r = gnutls_global_init ();
  if (r < 0) {
    nbdkit_error ("TLS: gnutls_global_init: %s", gnutls_strerror (r));
    return -1;
  }
  if (nbdkit_debug_tls_log > 0) {
    gnutls_global_set_log_function (gnutls_log);
    gnutls_global_set_log_level (nbdkit_debug_tls_log);
  }
  if ((cfg->tls_psk ? load_psk (cfg) : load_x509 (cfg)) == -1)
    return -1;
  verify_peer = cfg->tls_verify_peer;
  return load_priority (cfg);
}

/* ---- the transport under the session ---- */

/* Once the session is up, GnuTLS reads each record in two pieces, its
 * 5-byte header and then its body: two read calls per 16 KiB of a
 * client's writes (2622 for 20 MiB).  So the socket is read up to
 * TLS_IN_SIZE at a time and GnuTLS served from that; its wait
 * (transport_pull_timeout) sees what is buffered.  Nothing else reads
 * the socket of a TLS connection.
 */
#define TLS_IN_SIZE (256 * 1024)

static ssize_t
transport_pull (gnutls_transport_ptr_t p, void *buf, size_t len)
{
  struct connection *conn = p;
  ssize_t r;
  if (conn->tls->in_pos < conn->tls->in_len) {
    size_t n = conn->tls->in_len - conn->tls->in_pos;
    if (n > len)
      n = len;
    memcpy (buf, conn->tls->in + conn->tls->in_pos, n);
    conn->tls->in_pos += n;
    return n;
  }
  if (conn->tls_active && conn->tls->in == NULL && len < TLS_IN_SIZE)
    conn->tls->in = malloc (TLS_IN_SIZE);
  if (conn->tls_active && conn->tls->in && len < TLS_IN_SIZE) {
    do
      r = read (conn->sockin, conn->tls->in, TLS_IN_SIZE);
    while (r == -1 && errno == EINTR);
    if (r <= 0) {
      if (r == -1)
        gnutls_transport_set_errno (conn->tls->session, errno);
      return r;
    }
    conn->tls->in_len = r;
    conn->tls->in_pos = 0;
    return transport_pull (p, buf, len);
  }
  do
    r = read (conn->sockin, buf, len);
  while (r == -1 && errno == EINTR);
  if (r == -1)
    gnutls_transport_set_errno (conn->tls->session, errno);
  return r;
}

/* GnuTLS waits for input here: >0 readable, 0 timed out (at MS or at
 * the handshake deadline, whichever comes first), -1 on error.
 */
static int
transport_pull_timeout (gnutls_transport_ptr_t p, unsigned int ms)
{
  struct connection *conn = p;
  if (conn->tls->in_pos < conn->tls->in_len)
    return 1;                   /* read ahead already */
  int r = conn_poll_input (conn, ms == GNUTLS_INDEFINITE_TIMEOUT ||
                                 ms > INT_MAX ? -1 : (int) ms);
  if (r == -1)
    gnutls_transport_set_errno (conn->tls->session, errno);
  return r;
}

/* Write IOV to the socket, as a whole. */
static int
push_all (struct connection *conn, struct iovec *iov, int iovcnt)
{
  while (iovcnt > 0) {
    ssize_t r;
    if (conn->sockout_is_socket) {
      struct msghdr msg = { .msg_iov = iov, .msg_iovlen = iovcnt };
      r = sendmsg (conn->sockout, &msg, MSG_NOSIGNAL);
    }
    else
      r = writev (conn->sockout, iov, iovcnt);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    while (iovcnt > 0 && (size_t) r >= iov->iov_len) {
      r -= iov->iov_len;
      iov++;
      iovcnt--;
    }
    if (iovcnt > 0) {
      iov->iov_base = (char *) iov->iov_base + r;
      iov->iov_len -= r;
    }
  }
  return 0;
}

/* A large reply's records are batched (see tls_sendv): GnuTLS pushes
 * each 16 KiB record on its own, and one system call per record cost
 * more than encrypting it.  TLS_OUT_SIZE bytes go out per call.
 */
#define TLS_OUT_SIZE (256 * 1024)

static int
out_flush (struct connection *conn)
{
  struct iovec v = { .iov_base = conn->tls->out,
                     .iov_len = conn->tls->out_len };
  conn->tls->out_len = 0;
  return v.iov_len ? push_all (conn, &v, 1) : 0;
}

static ssize_t
transport_push (gnutls_transport_ptr_t p, const giovec_t *iov, int iovcnt)
{
  struct connection *conn = p;
  ssize_t r;
  if (conn->tls->batching) {
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) {
      if (conn->tls->out_len + iov[i].iov_len > TLS_OUT_SIZE &&
          out_flush (conn) == -1)
        goto err;
      if (iov[i].iov_len > TLS_OUT_SIZE) {
        struct iovec v = { iov[i].iov_base, iov[i].iov_len };
        if (push_all (conn, &v, 1) == -1)
          goto err;
      }
      else {
        memcpy (conn->tls->out + conn->tls->out_len, iov[i].iov_base,
                iov[i].iov_len);
        conn->tls->out_len += iov[i].iov_len;
      }
      total += iov[i].iov_len;
    }
    return total;
  err:
    gnutls_transport_set_errno (conn->tls->session, errno);
    return -1;
  }
  do {
    if (conn->sockout_is_socket) {
      struct msghdr msg = {
        .msg_iov = (struct iovec *) iov, .msg_iovlen = iovcnt,
      };
      r = sendmsg (conn->sockout, &msg, MSG_NOSIGNAL);
    }
    else
      r = writev (conn->sockout, (const struct iovec *) iov, iovcnt);
  } while (r == -1 && errno == EINTR);
  if (r == -1)
    gnutls_transport_set_errno (conn->tls->session, errno);
  return r;
}

/* ---- sessions ---- */

/* Over TCP, a client that decrypts more slowly than we encrypt keeps
 * its receive window full.  Records queued beyond the window are then
 * sent by the kernel when the client's ACK arrives, in the client's
 * system call: on a shared machine the slower side pays for moving the
 * faster side's data.  Keeping at most TLS_UNSENT_MAX bytes unsent in
 * the socket makes our own send wait for the window instead, so we
 * move our data.  Measured (bench/HISTORY.md, 2026-11-24): 1 MiB reads
 * and nbdcopy out over TLS on 127.0.0.1 gain 8-16% with X.509 and
 * 36-41% with PSK.  Plain TCP is left alone: there it cost 1 MiB reads
 * as much as it gained copies.
 */
#define TLS_UNSENT_MAX (64 * 1024)

static void
limit_unsent (struct connection *conn)
{
  int v = TLS_UNSENT_MAX;
  if (conn->sockout_is_socket && strcmp (conn->transport, "tcp") == 0 &&
      setsockopt (conn->sockout, IPPROTO_TCP, TCP_NOTSENT_LOWAT,
                  &v, sizeof v) == -1)
    nbdkit_debug ("TLS: TCP_NOTSENT_LOWAT: %m");
}

/* Who the peer proved to be: the PSK identity, or the DN of its
 * verified certificate (the issuer's DN if ISSUER).  malloc'd; "" when
 * there is none; NULL only when out of memory.
 */
static char *
peer_identity (gnutls_session_t s, bool issuer)
{
  if (gnutls_auth_get_type (s) == GNUTLS_CRD_PSK) {
    const char *user = gnutls_psk_server_get_username (s);
    return strdup (issuer || !user ? "" : user);
  }

  unsigned n = 0;
  const gnutls_datum_t *list = gnutls_certificate_get_peers (s, &n);
  gnutls_x509_crt_t crt;
  gnutls_datum_t dn = { NULL, 0 };
  char *ret = NULL;

  if (!list || n == 0 || gnutls_x509_crt_init (&crt) < 0)
    return strdup ("");
  if (gnutls_x509_crt_import (crt, &list[0], GNUTLS_X509_FMT_DER) >= 0 &&
      (issuer ? gnutls_x509_crt_get_issuer_dn3 (crt, &dn, 0)
              : gnutls_x509_crt_get_dn3 (crt, &dn, 0)) >= 0)
    ret = strndup ((const char *) dn.data, dn.size);
  else
    ret = strdup ("");
  gnutls_free (dn.data);
  gnutls_x509_crt_deinit (crt);
  return ret;
}

/* Why a client certificate failed to verify, short enough for a
 * tracer's default string size (bpftrace keeps 64 bytes): "client
 * certificate expired", or GnuTLS's own wording for rarer reasons.
 * malloc'd, or NULL.
 */
static char *
verify_failure (unsigned status)
{
  static const struct { unsigned bit; const char *what; } reasons[] = {
    { GNUTLS_CERT_PURPOSE_MISMATCH, "not for TLS clients" },
    { GNUTLS_CERT_EXPIRED, "expired" },
    { GNUTLS_CERT_NOT_ACTIVATED, "not yet valid" },
    { GNUTLS_CERT_SIGNER_NOT_FOUND, "from an unknown CA" },
    { GNUTLS_CERT_REVOKED, "revoked" },
    { GNUTLS_CERT_SIGNATURE_FAILURE, "badly signed" },
    { GNUTLS_CERT_INSECURE_ALGORITHM, "with an insecure algorithm" },
  };
  char buf[256] = "client certificate";
  size_t n = strlen (buf);
  bool named = false;

  for (size_t i = 0; i < ARRAY_SIZE (reasons); i++)
    if (status & reasons[i].bit) {
      n += snprintf (buf + n, n < sizeof buf ? sizeof buf - n : 0, "%s%s",
                     named ? ", " : " ", reasons[i].what);
      named = true;
    }
  if (named)
    return n < sizeof buf ? strdup (buf) : NULL;

  gnutls_datum_t st = { NULL, 0 };
  char *ret = NULL;
  if (gnutls_certificate_verification_status_print (status, GNUTLS_CRT_X509,
                                                    &st, 0) >= 0 &&
      asprintf (&ret, "client certificate: %s", (const char *) st.data) < 0)
    ret = NULL;
  gnutls_free (st.data);
  return ret;
}

int
tls_start (struct connection *conn)
{
  gnutls_session_t s;
  int r;

  NBDKIT_TLS_HANDSHAKE_START (conn->id, credentials_name ());
  r = gnutls_init (&s, GNUTLS_SERVER);
  if (r < 0) {
    nbdkit_error ("TLS: gnutls_init: %s", gnutls_strerror (r));
    NBDKIT_TLS_HANDSHAKE_DONE (conn->id, (int64_t) probe_u64 (0),
                               gnutls_strerror (r), "");
    return -1;
  }
  conn->tls = calloc (1, sizeof *conn->tls);
  if (!conn->tls) {
    nbdkit_error ("TLS: calloc: %m");
    gnutls_deinit (s);
    NBDKIT_TLS_HANDSHAKE_DONE (conn->id, (int64_t) probe_u64 (0),
                               "out of memory", "");
    return -1;
  }
  conn->tls->session = s;
  r = gnutls_priority_set (s, priority);
  if (r >= 0) {
    if (creds_type == CREDS_PSK)
      r = gnutls_credentials_set (s, GNUTLS_CRD_PSK, psk_creds);
    else {
      r = gnutls_credentials_set (s, GNUTLS_CRD_CERTIFICATE, x509_creds);
      if (verify_peer) {
        /* No certificate, or one that does not verify against the CA
         * (untrusted, expired, revoked), fails the handshake.
         */
        gnutls_certificate_server_set_request (s, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert2 (s, client_purpose,
                                         ARRAY_SIZE (client_purpose), 0);
      }
    }
  }
  if (r < 0)
    goto fail;

  gnutls_transport_set_ptr (s, conn);
  gnutls_transport_set_pull_function (s, transport_pull);
  gnutls_transport_set_pull_timeout_function (s, transport_pull_timeout);
  gnutls_transport_set_vec_push_function (s, transport_push);
  /* With a timeout set, GnuTLS waits through pull_timeout, which keeps
   * the connection's deadline however the client dribbles its bytes.
   */
  if (conn->deadline_ns) {
    uint64_t now = now_ns ();
    uint64_t left = conn->deadline_ns > now
      ? (conn->deadline_ns - now) / 1000000 + 1 : 1;
    gnutls_handshake_set_timeout (s, left < UINT_MAX ? left : UINT_MAX);
  }
  else
    gnutls_handshake_set_timeout (s, GNUTLS_INDEFINITE_TIMEOUT);

  do
    r = gnutls_handshake (s);
  while (r < 0 && !gnutls_error_is_fatal (r) && r != GNUTLS_E_TIMEDOUT);
  if (r < 0)
    goto fail;

  conn->tls_active = true;
  limit_unsent (conn);
  if (conn->metrics)
    metrics_tls_session (gnutls_protocol_get_name (
                           gnutls_protocol_get_version (s)),
                         gnutls_cipher_get_name (gnutls_cipher_get (s)));
  if (NBDKIT_TLS_HANDSHAKE_DONE_ENABLED () || conn->cfg->verbose) {
    char *desc = gnutls_session_get_desc (s);
    char *who = peer_identity (s, false);
    NBDKIT_TLS_HANDSHAKE_DONE (conn->id, (int64_t) probe_u64 (1),
                               desc ? desc : "", who ? who : "");
    nbdkit_debug ("TLS: connection %" PRIu64 " secured: %s, peer \"%s\"",
                  conn->id, desc ? desc : "", who ? who : "");
    gnutls_free (desc);
    free (who);
  }
  return 0;

 fail:
  if (r == GNUTLS_E_TIMEDOUT) {
    NBDKIT_LIMIT_HIT (conn->id, "handshake_timeout");
    conn_set_closing (conn, "handshake timeout");
  }
  {
    /* A certificate that did not verify: say why and whose it was. */
    char *why = NULL, *who = NULL;
    if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
      why = verify_failure (gnutls_session_get_verify_cert_status (s));
      who = peer_identity (s, false);
    }
    /* The reason goes through the stack: a tracer reading a string
     * from a page not yet touched (gnutls' message table) reads "".
     */
    char reason[256];
    snprintf (reason, sizeof reason, "%s", why ? why : gnutls_strerror (r));
    NBDKIT_TLS_HANDSHAKE_DONE (conn->id, (int64_t) probe_u64 (0), reason,
                               who ? who : "");
    nbdkit_debug ("TLS: handshake with connection %" PRIu64 " failed: %s%s%s",
                  conn->id, reason,
                  who && *who ? ", peer " : "", who ? who : "");
    free (why);
    free (who);
  }
  gnutls_deinit (s);
  free (conn->tls);
  conn->tls = NULL;
  return -1;
}

ssize_t
tls_recv (struct connection *conn, void *buf, size_t len)
{
  gnutls_session_t s = conn->tls->session;
  /* During negotiation every wait is bounded by the deadline (the
   * pull_timeout function clamps it); afterwards reads block.
   */
  gnutls_record_set_timeout (s, conn->deadline_ns ? 3600 * 1000 : 0);
  for (;;) {
    ssize_t r = gnutls_record_recv (s, buf, len);
    if (r >= 0)
      return r;
    switch (r) {
    case GNUTLS_E_INTERRUPTED:
    case GNUTLS_E_AGAIN:
      continue;
    case GNUTLS_E_PREMATURE_TERMINATION:
      return 0;                 /* gone without close_notify: EOF */
    case GNUTLS_E_TIMEDOUT:
      NBDKIT_LIMIT_HIT (conn->id, "handshake_timeout");
      conn_set_closing (conn, "handshake timeout");
      errno = ETIMEDOUT;
      return -1;
    default:
      nbdkit_debug ("TLS: connection %" PRIu64 ": receive: %s",
                    conn->id, gnutls_strerror ((int) r));
      errno = EIO;
      return -1;
    }
  }
}

static int
send_all (gnutls_session_t s, const char *p, size_t len)
{
  while (len > 0) {
    ssize_t r = gnutls_record_send (s, p, len);
    if (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN)
      continue;
    if (r < 0) {
      errno = EIO;
      return -1;
    }
    p += r;
    len -= r;
  }
  return 0;
}

/* Small replies are corked into as few records as fit; large ones go
 * out piece by piece, so no copy of a whole read reply is made.
 */
int
tls_sendv (struct connection *conn, const struct iovec *iov, int iovcnt)
{
  gnutls_session_t s = conn->tls->session;
  size_t total = 0;
  for (int i = 0; i < iovcnt; i++)
    total += iov[i].iov_len;
  bool cork = total <= 64 * 1024 && iovcnt > 1;
  bool batch = total > 64 * 1024;

  if (batch && conn->tls->out == NULL)
    conn->tls->out = malloc (TLS_OUT_SIZE);
  if (batch && conn->tls->out) {
    conn->tls->batching = true;
    conn->tls->out_len = 0;
    int r = 0;
    for (int i = 0; r == 0 && i < iovcnt; i++)
      r = send_all (s, iov[i].iov_base, iov[i].iov_len);
    conn->tls->batching = false;
    if (r == 0 && out_flush (conn) == -1) {
      errno = EIO;
      r = -1;
    }
    return r;
  }
  if (cork)
    gnutls_record_cork (s);
  for (int i = 0; i < iovcnt; i++)
    if (send_all (s, iov[i].iov_base, iov[i].iov_len) == -1) {
      if (cork)
        gnutls_record_uncork (s, 0);
      return -1;
    }
  if (cork) {
    int r;
    do
      r = gnutls_record_uncork (s, GNUTLS_RECORD_WAIT);
    while (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN);
    if (r < 0) {
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

void
tls_end (struct connection *conn)
{
  if (!conn->tls)
    return;
  /* Tell the client we are done, without waiting for its answer, and
   * without blocking on a client that has stopped reading: the socket
   * is closed next anyway.
   */
  if (conn->tls_active) {
    if (conn->sockout_is_socket) {
      int flags = fcntl (conn->sockout, F_GETFL);
      if (flags != -1)
        fcntl (conn->sockout, F_SETFL, flags | O_NONBLOCK);
    }
    gnutls_bye (conn->tls->session, GNUTLS_SHUT_WR);
  }
  gnutls_deinit (conn->tls->session);
  conn->tls_active = false;
  free (conn->tls->out);
  free (conn->tls->in);
  free (conn->tls);
  conn->tls = NULL;
}

char *
tls_peer_dn (struct connection *conn, bool issuer)
{
  if (!conn->tls_active ||
      gnutls_auth_get_type (conn->tls->session) != GNUTLS_CRD_CERTIFICATE)
    return strdup ("");
  return peer_identity (conn->tls->session, issuer);
}

char *
tls_peer_username (struct connection *conn)
{
  if (!conn->tls_active ||
      gnutls_auth_get_type (conn->tls->session) != GNUTLS_CRD_PSK)
    return strdup ("");
  return peer_identity (conn->tls->session, false);
}

#else /* !HAVE_GNUTLS */

bool
tls_available (void)
{
  return false;
}

int
tls_load (struct config *cfg)
{
  if (cfg->tls == TLS_OFF)
    return 0;
  nbdkit_error ("this nbdkit was built without TLS (GnuTLS)");
  return -1;
}

int
tls_start (struct connection *conn)
{
  errno = ENOTSUP;
  return -1;
}

ssize_t
tls_recv (struct connection *conn, void *buf, size_t len)
{
  errno = ENOTSUP;
  return -1;
}

int
tls_sendv (struct connection *conn, const struct iovec *iov, int iovcnt)
{
  errno = ENOTSUP;
  return -1;
}

void
tls_end (struct connection *conn)
{
}

char *
tls_peer_dn (struct connection *conn, bool issuer)
{
  return strdup ("");
}

char *
tls_peer_username (struct connection *conn)
{
  return strdup ("");
}

#endif /* !HAVE_GNUTLS */
