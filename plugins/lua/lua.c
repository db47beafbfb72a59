/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The lua plugin: one Lua state runs a script whose global functions
 * (open, get_size, pread, ...) are the plugin's callbacks.
 *
 * This file owns the Lua state: it is created at load with the
 * standard libraries and the "nbdkit" table (debug, set_error, probe,
 * errno constants), the script named by script= (the magic key, so
 * "nbdkit lua disk.lua" works) is loaded and run at config, and the
 * state is closed at unload.  The data callbacks are langhost's
 * (common/langhost): for each call it describes, lh_host_call pushes
 * the script's function of that name and the arguments, and call_fn
 * runs it protected and checks what came back.
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

#include "langhost.h"
#include "now-ns.h"
#include "array-size.h"

NBDKIT_PROBE_SEMAPHORE (lua_call_start);
NBDKIT_PROBE_SEMAPHORE (lua_call_done);

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

/* The Lua state, created at load and closed at unload. */
static lua_State *L;

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

/* nbdkit.disconnect (force): end this connection only. */
static int
l_disconnect (lua_State *l)
{
  nbdkit_disconnect (lua_toboolean (l, 1));
  return 0;
}

/* nbdkit.parse_probability (what, str) and nbdkit.parse_delay (what,
 * str), the latter two results sec, nsec.  A bad string raises a Lua
 * error (the server has logged why).
 */
static int
l_parse_probability (lua_State *l)
{
  const char *what = luaL_checkstring (l, 1);
  const char *str = luaL_checkstring (l, 2);
  double d;
  if (nbdkit_parse_probability (what, str, &d) == -1)
    return luaL_error (l, "nbdkit.parse_probability: %s: cannot parse '%s'",
                       what, str);
  lua_pushnumber (l, d);
  return 1;
}

static int
l_parse_delay (lua_State *l)
{
  const char *what = luaL_checkstring (l, 1);
  const char *str = luaL_checkstring (l, 2);
  unsigned sec, nsec;
  if (nbdkit_parse_delay (what, str, &sec, &nsec) == -1)
    return luaL_error (l, "nbdkit.parse_delay: %s: cannot parse '%s'",
                       what, str);
  lua_pushinteger (l, sec);
  lua_pushinteger (l, nsec);
  return 2;
}

/* The global table "nbdkit". */
static void
open_nbdkit (lua_State *l)
{
  static const luaL_Reg fns[] = {
    { "debug", l_debug },
    { "set_error", l_set_error },
    { "probe", l_probe },
    { "disconnect", l_disconnect },
    { "parse_probability", l_parse_probability },
    { "parse_delay", l_parse_delay },
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
  for (i = 0; i < ARRAY_SIZE (errnos); ++i) {
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
  free (lh_script);
  lh_script = NULL;
}

/* Does the script define the global function NAME? */
static bool
defined (const char *name)
{
  bool r;

  if (L == NULL || lh_script == NULL)
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
    nbdkit_error ("%s: %s: %s", lh_script, name, msg);
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

/* ---- the language side of langhost's callbacks ---- */

bool
lh_host_defined (const char *name)
{
  return defined (name);
}

static int
result_size (const char *name, void *opaque)
{
  struct lh_call *c = opaque;
  int isnum;
  lua_Integer i = lua_tointegerx (L, -1, &isnum);

  /* Numeric strings convert, as in nbdkit 1.32; 1.5 does not. */
  if (!isnum)
    return lh_wrong (name, "returned a value that is not an integer");
  c->size = i;
  return 0;
}

static int
result_truth (const char *name, void *opaque)
{
  struct lh_call *c = opaque;

  if (!lua_isboolean (L, -1))
    return lh_wrong (name, "returned a value that is not a boolean");
  c->truth = lua_toboolean (L, -1);
  return 0;
}

static int
result_handle (const char *name, void *opaque)
{
  struct lh_call *c = opaque;
  struct handle *h = c->handle;

  lua_pushvalue (L, -1);
  h->ref = luaL_ref (L, LUA_REGISTRYINDEX);
  return 0;
}

static int
result_data (const char *name, void *opaque)
{
  const char *p;
  size_t len;

  if (lua_type (L, -1) != LUA_TSTRING)
    return lh_wrong (name, "returned a value that is not a string");
  p = lua_tolstring (L, -1, &len);
  return lh_take_data (opaque, p, len);
}

static const result_fn results[] = {
  [LH_NOTHING] = NULL,
  [LH_NEW_HANDLE] = result_handle,
  [LH_SIZE] = result_size,
  [LH_TRUTH] = result_truth,
  [LH_DATA] = result_data,
};

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
push_arg (const struct lh_arg *a)
{
  switch (a->type) {
  case LH_HANDLE:
    lua_rawgeti (L, LUA_REGISTRYINDEX, ((const struct handle *) a->p)->ref);
    return 0;
  case LH_BOOL:
    lua_pushboolean (L, a->u != 0);
    return 0;
  case LH_UINT:
    lua_pushinteger (L, (lua_Integer) a->u);
    return 0;
  case LH_BYTES:
    return push_buffer (a->p, (uint32_t) a->u);
  }
  abort ();
}

enum lh_outcome
lh_host_call (struct lh_call *c)
{
  int top = lua_gettop (L);
  size_t i;

  if (c->optional && !defined (c->name))
    return LH_ABSENT;
  if (c->want == LH_NEW_HANDLE) {
    c->handle = malloc (sizeof (struct handle));
    if (c->handle == NULL) {
      nbdkit_error ("malloc: %m");
      return LH_FAILED;
    }
  }
  lua_getglobal (L, c->name);
  for (i = 0; i < c->nargs; ++i) {
    if (push_arg (&c->args[i]) == -1) {
      nbdkit_error ("%s: %s: %s", lh_script, c->name, lua_tostring (L, -1));
      lua_settop (L, top);
      nbdkit_set_error (ENOMEM);
      return LH_FAILED;
    }
  }
  if (call_fn (c->name, (int) c->nargs, results[c->want], c) == -1) {
    if (c->want == LH_NEW_HANDLE)
      free (c->handle);
    return LH_FAILED;
  }
  if (c->want == LH_SIZE && c->size < 0) {
    lh_wrong (c->name, "returned a negative size");
    nbdkit_set_error (EIO);
    return LH_FAILED;
  }
  return LH_DONE;
}

void
lh_host_free_handle (void *handle)
{
  struct handle *h = handle;

  luaL_unref (L, LUA_REGISTRYINDEX, h->ref);
  free (h);
}

const struct langhost langhost = {
  .word = "function",
  .open = "open",
  .close = "close",
  .flush = "flush",
  .pass_flags = false,          /* version 1 arguments, as 1.32's */
  .look_first = true,
  .no_zero_note = NULL,
};

/* ---- start-up ---- */

static void
lua_dump_plugin (void)
{
  printf ("lua_version=%s\n",
          LUA_VERSION_MAJOR "." LUA_VERSION_MINOR "." LUA_VERSION_RELEASE);
  if (defined ("dump_plugin")) {
    fflush (stdout);
    lua_getglobal (L, "dump_plugin");
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
  lh_script = strdup (path);
  if (lh_script == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  if (luaL_loadfile (L, lh_script) != LUA_OK) {
    nbdkit_error ("%s: the script does not parse: %s", lh_script,
                  error_text ());
    lua_settop (L, 0);
    return -1;
  }
  if (lua_pcall (L, 0, 0, 0) != LUA_OK) {
    nbdkit_error ("%s: the script failed when run at start-up: %s",
                  lh_script, error_text ());
    lua_settop (L, 0);
    return -1;
  }
  return 0;
}

static int
lua_config (const char *key, const char *value)
{
  if (lh_script == NULL) {
    if (strcmp (key, "script") != 0) {
      nbdkit_error ("the first parameter must be script=/path/to/script.lua");
      return -1;
    }
    return load_script (value);
  }
  if (defined ("config")) {
    lua_getglobal (L, "config");
    lua_pushstring (L, key);
    lua_pushstring (L, value);
    return call_fn ("config", 2, NULL, NULL);
  }
  nbdkit_error ("%s: the script takes no parameters (no function config), "
                "but was given %s=%s", lh_script, key, value);
  return -1;
}

static int
lua_config_complete (void)
{
  static const char *required[] = { "open", "get_size", "pread" };
  size_t i;

  if (lh_script == NULL) {
    nbdkit_error ("no script given: use script=/path/to/script.lua");
    return -1;
  }
  for (i = 0; i < ARRAY_SIZE (required); ++i) {
    if (!defined (required[i])) {
      nbdkit_error ("%s: the script does not define the required "
                    "function %s", lh_script, required[i]);
      return -1;
    }
  }
  if (defined ("config_complete")) {
    lua_getglobal (L, "config_complete");
    return call_fn ("config_complete", 0, NULL, NULL);
  }
  return 0;
}

#define lua_config_help \
  "script=<FILENAME>     (required) The Lua script to serve.\n" \
  "Other parameters are passed to the script's config function."

/* As nbdkit 1.32's Lua host: a version 1 host that advertises fast
 * zero, refused at once (lh_zero), since a Lua zero cannot promise
 * speed.
 */
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
  .can_fast_zero      = lh_yes,
  LANGHOST_CALLBACKS
};

NBDKIT_REGISTER_PLUGIN (plugin)
