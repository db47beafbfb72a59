/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The ip filter's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-ip-filter.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* A client is refused: before the handshake, or after TLS when a
   * dn: or issuer-dn: rule decides; peer as A.B.C.D:PORT,
   * [v6]:PORT, "unix pid=P uid=U gid=G" or "vsock cid=C port=P"; rule
   * is deny=ITEM, or "no peer address". It fires as the client
   * connects or negotiates, outside any request: no id, no cookie.
   * Arguments: peer, rule. */
  probe ip_refused (const char *peer, const char *rule);

  /* A client is let in (once, whichever moment decides); rule is
   * allow=ITEM or "no rule matched" (not fired when the filter has no
   * rules). Outside any request, as ip_refused. Arguments: peer,
   * rule. */
  probe ip_allowed (const char *peer, const char *rule);
};
