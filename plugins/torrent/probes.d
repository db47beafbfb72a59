/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The torrent plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-torrent-plugin.so.  Not
 * compiled: tools/probes-gen.py reads these declarations, and
 * tests/test-probes-declared.sh keeps them equal to the notes in the
 * built .so.
 */
provider nbdkit {
  /* Once at start-up, when the file to serve is chosen (after the
   * metadata of a magnet link has arrived). It fires outside any
   * request: no id, no cookie. Arguments: torrent name,
   * file path in the torrent, file size, piece length, pieces. */
  probe torrent_ready (const char *name, const char *file, int64_t size,
                       int64_t piece_length, int32_t pieces);

  /* A read needs pieces the session does not have yet: they are asked
   * for first, and the read waits. Arguments: id, cookie, first piece,
   * last piece, how many of them are missing. */
  probe torrent_wait_start (uint64_t id, uint64_t cookie, int32_t first,
                            int32_t last, int32_t missing);

  /* The wait ends: 0 pieces left when they all arrived, more when the
   * timeout passed or the server stopped (the read fails with EIO).
   * Arguments: id, cookie, pieces still missing, ns waited. */
  probe torrent_wait_done (uint64_t id, uint64_t cookie, int32_t left,
                           uint64_t ns);

  /* A piece arrived and passed its hash check. It fires in the
   * plugin's alert thread, on behalf of no request (the reads waiting
   * for it have their torrent_wait_done): no id, no cookie. Arguments:
   * piece. */
  probe torrent_piece (int64_t piece);
};
