/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Quoting for /bin/sh.
 *
 *   shell_quote (fp, s)    write S to FP in single quotes, so that the
 *                          shell takes it as it is (a ' inside becomes
 *                          '\'').
 *   shell_quote_dup (s)    the same, as a new string (NULL, errno
 *                          ENOMEM, if out of memory).
 */
#ifndef NBDKIT_QUOTE_H
#define NBDKIT_QUOTE_H

#include <stdio.h>

extern void shell_quote (FILE *fp, const char *s);
extern char *shell_quote_dup (const char *s);

#endif /* NBDKIT_QUOTE_H */
