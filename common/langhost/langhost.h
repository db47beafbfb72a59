/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* langhost: the half of a script-language plugin host (lua, perl, tcl,
 * ruby) that does not depend on the language.
 *
 * Each data callback of such a host does the same thing: look up the
 * script's function of the same name, hand it the handle and the
 * request's numbers, and turn what it returns (or raises) into a C
 * result and an errno.  langhost.c writes those callbacks once (lh_open
 * ... lh_zero), as calls described by a struct lh_call; the host
 * supplies the language side by name:
 *
 *   lh_host_call        run one lh_call in the language: marshal the
 *                       arguments, call, convert the result, report a
 *                       failure (one line naming the script and the
 *                       function) and set the client's errno
 *   lh_host_defined     does the script define this function?
 *   lh_host_free_handle drop what an LH_NEW_HANDLE call returned
 *   langhost            the host's answers to the questions on which
 *                       the hosts of nbdkit 1.32 differ (below)
 *
 * A host links the convenience library liblanghost.la, so these names
 * bind inside its own .so (plugins.syms keeps them local).  Nothing
 * here knows the server; only the plugin API is used.
 */
#ifndef NBDKIT_LANGHOST_H
#define NBDKIT_LANGHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most arguments a callback passes: pread's handle, count, offset
 * and flags.
 */
#define LH_MAX_ARGS 4

/* One argument of a call, as the language should see it. */
enum lh_arg_type {
  LH_HANDLE,                    /* p: what the script's open returned */
  LH_BOOL,                      /* u: 0 or 1 */
  LH_UINT,                      /* u: a count, offset or flags */
  LH_BYTES,                     /* p: u bytes of a write's data */
};

struct lh_arg {
  enum lh_arg_type type;
  uint64_t u;
  const void *p;
};

/* What the call's result must be, and where it goes. */
enum lh_want {
  LH_NOTHING,                   /* ignored */
  LH_NEW_HANDLE,                /* kept as the connection's handle */
  LH_SIZE,                      /* a size: an integer, 0 or more */
  LH_TRUTH,                     /* a yes or no */
  LH_DATA,                      /* at least count bytes, copied to buf */
};

/* How a call went.  LH_ABSENT only for an optional call. */
enum lh_outcome {
  LH_DONE = 0,
  LH_FAILED = -1,               /* reported, errno set */
  LH_ABSENT = 1,                /* the script has no such function */
};

struct lh_call {
  const char *name;             /* the script's function */
  bool optional;                /* absent is LH_ABSENT, not an error */
  size_t nargs;
  struct lh_arg args[LH_MAX_ARGS];
  enum lh_want want;

  /* Results, by want. */
  void *handle;                 /* LH_NEW_HANDLE */
  int64_t size;                 /* LH_SIZE */
  int truth;                    /* LH_TRUTH */
  void *buf;                    /* LH_DATA: count bytes go here */
  uint32_t count;
};

/* Where the hosts of nbdkit 1.32 differ, each host's answer. */
struct langhost {
  /* What the language calls a function, in messages ("sub", "proc"). */
  const char *word;
  /* The script's names for open, close and flush (Tcl's are
   * plugin_open, plugin_close, plugin_flush).
   */
  const char *open, *close, *flush;
  /* Version 2 arguments: the request's flags go last to pread, pwrite,
   * flush, trim and zero (zero gets them instead of may_trim), and the
   * script decides about a fast zero.  Otherwise version 1 arguments,
   * and a fast zero is refused at once (ENOTSUP).
   */
  bool pass_flags;
  /* Look before calling pwrite and trim: an absent trim is a no-op and
   * an absent pwrite fails with EROFS.  Otherwise they are called, and
   * the language reports the missing function.
   */
  bool look_first;
  /* Debug line when the script has no zero (NULL: none). */
  const char *no_zero_note;
};

/* Supplied by the host. */
extern const struct langhost langhost;
extern enum lh_outcome lh_host_call (struct lh_call *call);
extern bool lh_host_defined (const char *name);
extern void lh_host_free_handle (void *handle);

/* The script's path as given to script= (the host sets it at config
 * and frees it at unload), for messages.
 */
extern char *lh_script;

/* The callbacks.  LANGHOST_CALLBACKS fills a host's struct
 * nbdkit_plugin with those every host has; lh_yes (can_zero,
 * can_fast_zero) and lh_fua_emulate (can_fua) are for hosts that give
 * version 1 answers, as 1.32's version 1 hosts do.
 */
extern void *lh_open (int readonly);
extern void lh_close (void *handle);
extern int64_t lh_get_size (void *handle);
extern int lh_can_write (void *handle);
extern int lh_can_flush (void *handle);
extern int lh_is_rotational (void *handle);
extern int lh_can_trim (void *handle);
extern int lh_yes (void *handle);
extern int lh_fua_emulate (void *handle);
extern int lh_pread (void *handle, void *buf, uint32_t count,
                     uint64_t offset, uint32_t flags);
extern int lh_pwrite (void *handle, const void *buf, uint32_t count,
                      uint64_t offset, uint32_t flags);
extern int lh_flush (void *handle, uint32_t flags);
extern int lh_trim (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags);
extern int lh_zero (void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags);

#define LANGHOST_CALLBACKS                                              \
  .open = lh_open, .close = lh_close, .get_size = lh_get_size,          \
  .can_write = lh_can_write, .can_flush = lh_can_flush,                 \
  .is_rotational = lh_is_rotational, .can_trim = lh_can_trim,           \
  .pread = lh_pread, .pwrite = lh_pwrite, .flush = lh_flush,            \
  .trim = lh_trim, .zero = lh_zero

/* Helpers for lh_host_call. */

/* Report a wrong result of the script's NAME ("returned a value that
 * is not a string"); returns -1.  The caller sets the errno.
 */
extern int lh_wrong (const char *name, const char *what);

/* Copy an LH_DATA result of LEN bytes at P to the call's buffer, or
 * report that it is short; returns 0 or -1.
 */
extern int lh_take_data (struct lh_call *call, const void *p, size_t len);

#endif /* NBDKIT_LANGHOST_H */
