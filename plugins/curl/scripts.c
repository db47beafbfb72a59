/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The curl plugin's header-script and cookie-script.
 *
 * A script is a shell fragment run with /bin/sh -c, its standard
 * output captured: for header-script, one HTTP header per line; for
 * cookie-script, one line of cookies.  It runs before the first
 * request, and again before a request once its -renew period has
 * passed since its last run.  $iteration (0 the first time) and $url
 * are in its environment.  Each run that succeeds makes a new
 * generation of the output.  scripts_run_due runs what is due;
 * scripts_apply gives a handle the current generation if it carries an
 * older one (each handle owns its copy of the header list, since
 * libcurl keeps a pointer to the list and other handles may be
 * mid-transfer); pool_get calls scripts_refresh, which does both.  The
 * asynchronous path runs the scripts on the server's worker that
 * submits, and applies them on the event loop, which must never wait
 * for a script.
 *
 * A run is bounded: a script that has not exited within timeout=
 * seconds (SCRIPT_SECONDS without one) is killed and the run fails, as
 * does one that exits with a non-zero status or prints more than
 * MAX_OUTPUT bytes.
 *
 * script_lock serializes the runs (and protects iteration): it is held
 * while a script runs, so requests that need the new output wait for
 * it.  gen_lock protects a script's output and generation, is held only
 * to copy or replace them, and is taken inside script_lock when a run
 * publishes its output.  Lock order: script_lock, then gen_lock;
 * pool_lock is never held here.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define NBDKIT_PROBE_SEMAPHORES 1
#include <nbdkit-probe.h>

#include "cleanup.h"
#include "curldefs.h"
#include "now-ns.h"
#include "subprocess.h"
#include "vector.h"

NBDKIT_PROBE_SEMAPHORE (curl_script);

#define SCRIPT_SECONDS 60
#define MAX_OUTPUT (1024 * 1024)

struct script {
  const char *kind;             /* "header" or "cookie" */
  uint64_t gen;                 /* 0 until the first run succeeds */
  uint64_t iteration;           /* runs so far */
  uint64_t last_ns;             /* when the last good run started */
  string_vector lines;          /* the last good run's output */
};

static pthread_mutex_t script_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct script header_s = { .kind = "header", .lines = empty_vector };
static struct script cookie_s = { .kind = "cookie", .lines = empty_vector };

void
scripts_free (void)
{
  string_vector_free_all (&header_s.lines);
  string_vector_free_all (&cookie_s.lines);
}

/* Run the script; on success replace s->lines with its output.
 * Returns 0 or -1 (reported).
 */
static int
script_run (struct script *s, const char *script)
{
  CLEANUP_FREE char *it = NULL, *url = NULL;
  int ret = -1, exit_status = -1;
  uint64_t t0 = now_ns ();
  const uint64_t iteration = s->iteration;
  const long limit = params.timeout > 0 ? params.timeout : SCRIPT_SECONDS;
  struct subprocess sp = {
    .shell_command = script,
    .stdin_mode = SUBPROCESS_NULL,
    .stdout_mode = SUBPROCESS_PIPE, .out_max = MAX_OUTPUT,
    .kill_on_overflow = true,
    .timeout_ms = limit < UINT_MAX / 1000 ? limit * 1000 : UINT_MAX,
  };

  if (asprintf (&it, "iteration=%" PRIu64, s->iteration) == -1 ||
      asprintf (&url, "url=%s", params.url) == -1) {
    nbdkit_error ("%s-script: %m", s->kind);
    goto out;
  }
  const char *env[] = { it, url, NULL };
  sp.env = env;

  switch (subprocess_run (&sp)) {
  case SUBPROCESS_ERROR:
    nbdkit_error ("%s-script: %s: %m", s->kind, sp.failed_call);
    goto out;
  case SUBPROCESS_TIMED_OUT:
    exit_status = 128 + SIGKILL;
    s->iteration++;
    nbdkit_error ("%s-script: killed after %ld seconds", s->kind, limit);
    goto out;
  case SUBPROCESS_FINISHED:
    break;
  }
  if (sp.out_overflow) {
    nbdkit_error ("%s-script: more than %d bytes of output",
                  s->kind, MAX_OUTPUT);
    goto out;
  }
  exit_status = subprocess_code (sp.status);
  s->iteration++;
  if (exit_status != 0) {
    nbdkit_error ("%s-script: failed with exit status %d", s->kind,
                  exit_status);
    goto out;
  }

  /* Split the output into lines, dropping empty ones and \r. */
  string_vector lines = empty_vector;
  char *p = sp.out.ptr, *end = p ? p + sp.out.len : NULL;
  while (p && p < end) {
    char *nl = memchr (p, '\n', end - p);
    size_t n = (nl ? nl : end) - p;
    if (n > 0 && p[n - 1] == '\r')
      n--;
    if (n > 0) {
      if (memchr (p, '\0', n)) {
        nbdkit_error ("%s-script: a NUL byte in its output", s->kind);
        string_vector_free_all (&lines);
        goto out;
      }
      char *line = strndup (p, n);
      if (!line || string_vector_append (&lines, line) == -1) {
        nbdkit_error ("strndup: %m");
        free (line);
        string_vector_free_all (&lines);
        goto out;
      }
      if (curl_debug_scripts)
        nbdkit_debug ("%s-script: %s", s->kind, line);
    }
    p = nl ? nl + 1 : end;
  }
  pthread_mutex_lock (&gen_lock);
  string_vector_free_all (&s->lines);
  s->lines = lines;
  s->gen++;
  s->last_ns = t0;
  pthread_mutex_unlock (&gen_lock);
  ret = 0;

 out:
  subprocess_free (&sp);
  NBDKIT_PROBE (curl_script, nbdkit_connection_id (),
                nbdkit_request_cookie (), s->kind, iteration,
                now_ns () - t0, exit_status);
  return ret;
}

/* Does the script need a (first or renewed) run?  With script_lock
 * held (gen and last_ns change only under it).
 */
static bool
script_due (struct script *s, unsigned renew)
{
  if (s->gen == 0)
    return true;
  return renew > 0 &&
    now_ns () - s->last_ns >= renew * UINT64_C (1000000000);
}

int
scripts_run_due (void)
{
  int ret = 0;

  if (!params.header_script && !params.cookie_script)
    return 0;

  pthread_mutex_lock (&script_lock);
  if (params.header_script &&
      script_due (&header_s, params.header_script_renew) &&
      script_run (&header_s, params.header_script) == -1)
    ret = -1;
  else if (params.cookie_script &&
           script_due (&cookie_s, params.cookie_script_renew) &&
           script_run (&cookie_s, params.cookie_script) == -1)
    ret = -1;
  pthread_mutex_unlock (&script_lock);
  return ret;
}

/* With gen_lock held: give H the header script's current output. */
static int
apply_headers (struct handle *h)
{
  struct curl_slist *list = NULL, *l;
  CURLcode r;
  size_t i;

  if (h->header_gen == header_s.gen)
    return 0;
  for (i = 0; i < header_s.lines.len; i++) {
    l = curl_slist_append (list, header_s.lines.ptr[i]);
    if (!l) {
      nbdkit_error ("curl_slist_append: %m");
      curl_slist_free_all (list);
      return -1;
    }
    list = l;
  }
  r = curl_easy_setopt (h->c, CURLOPT_HTTPHEADER, list);
  if (r != CURLE_OK) {
    nbdkit_error ("CURLOPT_HTTPHEADER: %s", curl_easy_strerror (r));
    curl_slist_free_all (list);
    return -1;
  }
  curl_slist_free_all (h->own_headers);
  h->own_headers = list;
  h->header_gen = header_s.gen;
  return 0;
}

/* With gen_lock held: give H the cookie script's current output. */
static int
apply_cookie (struct handle *h)
{
  CURLcode r;

  if (h->cookie_gen == cookie_s.gen)
    return 0;
  /* libcurl copies the string.  No output: no cookie. */
  r = curl_easy_setopt (h->c, CURLOPT_COOKIE,
                        cookie_s.lines.len > 0 ? cookie_s.lines.ptr[0] : NULL);
  if (r != CURLE_OK) {
    nbdkit_error ("CURLOPT_COOKIE: %s", curl_easy_strerror (r));
    return -1;
  }
  h->cookie_gen = cookie_s.gen;
  return 0;
}

int
scripts_apply (struct handle *h)
{
  int ret = 0;

  if (!params.header_script && !params.cookie_script)
    return 0;

  pthread_mutex_lock (&gen_lock);
  if ((params.header_script && apply_headers (h) == -1) ||
      (params.cookie_script && apply_cookie (h) == -1))
    ret = -1;
  pthread_mutex_unlock (&gen_lock);
  return ret;
}

int
scripts_refresh (struct handle *h)
{
  if (scripts_run_due () == -1)
    return -1;
  return scripts_apply (h);
}
