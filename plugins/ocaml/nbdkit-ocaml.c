/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 *
 * The C side of the OCaml binding.  A plugin .so is the plugin's
 * modules, NBDKit and this file linked by ocamlopt -output-obj with the
 * PIC runtime.  plugin_init starts the OCaml runtime once; the
 * plugin's top level calls NBDKit.register_plugin, which lands in
 * ocaml_nbdkit_register below: each callback present in the record is
 * kept as a GC root and wired into the C plugin structure.
 *
 * One OCaml callback runs at a time: every entry from the server takes
 * "lock" (OCaml 4's runtime is not reentrant across threads), and the
 * thread model is at most SERIALIZE_ALL_REQUESTS.  Values made for a
 * call (int64 boxes, the read buffer) stay GC roots until it returns.
 */
#define CAML_NAME_SPACE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <caml/alloc.h>
#include <caml/callback.h>
#include <caml/memory.h>
#include <caml/mlvalues.h>
#include <caml/printexc.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

/* Fields of NBDKit.plugin, in the order of its type. */
enum {
  F_NAME, F_LONGNAME, F_VERSION, F_DESCRIPTION, F_CONFIG_HELP,
  F_MAGIC_CONFIG_KEY, F_THREAD_MODEL,
  F_LOAD, F_UNLOAD, F_CONFIG, F_CONFIG_COMPLETE, F_DUMP_PLUGIN,
  F_GET_READY, F_AFTER_FORK, F_PRECONNECT, F_CLEANUP, F_LIST_EXPORTS,
  F_DEFAULT_EXPORT,
  F_OPEN, F_CLOSE, F_GET_SIZE, F_EXPORT_DESCRIPTION, F_BLOCK_SIZE,
  F_CAN_WRITE, F_CAN_FLUSH, F_IS_ROTATIONAL, F_CAN_TRIM, F_CAN_ZERO,
  F_CAN_FAST_ZERO, F_CAN_FUA, F_CAN_MULTI_CONN, F_CAN_EXTENTS,
  F_CAN_CACHE,
  F_PREAD, F_PWRITE, F_FLUSH, F_TRIM, F_ZERO, F_CACHE, F_EXTENTS,
  F_COUNT
};

static struct nbdkit_plugin plugin;
static value fns[F_COUNT];              /* Some f -> f, else Val_unit */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int errno_set;                   /* set_error called in this call */

/* Report the exception EXN raised by callback NAME: one error line, and
 * the errno (NBDKit.Error's, else set_error's, else EIO).
 */
static void
report (const char *name, value exn)
{
  const value *err = caml_named_value ("NBDKit.Error");

  if (err != NULL && Tag_val (exn) == 0 && Wosize_val (exn) == 3 &&
      Field (exn, 0) == *err) {
    nbdkit_error ("%s: %s", name, String_val (Field (exn, 2)));
    nbdkit_set_error (Int_val (Field (exn, 1)));
  }
  else {
    char *s = caml_format_exception (exn);
    nbdkit_error ("%s: %s", name, s ? s : "exception");
    free (s);
    if (!errno_set)
      nbdkit_set_error (EIO);
  }
}

/* Call fns[F] with N arguments; on an exception report it and return
 * 0, else store the result in *R and return 1.  The caller holds lock
 * and has ARGS and *R registered as local roots.
 */
static int
call (const char *name, int f, int n, value *args, value *r)
{
  value v;

  errno_set = 0;
  v = caml_callbackN_exn (fns[f], n, args);
  if (Is_exception_result (v)) {
    report (name, Extract_exception (v));
    return 0;
  }
  *r = v;
  return 1;
}

#define ENTER pthread_mutex_lock (&lock)
#define LEAVE pthread_mutex_unlock (&lock)

/* A callback taking unit and returning unit or nothing useful. */
#define UNIT_CB(fn, F, ret_t, fail, okv)                        \
  static ret_t fn (void)                                        \
  {                                                             \
    CAMLparam0 ();                                              \
    CAMLlocal2 (arg, r);                                        \
    int ok;                                                     \
    ENTER;                                                      \
    arg = Val_unit;                                             \
    ok = call (#fn, F, 1, &arg, &r);                            \
    LEAVE;                                                      \
    CAMLreturnT (ret_t, ok ? (okv) : (fail));                   \
  }
UNIT_CB (config_complete, F_CONFIG_COMPLETE, int, -1, 0)
UNIT_CB (get_ready, F_GET_READY, int, -1, 0)
UNIT_CB (after_fork, F_AFTER_FORK, int, -1, 0)

#define VOID_CB(fn, F)                                          \
  static void fn (void)                                         \
  {                                                             \
    CAMLparam0 ();                                              \
    CAMLlocal2 (arg, r);                                        \
    ENTER;                                                      \
    arg = Val_unit;                                             \
    call (#fn, F, 1, &arg, &r);                                 \
    LEAVE;                                                      \
    CAMLreturn0;                                                \
  }
VOID_CB (load, F_LOAD)
VOID_CB (unload_cb, F_UNLOAD)
VOID_CB (dump_plugin, F_DUMP_PLUGIN)
VOID_CB (cleanup, F_CLEANUP)

/* OCaml 4.13's caml_startup gives the calling thread a malloc'd
 * alternate signal stack for its SIGSEGV handler and has no call that
 * frees it (4.14 added one); sigaltstack then holds the only pointer,
 * and LeakSanitizer reports it.  plugin_init notes which stack it was,
 * and unload, on the same thread (the server loads and unloads on its
 * main thread), gives SIGSEGV back its default action, takes the stack
 * down and frees it.
 */
static void *ocaml_altstack;

static void
note_altstack (const stack_t *before)
{
  stack_t after;

  if (sigaltstack (NULL, &after) == 0 && !(after.ss_flags & SS_DISABLE) &&
      after.ss_sp != NULL &&
      ((before->ss_flags & SS_DISABLE) || after.ss_sp != before->ss_sp))
    ocaml_altstack = after.ss_sp;
}

static void
free_altstack (void)
{
  stack_t cur, off = { .ss_flags = SS_DISABLE };

  if (ocaml_altstack == NULL ||
      sigaltstack (NULL, &cur) == -1 || (cur.ss_flags & SS_DISABLE) ||
      cur.ss_sp != ocaml_altstack)
    return;                     /* another thread's, or already gone */
  signal (SIGSEGV, SIG_DFL);
  if (sigaltstack (&off, NULL) == 0) {
    free (ocaml_altstack);
    ocaml_altstack = NULL;
  }
}

/* Always wired: after the plugin's own unload, shut the OCaml runtime
 * down (at_exit functions run) and free its signal stack.  The server
 * never loads the plugin again, so the runtime is not needed after.
 */
static void
unload (void)
{
  if (fns[F_UNLOAD] != Val_unit)
    unload_cb ();
  caml_shutdown ();
  free_altstack ();
}

static int
config (const char *key, const char *v)
{
  CAMLparam0 ();
  CAMLlocalN (args, 2);
  CAMLlocal1 (r);
  int ok;
  ENTER;
  args[0] = caml_copy_string (key);
  args[1] = caml_copy_string (v);
  ok = call ("config", F_CONFIG, 2, args, &r);
  LEAVE;
  CAMLreturnT (int, ok ? 0 : -1);
}

static int
preconnect (int readonly)
{
  CAMLparam0 ();
  CAMLlocal2 (arg, r);
  int ok;
  ENTER;
  arg = Val_bool (readonly);
  ok = call ("preconnect", F_PRECONNECT, 1, &arg, &r);
  LEAVE;
  CAMLreturnT (int, ok ? 0 : -1);
}

static int
list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  CAMLparam0 ();
  CAMLlocalN (args, 2);
  CAMLlocal3 (r, l, pair);
  int ok, ret = 0;
  ENTER;
  args[0] = Val_bool (readonly);
  args[1] = Val_bool (is_tls);
  ok = call ("list_exports", F_LIST_EXPORTS, 2, args, &r);
  if (!ok)
    ret = -1;
  for (l = ok ? r : Val_emptylist; ret == 0 && l != Val_emptylist;
       l = Field (l, 1)) {
    const char *desc;
    pair = Field (l, 0);
    desc = String_val (Field (pair, 1));
    if (nbdkit_add_export (exports, String_val (Field (pair, 0)),
                           *desc ? desc : NULL) == -1)
      ret = -1;
  }
  LEAVE;
  CAMLreturnT (int, ret);
}

static const char *
default_export (int readonly, int is_tls)
{
  CAMLparam0 ();
  CAMLlocalN (args, 2);
  CAMLlocal1 (r);
  const char *ret = NULL;
  ENTER;
  args[0] = Val_bool (readonly);
  args[1] = Val_bool (is_tls);
  if (call ("default_export", F_DEFAULT_EXPORT, 2, args, &r))
    ret = nbdkit_strdup_intern (String_val (r));
  LEAVE;
  CAMLreturnT (const char *, ret);
}

/* A handle is a malloc'd GC root holding the connection's value. */
static void *
open_ (int readonly)
{
  CAMLparam0 ();
  CAMLlocal2 (arg, r);
  value *h = NULL;
  ENTER;
  arg = Val_bool (readonly);
  if (call ("open", F_OPEN, 1, &arg, &r)) {
    h = malloc (sizeof *h);
    if (h == NULL)
      nbdkit_error ("open: malloc: %m");
    else {
      *h = r;
      caml_register_generational_global_root (h);
    }
  }
  LEAVE;
  CAMLreturnT (void *, h);
}

static void
close_ (void *handle)
{
  CAMLparam0 ();
  CAMLlocal2 (arg, r);
  value *h = handle;
  ENTER;
  if (fns[F_CLOSE] != Val_unit) {
    arg = *h;
    call ("close", F_CLOSE, 1, &arg, &r);
  }
  caml_remove_generational_global_root (h);
  free (h);
  LEAVE;
  CAMLreturn0;
}

static int64_t
get_size (void *handle)
{
  CAMLparam0 ();
  CAMLlocal2 (arg, r);
  int64_t ret = -1;
  ENTER;
  arg = *(value *) handle;
  if (call ("get_size", F_GET_SIZE, 1, &arg, &r)) {
    ret = Int64_val (r);
    if (ret < 0) {
      nbdkit_error ("get_size: negative size %" PRId64, ret);
      nbdkit_set_error (EINVAL);
      ret = -1;
    }
  }
  LEAVE;
  CAMLreturnT (int64_t, ret);
}

static const char *
export_description (void *handle)
{
  CAMLparam0 ();
  CAMLlocal2 (arg, r);
  const char *ret = NULL;
  ENTER;
  arg = *(value *) handle;
  if (call ("export_description", F_EXPORT_DESCRIPTION, 1, &arg, &r))
    ret = nbdkit_strdup_intern (String_val (r));
  LEAVE;
  CAMLreturnT (const char *, ret);
}

static int
block_size (void *handle, uint32_t *min, uint32_t *pref, uint32_t *max)
{
  CAMLparam0 ();
  CAMLlocal2 (arg, r);
  int ret = -1;
  ENTER;
  arg = *(value *) handle;
  if (call ("block_size", F_BLOCK_SIZE, 1, &arg, &r)) {
    *min = Long_val (Field (r, 0));
    *pref = Long_val (Field (r, 1));
    *max = Long_val (Field (r, 2));
    ret = 0;
  }
  LEAVE;
  CAMLreturnT (int, ret);
}

/* can_* returning bool, or a constant constructor (fua, cache): both
 * are immediate integers.
 */
#define CAN_CB(fn, F)                                           \
  static int fn (void *handle)                                  \
  {                                                             \
    CAMLparam0 ();                                              \
    CAMLlocal2 (arg, r);                                        \
    int ret = -1;                                               \
    ENTER;                                                      \
    arg = *(value *) handle;                                    \
    if (call (#fn, F, 1, &arg, &r))                             \
      ret = Int_val (r);                                        \
    LEAVE;                                                      \
    CAMLreturnT (int, ret);                                     \
  }
CAN_CB (can_write, F_CAN_WRITE)
CAN_CB (can_flush, F_CAN_FLUSH)
CAN_CB (is_rotational, F_IS_ROTATIONAL)
CAN_CB (can_trim, F_CAN_TRIM)
CAN_CB (can_zero, F_CAN_ZERO)
CAN_CB (can_fast_zero, F_CAN_FAST_ZERO)
CAN_CB (can_fua, F_CAN_FUA)
CAN_CB (can_multi_conn, F_CAN_MULTI_CONN)
CAN_CB (can_extents, F_CAN_EXTENTS)
CAN_CB (can_cache, F_CAN_CACHE)

static int
pread_ (void *handle, void *buf, uint32_t count, uint64_t offset,
        uint32_t flags)
{
  CAMLparam0 ();
  CAMLlocalN (args, 4);
  CAMLlocal1 (r);
  int ret = -1;
  ENTER;
  args[0] = *(value *) handle;
  args[1] = caml_alloc_string (count);
  memset (Bytes_val (args[1]), 0, count);
  args[2] = caml_copy_int64 (offset);
  args[3] = Val_int (flags);
  if (call ("pread", F_PREAD, 4, args, &r)) {
    memcpy (buf, Bytes_val (args[1]), count);
    ret = 0;
  }
  LEAVE;
  CAMLreturnT (int, ret);
}

static int
pwrite_ (void *handle, const void *buf, uint32_t count, uint64_t offset,
         uint32_t flags)
{
  CAMLparam0 ();
  CAMLlocalN (args, 4);
  CAMLlocal1 (r);
  int ret = -1;
  ENTER;
  args[0] = *(value *) handle;
  args[1] = caml_alloc_initialized_string (count, buf);
  args[2] = caml_copy_int64 (offset);
  args[3] = Val_int (flags);
  if (call ("pwrite", F_PWRITE, 4, args, &r))
    ret = 0;
  LEAVE;
  CAMLreturnT (int, ret);
}

static int
flush (void *handle, uint32_t flags)
{
  CAMLparam0 ();
  CAMLlocalN (args, 2);
  CAMLlocal1 (r);
  int ret = -1;
  ENTER;
  args[0] = *(value *) handle;
  args[1] = Val_int (flags);
  if (call ("flush", F_FLUSH, 2, args, &r))
    ret = 0;
  LEAVE;
  CAMLreturnT (int, ret);
}

/* trim, zero, cache: (handle, count, offset, flags) -> unit. */
static int
range (const char *name, int f, void *handle, uint32_t count,
       uint64_t offset, uint32_t flags)
{
  CAMLparam0 ();
  CAMLlocalN (args, 4);
  CAMLlocal1 (r);
  int ret = -1;
  ENTER;
  args[0] = *(value *) handle;
  args[1] = caml_copy_int32 (count);
  args[2] = caml_copy_int64 (offset);
  args[3] = Val_int (flags);
  if (call (name, f, 4, args, &r))
    ret = 0;
  LEAVE;
  CAMLreturnT (int, ret);
}
static int trim (void *h, uint32_t n, uint64_t o, uint32_t f)
{ return range ("trim", F_TRIM, h, n, o, f); }
static int zero (void *h, uint32_t n, uint64_t o, uint32_t f)
{ return range ("zero", F_ZERO, h, n, o, f); }
static int cache (void *h, uint32_t n, uint64_t o, uint32_t f)
{ return range ("cache", F_CACHE, h, n, o, f); }

static int
extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
         struct nbdkit_extents *e)
{
  CAMLparam0 ();
  CAMLlocalN (args, 4);
  CAMLlocal3 (r, l, x);
  int ret = -1;
  ENTER;
  args[0] = *(value *) handle;
  args[1] = caml_copy_int32 (count);
  args[2] = caml_copy_int64 (offset);
  args[3] = Val_int (flags);
  if (call ("extents", F_EXTENTS, 4, args, &r)) {
    ret = 0;
    for (l = r; ret == 0 && l != Val_emptylist; l = Field (l, 1)) {
      uint32_t type = 0;
      x = Field (l, 0);
      if (Bool_val (Field (x, 2))) type |= NBDKIT_EXTENT_HOLE;
      if (Bool_val (Field (x, 3))) type |= NBDKIT_EXTENT_ZERO;
      if (nbdkit_add_extent (e, Int64_val (Field (x, 0)),
                             Int64_val (Field (x, 1)), type) == -1)
        ret = -1;
    }
  }
  LEAVE;
  CAMLreturnT (int, ret);
}

/* --- Registration ------------------------------------------------------- */

static const char *
opt_string (value s)
{
  return caml_string_length (s) > 0 ? strdup (String_val (s)) : NULL;
}

value
ocaml_nbdkit_register (value p)
{
  CAMLparam1 (p);
  int i, model;

  for (i = F_LOAD; i < F_COUNT; i++) {
    value o = Field (p, i);
    fns[i] = Is_block (o) ? Field (o, 0) : Val_unit;
    caml_register_generational_global_root (&fns[i]);
  }
  plugin.name = strdup (String_val (Field (p, F_NAME)));
  plugin.longname = opt_string (Field (p, F_LONGNAME));
  plugin.version = opt_string (Field (p, F_VERSION));
  plugin.description = opt_string (Field (p, F_DESCRIPTION));
  plugin.config_help = opt_string (Field (p, F_CONFIG_HELP));
  plugin.magic_config_key = opt_string (Field (p, F_MAGIC_CONFIG_KEY));
  model = Int_val (Field (p, F_THREAD_MODEL));
  if (model > NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS)
    model = NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS;
  plugin._thread_model = model;

#define WIRE(field, F, fn) if (fns[F] != Val_unit) plugin.field = fn
  WIRE (load, F_LOAD, load);
  plugin.unload = unload;
  WIRE (config, F_CONFIG, config);
  WIRE (config_complete, F_CONFIG_COMPLETE, config_complete);
  WIRE (dump_plugin, F_DUMP_PLUGIN, dump_plugin);
  WIRE (get_ready, F_GET_READY, get_ready);
  WIRE (after_fork, F_AFTER_FORK, after_fork);
  WIRE (preconnect, F_PRECONNECT, preconnect);
  WIRE (cleanup, F_CLEANUP, cleanup);
  WIRE (list_exports, F_LIST_EXPORTS, list_exports);
  WIRE (default_export, F_DEFAULT_EXPORT, default_export);
  WIRE (open, F_OPEN, open_);
  plugin.close = close_;
  WIRE (get_size, F_GET_SIZE, get_size);
  WIRE (export_description, F_EXPORT_DESCRIPTION, export_description);
  WIRE (block_size, F_BLOCK_SIZE, block_size);
  WIRE (can_write, F_CAN_WRITE, can_write);
  WIRE (can_flush, F_CAN_FLUSH, can_flush);
  WIRE (is_rotational, F_IS_ROTATIONAL, is_rotational);
  WIRE (can_trim, F_CAN_TRIM, can_trim);
  WIRE (can_zero, F_CAN_ZERO, can_zero);
  WIRE (can_fast_zero, F_CAN_FAST_ZERO, can_fast_zero);
  WIRE (can_fua, F_CAN_FUA, can_fua);
  WIRE (can_multi_conn, F_CAN_MULTI_CONN, can_multi_conn);
  WIRE (can_extents, F_CAN_EXTENTS, can_extents);
  WIRE (can_cache, F_CAN_CACHE, can_cache);
  WIRE (pread, F_PREAD, pread_);
  WIRE (pwrite, F_PWRITE, pwrite_);
  WIRE (flush, F_FLUSH, flush);
  WIRE (trim, F_TRIM, trim);
  WIRE (zero, F_ZERO, zero);
  WIRE (cache, F_CACHE, cache);
  WIRE (extents, F_EXTENTS, extents);
#undef WIRE
  CAMLreturn (Val_unit);
}

__attribute__ ((visibility ("default")))
struct nbdkit_plugin *
plugin_init (void)
{
  static char *argv[] = { (char *) "nbdkit", NULL };
  static int started;
  value r;

  if (!started) {
    stack_t before;

    started = 1;
    if (sigaltstack (NULL, &before) == -1)
      before.ss_flags = SS_DISABLE;
    r = caml_startup_exn (argv);
    note_altstack (&before);
    if (Is_exception_result (r)) {
      char *s = caml_format_exception (Extract_exception (r));
      nbdkit_error ("OCaml plugin: the plugin's top level raised %s",
                    s ? s : "an exception");
      free (s);
      return NULL;
    }
  }
  if (plugin.name == NULL) {
    nbdkit_error ("OCaml plugin: NBDKit.register_plugin was not called");
    return NULL;
  }
  plugin._struct_size = sizeof plugin;
  plugin._api_version = NBDKIT_API_VERSION;
  return &plugin;
}

/* --- Helpers called from OCaml ------------------------------------------ */

/* This server's additions to nbdkit 1.32's interface are weak in
 * <nbdkit-common.h>, so the .so loads in nbdkit 1.32: there the ids
 * are 0, probe and disconnect do nothing, and the parsers answer -2.
 */

value
ocaml_nbdkit_disconnect (value force)
{
  nbdkit_disconnect (Bool_val (force));
  return Val_unit;
}

/* (rc, probability): rc 0, -1 (the server logged why) or -2. */
value
ocaml_nbdkit_parse_probability (value what, value s)
{
  CAMLparam2 (what, s);
  CAMLlocal2 (r, d);
  double p = 0;
  int rc = NBDKIT_SERVER_HAS (nbdkit_parse_probability)
    ? nbdkit_parse_probability (String_val (what), String_val (s), &p) : -2;
  d = caml_copy_double (p);
  r = caml_alloc_tuple (2);
  Store_field (r, 0, Val_int (rc));
  Store_field (r, 1, d);
  CAMLreturn (r);
}

/* (rc, sec, nsec), rc as above. */
value
ocaml_nbdkit_parse_delay (value what, value s)
{
  CAMLparam2 (what, s);
  CAMLlocal1 (r);
  unsigned sec = 0, nsec = 0;
  int rc = NBDKIT_SERVER_HAS (nbdkit_parse_delay)
    ? nbdkit_parse_delay (String_val (what), String_val (s), &sec, &nsec)
    : -2;
  r = caml_alloc_tuple (3);
  Store_field (r, 0, Val_int (rc));
  Store_field (r, 1, Val_long (sec));
  Store_field (r, 2, Val_long (nsec));
  CAMLreturn (r);
}

value
ocaml_nbdkit_set_error (value err)
{
  errno_set = 1;
  nbdkit_set_error (Int_val (err));
  return Val_unit;
}

value
ocaml_nbdkit_debug (value s)
{
  nbdkit_debug ("%s", String_val (s));
  return Val_unit;
}

value
ocaml_nbdkit_export_name (value unit)
{
  CAMLparam1 (unit);
  const char *n = nbdkit_export_name ();
  CAMLreturn (caml_copy_string (n ? n : ""));
}

value
ocaml_nbdkit_is_tls (value unit)
{
  return Val_bool (nbdkit_is_tls () == 1);
}

value
ocaml_nbdkit_parse_size (value s)
{
  CAMLparam1 (s);
  CAMLreturn (caml_copy_int64 (nbdkit_parse_size (String_val (s))));
}

value
ocaml_nbdkit_parse_bool (value s)
{
  return Val_int (nbdkit_parse_bool (String_val (s)));
}

value
ocaml_nbdkit_shutdown (value unit)
{
  nbdkit_shutdown ();
  return Val_unit;
}

value
ocaml_nbdkit_probe (value name, value a1, value a2, value text)
{
  nbdkit_probe (String_val (name), Int64_val (a1), Int64_val (a2),
                String_val (text));
  return Val_unit;
}

value
ocaml_nbdkit_connection_id (value unit)
{
  CAMLparam1 (unit);
  CAMLreturn (caml_copy_int64 (nbdkit_connection_id ()));
}

value
ocaml_nbdkit_request_cookie (value unit)
{
  CAMLparam1 (unit);
  CAMLreturn (caml_copy_int64 (nbdkit_request_cookie ()));
}
