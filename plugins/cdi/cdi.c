/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The cdi plugin: one layer of a container image (a KubeVirt
 * "containerDisk" keeps its VM disk under /disk/ in such a layer),
 * served read-only as the uncompressed tar file it is.
 *
 *   nbdkit cdi [name=]IMAGE [layer=N]
 *
 * get_ready does all the work, once, before the server accepts
 * connections: "podman pull IMAGE", then "podman save --format oci-dir"
 * into a private directory under $TMPDIR (default /var/tmp), then the
 * OCI layout is followed (index.json -> manifest blob -> layers[N] ->
 * layer blob) and the layer is uncompressed into a file in the same
 * directory.  The file is opened, the directory removed, and from then
 * on reads are preads on that one descriptor, which needs no lock.
 *
 * Everything read from the layout is untrusted: files have a size
 * limit, digests must be "sha256:" and 64 hex digits (so a digest never
 * names a path outside blobs/sha256/), and the JSON must have the
 * expected shape, else get_ready fails with the reason.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "full-rw.h"
#include "subprocess.h"

/* index.json and a manifest are a few hundred bytes; this bounds what
 * a corrupt or hostile layout can make us read into memory.
 */
#define MAX_JSON_SIZE (4 * 1024 * 1024)

/* Parameters (config), then the layer (get_ready): read-only after. */
static char *image = NULL;
static unsigned layer_index = 0;
static int layer_fd = -1;
static int64_t layer_size = 0;

static void
cdi_unload (void)
{
  free (image);
  if (layer_fd >= 0)
    close (layer_fd);
}

static int
cdi_config (const char *key, const char *value)
{
  if (strcmp (key, "name") == 0 || strcmp (key, "image") == 0) {
    free (image);
    image = strdup (value);
    if (image == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
  }
  else if (strcmp (key, "layer") == 0) {
    if (nbdkit_parse_unsigned ("layer", value, &layer_index) == -1)
      return -1;
  }
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

static int
cdi_config_complete (void)
{
  if (image == NULL) {
    nbdkit_error ("the image name is required: nbdkit cdi IMAGE");
    return -1;
  }
  return 0;
}

#define cdi_config_help \
  "[name=]IMAGE  (required) The container image, as podman pull takes it.\n" \
  "layer=N                  The layer to export (default 0)."

static uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Run podman with ARGV (argv[0] is "podman"); stdout is thrown away,
 * stderr kept so that a failure is reported with podman's own reason.
 * Returns the exit code (0 on success), or -1 if podman did not run.
 */
static int
run_podman (const char *const *argv)
{
  struct subprocess sp = {
    .argv = argv,
    .stdin_mode = SUBPROCESS_NULL,
    .stdout_mode = SUBPROCESS_DISCARD,
    .stderr_mode = SUBPROCESS_PIPE,
    .err_keep_tail = true,
  };
  int code;

  if (subprocess_run (&sp) != SUBPROCESS_FINISHED) {
    nbdkit_error ("podman %s: %s: %m", argv[1], sp.failed_call);
    subprocess_free (&sp);
    return -1;
  }
  code = subprocess_code (sp.status);
  if (sp.exec_errno != 0) {
    errno = sp.exec_errno;
    nbdkit_error ("cannot run podman (is it installed?): %m");
    code = -1;
  }
  else if (code != 0)
    nbdkit_error ("podman %s %s failed (exit status %d): %s",
                  argv[1], image, code, subprocess_last_line (&sp));
  subprocess_free (&sp);
  return code;
}

/* Read the JSON file PATH (at most MAX_JSON_SIZE bytes). */
static json_object *
read_json (const char *path)
{
  CLEANUP_FREE char *buf = NULL;
  struct stat st;
  json_object *obj;
  json_tokener *tok;
  int fd;

  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("%s: %m", path);
    return NULL;
  }
  if (fstat (fd, &st) == -1 || !S_ISREG (st.st_mode) ||
      st.st_size > MAX_JSON_SIZE) {
    nbdkit_error ("%s: not a regular file of at most %d bytes",
                  path, MAX_JSON_SIZE);
    close (fd);
    return NULL;
  }
  buf = malloc (st.st_size + 1);
  if (buf == NULL || full_read (fd, buf, st.st_size) != st.st_size) {
    nbdkit_error ("%s: read: %m", path);
    close (fd);
    return NULL;
  }
  close (fd);
  buf[st.st_size] = '\0';

  tok = json_tokener_new ();
  if (tok == NULL) {
    nbdkit_error ("json_tokener_new: %m");
    return NULL;
  }
  obj = json_tokener_parse_ex (tok, buf, st.st_size);
  if (obj == NULL || json_tokener_get_error (tok) != json_tokener_success)
    nbdkit_error ("%s: not valid JSON: %s", path,
                  json_tokener_error_desc (json_tokener_get_error (tok)));
  json_tokener_free (tok);
  return obj;
}

/* OBJ's member KEY if it is a string, else NULL (reported). */
static const char *
json_string_member (json_object *obj, const char *key, const char *what)
{
  json_object *v;

  if (!json_object_is_type (obj, json_type_object) ||
      !json_object_object_get_ex (obj, key, &v) ||
      !json_object_is_type (v, json_type_string)) {
    nbdkit_error ("%s: no \"%s\" string", what, key);
    return NULL;
  }
  return json_object_get_string (v);
}

/* The path of the blob named by DIGEST in the layout DIR, or NULL if
 * the digest is not a well-formed sha256 one.  The caller frees it.
 */
static char *
blob_path (const char *dir, const char *digest)
{
  const char *hex;
  char *path;
  size_t i;

  if (strncmp (digest, "sha256:", 7) != 0) {
    nbdkit_error ("unsupported digest \"%s\" (only sha256)", digest);
    return NULL;
  }
  hex = digest + 7;
  for (i = 0; hex[i] != '\0'; ++i)
    if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
      break;
  if (i != 64 || hex[i] != '\0') {
    nbdkit_error ("malformed digest \"%s\"", digest);
    return NULL;
  }
  if (asprintf (&path, "%s/blobs/sha256/%s", dir, hex) == -1) {
    nbdkit_error ("asprintf: %m");
    return NULL;
  }
  return path;
}

/* Uncompress (gzip) or copy (plain tar: zlib passes it through) the
 * blob SRC into the new file DST, and return DST opened read-only.
 */
static int
unpack_layer (const char *src, const char *dst)
{
  CLEANUP_FREE char *buf = NULL;
  const size_t bufsize = 1024 * 1024;
  gzFile gz;
  int out, fd, n, r = 0;

  gz = gzopen (src, "rb");
  if (gz == NULL) {
    nbdkit_error ("%s: %m", src);
    return -1;
  }
  out = open (dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  buf = malloc (bufsize);
  if (out == -1 || buf == NULL) {
    nbdkit_error ("%s: %m", dst);
    gzclose (gz);
    if (out >= 0)
      close (out);
    return -1;
  }
  while ((n = gzread (gz, buf, bufsize)) > 0) {
    if (full_write (out, buf, n) != n) {
      nbdkit_error ("%s: write: %m", dst);
      r = -1;
      break;
    }
  }
  if (r == 0) {
    /* gzread ends a truncated stream with 0, as it ends a whole one:
     * only gzerror tells them apart.
     */
    int e;
    const char *msg = gzerror (gz, &e);
    if (n < 0 || (e != Z_OK && e != Z_STREAM_END)) {
      if (e == Z_ERRNO)
        nbdkit_error ("%s: read: %m", src);
      else
        nbdkit_error ("%s: the layer does not uncompress: %s", src, msg);
      r = -1;
    }
  }
  gzclose (gz);
  if (close (out) == -1 && r == 0) {
    nbdkit_error ("%s: close: %m", dst);
    r = -1;
  }
  if (r == -1)
    return -1;

  fd = open (dst, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    nbdkit_error ("%s: %m", dst);
  return fd;
}

/* Follow DIR/index.json to layer LAYER_INDEX and unpack it into
 * DIR/layer.  Sets layer_fd.
 */
static int
open_layer (const char *dir)
{
  CLEANUP_FREE char *index_path = NULL, *manifest_path = NULL;
  CLEANUP_FREE char *blob = NULL, *dst = NULL;
  json_object *index = NULL, *manifest = NULL, *manifests, *layers, *l;
  const char *digest, *media_type;
  size_t nr_layers;
  struct stat st;
  int r = -1;

  if (asprintf (&index_path, "%s/index.json", dir) == -1 ||
      asprintf (&dst, "%s/layer", dir) == -1) {
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  index = read_json (index_path);
  if (index == NULL)
    goto out;
  if (!json_object_object_get_ex (index, "manifests", &manifests) ||
      !json_object_is_type (manifests, json_type_array) ||
      json_object_array_length (manifests) < 1) {
    nbdkit_error ("%s: no manifest listed", index_path);
    goto out;
  }
  digest = json_string_member (json_object_array_get_idx (manifests, 0),
                               "digest", "index.json manifests[0]");
  if (digest == NULL || (manifest_path = blob_path (dir, digest)) == NULL)
    goto out;
  manifest = read_json (manifest_path);
  if (manifest == NULL)
    goto out;
  if (!json_object_object_get_ex (manifest, "layers", &layers) ||
      !json_object_is_type (layers, json_type_array)) {
    nbdkit_error ("image %s: its manifest has no list of layers "
                  "(an index of several platforms is not supported)",
                  image);
    goto out;
  }
  nr_layers = json_object_array_length (layers);
  if (nr_layers == 0) {
    nbdkit_error ("image %s has no layers, so no disk to export", image);
    goto out;
  }
  if (layer_index >= nr_layers) {
    nbdkit_error ("image %s has %zu layer(s): layer=%u does not exist "
                  "(layers count from 0)", image, nr_layers, layer_index);
    goto out;
  }
  l = json_object_array_get_idx (layers, layer_index);
  digest = json_string_member (l, "digest", "the layer");
  media_type = json_string_member (l, "mediaType", "the layer");
  if (digest == NULL || media_type == NULL)
    goto out;
  /* gzip and plain tar layers are what podman and docker write; zstd
   * layers would need libzstd, and anything else is not a tar.
   */
  if (strstr (media_type, "tar") == NULL || strstr (media_type, "zstd")) {
    nbdkit_error ("layer %u of %s has media type %s: only tar and "
                  "gzip-compressed tar layers are supported",
                  layer_index, image, media_type);
    goto out;
  }
  blob = blob_path (dir, digest);
  if (blob == NULL)
    goto out;
  layer_fd = unpack_layer (blob, dst);
  if (layer_fd == -1)
    goto out;
  if (fstat (layer_fd, &st) == -1) {
    nbdkit_error ("fstat: %m");
    goto out;
  }
  layer_size = st.st_size;
  NBDKIT_PROBE (cdi_layer, image, layer_index, nr_layers, digest,
                media_type, layer_size);
  nbdkit_debug ("cdi: layer %u of %zu: %s (%s), %" PRIi64 " bytes",
                layer_index, nr_layers, digest, media_type, layer_size);
  r = 0;

 out:
  json_object_put (manifest);
  json_object_put (index);
  return r;
}

static int
remove_one (const char *path, const struct stat *st, int flag,
            struct FTW *ftw)
{
  (void) st; (void) flag; (void) ftw;
  if (remove (path) == -1)
    nbdkit_debug ("cdi: remove %s: %m", path);
  return 0;
}

static int
cdi_get_ready (void)
{
  CLEANUP_FREE char *dir = NULL, *layout = NULL;
  const char *tmpdir = getenv ("TMPDIR");
  uint64_t t0;
  int r;

  if (tmpdir == NULL || *tmpdir == '\0')
    tmpdir = "/var/tmp";
  if (asprintf (&dir, "%s/nbdkit-cdi-XXXXXX", tmpdir) == -1) {
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  if (mkdtemp (dir) == NULL) {
    nbdkit_error ("mkdtemp: %s: %m", dir);
    return -1;
  }
  if (asprintf (&layout, "%s/image", dir) == -1) {
    nbdkit_error ("asprintf: %m");
    rmdir (dir);
    return -1;
  }

  t0 = now_ns ();
  r = run_podman ((const char *[]) { "podman", "pull", "-q", image, NULL });
  NBDKIT_PROBE (cdi_pull, image, r, now_ns () - t0);
  if (r == 0)
    r = run_podman ((const char *[]) { "podman", "save", "--format",
                                       "oci-dir", "-o", layout, image,
                                       NULL });
  if (r == 0)
    r = open_layer (layout);

  /* The open descriptor keeps the layer's bytes; nothing else is
   * needed, so the whole directory goes now, on success or failure.
   */
  nftw (dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  return r == 0 ? 0 : -1;
}

static void *
cdi_open (int readonly)
{
  (void) readonly;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
cdi_get_size (void *handle)
{
  (void) handle;
  return layer_size;
}

/* The layer never changes, so every connection sees the same bytes. */
static int
cdi_can_multi_conn (void *handle)
{
  (void) handle;
  return 1;
}

static int
cdi_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  ssize_t n;

  (void) handle; (void) flags;
  n = full_pread (layer_fd, buf, count, offset);
  if (n == -1) {
    nbdkit_error ("pread: %m");
    return -1;
  }
  if ((size_t) n < count) {
    /* The server keeps requests within layer_size, and the file is
     * ours: a short read means it shrank under us.
     */
    nbdkit_error ("pread: unexpected end of the layer file");
    errno = EIO;
    return -1;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name               = "cdi",
  .longname           = "nbdkit containerized data importer plugin",
  .version            = PACKAGE_VERSION,
  .unload             = cdi_unload,
  .config             = cdi_config,
  .config_complete    = cdi_config_complete,
  .config_help        = cdi_config_help,
  .magic_config_key   = "name",
  .get_ready          = cdi_get_ready,
  .open               = cdi_open,
  .get_size           = cdi_get_size,
  .can_multi_conn     = cdi_can_multi_conn,
  .pread              = cdi_pread,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
