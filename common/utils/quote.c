/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Quoting for /bin/sh: see quote.h. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "quote.h"

void
shell_quote (FILE *fp, const char *s)
{
  fputc ('\'', fp);
  for (; *s; s++) {
    if (*s == '\'')
      fputs ("'\\''", fp);
    else
      fputc (*s, fp);
  }
  fputc ('\'', fp);
}

char *
shell_quote_dup (const char *s)
{
  char *q = NULL;
  size_t len;
  FILE *fp = open_memstream (&q, &len);
  if (fp == NULL)
    return NULL;
  shell_quote (fp, s);
  if (fclose (fp) == EOF) {
    free (q);
    return NULL;
  }
  return q;
}
