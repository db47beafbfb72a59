/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ip filter: admit or refuse each client by who it is: its IPv4
 * or IPv6 address, its Unix socket credentials (pid, uid, gid) or
 * security label, its vsock CID and port, or the DN of its verified
 * TLS certificate or of that certificate's issuer.
 *
 * allow= and deny= fill two rule lists at config time; they are
 * read-only afterwards, so .preconnect and .open, which run in each
 * connection's thread, need no lock.  The allow list is tried first,
 * then the deny list; a client neither list names is admitted.
 *
 * The certificate is known only after TLS, long after .preconnect.
 * So .preconnect decides with what it knows, a certificate rule
 * counting as "unknown": a known match in the allow list admits, else
 * an unknown rule there leaves the decision open, else a known match
 * in the deny list refuses, else an unknown rule there leaves it open,
 * else the client is admitted.  What is left open is decided in .open
 * (the client asking for an export, after STARTTLS), with the
 * certificate.  The answer is the one the full lists give, and each
 * client gets one decision: ip_allowed or ip_refused fires once, with
 * the peer and the rule.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#ifdef __linux__
#include <linux/vm_sockets.h>
#endif

#include <nbdkit-filter.h>

#define NBDKIT_PROBE_SEMAPHORES
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "vector.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (ip_allowed);
NBDKIT_PROBE_SEMAPHORE (ip_refused);

enum rule_kind {
  RULE_ANY,                     /* all, any */
  RULE_ANY_IPV4,                /* allipv4, anyipv4 */
  RULE_ANY_IPV6,                /* allipv6, anyipv6 */
  RULE_ANY_UNIX,                /* allunix, anyunix */
  RULE_ANY_VSOCK,               /* allvsock, anyvsock */
  RULE_IPV4,                    /* A.B.C.D[/NN] */
  RULE_IPV6,                    /* A:B:...[/NN] */
  RULE_PID,                     /* pid:PID */
  RULE_UID,                     /* uid:UID */
  RULE_GID,                     /* gid:GID */
  RULE_VSOCK_CID,               /* vsock-cid:CID */
  RULE_VSOCK_PORT,              /* vsock-port:PORT */
  RULE_SECURITY,                /* security:LABEL */
  RULE_DN,                      /* dn:DN */
  RULE_ISSUER_DN,               /* issuer-dn:DN */
};

/* Whether a rule matches a client; UNKNOWN while what it asks about
 * (the certificate, before TLS) cannot be known yet.
 */
enum match { NO, YES, UNKNOWN };

struct rule {
  enum rule_kind kind;
  char *text;                   /* "deny=10.0.0.0/8", for messages */
  unsigned prefix;              /* RULE_IPV4, RULE_IPV6: bits compared */
  struct in_addr ipv4;
  struct in6_addr ipv6;
  uint32_t id;                  /* pid, uid, gid, cid or port */
  char *str;                    /* the label, or the DN */
};

DEFINE_VECTOR_TYPE (rule_list, struct rule);

/* Filled by config, read-only once the server runs. */
static rule_list allow_rules = empty_vector;
static rule_list deny_rules = empty_vector;
static bool any_tls_rules;      /* a dn: or issuer-dn: rule: see .open */

static void
free_rules (rule_list *rules)
{
  for (size_t i = 0; i < rules->len; i++) {
    free (rules->ptr[i].text);
    free (rules->ptr[i].str);
  }
  rule_list_reset (rules);
}

static void
ip_unload (void)
{
  free_rules (&allow_rules);
  free_rules (&deny_rules);
}

/* A keyword and the rule it stands for. */
static const struct {
  const char *word;
  enum rule_kind kind;
} keywords[] = {
  { "all", RULE_ANY }, { "any", RULE_ANY },
  { "allipv4", RULE_ANY_IPV4 }, { "anyipv4", RULE_ANY_IPV4 },
  { "allipv6", RULE_ANY_IPV6 }, { "anyipv6", RULE_ANY_IPV6 },
  { "allunix", RULE_ANY_UNIX }, { "anyunix", RULE_ANY_UNIX },
  { "allvsock", RULE_ANY_VSOCK }, { "anyvsock", RULE_ANY_VSOCK },
};

/* Rules of the form PREFIX:NUMBER. */
static const struct {
  const char *prefix;
  enum rule_kind kind;
} numbered[] = {
  { "pid:", RULE_PID }, { "uid:", RULE_UID }, { "gid:", RULE_GID },
  { "vsock-cid:", RULE_VSOCK_CID }, { "vsock-port:", RULE_VSOCK_PORT },
};

/* Rules of the form PREFIX:STRING.  A DN has commas of its own
 * (CN=a,O=b), so a DN rule takes the rest of its parameter, commas
 * and all (parse_rules): it is the last rule of its allow= or deny=.
 */
static const struct {
  const char *prefix;
  enum rule_kind kind;
  const char *what;
  bool rest;                    /* takes the rest of the parameter */
} named[] = {
  { "security:", RULE_SECURITY, "label", false },
  { "dn:", RULE_DN, "DN", true },
  { "issuer-dn:", RULE_ISSUER_DN, "DN", true },
};

/* An address with an optional /NN: fills R, or reports why not. */
static int
parse_address (const char *key, char *item, struct rule *r)
{
  char *slash = strchr (item, '/');
  unsigned max;

  if (slash)
    *slash = '\0';
  if (inet_pton (AF_INET, item, &r->ipv4) == 1) {
    r->kind = RULE_IPV4;
    max = 32;
  }
  else if (inet_pton (AF_INET6, item, &r->ipv6) == 1) {
    r->kind = RULE_IPV6;
    max = 128;
  }
  else {
    nbdkit_error ("%s: not an address or a rule this filter knows: \"%s\"",
                  key, item);
    return -1;
  }
  r->prefix = max;
  if (slash) {
    const char *p = slash + 1;
    char *end;
    unsigned long bits;

    errno = 0;
    bits = strtoul (p, &end, 10);
    if (*p < '0' || *p > '9' || *end != '\0' || errno != 0 ||
        bits > max) {
      nbdkit_error ("%s: bad prefix length \"/%s\" after %s (0 to %u)",
                    key, p, item, max);
      return -1;
    }
    r->prefix = bits;
  }
  return 0;
}

/* One comma-separated ITEM of allow= or deny=: fills R. */
static int
parse_rule (const char *key, char *item, struct rule *r)
{
  size_t i;

  for (i = 0; i < ARRAY_SIZE (keywords); i++)
    if (strcmp (item, keywords[i].word) == 0) {
      r->kind = keywords[i].kind;
      return 0;
    }

  for (i = 0; i < ARRAY_SIZE (numbered); i++) {
    size_t n = strlen (numbered[i].prefix);
    if (strncmp (item, numbered[i].prefix, n) == 0) {
      char what[64];
      snprintf (what, sizeof what, "%s: %.*s", key, (int) (n - 1), item);
      r->kind = numbered[i].kind;
      return nbdkit_parse_uint32_t (what, item + n, &r->id);
    }
  }

  for (i = 0; i < ARRAY_SIZE (named); i++) {
    size_t n = strlen (named[i].prefix);
    if (strncmp (item, named[i].prefix, n) == 0) {
      if (item[n] == '\0') {
        nbdkit_error ("%s: %s needs a %s", key, named[i].prefix,
                      named[i].what);
        return -1;
      }
      r->kind = named[i].kind;
      r->str = strdup (item + n);
      if (!r->str) {
        nbdkit_error ("strdup: %m");
        return -1;
      }
      return 0;
    }
  }

  return parse_address (key, item, r);
}

/* Does ITEM start a rule that takes the rest of the parameter? */
static bool
takes_rest (const char *item)
{
  for (size_t i = 0; i < ARRAY_SIZE (named); i++)
    if (named[i].rest &&
        strncmp (item, named[i].prefix, strlen (named[i].prefix)) == 0)
      return true;
  return false;
}

/* allow=a,b,c or deny=...: append each item to RULES.  An empty value
 * adds nothing (as nbdkit does); an empty item is an error.
 */
static int
parse_rules (const char *key, const char *value, rule_list *rules)
{
  CLEANUP_FREE char *copy = strdup (value);
  char *item, *next;

  if (!copy) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  if (*copy == '\0')
    return 0;

  for (item = copy; item; item = next) {
    struct rule r = { 0 };

    next = takes_rest (item) ? NULL : strchr (item, ',');
    if (next)
      *next++ = '\0';
    if (*item == '\0') {
      nbdkit_error ("%s: empty rule in \"%s\"", key, value);
      return -1;
    }
    if (asprintf (&r.text, "%s=%s", key, item) == -1) {
      nbdkit_error ("asprintf: %m");
      return -1;
    }
    if (parse_rule (key, item, &r) == -1 ||
        rule_list_append (rules, r) == -1) {
      if (errno == ENOMEM)
        nbdkit_error ("%s: %m", key);
      free (r.text);
      free (r.str);
      return -1;
    }
    if (r.kind == RULE_DN || r.kind == RULE_ISSUER_DN)
      any_tls_rules = true;
  }
  return 0;
}

static int
ip_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
           const char *key, const char *value)
{
  if (strcmp (key, "allow") == 0)
    return parse_rules (key, value, &allow_rules);
  if (strcmp (key, "deny") == 0)
    return parse_rules (key, value, &deny_rules);
  return next (nxdata, key, value);
}

#define ip_config_help \
  "allow=RULE[,RULE...]  Admit clients that match (tried first).\n" \
  "deny=RULE[,RULE...]   Refuse clients that match (tried second).\n" \
  "                      dn:DN and issuer-dn:DN take the rest of the list."

/* What we know of the client, gathered once per connection; the Unix
 * credentials and the label only when a rule asks for them.
 */
struct peer {
  struct sockaddr_storage addr;
  socklen_t addrlen;
  bool have_cred;
  int64_t pid, uid, gid;
  bool have_label;
  char *label;                  /* NULL: the kernel gives none */
  bool tls_known;               /* in .open: the certificate is known */
  char *dn[2];                  /* [0] its DN, [1] its issuer's; NULL
                                 * until asked, "" for none */
};

static void
peer_free (struct peer *p)
{
  free (p->label);
  free (p->dn[0]);
  free (p->dn[1]);
}

static void
peer_get_cred (struct peer *p)
{
  if (p->have_cred)
    return;
  p->have_cred = true;
  p->pid = nbdkit_peer_pid ();
  p->uid = nbdkit_peer_uid ();
  p->gid = nbdkit_peer_gid ();
}

static const char *
peer_get_label (struct peer *p)
{
  if (!p->have_label) {
    p->have_label = true;
    p->label = nbdkit_peer_security_context ();
    if (!p->label)
      nbdkit_debug ("the client has no security label");
  }
  return p->label;
}

/* The DN of the client's verified certificate (ISSUER: of its
 * issuer), "" without TLS, without a certificate or without
 * --tls-verify-peer; NULL only if the server could not say (then the
 * rule does not match).
 */
static const char *
peer_get_dn (struct peer *p, bool issuer)
{
  if (!p->dn[issuer]) {
    p->dn[issuer] = issuer ? nbdkit_peer_tls_issuer_dn ()
                           : nbdkit_peer_tls_dn ();
    if (p->dn[issuer])
      nbdkit_debug ("client %sDN: \"%s\"", issuer ? "issuer " : "",
                    p->dn[issuer]);
  }
  return p->dn[issuer];
}

/* The first BITS bits of A and B are equal. */
static bool
prefix_equal (const uint8_t *a, const uint8_t *b, unsigned bits)
{
  unsigned bytes = bits / 8, rest = bits % 8;

  if (memcmp (a, b, bytes) != 0)
    return false;
  if (rest == 0)
    return true;
  uint8_t mask = 0xff << (8 - rest);
  return (a[bytes] & mask) == (b[bytes] & mask);
}

/* The client's IPv4 address, if it has one: an IPv4 peer, or an IPv6
 * peer whose address is IPv4-mapped (::ffff:A.B.C.D, as a dual-stack
 * socket sees IPv4 clients), so that deny=127.0.0.1 cannot be dodged.
 */
static const struct in_addr *
peer_ipv4 (const struct peer *p)
{
  if (p->addr.ss_family == AF_INET)
    return &((const struct sockaddr_in *) &p->addr)->sin_addr;
  if (p->addr.ss_family == AF_INET6) {
    const struct in6_addr *a =
      &((const struct sockaddr_in6 *) &p->addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED (a))
      return (const struct in_addr *) &a->s6_addr[12];
  }
  return NULL;
}

static bool rule_matches_known (const struct rule *r, struct peer *p);

static enum match
rule_matches (const struct rule *r, struct peer *p)
{
  if ((r->kind == RULE_DN || r->kind == RULE_ISSUER_DN) && !p->tls_known)
    return UNKNOWN;
  return rule_matches_known (r, p) ? YES : NO;
}

static bool
rule_matches_known (const struct rule *r, struct peer *p)
{
  const int family = p->addr.ss_family;
  const struct in_addr *v4 = peer_ipv4 (p);
  const char *label, *dn;

  switch (r->kind) {
  case RULE_ANY:
    return true;
  case RULE_ANY_IPV4:
    return v4 != NULL;
  case RULE_ANY_IPV6:
    return family == AF_INET6;
  case RULE_ANY_UNIX:
    return family == AF_UNIX;
  case RULE_ANY_VSOCK:
#ifdef AF_VSOCK
    return family == AF_VSOCK;
#else
    return false;
#endif
  case RULE_IPV4:
    return v4 && prefix_equal ((const uint8_t *) v4,
                               (const uint8_t *) &r->ipv4, r->prefix);
  case RULE_IPV6:
    return family == AF_INET6 &&
      prefix_equal (((const struct sockaddr_in6 *) &p->addr)->sin6_addr.s6_addr,
                    r->ipv6.s6_addr, r->prefix);
  case RULE_PID:
  case RULE_UID:
  case RULE_GID:
    if (family != AF_UNIX)
      return false;
    peer_get_cred (p);
    if (r->kind == RULE_PID)
      return p->pid >= 0 && p->pid == r->id;
    if (r->kind == RULE_UID)
      return p->uid >= 0 && p->uid == r->id;
    return p->gid >= 0 && p->gid == r->id;
  case RULE_VSOCK_CID:
  case RULE_VSOCK_PORT:
#ifdef AF_VSOCK
    if (family == AF_VSOCK) {
      const struct sockaddr_vm *vm = (const struct sockaddr_vm *) &p->addr;
      return r->id == (r->kind == RULE_VSOCK_CID ? vm->svm_cid
                                                  : vm->svm_port);
    }
#endif
    return false;
  case RULE_SECURITY:
    label = peer_get_label (p);
    return label && strcmp (label, r->str) == 0;
  case RULE_DN:
  case RULE_ISSUER_DN:
    dn = peer_get_dn (p, r->kind == RULE_ISSUER_DN);
    return dn && *dn && strcmp (dn, r->str) == 0;
  }
  return false;
}

/* The peer as one line, for the probes and messages. */
static void
describe_peer (struct peer *p, char *buf, size_t len)
{
  char host[INET6_ADDRSTRLEN] = "?";

  switch (p->addr.ss_family) {
  case AF_INET: {
    const struct sockaddr_in *sin = (const struct sockaddr_in *) &p->addr;
    inet_ntop (AF_INET, &sin->sin_addr, host, sizeof host);
    snprintf (buf, len, "%s:%u", host, ntohs (sin->sin_port));
    break;
  }
  case AF_INET6: {
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) &p->addr;
    inet_ntop (AF_INET6, &sin6->sin6_addr, host, sizeof host);
    snprintf (buf, len, "[%s]:%u", host, ntohs (sin6->sin6_port));
    break;
  }
  case AF_UNIX:
    peer_get_cred (p);
    snprintf (buf, len, "unix pid=%" PRIi64 " uid=%" PRIi64 " gid=%" PRIi64,
              p->pid, p->uid, p->gid);
    break;
#ifdef AF_VSOCK
  case AF_VSOCK: {
    const struct sockaddr_vm *vm = (const struct sockaddr_vm *) &p->addr;
    snprintf (buf, len, "vsock cid=%u port=%u", vm->svm_cid, vm->svm_port);
    break;
  }
#endif
  default:
    snprintf (buf, len, "family %d", p->addr.ss_family);
  }
}

/* The first rule of RULES that matches, with *UNKNOWN set if, before
 * or without one, a rule could not be decided yet.
 */
static const struct rule *
first_match (rule_list *rules, struct peer *p, bool *unknown)
{
  *unknown = false;
  for (size_t i = 0; i < rules->len; i++) {
    switch (rule_matches (&rules->ptr[i], p)) {
    case YES: return &rules->ptr[i];
    case UNKNOWN: *unknown = true; break;
    case NO: break;
    }
  }
  return NULL;
}

enum verdict { ALLOWED, REFUSED, UNDECIDED };

/* The allow list, then the deny list, as the top comment says. */
static enum verdict
decide (struct peer *p, const char **why)
{
  const struct rule *r;
  bool unknown;

  *why = "no rule matched";
  if ((r = first_match (&allow_rules, p, &unknown)) != NULL) {
    *why = r->text;
    return ALLOWED;
  }
  if (unknown)
    return UNDECIDED;
  if ((r = first_match (&deny_rules, p, &unknown)) != NULL) {
    *why = r->text;
    return REFUSED;
  }
  return unknown ? UNDECIDED : ALLOWED;
}

/* Decide for the client of this thread: 1 admit, 0 refuse (having said
 * why), -1 undecided until TLS (only while !TLS_KNOWN).
 */
static int
check_client (bool tls_known)
{
  struct peer p = { .addrlen = sizeof p.addr, .tls_known = tls_known };
  const char *why;
  char who[128];
  enum verdict v;

  /* A client we cannot place is refused: an address-based filter that
   * failed open would be no filter at all.
   */
  if (nbdkit_peer_name ((struct sockaddr *) &p.addr, &p.addrlen) == -1) {
    NBDKIT_PROBE (ip_refused, "unknown", "no peer address");
    nbdkit_error ("refused a client whose address is unknown");
    return 0;
  }

  v = decide (&p, &why);
  if (v == ALLOWED) {
    if (NBDKIT_PROBE_ENABLED (ip_allowed)) {
      describe_peer (&p, who, sizeof who);
      NBDKIT_PROBE (ip_allowed, who, why);
    }
  }
  else if (v == REFUSED) {
    describe_peer (&p, who, sizeof who);
    NBDKIT_PROBE (ip_refused, who, why);
    nbdkit_error ("client %s refused by %s", who, why);
  }
  else
    nbdkit_debug ("the client's certificate decides: after TLS");
  peer_free (&p);
  return v == ALLOWED ? 1 : v == REFUSED ? 0 : -1;
}

static int
ip_preconnect (nbdkit_next_preconnect *next, nbdkit_backend *nxdata,
               int readonly)
{
  if ((allow_rules.len > 0 || deny_rules.len > 0) &&
      check_client (false) == 0)
    return -1;
  return next (nxdata, readonly);
}

/* What .preconnect left open is decided here, once the client has
 * done TLS (or not) and asks for an export.  A client .preconnect
 * decided for is let through without a second decision.
 */
static void *
ip_open (nbdkit_next_open *next, nbdkit_context *nxdata, int readonly,
         const char *exportname, int is_tls)
{
  if (any_tls_rules) {
    struct peer p = { .addrlen = sizeof p.addr };
    const char *why;
    bool decided;

    decided = nbdkit_peer_name ((struct sockaddr *) &p.addr,
                                &p.addrlen) == -1 ||
      decide (&p, &why) != UNDECIDED;
    peer_free (&p);
    if (!decided && check_client (true) == 0) {
      errno = EACCES;
      return NULL;
    }
  }
  if (next (nxdata, readonly, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static struct nbdkit_filter filter = {
  .name = "ip",
  .longname = "nbdkit ip filter",
  .unload = ip_unload,
  .config = ip_config,
  .config_help = ip_config_help,
  .preconnect = ip_preconnect,
  .open = ip_open,
};

NBDKIT_REGISTER_FILTER (filter)
