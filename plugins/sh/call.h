/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Running one method of a script plugin (sh and eval share this).
 *
 * Every plugin callback becomes one run of an external program:
 * "PROGRAM METHOD ARGS...", with optional bytes on its stdin, its stdout
 * collected, and its exit code read as the sh plugin's protocol:
 *
 *   0      ok
 *   2      the method is missing
 *   3      false (for the boolean methods)
 *   4, 5   nbdkit_shutdown, then ok (4) or an error (5)
 *   6      nbdkit_disconnect (force): no reply
 *   7, 8   nbdkit_disconnect (soft), then ok (7) or an error (8)
 *   other  an error: the first word of stderr may name an errno
 *          ("ENOSPC Out of space"), the rest is the message; without a
 *          known name the whole of stderr is the message and errno EIO
 *          (ESHUTDOWN for 5 and 8).
 *
 * The plugin that links this code (sh.c, eval.c) says where a method's
 * program is and fires its own probe through struct script_hooks.
 */
#ifndef NBDKIT_SH_CALL_H
#define NBDKIT_SH_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vector.h"

DEFINE_VECTOR_TYPE (byte_vector, char);

enum script_status {
  SCRIPT_OK = 0,
  SCRIPT_ERROR = 1,             /* reported with nbdkit_error, errno set */
  SCRIPT_MISSING = 2,
  SCRIPT_FALSE = 3,
};

/* What the plugin around this code provides. */
struct script_hooks {
  /* The program that runs METHOD, or NULL when the method is known to be
   * missing without running anything.
   */
  const char *(*path) (const char *method);
  /* Whether METHOD was given explicitly (eval), so that a missing can_X
   * can answer "yes" when X exists, as C plugins do.  NULL: never.
   */
  bool (*defined) (const char *method);
  /* Run every program under /bin/sh (eval) rather than executing it. */
  bool use_sh;
  /* Name used in error messages, before the method (NULL: none). */
  const char *(*display_name) (void);
  /* Fired after each run: method, exit code (128+N if killed by signal
   * N), duration in nanoseconds, errno parsed from stderr (0 on success).
   */
  void (*probe) (const char *method, int code, int64_t ns, int err);
};

extern struct script_hooks script_hooks;

/* The private directory given to scripts as $tmpdir. */
extern char *script_tmpdir;

/* Create $tmpdir and export it to scripts.  -1 on error. */
extern int script_tmpdir_create (void);
/* Remove $tmpdir and everything under it. */
extern void script_tmpdir_remove (void);

/* Run METHOD with ARGS (NULL-terminated, may be NULL).  IN/INLEN go to
 * the script's stdin; its stdout goes to OUT (if OUT is not NULL),
 * reading at most MAXOUT bytes (more is an error).  On SCRIPT_ERROR the
 * error is already reported and errno set.
 */
extern enum script_status script_call (const char *method,
                                       const char **args,
                                       const void *in, size_t inlen,
                                       byte_vector *out, size_t maxout);

/* Strip trailing newlines of OUT and make it a C string.  -1 on ENOMEM. */
extern int script_output_string (byte_vector *out);

/* The default limit on what a method may print. */
#define SCRIPT_MAX_OUTPUT ((size_t) 64 << 20)

#endif /* NBDKIT_SH_CALL_H */
