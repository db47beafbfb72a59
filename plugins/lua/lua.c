/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The lua plugin: one Lua state runs a script whose global functions
 * (open, get_size, pread, ...) are the plugin's callbacks.
 *
 * This file owns the Lua state: it is created at load with the
 * standard libraries and the "nbdkit" table (debug, set_error, probe,
 * errno constants), the script named by script= (the magic key, so
 * "nbdkit lua disk.lua" works) is loaded and run at config, and the
 * state is closed at unload.  Each callback below pushes the script's
 * function of the same name and its arguments, and call_fn runs it
 * protected and checks what came back.
 *
 * The arguments are those of nbdkit 1.32's Lua host, which follows
 * version 1 of the plugin API (no flags, zero gets may_trim); the
 * plugin itself speaks version 2 to the server.  One state means the
 * thread model is serialize_all_requests, as in 1.32.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>

NBDKIT_PROBE_SEMAPHORE (lua_call_start);
NBDKIT_PROBE_SEMAPHORE (lua_call_done);

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

/* The Lua state, created at load and closed at unload. */
static lua_State *L;

/* Set at config, read-only afterwards. */
static char *script;            /* as given on the command line */

/* The errno the script passed to nbdkit.set_error during the current
 * call (0 if none).  Calls are serialized, so one will do.
 */
static int script_errno;

/* A connection's handle: a reference in the registry to the value the
 * script's open returned.
 */
struct handle {
  int ref;
};

/* nbdkit.debug (msg) */
static int
l_debug (lua_State *l)
{
  nbdkit_debug ("%s", luaL_checkstring (l, 1));
  return 0;
}

/* nbdkit.set_error (errno) */
static int
l_set_error (lua_State *l)
{
  script_errno = (int) luaL_checkinteger (l, 1);
  nbdkit_set_error (script_errno);
  return 0;
}

/* nbdkit.probe (name, arg1, arg2, text): the server's probe "user";
 * missing arguments are 0 or "".
 */
static int
l_probe (lua_State *l)
{
  const char *name = luaL_optstring (l, 1, "");
  int64_t arg1 = luaL_optinteger (l, 2, 0);
  int64_t arg2 = luaL_optinteger (l, 3, 0);
  const char *text = luaL_optstring (l, 4, "");
  nbdkit_probe (name, arg1, arg2, text);
  return 0;
}

/* The global table "nbdkit". */
static void
open_nbdkit (lua_State *l)
{
  static const luaL_Reg fns[] = {
    { "debug", l_debug },
    { "set_error", l_set_error },
    { "probe", l_probe },
    { NULL, NULL }
  };
  static const struct { const char *name; int value; } errnos[] = {
    { "EPERM", EPERM }, { "EIO", EIO }, { "ENOMEM", ENOMEM },
    { "EINVAL", EINVAL }, { "ENOSPC", ENOSPC }, { "EROFS", EROFS },
    { "EFBIG", EFBIG }, { "EOVERFLOW", EOVERFLOW },
    { "ENOTSUP", ENOTSUP }, { "EOPNOTSUPP", EOPNOTSUPP },
    { "ESHUTDOWN", ESHUTDOWN },
  };
  size_t i;

  luaL_newlib (l, fns);
  for (i = 0; i < sizeof errnos / sizeof errnos[0]; ++i) {
    lua_pushinteger (l, errnos[i].value);
    lua_setfield (l, -2, errnos[i].name);
  }
  lua_setglobal (l, "nbdkit");
}

static void
lua_load_ (void)
{
  L = luaL_newstate ();
  if (L == NULL)
    return;                     /* reported at config */
  luaL_openlibs (L);
  /* Lua 5.4's incremental collector, its default, fell behind after a
   * burst of small reads: a 256 KiB copy that followed 3 s of 4 KiB
   * random reads ran at 0.5-0.6x the speed (and 2x the CPU) of the
   * same copy on a fresh server.  The generational collector keeps
   * the copy at fresh-server speed.  A script can still choose with
   * collectgarbage ("incremental").
   */
  lua_gc (L, LUA_GCGEN, 0, 0);
  open_nbdkit (L);
}

static void
lua_unload_ (void)
{
  if (L != NULL)
    lua_close (L);
  L = NULL;
  free (script);
  script = NULL;
}

static uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Does the script define the global function NAME? */
static bool
defined (const char *name)
{
  bool r;

  if (L == NULL || script == NULL)
    return false;
  lua_getglobal (L, name);
  r = lua_isfunction (L, -1);
  lua_pop (L, 1);
  return r;
}

/* The error value on top of the stack as one line, pushed on top of
 * it (newlines become spaces).
 */
static const char *
error_text (void)
{
  const char *s = lua_tostring (L, -1);
  if (s == NULL)
    s = lua_pushfstring (L, "(error object is a %s value)",
                         luaL_typename (L, -1));
  s = luaL_gsub (L, s, "\n", " ");
  return luaL_gsub (L, s, "\r", " ");
}

/* A wrong result: report it; the caller returns -1 (EIO). */
static int
wrong (const char *name, const char *what)
{
  nbdkit_error ("%s: %s: %s", script, name, what);
  return -1;
}

/* What a callback makes of the value a function returned (on top of
 * the stack); it reports a wrong one and returns -1.
 */
typedef int (*result_fn) (const char *name, void *opaque);

/* Call the script's function NAME, pushed below its NARGS arguments.
 * If CHECK is not NULL, the function's first result goes to it.
 * Returns 0, or -1 after reporting the error: one line naming the
 * script and the function, with the errno the script set (else EIO)
 * for the client.  The stack is left as it was before NAME was pushed.
 * Fires lua_call_start and lua_call_done around the call.
 */
static int
call_fn (const char *name, int nargs, result_fn check, void *opaque)
{
  bool traced = NBDKIT_PROBE_ENABLED (lua_call_done);
  uint64_t id = 0, cookie = 0, t0 = 0;
  const char *msg = NULL;
  int top = lua_gettop (L) - nargs - 1;
  int r = 0;

  if (traced || NBDKIT_PROBE_ENABLED (lua_call_start)) {
    id = nbdkit_connection_id ();
    cookie = nbdkit_request_cookie ();
    NBDKIT_PROBE (lua_call_start, id, cookie, name);
    t0 = now_ns ();
  }
  script_errno = 0;

  if (lua_pcall (L, nargs, 1, 0) != LUA_OK) {
    msg = error_text ();
    nbdkit_error ("%s: %s: %s", script, name, msg);
    r = -1;
  }
  else if (check && check (name, opaque) == -1)
    r = -1;

  if (r == -1)
    nbdkit_set_error (script_errno ? script_errno : EIO);
  if (traced) {
    int err = r == 0 ? 0 : script_errno ? script_errno : EIO;
    NBDKIT_PROBE (lua_call_done, id, cookie, name, now_ns () - t0, err,
                  r == 0 ? "" : msg ? msg : "wrong result");
  }
  lua_settop (L, top);
  return r;
}

static int
result_int64 (const char *name, void *opaque)
{
  int64_t *r = opaque;
  int isnum;
  lua_Integer i = lua_tointegerx (L, -1, &isnum);

  /* Numeric strings convert, as in nbdkit 1.32; 1.5 does not. */
  if (!isnum)
    return wrong (name, "returned a value that is not an integer");
  *r = i;
  return 0;
}

static int
result_bool (const char *name, void *opaque)
{
  int *r = opaque;

  if (!lua_isboolean (L, -1))
    return wrong (name, "returned a value that is not a boolean");
  *r = lua_toboolean (L, -1);
  return 0;
}

static int
result_handle (const char *name, void *opaque)
{
  struct handle *h = opaque;
  lua_pushvalue (L, -1);
  h->ref = luaL_ref (L, LUA_REGISTRYINDEX);
  return 0;
}

struct read_buf {
  void *buf;
  uint32_t count;
};

static int
result_buffer (const char *name, void *opaque)
{
  struct read_buf *rb = opaque;
  const char *p;
  size_t len;

  if (lua_type (L, -1) != LUA_TSTRING)
    return wrong (name, "returned a value that is not a string");
  p = lua_tolstring (L, -1, &len);
  if (len < rb->count) {
    nbdkit_error ("%s: %s: returned %zu bytes, expected %" PRIu32,
                  script, name, len, rb->count);
    return -1;
  }
  memcpy (rb->buf, p, rb->count);
  return 0;
}

/* Push the script's function NAME, then the handle. */
static void
push_fn (const char *name, struct handle *h)
{
  lua_getglobal (L, name);
  if (h)
    lua_rawgeti (L, LUA_REGISTRYINDEX, h->ref);
}

static void
lua_dump_plugin (void)
{
  printf ("lua_version=%s\n",
          LUA_VERSION_MAJOR "." LUA_VERSION_MINOR "." LUA_VERSION_RELEASE);
  if (defined ("dump_plugin")) {
    fflush (stdout);
    push_fn ("dump_plugin", NULL);
    call_fn ("dump_plugin", 0, NULL, NULL);
    fflush (stdout);
  }
}

/* Load the script and run its top-level statements. */
static int
load_script (const char *path)
{
  if (L == NULL) {
    nbdkit_error ("could not create the Lua state");
    return -1;
  }
  if (access (path, R_OK) == -1) {
    nbdkit_error ("%s: %m", path);
    return -1;
  }
  script = strdup (path);
  if (script == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  if (luaL_loadfile (L, script) != LUA_OK) {
    nbdkit_error ("%s: the script does not parse: %s", script, error_text ());
    lua_settop (L, 0);
    return -1;
  }
  if (lua_pcall (L, 0, 0, 0) != LUA_OK) {
    nbdkit_error ("%s: the script failed when run at start-up: %s",
                  script, error_text ());
    lua_settop (L, 0);
    return -1;
  }
  return 0;
}

static int
lua_config (const char *key, const char *value)
{
  if (script == NULL) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be script=/path/to/script.lua");
      return -1;
    }
    return load_script (value);
  }
  if (defined ("config")) {
    push_fn ("config", NULL);
    lua_pushstring (L, key);
    lua_pushstring (L, value);
    return call_fn ("config", 2, NULL, NULL);
  }
  nbdkit_error ("%s: the script takes no parameters (no function config), "
                "but was given %s=%s", script, key, value);
  return -1;
}

static int
lua_config_complete (void)
{
  static const char *required[] = { "open", "get_size", "pread" };
  size_t i;

  if (script == NULL) {
    nbdkit_error ("no script given: use script=/path/to/script.lua");
    return -1;
  }
  for (i = 0; i < sizeof required / sizeof required[0]; ++i) {
    if (!defined (required[i])) {
      nbdkit_error ("%s: the script does not define the required "
                    "function %s", script, required[i]);
      return -1;
    }
  }
  if (defined ("config_complete")) {
    push_fn ("config_complete", NULL);
    return call_fn ("config_complete", 0, NULL, NULL);
  }
  return 0;
}

#define lua_config_help \
  "script=<FILENAME>     (required) The Lua script to serve.\n" \
  "Other parameters are passed to the script's config function."

static void *
lua_open (int readonly)
{
  struct handle *h = malloc (sizeof *h);

  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  push_fn ("open", NULL);
  lua_pushboolean (L, readonly);
  if (call_fn ("open", 1, result_handle, h) == -1) {
    free (h);
    return NULL;
  }
  return h;
}

static void
lua_close_ (void *handle)
{
  struct handle *h = handle;

  if (defined ("close")) {
    push_fn ("close", h);
    call_fn ("close", 1, NULL, NULL);
  }
  luaL_unref (L, LUA_REGISTRYINDEX, h->ref);
  free (h);
}

static int64_t
lua_get_size (void *handle)
{
  int64_t size = -1;

  push_fn ("get_size", handle);
  if (call_fn ("get_size", 1, result_int64, &size) == -1)
    return -1;
  if (size < 0) {
    wrong ("get_size", "returned a negative size");
    nbdkit_set_error (EIO);
    return -1;
  }
  return size;
}

/* can_write, can_flush, can_trim: the script's function if it has
 * one, else whether it defines the callback that the answer is about,
 * as for a C plugin.  (Debian's nbdkit 1.32 answers can_flush false
 * for a script with flush but no can_flush, against its own page; we
 * follow the page.)
 */
static int
ask_bool (void *handle, const char *name, const char *fallback)
{
  int r = 0;

  if (!defined (name))
    return fallback ? defined (fallback) : 0;
  push_fn (name, handle);
  if (call_fn (name, 1, result_bool, &r) == -1)
    return -1;
  return r;
}

static int
lua_can_write (void *handle)
{
  return ask_bool (handle, "can_write", "pwrite");
}

static int
lua_can_flush (void *handle)
{
  return ask_bool (handle, "can_flush", "flush");
}

static int
lua_is_rotational (void *handle)
{
  return ask_bool (handle, "is_rotational", NULL);
}

static int
lua_can_trim (void *handle)
{
  return ask_bool (handle, "can_trim", "trim");
}

/* As nbdkit 1.32 does for its Lua host: fast zero is advertised, and
 * refused at once (zero below), since a Lua zero cannot promise speed.
 */
static int
lua_can_fast_zero (void *handle)
{
  return 1;
}

static int
lua_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  struct read_buf rb = { .buf = buf, .count = count };

  push_fn ("pread", handle);
  lua_pushinteger (L, count);
  lua_pushinteger (L, (lua_Integer) offset);
  return call_fn ("pread", 3, result_buffer, &rb);
}

static int
l_pushlstring (lua_State *l)
{
  lua_pushlstring (l, lua_touserdata (l, 1), (size_t) lua_tointeger (l, 2));
  return 1;
}

/* Push a write's data as a Lua string.  Outside a protected call, Lua
 * aborts the process when it cannot allocate, so the string (up to the
 * server's largest request) is made inside one: a failure leaves the
 * error message on the stack and returns -1.
 */
static int
push_buffer (const void *buf, uint32_t count)
{
  lua_pushcfunction (L, l_pushlstring);
  lua_pushlightuserdata (L, (void *) buf);
  lua_pushinteger (L, count);
  return lua_pcall (L, 2, 1, 0) == LUA_OK ? 0 : -1;
}

static int
lua_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  if (!defined ("pwrite")) {
    nbdkit_error ("%s: the script has no function pwrite", script);
    nbdkit_set_error (EROFS);
    return -1;
  }
  push_fn ("pwrite", handle);
  if (push_buffer (buf, count) == -1) {
    nbdkit_error ("%s: pwrite: %s", script, lua_tostring (L, -1));
    lua_pop (L, 3);
    nbdkit_set_error (ENOMEM);
    return -1;
  }
  lua_pushinteger (L, (lua_Integer) offset);
  return call_fn ("pwrite", 3, NULL, NULL);
}

static int
lua_flush (void *handle, uint32_t flags)
{
  if (!defined ("flush"))
    return 0;
  push_fn ("flush", handle);
  return call_fn ("flush", 1, NULL, NULL);
}

static int
lua_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (!defined ("trim"))
    return 0;                   /* trim is advisory */
  push_fn ("trim", handle);
  lua_pushinteger (L, count);
  lua_pushinteger (L, (lua_Integer) offset);
  return call_fn ("trim", 3, NULL, NULL);
}

/* Without a function zero, or for a fast zero, fail with EOPNOTSUPP:
 * the server then writes zeroes with pwrite (or, for a fast zero,
 * tells the client at once).  A function may do the same with
 * nbdkit.set_error (nbdkit.EOPNOTSUPP).
 */
static int
lua_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (!defined ("zero") || (flags & NBDKIT_FLAG_FAST_ZERO)) {
    nbdkit_set_error (EOPNOTSUPP);
    return -1;
  }
  push_fn ("zero", handle);
  lua_pushinteger (L, count);
  lua_pushinteger (L, (lua_Integer) offset);
  lua_pushboolean (L, (flags & NBDKIT_FLAG_MAY_TRIM) != 0);
  return call_fn ("zero", 4, NULL, NULL);
}

static struct nbdkit_plugin plugin = {
  .name               = "lua",
  .version            = PACKAGE_VERSION,
  .longname           = "nbdkit Lua plugin host",
  .load               = lua_load_,
  .unload             = lua_unload_,
  .dump_plugin        = lua_dump_plugin,
  .config             = lua_config,
  .config_complete    = lua_config_complete,
  .config_help        = lua_config_help,
  .magic_config_key   = "script",
  .open               = lua_open,
  .close              = lua_close_,
  .get_size           = lua_get_size,
  .can_write          = lua_can_write,
  .can_flush          = lua_can_flush,
  .is_rotational      = lua_is_rotational,
  .can_trim           = lua_can_trim,
  .can_fast_zero      = lua_can_fast_zero,
  .pread              = lua_pread,
  .pwrite             = lua_pwrite,
  .flush              = lua_flush,
  .trim               = lua_trim,
  .zero               = lua_zero,
};

NBDKIT_REGISTER_PLUGIN (plugin)
