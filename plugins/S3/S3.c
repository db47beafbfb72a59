/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The S3 plugin: a disk kept in an S3 bucket (Amazon S3, Ceph's
 * radosgw, or any store speaking the same API).
 *
 * Two layouts, as in nbdkit's S3 plugin:
 *
 *   single object (no size=): the disk is the object KEY, read-only;
 *   its size is the object's, and reads are ranged GETs;
 *
 *   many objects (size= and object-size=): the disk is cut into
 *   objects of object-size bytes named KEY/%016x (the object number in
 *   hex, 16 digits); an object that does not exist reads as zeroes.
 *   A write PUTs whole objects; a write that covers part of an object
 *   reads it first (read-modify-write, under a per-object lock).  Trim
 *   and zero DELETE the whole objects in their range; block status
 *   lists the bucket and maps missing objects as holes.
 *
 * This file owns the plugin callbacks and the object layout;
 * credentials.c finds the credentials, http.c runs the requests.
 * Every write reaches the store before it is acknowledged, so flush
 * has nothing to do and FUA is native.
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

#include <curl/curl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "include/ispowerof2.h"
#include "include/minmax.h"
#include "s3.h"
#include "vector.h"

struct s3_config s3_cfg = {
  .timeout_ms = 60000,
  .connect_timeout_ms = 10000,
  .connections = 16,
  .retries = 2,
};

NBDKIT_DLL_PUBLIC int S3_debug_verbose = 0;

/* The most objects one listing asks for (S3's own limit). */
#define LIST_MAX ((uint64_t) 1000)

/* Objects deleted one by one, without listing, up to this many. */
#define DELETE_UNLISTED 4

/* Objects under read-modify-write (or being replaced or deleted):
 * their numbers, at most one holder each.  obj_lock protects
 * busy_objects; it is taken before the pool lock of http.c.
 */
DEFINE_VECTOR_TYPE (u64_vector, uint64_t);
static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t obj_cond = PTHREAD_COND_INITIALIZER;
static u64_vector busy_objects = empty_vector;

static bool
object_busy (uint64_t n)
{
  for (size_t i = 0; i < busy_objects.len; ++i)
    if (busy_objects.ptr[i] == n)
      return true;
  return false;
}

static int
lock_object (uint64_t n)
{
  LOCK_FOR_SCOPE (&obj_lock);
  while (object_busy (n))
    pthread_cond_wait (&obj_cond, &obj_lock);
  if (u64_vector_append (&busy_objects, n) == -1) {
    nbdkit_error ("realloc: %m");
    return -1;
  }
  return 0;
}

static void
unlock_object (uint64_t n)
{
  LOCK_FOR_SCOPE (&obj_lock);
  for (size_t i = 0; i < busy_objects.len; ++i)
    if (busy_objects.ptr[i] == n) {
      u64_vector_remove (&busy_objects, i);
      break;
    }
  pthread_cond_broadcast (&obj_cond);
}

static void
s3_load (void)
{
  curl_global_init (CURL_GLOBAL_DEFAULT);
}

static void
s3_unload (void)
{
  s3_http_free ();
  free (busy_objects.ptr);
  free (s3_cfg.access_key);
  free (s3_cfg.secret_key);
  free (s3_cfg.session_token);
  free (s3_cfg.endpoint);
  free (s3_cfg.region);
  free (s3_cfg.profile);
  free (s3_cfg.bucket);
  free (s3_cfg.key);
  curl_global_cleanup ();
}

static int
set_string (char **dst, const char *value)
{
  free (*dst);
  *dst = strdup (value);
  if (*dst == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

/* SECS (a decimal number, fractions allowed) into *MS. */
static int
parse_seconds (const char *key, const char *value, long *ms)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (value, &end);
  if (errno || end == value || *end || !(d > 0) || d > 86400) {
    nbdkit_error ("%s: '%s' is not a number of seconds (0 < N <= "
                  "86400)", key, value);
    return -1;
  }
  *ms = (long) (d * 1000);
  if (*ms == 0)
    *ms = 1;
  return 0;
}

static int
parse_unsigned (const char *key, const char *value, unsigned lo,
                unsigned hi, unsigned *r)
{
  if (nbdkit_parse_unsigned (key, value, r) == -1)
    return -1;
  if (*r < lo || *r > hi) {
    nbdkit_error ("%s: must be between %u and %u", key, lo, hi);
    return -1;
  }
  return 0;
}

/* nbdkit's plugin took both spellings, with - and with _. */
static bool
key_is (const char *key, const char *name)
{
  for (; *key && *name; key++, name++)
    if (*key != *name && !(*key == '_' && *name == '-'))
      return false;
  return *key == *name;
}

static int
s3_config (const char *key, const char *value)
{
  int64_t r;

  if (key_is (key, "access-key"))
    return set_string (&s3_cfg.access_key, value);
  if (key_is (key, "secret-key"))
    return set_string (&s3_cfg.secret_key, value);
  if (key_is (key, "session-token"))
    return set_string (&s3_cfg.session_token, value);
  if (key_is (key, "endpoint-url"))
    return set_string (&s3_cfg.endpoint, value);
  if (strcmp (key, "region") == 0)
    return set_string (&s3_cfg.region, value);
  if (strcmp (key, "profile") == 0)
    return set_string (&s3_cfg.profile, value);
  if (strcmp (key, "bucket") == 0)
    return set_string (&s3_cfg.bucket, value);
  if (strcmp (key, "key") == 0)
    return set_string (&s3_cfg.key, value);
  if (strcmp (key, "size") == 0 || key_is (key, "object-size")) {
    r = nbdkit_parse_size (value);
    if (r == -1)
      return -1;
    if (r == 0) {
      nbdkit_error ("%s must not be 0", key);
      return -1;
    }
    if (strcmp (key, "size") == 0)
      s3_cfg.size = r;
    else
      s3_cfg.object_size = r;
    return 0;
  }
  if (strcmp (key, "timeout") == 0)
    return parse_seconds (key, value, &s3_cfg.timeout_ms);
  if (key_is (key, "connect-timeout"))
    return parse_seconds (key, value, &s3_cfg.connect_timeout_ms);
  if (strcmp (key, "connections") == 0)
    return parse_unsigned (key, value, 1, 1024, &s3_cfg.connections);
  if (strcmp (key, "retries") == 0)
    return parse_unsigned (key, value, 0, 10, &s3_cfg.retries);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
s3_config_complete (void)
{
  if (s3_cfg.bucket == NULL || *s3_cfg.bucket == '\0') {
    nbdkit_error ("the bucket parameter is required");
    return -1;
  }
  if (s3_cfg.key == NULL || *s3_cfg.key == '\0') {
    nbdkit_error ("the key parameter is required");
    return -1;
  }
  if ((s3_cfg.size == 0) != (s3_cfg.object_size == 0)) {
    nbdkit_error ("size and object-size must be given together");
    return -1;
  }
  if (s3_cfg.object_size > 1024 * 1024 * 1024) {
    nbdkit_error ("object-size must be at most 1G");
    return -1;
  }
  if (s3_cfg.size && s3_cfg.size % s3_cfg.object_size != 0) {
    nbdkit_error ("size must be a multiple of object-size");
    return -1;
  }
  if (s3_cfg.connect_timeout_ms > s3_cfg.timeout_ms)
    s3_cfg.connect_timeout_ms = s3_cfg.timeout_ms;
  if (s3_resolve_credentials () == -1)
    return -1;
  nbdkit_debug ("S3: endpoint %s (%s style), region %s, bucket %s, key %s",
                s3_cfg.endpoint, s3_cfg.path_style ? "path" : "virtual-host",
                s3_cfg.region, s3_cfg.bucket, s3_cfg.key);
  return s3_http_init ();
}

#define s3_config_help \
  "bucket=BUCKET             The bucket (required).\n" \
  "key=KEY                   The object, or the objects' prefix (required).\n" \
  "size=SIZE                 The disk's size: one object per object-size.\n" \
  "object-size=SIZE          The size of each object (with size=).\n" \
  "endpoint-url=URL          The S3 service (default Amazon's).\n" \
  "access-key=ID             The credentials (else AWS_* and ~/.aws).\n" \
  "secret-key=SECRET\n" \
  "session-token=TOKEN\n" \
  "region=REGION             The signing region (default us-east-1).\n" \
  "profile=NAME              The profile in ~/.aws/credentials.\n" \
  "timeout=SECS              Time limit of each request (default 60).\n" \
  "connect-timeout=SECS      Time limit to connect (default 10).\n" \
  "connections=N             HTTP connections in the pool (default 16).\n" \
  "retries=N                 Retries after 5xx or a dropped connection."

static void
s3_dump_plugin (void)
{
  curl_version_info_data *d = curl_version_info (CURLVERSION_NOW);

  printf ("S3_curl_version=%s\n", d->version);
  printf ("S3_sigv4=yes\n");
}

/* The name of object N, malloc'd. */
static char *
object_name (uint64_t n)
{
  char *name;

  if (asprintf (&name, "%s/%016" PRIx64, s3_cfg.key, n) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  return name;
}

/* An error reply at run time: say what failed and set errno. */
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

/* Object not there, in a reply to a GET or HEAD (HEAD has no body). */
static bool
no_such_key (const struct s3_request *req)
{
  return req->status == 404 &&
    (req->code[0] == '\0' || strcmp (req->code, "NoSuchKey") == 0);
}

/* The start-up check: one request that needs the credentials, the
 * bucket, and (single object) the object, so that a mistake in any of
 * them is one clear line now rather than EIO later.
 */
static void
startup_error (struct s3_request *req, const char *what)
{
  CLEANUP_FREE char *msg = req->body ?
    s3_xml_next (req->body, "Message", NULL) : NULL;
  const char *m = msg ? msg : "";
  const char *sep = *m ? ": " : "";

  if (req->status == 403)
    nbdkit_error ("credentials refused by %s (HTTP 403 %s%s%s): check "
                  "access-key, secret-key and the clock", s3_cfg.endpoint,
                  req->code, sep, m);
  else if (strcmp (req->code, "NoSuchBucket") == 0)
    nbdkit_error ("bucket '%s' does not exist at %s", s3_cfg.bucket,
                  s3_cfg.endpoint);
  else if (req->status == 404)
    nbdkit_error ("%s '%s' not found in bucket '%s' at %s", what,
                  s3_cfg.key, s3_cfg.bucket, s3_cfg.endpoint);
  else if (req->status == 301 || strcmp (req->code,
                                         "AuthorizationHeaderMalformed") == 0)
    nbdkit_error ("bucket '%s' is not in region %s (HTTP %ld %s%s%s): "
                  "set region= or AWS_REGION", s3_cfg.bucket, s3_cfg.region,
                  req->status, req->code, sep, m);
  else
    nbdkit_error ("%s answered HTTP %ld %s%s%s", s3_cfg.endpoint,
                  req->status, req->code, sep, m);
}

static int64_t
head_object (void)
{
  struct s3_request req = { .method = "HEAD", .object = s3_cfg.key };

  if (s3_perform (&req) == -1)
    return -1;
  free (req.body);
  if (req.status != 200) {
    errno = s3_status_errno (&req);
    nbdkit_error ("HEAD %s: HTTP %ld", s3_cfg.key, req.status);
    return -1;
  }
  if (req.content_length < 0) {
    nbdkit_error ("HEAD %s: no Content-Length", s3_cfg.key);
    errno = EIO;
    return -1;
  }
  return req.content_length;
}

static int
startup_check (void)
{
  struct s3_request req = { .method = "GET" };
  CLEANUP_FREE char *query = NULL;
  CLEANUP_FREE char *prefix = NULL;
  char byte;
  int r = -1;

  if (s3_cfg.size == 0) {
    /* HEAD gives the size; if it fails, a one-byte GET gives the
     * reason (HEAD replies have no body).
     */
    req.method = "HEAD";
    req.object = s3_cfg.key;
    if (s3_perform (&req) == -1)
      return -1;
    if (req.status == 200 && req.content_length >= 0) {
      free (req.body);
      return 0;
    }
    free (req.body);
    req = (struct s3_request) {
      .method = "GET", .object = s3_cfg.key,
      .range_len = 1, .buf = &byte,
    };
    if (s3_perform (&req) == -1)
      return -1;
    startup_error (&req, "object");
    free (req.body);
    return -1;
  }

  /* Many objects: list at most one of ours. */
  if (asprintf (&prefix, "%s/", s3_cfg.key) == -1 ||
      s3_query_add (&query, "list-type", "2") == -1 ||
      s3_query_add (&query, "max-keys", "1") == -1 ||
      s3_query_add (&query, "prefix", prefix) == -1) {
    nbdkit_error ("%m");
    return -1;
  }
  req.query = query;
  req.list = true;
  if (s3_perform (&req) == -1)
    return -1;
  if (req.status == 200)
    r = 0;
  else
    startup_error (&req, "prefix");
  free (req.body);
  return r;
}

static int
s3_get_ready (void)
{
  int r = startup_check ();

  /* No connection is carried over the fork of the server. */
  s3_http_close_all ();
  return r;
}

struct handle {
  int64_t size;
};

static void *
s3_open (int readonly)
{
  struct handle *h = malloc (sizeof *h);

  if (h == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  if (s3_cfg.size) {
    h->size = s3_cfg.size;
    return h;
  }
  /* The object may have been replaced since start-up. */
  h->size = head_object ();
  if (h->size == -1) {
    free (h);
    return NULL;
  }
  return h;
}

static void
s3_close (void *handle)
{
  free (handle);
}

static int64_t
s3_get_size (void *handle)
{
  struct handle *h = handle;

  return h->size;
}

static int
s3_can_write (void *handle)
{
  return s3_cfg.size != 0;
}

static int
s3_can_multi_conn (void *handle)
{
  return 1;
}

static int
s3_can_flush (void *handle)
{
  return 1;
}

static int
s3_can_trim (void *handle)
{
  return s3_cfg.size != 0;
}

static int
s3_can_zero (void *handle)
{
  return s3_cfg.size != 0;
}

static int
s3_can_fast_zero (void *handle)
{
  return 1;
}

static int
s3_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
s3_can_extents (void *handle)
{
  return s3_cfg.size != 0;
}

static int
s3_is_rotational (void *handle)
{
  return 0;
}

static int
s3_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
               uint32_t *maximum)
{
  *minimum = 1;
  *preferred = 4096;
  if (s3_cfg.object_size >= 512 && s3_cfg.object_size <= 32 * 1024 * 1024 &&
      is_power_of_2 (s3_cfg.object_size))
    *preferred = s3_cfg.object_size;
  *maximum = 0xffffffff;
  return 0;
}

static int
s3_thread_model (void)
{
  return NBDKIT_THREAD_MODEL_PARALLEL;
}

/* Read [off, off + len) of object NAME into BUF.  A missing object, or
 * the part of one past its end, reads as zeroes when MISSING_OK.
 */
static int
get_range (const char *name, uint64_t off, uint64_t len, void *buf,
           bool missing_ok)
{
  struct s3_request req = {
    .method = "GET", .object = name,
    .range_off = off, .range_len = len, .buf = buf,
  };

  if (s3_perform (&req) == -1)
    return -1;
  if ((req.status == 200 || req.status == 206) &&
      (req.got == len || missing_ok)) {
    memset ((char *) buf + req.got, 0, len - req.got);
    free (req.body);
    return 0;
  }
  if (missing_ok && (no_such_key (&req) || req.status == 416)) {
    memset (buf, 0, len);
    free (req.body);
    return 0;
  }
  if (req.status == 200 || req.status == 206) {
    nbdkit_error ("GET %s: %" PRIu64 " bytes at %" PRIu64 " asked, %"
                  PRIu64 " came (the object shrank?)", name, len, off,
                  req.got);
    free (req.body);
    errno = EIO;
    return -1;
  }
  return reply_error (&req);
}

static int
put_object (const char *name, const void *buf)
{
  struct s3_request req = {
    .method = "PUT", .object = name,
    .wbuf = buf, .wlen = s3_cfg.object_size,
  };

  if (s3_perform (&req) == -1)
    return -1;
  if (req.status == 200 || req.status == 201 || req.status == 204) {
    free (req.body);
    return 0;
  }
  return reply_error (&req);
}

static int
delete_object (uint64_t n)
{
  CLEANUP_FREE char *name = object_name (n);
  struct s3_request req = { .method = "DELETE", .object = name };
  int r;

  if (name == NULL || lock_object (n) == -1)
    return -1;
  r = s3_perform (&req);
  unlock_object (n);
  if (r == -1)
    return -1;
  if (req.status == 200 || req.status == 204 || no_such_key (&req)) {
    free (req.body);
    return 0;
  }
  return reply_error (&req);
}

static int
s3_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  uint64_t os = s3_cfg.object_size;
  char *p = buf;

  if (os == 0)
    return get_range (s3_cfg.key, offset, count, buf, false);

  while (count > 0) {
    uint64_t n = offset / os, in = offset % os;
    uint32_t len = MIN ((uint64_t) count, os - in);
    CLEANUP_FREE char *name = object_name (n);

    if (name == NULL || get_range (name, in, len, p, true) == -1)
      return -1;
    p += len;
    offset += len;
    count -= len;
  }
  return 0;
}

/* Write LEN bytes of BUF (or zeroes if BUF is NULL) at IN in object N.
 * A whole object is PUT as it is; a part is merged into the object's
 * current bytes first.  Zeroes into a missing object need nothing.
 */
static int
write_piece (uint64_t n, uint64_t in, uint64_t len, const void *buf)
{
  uint64_t os = s3_cfg.object_size;
  CLEANUP_FREE char *name = object_name (n);
  CLEANUP_FREE char *obj = NULL;
  int r = -1;

  if (name == NULL)
    return -1;
  if (len == os && buf)
    obj = NULL;
  else if ((obj = malloc (os)) == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  if (lock_object (n) == -1)
    return -1;
  if (obj == NULL)
    r = put_object (name, buf);
  else {
    struct s3_request req = {
      .method = "GET", .object = name,
      .range_off = 0, .range_len = os, .buf = obj,
    };

    NBDKIT_PROBE (s3_rmw, nbdkit_connection_id (), nbdkit_request_cookie (),
                  n, in, len);
    if (s3_perform (&req) == -1)
      goto out;
    if (no_such_key (&req) || req.status == 416) {
      free (req.body);
      if (buf == NULL) {        /* zeroes into nothing */
        r = 0;
        goto out;
      }
      memset (obj, 0, os);
    }
    else if (req.status == 200 || req.status == 206) {
      free (req.body);
      memset (obj + req.got, 0, os - req.got);
    }
    else {
      reply_error (&req);
      goto out;
    }
    if (buf)
      memcpy (obj + in, buf, len);
    else
      memset (obj + in, 0, len);
    r = put_object (name, obj);
  }
 out:
  unlock_object (n);
  return r;
}

static int
s3_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  uint64_t os = s3_cfg.object_size;
  const char *p = buf;

  while (count > 0) {
    uint64_t n = offset / os, in = offset % os;
    uint32_t len = MIN ((uint64_t) count, os - in);

    if (write_piece (n, in, len, p) == -1)
      return -1;
    p += len;
    offset += len;
    count -= len;
  }
  return 0;
}

static int
s3_flush (void *handle, uint32_t flags)
{
  /* Every write was in the store before it was acknowledged. */
  return 0;
}

/* Which of the objects [FIRST, FIRST + COUNT) exist (COUNT <=
 * LIST_MAX), from one listing, into PRESENT.  Returns how many of the
 * COUNT objects the listing covered (all of them unless it was cut
 * short), or -1.
 */
static int64_t
list_objects (uint64_t first, uint64_t count, bool *present)
{
  CLEANUP_FREE char *query = NULL;
  CLEANUP_FREE char *prefix = NULL;
  CLEANUP_FREE char *after = NULL;
  CLEANUP_FREE char *truncated = NULL;
  struct s3_request req = { .method = "GET", .list = true };
  const char *pos = NULL;
  size_t plen;
  char max[32];
  uint64_t known = 0;
  char *k;

  memset (present, 0, count * sizeof *present);
  snprintf (max, sizeof max, "%" PRIu64, count);
  if (first > 0 && (after = object_name (first - 1)) == NULL)
    return -1;
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

  plen = strlen (prefix);
  while ((k = s3_xml_next (req.body, "Key", &pos)) != NULL) {
    const char *hex = k + plen;
    char *end;
    uint64_t n;

    if (strncmp (k, prefix, plen) == 0 && strlen (hex) == 16 &&
        strspn (hex, "0123456789abcdef") == 16) {
      errno = 0;
      n = strtoull (hex, &end, 16);
      if (errno == 0 && n >= first) {
        if (n - first >= count) {
          free (k);
          break;
        }
        present[n - first] = true;
        known = n - first + 1;
      }
    }
    free (k);
  }
  truncated = s3_xml_next (req.body, "IsTruncated", NULL);
  free (req.body);
  if (truncated == NULL || strcmp (truncated, "true") != 0)
    known = count;
  if (known == 0) {
    nbdkit_error ("listing %s: no object of ours in %" PRIu64
                  " keys", prefix, count);
    errno = EIO;
    return -1;
  }
  return known;
}

/* Delete the whole objects [A, B).  Beyond a few, list first and
 * delete only those that exist.
 */
static int
delete_objects (uint64_t a, uint64_t b)
{
  CLEANUP_FREE bool *present = NULL;

  if (b - a <= DELETE_UNLISTED) {
    for (; a < b; ++a)
      if (delete_object (a) == -1)
        return -1;
    return 0;
  }
  present = malloc (LIST_MAX * sizeof *present);
  if (present == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  while (a < b) {
    int64_t known = list_objects (a, MIN (b - a, LIST_MAX), present);

    if (known == -1)
      return -1;
    for (int64_t i = 0; i < known; ++i)
      if (present[i] && delete_object (a + i) == -1)
        return -1;
    a += known;
  }
  return 0;
}

static int
s3_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t os = s3_cfg.object_size;
  uint64_t a = (offset + os - 1) / os, b = (offset + count) / os;

  /* Parts of objects stay as they are: a trim is only advice. */
  return a < b ? delete_objects (a, b) : 0;
}

static int
s3_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t os = s3_cfg.object_size;
  uint64_t end = offset + count;

  /* Parts of objects are rewritten with zeroes; whole objects go. */
  while (offset < end) {
    uint64_t n = offset / os, in = offset % os;
    uint64_t len = MIN (end - offset, os - in);

    if (len == os) {
      uint64_t b = end / os;

      if (delete_objects (n, b) == -1)
        return -1;
      offset = b * os;
    }
    else {
      if (write_piece (n, in, len, NULL) == -1)
        return -1;
      offset += len;
    }
  }
  return 0;
}

static int
s3_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents)
{
  uint64_t os = s3_cfg.object_size;
  uint64_t first = offset / os;
  uint64_t last = (offset + count - 1) / os;
  uint64_t n = MIN (last - first + 1, LIST_MAX);
  CLEANUP_FREE bool *present = malloc (n * sizeof *present);
  int64_t known;

  if (present == NULL) {
    nbdkit_error ("malloc: %m");
    return -1;
  }
  known = list_objects (first, n, present);
  if (known == -1)
    return -1;
  for (int64_t i = 0; i < known; ++i) {
    uint64_t start = MAX ((first + i) * os, offset);
    uint64_t stop = (first + i + 1) * os;

    if (nbdkit_add_extent (extents, start, stop - start,
                           present[i] ? 0 :
                           NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
      return -1;
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name              = "S3",
  .longname          = "nbdkit S3 plugin",
  .version           = PACKAGE_VERSION,
  .load              = s3_load,
  .unload            = s3_unload,
  .config            = s3_config,
  .config_complete   = s3_config_complete,
  .config_help       = s3_config_help,
  .magic_config_key  = NULL,
  .dump_plugin       = s3_dump_plugin,
  .get_ready         = s3_get_ready,
  .thread_model      = s3_thread_model,
  .open              = s3_open,
  .close             = s3_close,
  .get_size          = s3_get_size,
  .block_size        = s3_block_size,
  .can_write         = s3_can_write,
  .can_flush         = s3_can_flush,
  .can_trim          = s3_can_trim,
  .can_zero          = s3_can_zero,
  .can_fast_zero     = s3_can_fast_zero,
  .can_fua           = s3_can_fua,
  .can_multi_conn    = s3_can_multi_conn,
  .can_extents       = s3_can_extents,
  .is_rotational     = s3_is_rotational,
  .pread             = s3_pread,
  .pwrite            = s3_pwrite,
  .flush             = s3_flush,
  .trim              = s3_trim,
  .zero              = s3_zero,
  .extents           = s3_extents,
  .errno_is_preserved = 1,
};

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
NBDKIT_REGISTER_PLUGIN (plugin)
