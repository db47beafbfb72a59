/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The vddk plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-vddk-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* At start-up (outside any request, so no id and no cookie), once
   * the VDDK library has been looked for: the file
   * loaded (or the directory searched, or the file that failed to
   * load), whether it has VixDiskLib_QueryAllocatedBlocks (1) or not
   * (0), and 0, or -1 when no usable library was found. Arguments:
   * path, has QueryAllocatedBlocks, result. */
  probe vddk_library (const char *path, int32_t has_query_blocks,
                      int32_t result);

  /* After each NBD connection has connected to VDDK and opened the
   * disk (as it opens, outside any request: no cookie): the transport
   * mode VDDK chose ("" if unknown or on failure),
   * and 0, or -1 when ConnectEx, Open or GetInfo failed. Arguments: id,
   * file, transport mode, result. */
  probe vddk_open (uint64_t id, const char *file, const char *transport,
                   int32_t result);

  /* When a VDDK call fails: the request's id and cookie (cookie 0 for
   * a call no request made: at start-up, with id 0 too, or as a
   * connection opens), the function, the VixError and the library's
   * text for it. Arguments: id, cookie, call, VixError, message. */
  probe vddk_error (uint64_t id, uint64_t cookie, const char *call,
                    uint64_t vix_error, const char *message);

  /* After each block status request has asked VDDK which chunks hold
   * data: the sectors asked about, the number of allocated blocks in
   * the answer, and errno 0, or the error (EIO for an answer that
   * failed the checks). Arguments: id, cookie, start sector, sectors,
   * blocks, errno. */
  probe vddk_query_blocks (uint64_t id, uint64_t cookie,
                           uint64_t start_sector, uint64_t nr_sectors,
                           uint32_t nr_blocks, int32_t error);
};
