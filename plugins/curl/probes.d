/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's USDT probes, provider "nbdkit", fired with
 * NBDKIT_PROBE (<nbdkit-probe.h>) in nbdkit-curl-plugin.so.  Not
 * compiled: the declarations, in the syntax of server/probes.d, are
 * what tools/probes-gen.py turns into the tapset's aliases, the D
 * translators, the perf events' argument names and the tables of
 * nbdkit-probes(1); tests/test-probes-declared.sh keeps them equal to
 * the notes in the built .so.
 */
provider nbdkit {
  /* Once at start-up, after the request for the file's size (size -1
   * if it failed); it fires outside any request: no id, no cookie.
   * Arguments: url, HTTP status, size, ns. */
  probe curl_size (const char *url, int64_t http_status, int64_t size,
                   uint64_t ns);

  /* Before each range request (method GET for a read, PUT for a
   * write). Arguments: id, cookie, method, offset, count. */
  probe curl_range_start (uint64_t id, uint64_t cookie, const char *method,
                          uint64_t offset, uint32_t count);

  /* After each range request, on success or failure: status (0 for
   * file:// or when no reply came), bytes received or sent,
   * nanoseconds since the start, libcurl's result code. Arguments: id,
   * cookie, HTTP status, bytes, ns, curl code. */
  probe curl_range_done (uint64_t id, uint64_t cookie, int64_t http_status,
                         uint64_t bytes, uint64_t ns, int32_t curl_code);

  /* A partial reply carried another range than the read asked for
   * (first and last from its Content-Range, -1 if none); the read
   * fails with EIO. Arguments: id, cookie, offset, count, first, last. */
  probe curl_bad_range (uint64_t id, uint64_t cookie, uint64_t offset,
                        uint64_t count, int64_t first, int64_t last);

  /* A request took a handle from the pool: how long it waited (0 if
   * one was free), and which one (0 to connections-1); only while
   * traced. Arguments: id, cookie, wait ns, handle. */
  probe curl_pool_wait (uint64_t id, uint64_t cookie, uint64_t wait_ns,
                        uint32_t handle);

  /* After each run of the header or cookie script (kind "header" or
   * "cookie"; 128+N if killed by signal N, -1 if it could not start).
   * A script due runs in the thread of the request that needs it: id
   * and cookie are that request's (both 0 for the first run, at
   * start-up). Arguments: id, cookie, kind, iteration, ns, exit
   * status. */
  probe curl_script (uint64_t id, uint64_t cookie, const char *kind,
                     uint64_t iteration, uint64_t ns, int32_t exit_status);
};
