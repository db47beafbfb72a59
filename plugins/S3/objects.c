/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin's data path: a disk request turned into requests on
 * objects.  In the many-objects layout, object N holds the bytes
 * [N * object-size, (N + 1) * object-size) and is named KEY/%016x; an
 * object that does not exist reads as zeroes.
 *
 *   read     a ranged GET per object touched, in parallel;
 *   write    a PUT per whole object (in parallel), a read-modify-write
 *            for a part of one;
 *   trim     DELETE of the whole objects in the range;
 *   zero     DELETE of the whole objects, zeroes merged into parts;
 *   extents  one listing of the objects in the range.
 *
 * An object being written or deleted is locked (busy_objects) so that
 * two read-modify-writes in this server never lose each other's bytes.
 * A thread locks objects in ascending order, so two threads never wait
 * for each other.  The asynchronous writes of awrite.c take the same
 * locks without waiting: a waiter queued on a busy object (waiters, a
 * FIFO) is handed the object by whoever unlocks it, ahead of the
 * threads waiting on obj_cond; it holds one object and needs no other
 * lock to finish, so it never closes a cycle.  obj_lock protects
 * busy_objects and waiters and is taken before the pool lock of
 * http.c, never after; no callback runs under it.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "include/minmax.h"
#include "s3.h"
#include "vector.h"

/* The most objects one listing asks for (S3's own limit), and so the
 * most one batch of deletes or one block status answer covers.
 */
#define LIST_MAX ((uint64_t) 1000)

/* Objects deleted without listing them first, up to this many. */
#define DELETE_UNLISTED 4

DEFINE_VECTOR_TYPE (u64_vector, uint64_t);
static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t obj_cond = PTHREAD_COND_INITIALIZER;
static u64_vector busy_objects = empty_vector;
static struct s3_obj_waiter *wait_head, *wait_tail;

void
s3_objects_free (void)
{
  free (busy_objects.ptr);
  busy_objects = (u64_vector) empty_vector;
}

static bool
object_busy (uint64_t n)
{
  for (size_t i = 0; i < busy_objects.len; ++i)
    if (busy_objects.ptr[i] == n)
      return true;
  return false;
}

/* Take the first queued waiter for object N out of the queue, or
 * NULL (obj_lock held).
 */
static struct s3_obj_waiter *
unqueue (uint64_t n)
{
  struct s3_obj_waiter **p, *w, *prev = NULL;

  for (p = &wait_head; (w = *p) != NULL; prev = w, p = &w->next)
    if (w->n == n) {
      *p = w->next;
      if (wait_tail == w)
        wait_tail = prev;
      return w;
    }
  return NULL;
}

/* Unlock the K objects NUMS (obj_lock held): each goes to its first
 * waiter if it has one (it stays busy), else out of busy_objects.
 * The waiters handed an object are chained on *GRANTED, for grant_all
 * once obj_lock is dropped.
 */
static void
release (const uint64_t *nums, size_t k, struct s3_obj_waiter **granted)
{
  for (size_t i = 0; i < k; ++i) {
    struct s3_obj_waiter *w = unqueue (nums[i]);

    if (w) {
      w->next = *granted;
      *granted = w;
      continue;
    }
    for (size_t j = 0; j < busy_objects.len; ++j)
      if (busy_objects.ptr[j] == nums[i]) {
        u64_vector_remove (&busy_objects, j);
        break;
      }
  }
  pthread_cond_broadcast (&obj_cond);
}

static void
grant_all (struct s3_obj_waiter *w)
{
  while (w) {
    struct s3_obj_waiter *next = w->next;

    w->granted (w);
    w = next;
  }
}

/* Lock the K objects NUMS (in ascending order). */
static int
lock_objects (const uint64_t *nums, size_t k)
{
  struct s3_obj_waiter *granted = NULL;
  int r = 0;

  pthread_mutex_lock (&obj_lock);
  for (size_t i = 0; i < k; ++i) {
    while (object_busy (nums[i]))
      pthread_cond_wait (&obj_cond, &obj_lock);
    if (u64_vector_append (&busy_objects, nums[i]) == -1) {
      nbdkit_error ("realloc: %m");
      release (nums, i, &granted);
      r = -1;
      break;
    }
  }
  pthread_mutex_unlock (&obj_lock);
  grant_all (granted);
  return r;
}

static void
unlock_objects (const uint64_t *nums, size_t k)
{
  struct s3_obj_waiter *granted = NULL;

  pthread_mutex_lock (&obj_lock);
  release (nums, k, &granted);
  pthread_mutex_unlock (&obj_lock);
  grant_all (granted);
}

void
s3_object_unlock (uint64_t n)
{
  unlock_objects (&n, 1);
}

void
s3_objects_lock_async (struct s3_obj_waiter *chain)
{
  LOCK_FOR_SCOPE (&obj_lock);
  while (chain) {
    struct s3_obj_waiter *w = chain;

    chain = w->next;            /* queueing W rewrites its next */
    if (object_busy (w->n)) {
      w->state = S3_WAIT_QUEUED;
      w->next = NULL;
      if (wait_tail)
        wait_tail->next = w;
      else
        wait_head = w;
      wait_tail = w;
    }
    else if (u64_vector_append (&busy_objects, w->n) == -1) {
      nbdkit_error ("realloc: %m");
      w->state = S3_WAIT_FAILED;
    }
    else
      w->state = S3_WAIT_LOCKED;
  }
}

struct s3_obj_waiter *
s3_objects_cancel_waiters (uint64_t id)
{
  struct s3_obj_waiter **p, *w, *prev = NULL, *out = NULL;

  LOCK_FOR_SCOPE (&obj_lock);
  for (p = &wait_head; (w = *p) != NULL; ) {
    if (w->conn_id != id) {
      prev = w;
      p = &w->next;
      continue;
    }
    *p = w->next;
    if (wait_tail == w)
      wait_tail = prev;
    w->next = out;
    out = w;
  }
  return out;
}

/* The name of object N, malloc'd. */
char *
s3_object_name (uint64_t n)
{
  char *name;

  if (asprintf (&name, "%s/%016" PRIx64, s3_cfg.key, n) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  return name;
}

/* An error reply at run time: say what failed, set errno, free the
 * body.
 */
static int
reply_error (struct s3_request *req)
{
  int err = s3_status_errno (req);

  nbdkit_error ("%s %s: HTTP %ld %s", req->method,
                req->object ? req->object : s3_cfg.bucket, req->status,
                req->code);
  free (req->body);
  req->body = NULL;
  errno = err;
  return -1;
}

/* The object is not there, in a reply to a GET or HEAD (a HEAD reply
 * has no body, so no code).
 */
bool
s3_no_such_key (const struct s3_request *req)
{
  return req->status == 404 &&
    (req->code[0] == '\0' || strcmp (req->code, "NoSuchKey") == 0);
}

static bool
success (const struct s3_request *req)
{
  return req->status >= 200 && req->status < 300;
}

/* The outcome of a ranged GET (see get_range), after s3_perform. */
int
s3_range_result (struct s3_request *req, bool missing_ok)
{
  char *buf = req->buf;

  if (req->err)
    return -1;                  /* reported by s3_perform */
  if ((req->status == 200 || req->status == 206) &&
      (req->got == req->range_len || missing_ok)) {
    memset (buf + req->got, 0, req->range_len - req->got);
    free (req->body);
    return 0;
  }
  if (missing_ok && (s3_no_such_key (req) || req->status == 416)) {
    memset (buf, 0, req->range_len);
    free (req->body);
    return 0;
  }
  if (req->status == 200 || req->status == 206) {
    nbdkit_error ("GET %s: %" PRIu64 " bytes at %" PRIu64 " asked, %"
                  PRIu64 " came (the object shrank?)", req->object,
                  req->range_len, req->range_off, req->got);
    free (req->body);
    errno = EIO;
    return -1;
  }
  return reply_error (req);
}

static void
range_request (struct s3_request *req, const char *name, uint64_t off,
               uint64_t len, void *buf)
{
  *req = (struct s3_request) {
    .method = "GET", .object = name,
    .range_off = off, .range_len = len, .buf = buf,
  };
}

/* Read [OFF, OFF + LEN) of object NAME into BUF.  A missing object, or
 * the part of one past its end, reads as zeroes when MISSING_OK.
 */
static int
get_range (const char *name, uint64_t off, uint64_t len, void *buf,
           bool missing_ok)
{
  struct s3_request req;

  range_request (&req, name, off, len, buf);
  if (s3_perform (&req) == -1)
    return -1;
  return s3_range_result (&req, missing_ok);
}

int
s3_single_pread (void *buf, uint32_t count, uint64_t offset)
{
  return get_range (s3_cfg.key, offset, count, buf, false);
}

/* The names of the K objects NUMS, malloc'd (free with free_names). */
static char **
make_names (const uint64_t *nums, size_t k)
{
  char **names = calloc (k, sizeof *names);

  if (names == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  for (size_t i = 0; i < k; ++i)
    if ((names[i] = s3_object_name (nums[i])) == NULL) {
      while (i > 0)
        free (names[--i]);
      free (names);
      return NULL;
    }
  return names;
}

/* The numbers A, A + 1, ..., B - 1 (B - A <= LIST_MAX), into NUMS. */
static size_t
run_of (uint64_t a, uint64_t b, uint64_t *nums)
{
  for (uint64_t n = a; n < b; ++n)
    nums[n - a] = n;
  return b - a;
}

static void
free_names (char **names, uint64_t count)
{
  if (names == NULL)
    return;
  for (uint64_t i = 0; i < count; ++i)
    free (names[i]);
  free (names);
}

/* Run REQS (N of them) and check each with CHECK; -1 if any failed
 * (errno from the first).
 */
static int
run_all (struct s3_request *reqs, size_t n,
         int (*check) (struct s3_request *))
{
  int r = 0, err = 0;

  s3_perform_many (reqs, n);
  for (size_t i = 0; i < n; ++i)
    if (check (&reqs[i]) == -1 && r == 0) {
      r = -1;
      err = errno;
    }
  errno = err;
  return r;
}

static int
check_read (struct s3_request *req)
{
  return s3_range_result (req, true);
}

/* Read COUNT bytes at OFFSET, which cover at most LIST_MAX objects. */
static int
pread_batch (char *buf, uint64_t count, uint64_t offset)
{
  const uint64_t os = s3_cfg.object_size;
  const uint64_t first = offset / os, last = (offset + count - 1) / os;
  const uint64_t n = last - first + 1;
  CLEANUP_FREE struct s3_request *reqs = NULL;
  CLEANUP_FREE uint64_t *nums = NULL;
  char **names;
  char *p = buf;
  int r;

  if (n == 1) {
    CLEANUP_FREE char *name = s3_object_name (first);

    return name ? get_range (name, offset % os, count, buf, true) : -1;
  }
  reqs = calloc (n, sizeof *reqs);
  nums = calloc (n, sizeof *nums);
  if (reqs == NULL || nums == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  for (uint64_t i = 0; i < n; ++i)
    nums[i] = first + i;
  names = make_names (nums, n);
  if (names == NULL)
    return -1;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t in = offset % os;
    uint64_t len = MIN (count, os - in);

    range_request (&reqs[i], names[i], in, len, p);
    p += len;
    offset += len;
    count -= len;
  }
  r = run_all (reqs, n, check_read);
  free_names (names, n);
  return r;
}

int
s3_objects_pread (void *buf, uint32_t count, uint64_t offset)
{
  const uint64_t os = s3_cfg.object_size;
  char *p = buf;

  /* A batch of at most LIST_MAX objects at a time (tiny objects make
   * many of them).
   */
  while (count > 0) {
    uint64_t stop = MIN ((offset / os + LIST_MAX) * os, offset + count);
    uint64_t len = stop - offset;

    if (pread_batch (p, len, offset) == -1)
      return -1;
    p += len;
    offset += len;
    count -= len;
  }
  return 0;
}

int
s3_write_result (struct s3_request *req)
{
  if (req->err)
    return -1;
  if (success (req)) {
    free (req->body);
    return 0;
  }
  return reply_error (req);
}

int
s3_delete_result (struct s3_request *req)
{
  if (req->err)
    return -1;
  if (success (req) || s3_no_such_key (req)) {
    free (req->body);
    return 0;
  }
  return reply_error (req);
}

/* PUT the K whole objects NUMS, object NUMS[i] from BUF + i *
 * object-size, or DELETE them if BUF is NULL.
 */
static int
put_or_delete (const uint64_t *nums, size_t k, const char *buf)
{
  const uint64_t os = s3_cfg.object_size;
  CLEANUP_FREE struct s3_request *reqs = calloc (k, sizeof *reqs);
  char **names;
  int r;

  if (reqs == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  names = make_names (nums, k);
  if (names == NULL)
    return -1;
  for (size_t i = 0; i < k; ++i) {
    if (buf)
      reqs[i] = (struct s3_request) {
        .method = "PUT", .object = names[i],
        .wbuf = buf + i * os, .wlen = os,
      };
    else
      reqs[i] = (struct s3_request) {
        .method = "DELETE", .object = names[i],
      };
  }
  if (lock_objects (nums, k) == -1) {
    free_names (names, k);
    return -1;
  }
  r = run_all (reqs, k, buf ? s3_write_result : s3_delete_result);
  unlock_objects (nums, k);
  free_names (names, k);
  return r;
}

/* Write LEN bytes of BUF (zeroes if BUF is NULL) at IN in object N,
 * which they do not cover: the object's bytes are read and merged.
 * Zeroes into a missing object need nothing.
 */
static int
write_part (uint64_t n, uint64_t in, uint64_t len, const void *buf)
{
  const uint64_t os = s3_cfg.object_size;
  CLEANUP_FREE char *name = s3_object_name (n);
  CLEANUP_FREE char *obj = malloc (os);
  struct s3_request req;
  int r = -1;

  if (name == NULL)
    return -1;
  if (obj == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (lock_objects (&n, 1) == -1)
    return -1;
  NBDKIT_PROBE (s3_rmw, nbdkit_connection_id (), nbdkit_request_cookie (),
                n, in, len);
  range_request (&req, name, 0, os, obj);
  if (s3_perform (&req) == -1)
    goto out;
  if (buf == NULL && (s3_no_such_key (&req) || req.status == 416)) {
    free (req.body);
    r = 0;                      /* zeroes into nothing */
    goto out;
  }
  if (s3_range_result (&req, true) == -1)
    goto out;
  if (buf)
    memcpy (obj + in, buf, len);
  else
    memset (obj + in, 0, len);
  req = (struct s3_request) {
    .method = "PUT", .object = name, .wbuf = obj, .wlen = os,
  };
  if (s3_perform (&req) == -1)
    goto out;
  r = s3_write_result (&req);
 out:
  unlock_objects (&n, 1);
  return r;
}

/* Write COUNT bytes of BUF (zeroes if NULL, and then whole objects are
 * deleted) at OFFSET: the parts of objects one by one, the runs of
 * whole objects together.
 */
static int
write_range (const char *buf, uint64_t count, uint64_t offset)
{
  const uint64_t os = s3_cfg.object_size;
  const uint64_t end = offset + count;

  while (offset < end) {
    uint64_t n = offset / os, in = offset % os;
    uint64_t len = MIN (end - offset, os - in);

    if (len < os) {
      if (write_part (n, in, len, buf) == -1)
        return -1;
    }
    else if (buf) {
      /* Whole objects, a batch at a time. */
      uint64_t b = MIN (end / os, n + LIST_MAX);
      uint64_t nums[LIST_MAX];

      len = (b - n) * os;
      if (put_or_delete (nums, run_of (n, b, nums), buf) == -1)
        return -1;
    }
    else {
      /* Zeroes: all the whole objects go at once. */
      uint64_t b = end / os;

      len = (b - n) * os;
      if (s3_delete_objects (n, b) == -1)
        return -1;
    }
    offset += len;
    if (buf)
      buf += len;
  }
  return 0;
}

int
s3_objects_pwrite (const void *buf, uint32_t count, uint64_t offset)
{
  return write_range (buf, count, offset);
}

int
s3_objects_zero (uint32_t count, uint64_t offset)
{
  return write_range (NULL, count, offset);
}

int
s3_objects_trim (uint32_t count, uint64_t offset)
{
  const uint64_t os = s3_cfg.object_size;
  const uint64_t a = (offset + os - 1) / os, b = (offset + count) / os;

  /* Parts of objects stay as they are: a trim is only advice. */
  return a < b ? s3_delete_objects (a, b) : 0;
}

/* The objects of [FIRST, FIRST + COUNT) that exist, from one listing:
 * their numbers in NUMS (ascending, at most LIST_MAX), how many in *K,
 * and in *END the object up to which the answer is complete (FIRST +
 * COUNT, unless the listing was cut short).  -1 on error.
 */
static int
list_objects (uint64_t first, uint64_t count, uint64_t *nums, size_t *k,
              uint64_t *end)
{
  CLEANUP_FREE char *query = NULL;
  CLEANUP_FREE char *prefix = NULL;
  CLEANUP_FREE char *after = NULL;
  CLEANUP_FREE char *truncated = NULL;
  struct s3_request req = { .method = "GET", .list = true };
  const char *pos = NULL;
  size_t plen;
  char max[32];
  bool past = false;
  char *key;

  *k = 0;
  *end = first;
  snprintf (max, sizeof max, "%" PRIu64, MIN (count, LIST_MAX));
  if (first > 0 && (after = s3_object_name (first - 1)) == NULL)
    return -1;
  /* The parameters in sorted order, as SigV4 signs them. */
  if (asprintf (&prefix, "%s/", s3_cfg.key) == -1 ||
      s3_query_add (&query, "list-type", "2") == -1 ||
      s3_query_add (&query, "max-keys", max) == -1 ||
      s3_query_add (&query, "prefix", prefix) == -1 ||
      (after && s3_query_add (&query, "start-after", after) == -1)) {
    nbdkit_error ("%m");
    return -1;
  }
  req.query = query;
  if (s3_perform (&req) == -1)
    return -1;
  if (req.status != 200)
    return reply_error (&req);

  /* Keys come in order; ours (KEY/ and 16 lower-case hex digits) sort
   * as their numbers do.  Other keys under the prefix are skipped.
   */
  plen = strlen (prefix);
  while (!past && *k < LIST_MAX &&
         (key = s3_xml_next (req.body, "Key", &pos)) != NULL) {
    const char *hex = key + plen;

    if (strncmp (key, prefix, plen) == 0 && strlen (hex) == 16 &&
        strspn (hex, "0123456789abcdef") == 16) {
      uint64_t n = strtoull (hex, NULL, 16);

      if (n >= first && n - first >= count)
        past = true;
      else if (n >= first) {
        nums[(*k)++] = n;
        *end = n + 1;
      }
    }
    free (key);
  }
  truncated = s3_xml_next (req.body, "IsTruncated", NULL);
  free (req.body);
  if (past || truncated == NULL || strcmp (truncated, "true") != 0)
    *end = first + count;
  if (*end == first) {
    nbdkit_error ("listing %s: no object of ours in %s keys", prefix, max);
    errno = EIO;
    return -1;
  }
  return 0;
}

/* Delete the whole objects [A, B).  Beyond a few, list them first and
 * delete only those that exist.
 */
int
s3_delete_objects (uint64_t a, uint64_t b)
{
  CLEANUP_FREE uint64_t *nums = malloc (LIST_MAX * sizeof *nums);
  size_t k;

  if (nums == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (b - a <= DELETE_UNLISTED)
    return put_or_delete (nums, run_of (a, b, nums), NULL);
  while (a < b) {
    uint64_t end;

    if (list_objects (a, b - a, nums, &k, &end) == -1 ||
        (k > 0 && put_or_delete (nums, k, NULL) == -1))
      return -1;
    a = end;
  }
  return 0;
}

int
s3_objects_extents (uint32_t count, uint64_t offset,
                    struct nbdkit_extents *extents)
{
  const uint64_t os = s3_cfg.object_size;
  const uint64_t first = offset / os;
  const uint64_t last = (offset + count - 1) / os;
  CLEANUP_FREE uint64_t *nums = malloc (LIST_MAX * sizeof *nums);
  uint64_t n, end;
  size_t k;

  if (nums == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (list_objects (first, last - first + 1, nums, &k, &end) == -1)
    return -1;
  /* Holes between the objects found, up to where the listing ended
   * (the server clips the first extent to OFFSET).
   */
  n = first;
  for (size_t i = 0; i <= k; ++i) {
    uint64_t data = i < k ? nums[i] : end;

    if (n < data &&
        nbdkit_add_extent (extents, n * os, (data - n) * os,
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
      return -1;
    if (i < k &&
        nbdkit_add_extent (extents, data * os, os, 0) == -1)
      return -1;
    n = data + 1;
  }
  return 0;
}
