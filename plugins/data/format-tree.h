/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The tree of a data expression, shared by format-parse.c (which builds
 * it) and format-render.c (which writes its bytes).  Private to the
 * data plugin: callers use format.h.
 *
 * Every node is owned by its struct data_tree, not by its parents
 * (names and $VARs may make a node the child of several), and has its
 * length and depth fixed and checked when it is made: a finished tree
 * fits in 2^63 - 1 bytes and recurses at most MAX_DEPTH deep.
 */
#ifndef NBDKIT_DATA_FORMAT_TREE_H
#define NBDKIT_DATA_FORMAT_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "vector.h"

#define MAX_LEN ((uint64_t) INT64_MAX)
#define MAX_DEPTH 200           /* nesting of groups, names, $VARs */

enum kind {
  N_BYTES,                      /* literal bytes */
  N_LIST,                       /* a group, or the whole expression */
  N_REPEAT,                     /* child * count */
  N_SLICE,                      /* child[start:start+len] */
  N_ABS,                        /* @N */
  N_FWD,                        /* @+N */
  N_BACK,                       /* @-N */
  N_ALIGN,                      /* @^N */
};

struct node;
DEFINE_VECTOR_TYPE (node_list, struct node *);
DEFINE_VECTOR_TYPE (byte_vector, uint8_t);

struct node {
  enum kind kind;
  unsigned depth;
  uint64_t len;                 /* bytes it spans (0 for offsets) */
  uint64_t n;                   /* N_ABS..N_ALIGN: N; repeat: count;
                                 * slice: start */
  uint8_t *bytes;               /* N_BYTES (owned) */
  char *source;                 /* N_BYTES read from "<FILE" or
                                 * "<(SCRIPT)" (owned), NULL if literal */
  bool zero_run;                /* N_BYTES: a literal of 2 or more bytes,
                                 * all zero (rendered as zeroing) */
  bool joined;                  /* N_BYTES made by joining literals, in
                                 * one list only (so it may grow) */
  node_list items;              /* N_LIST */
  struct node *child;           /* N_REPEAT, N_SLICE */
  uint64_t stored;              /* data_stored_bytes' answer, once known */
  bool stored_known;
};

struct data_tree {
  node_list all;
  struct node *root;
};

#endif /* NBDKIT_DATA_FORMAT_TREE_H */
