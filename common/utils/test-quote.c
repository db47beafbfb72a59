/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* shell_quote: what /bin/sh reads back from the quoted text is the
 * original string, for strings with quotes, spaces, $, backslashes and
 * newlines.
 */
#include <config.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quote.h"
#include "subprocess.h"
#include "array-size.h"

int
main (void)
{
  static const char *cases[] = {
    "", "plain", "two words", "it's", "'", "''", "$HOME `id` \\ \"q\"",
    "line\nbreak", "a'b'c",
  };
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++) {
    char *q = shell_quote_dup (cases[i]);
    assert (q != NULL);
    /* printf %s QUOTED: the shell hands printf the original bytes. */
    char *cmd = NULL;
    assert (asprintf (&cmd, "printf %%s %s", q) > 0);
    struct subprocess sp = {
      .shell_command = cmd,
      .stdout_mode = SUBPROCESS_PIPE, .out_max = 255,
    };
    assert (subprocess_run (&sp) == SUBPROCESS_FINISHED);
    assert (sp.status == 0);
    char buf[256];
    memcpy (buf, sp.out.ptr ? sp.out.ptr : "", sp.out.len);
    buf[sp.out.len] = '\0';
    subprocess_free (&sp);
    if (strcmp (buf, cases[i]) != 0) {
      fprintf (stderr, "shell_quote: \"%s\" came back as \"%s\" (%s)\n",
               cases[i], buf, q);
      return 1;
    }
    free (cmd);
    free (q);
  }
  return 0;
}
