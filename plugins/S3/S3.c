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
 * This file owns the parameters, the start-up check and the plugin
 * callbacks; objects.c maps requests to objects, credentials.c finds
 * the credentials, http.c runs the requests.
 * Every write reaches the store before it is acknowledged, so flush
 * has nothing to do and FUA is native.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "include/ispowerof2.h"
#include "s3.h"
#include "answers.h"

struct s3_config s3_cfg = {
  .timeout_ms = 60000,
  .connect_timeout_ms = 10000,
  .connections = 16,
  .retries = 2,
};

NBDKIT_DLL_PUBLIC int S3_debug_verbose = 0;

static void
s3_load (void)
{
  curl_global_init (CURL_GLOBAL_DEFAULT);
}

static void
s3_unload (void)
{
  s3_async_stop ();
  s3_http_free ();
  s3_objects_free ();
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

static int
s3_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  if (s3_cfg.object_size == 0)
    return s3_single_pread (buf, count, offset);
  return s3_objects_pread (buf, count, offset);
}

static int
s3_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  return s3_objects_pwrite (buf, count, offset);
}

static int
s3_flush (void *handle, uint32_t flags)
{
  /* Every write was in the store before it was acknowledged. */
  return 0;
}

static int
s3_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return s3_objects_trim (count, offset);
}

static int
s3_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return s3_objects_zero (count, offset);
}

static int
s3_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents)
{
  return s3_objects_extents (count, offset, extents);
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
  .can_flush         = answer_yes,
  .can_trim          = s3_can_trim,
  .can_zero          = s3_can_zero,
  .can_fast_zero     = answer_yes,
  .can_fua           = answer_fua_native,
  .can_multi_conn    = answer_yes,
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
