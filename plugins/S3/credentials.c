/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Where the S3 plugin's credentials, region and endpoint come from
 * when the parameters do not give them, in the order the AWS tools
 * use:
 *
 *   1. the parameters (access-key, secret-key, session-token,
 *      region, endpoint-url);
 *   2. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *      AWS_SESSION_TOKEN, AWS_REGION, AWS_DEFAULT_REGION,
 *      AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL;
 *   3. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 *      ~/.aws/credentials), section [PROFILE];
 *   4. the config file (AWS_CONFIG_FILE, else ~/.aws/config), section
 *      [default] or [profile PROFILE].
 *
 * PROFILE is profile=, else AWS_PROFILE, else AWS_DEFAULT_PROFILE,
 * else "default".  Runs once, from config_complete; writes s3_cfg.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "s3.h"

/* An environment variable, or NULL if unset or empty. */
static const char *
env (const char *name)
{
  const char *v = getenv (name);

  return v && *v ? v : NULL;
}

static char *
trim (char *s)
{
  char *e;

  while (isspace ((unsigned char) *s))
    s++;
  e = s + strlen (s);
  while (e > s && isspace ((unsigned char) e[-1]))
    *--e = '\0';
  return s;
}

/* The value of KEY in [SECTION] of the INI file PATH, malloc'd; NULL
 * if the file, the section or the key is not there.  Indented lines
 * (the nested settings of the config file) are skipped; comments
 * start with # or ;.
 */
static char *
ini_lookup (const char *path, const char *section, const char *key)
{
  FILE *fp;
  char *line = NULL;
  size_t cap = 0;
  bool in_section = false;
  char *ret = NULL;

  fp = fopen (path, "r");
  if (fp == NULL)
    return NULL;
  while (ret == NULL && getline (&line, &cap, fp) != -1) {
    bool nested = line[0] == ' ' || line[0] == '\t';
    char *s = trim (line), *eq;

    if (*s == '\0' || *s == '#' || *s == ';')
      continue;
    if (*s == '[') {
      char *end = strchr (s, ']');

      if (end) {
        *end = '\0';
        in_section = strcmp (trim (s + 1), section) == 0;
      }
      continue;
    }
    if (!in_section || nested || (eq = strchr (s, '=')) == NULL)
      continue;
    *eq = '\0';
    if (strcmp (trim (s), key) == 0) {
      ret = strdup (trim (eq + 1));
      if (ret == NULL)
        nbdkit_error ("strdup: %m");
    }
  }
  free (line);
  fclose (fp);
  return ret;
}

/* A path under $HOME, or NULL. */
static char *
home_path (const char *rel)
{
  const char *home = env ("HOME");
  char *p;

  if (home == NULL)
    return NULL;
  if (asprintf (&p, "%s/%s", home, rel) == -1)
    return NULL;
  return p;
}

static char *
file_path (const char *var, const char *rel)
{
  const char *v = env (var);

  return v ? strdup (v) : home_path (rel);
}

/* Set *DST to a copy of SRC if *DST is unset and SRC is not NULL. */
static int
fill (char **dst, const char *src)
{
  if (*dst || src == NULL)
    return 0;
  *dst = strdup (src);
  if (*dst == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

/* Take the malloc'd SRC into *DST if *DST is unset, else free it. */
static void
take (char **dst, char *src)
{
  if (*dst == NULL)
    *dst = src;
  else
    free (src);
}

/* The key pair (and token) from [SECTION] of PATH, if both halves of
 * the pair are there.
 */
static int
keys_from_file (const char *path, const char *section)
{
  char *id, *secret;

  if (path == NULL)
    return 0;
  id = ini_lookup (path, section, "aws_access_key_id");
  secret = ini_lookup (path, section, "aws_secret_access_key");
  if (id && secret) {
    s3_cfg.access_key = id;
    s3_cfg.secret_key = secret;
    take (&s3_cfg.session_token,
          ini_lookup (path, section, "aws_session_token"));
    nbdkit_debug ("S3: credentials from %s [%s]", path, section);
    return 0;
  }
  free (id);
  free (secret);
  return 0;
}

/* Is BUCKET usable as a host name label (virtual-hosted style)? */
static bool
dns_compatible (const char *bucket)
{
  size_t n = strlen (bucket);

  if (n < 3 || n > 63)
    return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = bucket[i];
    if (!(islower (c) || isdigit (c) || c == '-'))
      return false;
  }
  return bucket[0] != '-' && bucket[n - 1] != '-';
}

int
s3_resolve_credentials (void)
{
  CLEANUP_FREE char *cred_file = NULL;
  CLEANUP_FREE char *conf_file = NULL;
  CLEANUP_FREE char *conf_section = NULL;
  const char *profile;

  if (fill (&s3_cfg.profile, env ("AWS_PROFILE")) == -1 ||
      fill (&s3_cfg.profile, env ("AWS_DEFAULT_PROFILE")) == -1 ||
      fill (&s3_cfg.profile, "default") == -1)
    return -1;
  profile = s3_cfg.profile;
  cred_file = file_path ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  conf_file = file_path ("AWS_CONFIG_FILE", ".aws/config");
  if (strcmp (profile, "default") == 0)
    conf_section = strdup ("default");
  else if (asprintf (&conf_section, "profile %s", profile) == -1)
    conf_section = NULL;
  if (conf_section == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }

  if (s3_cfg.access_key == NULL && s3_cfg.secret_key == NULL) {
    if (env ("AWS_ACCESS_KEY_ID") && env ("AWS_SECRET_ACCESS_KEY")) {
      if (fill (&s3_cfg.access_key, env ("AWS_ACCESS_KEY_ID")) == -1 ||
          fill (&s3_cfg.secret_key, env ("AWS_SECRET_ACCESS_KEY")) == -1 ||
          fill (&s3_cfg.session_token, env ("AWS_SESSION_TOKEN")) == -1 ||
          fill (&s3_cfg.session_token, env ("AWS_SECURITY_TOKEN")) == -1)
        return -1;
      nbdkit_debug ("S3: credentials from the environment");
    }
    if (s3_cfg.access_key == NULL)
      keys_from_file (cred_file, profile);
    if (s3_cfg.access_key == NULL)
      keys_from_file (conf_file, conf_section);
  }
  if (s3_cfg.access_key == NULL || s3_cfg.secret_key == NULL) {
    if (s3_cfg.access_key || s3_cfg.secret_key)
      nbdkit_error ("access-key and secret-key must be given together");
    else
      nbdkit_error ("no credentials: give access-key= and secret-key=, "
                    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                    "add profile [%s] to %s", profile,
                    cred_file ? cred_file : "~/.aws/credentials");
    return -1;
  }

  if (fill (&s3_cfg.region, env ("AWS_REGION")) == -1 ||
      fill (&s3_cfg.region, env ("AWS_DEFAULT_REGION")) == -1)
    return -1;
  if (s3_cfg.region == NULL && conf_file)
    s3_cfg.region = ini_lookup (conf_file, conf_section, "region");
  if (fill (&s3_cfg.region, "us-east-1") == -1)
    return -1;

  if (fill (&s3_cfg.endpoint, env ("AWS_ENDPOINT_URL_S3")) == -1 ||
      fill (&s3_cfg.endpoint, env ("AWS_ENDPOINT_URL")) == -1)
    return -1;
  if (s3_cfg.endpoint == NULL && conf_file)
    s3_cfg.endpoint = ini_lookup (conf_file, conf_section, "endpoint_url");
  if (s3_cfg.endpoint) {
    size_t n;

    if (strncmp (s3_cfg.endpoint, "http://", 7) != 0 &&
        strncmp (s3_cfg.endpoint, "https://", 8) != 0) {
      nbdkit_error ("endpoint-url '%s' must start with http:// or "
                    "https://", s3_cfg.endpoint);
      return -1;
    }
    n = strlen (s3_cfg.endpoint);
    while (n > 0 && s3_cfg.endpoint[n - 1] == '/')
      s3_cfg.endpoint[--n] = '\0';
    s3_cfg.path_style = true;
  }
  else {
    /* Amazon's own endpoint: the bucket in the host name where it
     * fits one, as Amazon now prefers.
     */
    s3_cfg.path_style = !dns_compatible (s3_cfg.bucket);
    if (s3_cfg.path_style)
      errno = asprintf (&s3_cfg.endpoint, "https://s3.%s.amazonaws.com",
                        s3_cfg.region) == -1 ? ENOMEM : 0;
    else
      errno = asprintf (&s3_cfg.endpoint, "https://%s.s3.%s.amazonaws.com",
                        s3_cfg.bucket, s3_cfg.region) == -1 ? ENOMEM : 0;
    if (errno) {
      s3_cfg.endpoint = NULL;
      nbdkit_error ("asprintf: %m");
      return -1;
    }
  }
  return 0;
}
