/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 *
 * The C side of the Go binding (see plugin.h).  plugin_init asks the Go
 * side which callbacks the registered plugin has (goPluginSetup calls
 * go_setup with a mask), and wires a trampoline for each.  Handles are
 * small integers naming Go values in a table on the Go side: a Go
 * pointer must not be kept by C code.
 */
#define NBDKIT_API_VERSION 2
#include <stdint.h>
#include <stdlib.h>
#include <nbdkit-plugin.h>

#include "plugin.h"
#include "_cgo_export.h"

static struct nbdkit_plugin plugin;

#define H(h) ((uintptr_t) (h))

static void load (void) { goLoad (); }
static void unload (void) { goUnload (); }
static int config (const char *k, const char *v) { return goConfig ((char *) k, (char *) v); }
static int config_complete (void) { return goConfigComplete (); }
static void dump_plugin (void) { goDumpPlugin (); }
static int thread_model (void) { return goThreadModel (); }
static int preconnect (int ro) { return goPreconnect (ro); }
static int get_ready (void) { return goGetReady (); }
static int after_fork (void) { return goAfterFork (); }
static void cleanup (void) { goCleanup (); }
static int list_exports (int ro, int tls, struct nbdkit_exports *e)
{ return goListExports (ro, tls, e); }
static const char *default_export (int ro, int tls) { return goDefaultExport (ro, tls); }

static void *open_ (int ro) { return (void *) goOpen (ro); }
static void close_ (void *h) { goClose (H (h)); }
static int64_t get_size (void *h) { return goGetSize (H (h)); }
static const char *export_description (void *h) { return goExportDescription (H (h)); }
static int block_size (void *h, uint32_t *min, uint32_t *pref, uint32_t *max)
{ return goBlockSize (H (h), min, pref, max); }

#define CAN(name, bit) \
  static int name (void *h) { return goCan (H (h), bit); }
CAN (can_write, GO_CAN_WRITE)
CAN (can_flush, GO_CAN_FLUSH)
CAN (is_rotational, GO_IS_ROTATIONAL)
CAN (can_trim, GO_CAN_TRIM)
CAN (can_zero, GO_CAN_ZERO)
CAN (can_fast_zero, GO_CAN_FAST_ZERO)
CAN (can_fua, GO_CAN_FUA)
CAN (can_multi_conn, GO_CAN_MULTI_CONN)
CAN (can_extents, GO_CAN_EXTENTS)
CAN (can_cache, GO_CAN_CACHE)

static int pread_ (void *h, void *buf, uint32_t n, uint64_t off, uint32_t fl)
{ return goPread (H (h), buf, n, off, fl); }
static int pwrite_ (void *h, const void *buf, uint32_t n, uint64_t off, uint32_t fl)
{ return goPwrite (H (h), (void *) buf, n, off, fl); }
static int flush (void *h, uint32_t fl) { return goFlush (H (h), fl); }
static int trim (void *h, uint32_t n, uint64_t off, uint32_t fl)
{ return goRange (H (h), GO_TRIM, n, off, fl); }
static int zero (void *h, uint32_t n, uint64_t off, uint32_t fl)
{ return goRange (H (h), GO_ZERO, n, off, fl); }
static int cache (void *h, uint32_t n, uint64_t off, uint32_t fl)
{ return goRange (H (h), GO_CACHE, n, off, fl); }
static int extents (void *h, uint32_t n, uint64_t off, uint32_t fl,
                    struct nbdkit_extents *e)
{ return goExtents (H (h), n, off, fl, e); }

#define HAS(bit) (mask & (UINT64_C (1) << (bit)))

void
go_setup (uint64_t mask, char *name, char *longname, char *version,
          char *description, char *config_help, char *magic_config_key,
          int model)
{
  plugin.name = name;
  plugin.longname = longname;
  plugin.version = version;
  plugin.description = description;
  plugin.config_help = config_help;
  plugin.magic_config_key = magic_config_key;
  plugin._thread_model = model;
  plugin.open = open_;
  plugin.close = close_;
  plugin.get_size = get_size;
  plugin.pread = pread_;
  if (HAS (GO_LOAD)) plugin.load = load;
  if (HAS (GO_UNLOAD)) plugin.unload = unload;
  if (HAS (GO_CONFIG)) plugin.config = config;
  if (HAS (GO_CONFIG_COMPLETE)) plugin.config_complete = config_complete;
  if (HAS (GO_DUMP_PLUGIN)) plugin.dump_plugin = dump_plugin;
  if (HAS (GO_THREAD_MODEL)) plugin.thread_model = thread_model;
  if (HAS (GO_PRECONNECT)) plugin.preconnect = preconnect;
  if (HAS (GO_GET_READY)) plugin.get_ready = get_ready;
  if (HAS (GO_AFTER_FORK)) plugin.after_fork = after_fork;
  if (HAS (GO_CLEANUP)) plugin.cleanup = cleanup;
  if (HAS (GO_LIST_EXPORTS)) plugin.list_exports = list_exports;
  if (HAS (GO_DEFAULT_EXPORT)) plugin.default_export = default_export;
  if (HAS (GO_EXPORT_DESCRIPTION)) plugin.export_description = export_description;
  if (HAS (GO_BLOCK_SIZE)) plugin.block_size = block_size;
  if (HAS (GO_CAN_WRITE)) plugin.can_write = can_write;
  if (HAS (GO_CAN_FLUSH)) plugin.can_flush = can_flush;
  if (HAS (GO_IS_ROTATIONAL)) plugin.is_rotational = is_rotational;
  if (HAS (GO_CAN_TRIM)) plugin.can_trim = can_trim;
  if (HAS (GO_CAN_ZERO)) plugin.can_zero = can_zero;
  if (HAS (GO_CAN_FAST_ZERO)) plugin.can_fast_zero = can_fast_zero;
  if (HAS (GO_CAN_FUA)) plugin.can_fua = can_fua;
  if (HAS (GO_CAN_MULTI_CONN)) plugin.can_multi_conn = can_multi_conn;
  if (HAS (GO_CAN_EXTENTS)) plugin.can_extents = can_extents;
  if (HAS (GO_CAN_CACHE)) plugin.can_cache = can_cache;
  if (HAS (GO_PWRITE)) plugin.pwrite = pwrite_;
  if (HAS (GO_FLUSH)) plugin.flush = flush;
  if (HAS (GO_TRIM)) plugin.trim = trim;
  if (HAS (GO_ZERO)) plugin.zero = zero;
  if (HAS (GO_CACHE)) plugin.cache = cache;
  if (HAS (GO_EXTENTS)) plugin.extents = extents;
}

__attribute__ ((visibility ("default")))
struct nbdkit_plugin *
plugin_init (void)
{
  if (goPluginSetup () == -1)
    return NULL;
  plugin._struct_size = sizeof plugin;
  plugin._api_version = NBDKIT_API_VERSION;
  return &plugin;
}

/* Server functions. */
void go_error (const char *msg) { nbdkit_error ("%s", msg); }
void go_debug (const char *msg) { nbdkit_debug ("%s", msg); }
void go_set_error (int err) { nbdkit_set_error (err); }
const char *go_export_name (void) { return nbdkit_export_name (); }
int go_is_tls (void) { return nbdkit_is_tls (); }
int64_t go_parse_size (const char *s) { return nbdkit_parse_size (s); }
void go_shutdown (void) { nbdkit_shutdown (); }
const char *go_intern (const char *s) { return nbdkit_strdup_intern (s); }
int go_add_extent (void *e, uint64_t off, uint64_t len, uint32_t type)
{ return nbdkit_add_extent (e, off, len, type); }
int go_add_export (void *e, const char *name, const char *desc)
{ return nbdkit_add_export (e, name, desc); }
int go_use_default_export (void *e) { return nbdkit_use_default_export (e); }

/* This server's additions to nbdkit 1.32's interface are weak in
 * <nbdkit-common.h>: in nbdkit 1.32 the ids are 0, probe and
 * disconnect do nothing, and the parsers here fail with -2.
 */
void
go_probe (const char *name, int64_t a1, int64_t a2, const char *text)
{ nbdkit_probe (name, a1, a2, text); }
uint64_t go_connection_id (void) { return nbdkit_connection_id (); }
uint64_t go_request_cookie (void) { return nbdkit_request_cookie (); }
void go_disconnect (int force) { nbdkit_disconnect (force); }
int go_parse_probability (const char *what, const char *s, double *r)
{
  return NBDKIT_SERVER_HAS (nbdkit_parse_probability)
    ? nbdkit_parse_probability (what, s, r) : -2;
}
int go_parse_delay (const char *what, const char *s, unsigned *sec,
                    unsigned *nsec)
{
  return NBDKIT_SERVER_HAS (nbdkit_parse_delay)
    ? nbdkit_parse_delay (what, s, sec, nsec) : -2;
}
