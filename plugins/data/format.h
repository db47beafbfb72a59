/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The data plugin's expression language: parse, then render.
 *
 * data_parse turns the text of data= into a tree whose every node
 * already knows its length (checked against 2^63 - 1 and every other
 * limit at parse time), so a hostile expression fails there with one
 * error, before any byte is stored.  data_render then writes the bytes
 * of a window [0, LIMIT) of the tree through the caller's callbacks:
 * work and memory are bounded by the window, never by the expression's
 * nominal size (a repeat of a billion copies costs only the copies that
 * land in the window).
 *
 * data_parse is format-parse.c, data_render format-render.c; the tree
 * between them is format-tree.h, and format-debug.c shows it.  Errors are reported with
 * nbdkit_error; the fuzz target (fuzzing/fuzz-data.c) links the two
 * files alone, with its own nbdkit_error.
 */
#ifndef NBDKIT_DATA_FORMAT_H
#define NBDKIT_DATA_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct data_tree;

struct data_parse_opts {
  /* Allow <FILE, <(SCRIPT) and environment variables.  The fuzzer
   * turns them off.
   */
  bool allow_io;
  /* The value of $NAME given as a NAME= parameter, or NULL. */
  const char *(*lookup) (void *opaque, const char *name);
  void *opaque;
  /* Read no more than this from one <FILE or <(SCRIPT): the size= of
   * the disk, which no input can outgrow (0: no such bound).
   */
  uint64_t max_read;
  /* An input longer than this, that nothing else bounds, is an error
   * (0: no limit): an endless script would otherwise fill memory.
   */
  uint64_t max_input;
};

/* Decode the N bytes of standard base64 at S ('=' padding optional
 * only where it would end the text; whitespace is skipped) into a new
 * buffer *OUT of *OUTLEN bytes.  -1 on error, with nothing reported:
 * errno ENOMEM, or EINVAL with *BAD the offset of a character that
 * does not belong, or SIZE_MAX when the length or padding is wrong.
 * For base64= and the base64: item of the language.
 */
extern int data_base64_decode (const char *s, size_t n, uint8_t **out,
                               size_t *outlen, size_t *bad);

/* NULL on error (reported).  *SIZE is the expression's length. */
extern struct data_tree *data_parse (const char *text,
                                     const struct data_parse_opts *opts,
                                     uint64_t *size);

struct data_sink {
  /* Store COUNT bytes at OFFSET (COUNT <= 1 MiB). */
  int (*write) (void *opaque, const void *buf, uint32_t count,
                uint64_t offset);
  /* Make COUNT bytes at OFFSET zero (COUNT <= 1 GiB). */
  int (*zero) (void *opaque, uint32_t count, uint64_t offset);
  void *opaque;
  uint64_t bytes_set;           /* out: bytes written or zeroed */
  /* The store starts all zero: zeroing beyond the furthest write so far
   * (written_end, kept by data_render) may be skipped.
   */
  bool starts_zero;
  uint64_t written_end;
};

/* At most how many bytes rendering [0, LIMIT) of the tree stores (an
 * upper bound: bytes written twice count twice; runs of zeroes that
 * make holes count nothing).  Computed from the tree, without
 * rendering, saturating at UINT64_MAX.
 */
extern uint64_t data_stored_bytes (struct data_tree *t, uint64_t limit);

/* Render [0, LIMIT) of the tree.  -1 if a callback failed. */
extern int data_render (struct data_tree *t, uint64_t limit,
                        struct data_sink *sink);

/* Show the tree (for -D data.AST=1), one line per node, through PRINT
 * (format-debug.c).
 */
extern void data_show (const struct data_tree *t,
                       void (*print) (const char *fmt, ...));

extern void data_free (struct data_tree *t);

#endif /* NBDKIT_DATA_FORMAT_H */
