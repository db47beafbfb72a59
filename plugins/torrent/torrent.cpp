/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The torrent plugin: one file of a BitTorrent torrent (a .torrent
 * file or a magnet link) served read-only.  libtorrent-rasterbar does
 * the peer-to-peer work on its own threads, writing pieces into the
 * cache directory; the whole chosen file downloads in the background
 * and a read that needs a missing piece asks for it first (a piece
 * deadline) and waits until it has arrived.
 *
 * Data flow: config -> params (read-only after config_complete);
 * after_fork starts the session and the alert thread; the alert
 * thread turns piece_finished alerts into a generation count under
 * `lock` that waiting reads sleep on; pread reads the file in the
 * cache directory with pread(2) once its pieces are there.
 */

#include <config.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cinttypes>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libtorrent/alert_types.hpp>
#include <libtorrent/magnet_uri.hpp>
#include <libtorrent/session.hpp>
#include <libtorrent/settings_pack.hpp>
#include <libtorrent/torrent_handle.hpp>
#include <libtorrent/torrent_info.hpp>

extern "C" {
#include "full-rw.h"
}

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <nbdkit-probe.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

namespace {

/* The command line, fixed after config_complete. */
struct params {
  std::string torrent;          /* path of a .torrent, or a magnet link */
  bool magnet = false;
  std::string file;             /* file= (empty: the largest file) */
  std::string cache;            /* cache directory */
  bool cache_is_temp = false;   /* we made it, we remove it */
  int connections_limit = -1;   /* -1: libtorrent's default */
  int download_rate = 0;        /* bytes per second, 0: unlimited */
  int upload_rate = 0;
  std::string listen_interfaces;
  std::string outgoing_interfaces;
  std::string user_agent;
  unsigned timeout = 0;         /* seconds, 0: wait as long as it takes */
} params;

/* What after_fork learnt about the torrent, fixed once it returns. */
struct served {
  lt::torrent_handle handle;
  std::string path;             /* the file on disk, in the cache */
  int64_t size = 0;
  int64_t offset = 0;           /* of the file within the torrent */
  int64_t piece_length = 0;
  int npieces = 0;
} served;

/* The session is created in after_fork (its threads must not cross a
 * fork) and destroyed in unload.
 */
lt::session *session;
std::thread alert_thread;
std::atomic<bool> stopping (false);

/* `lock` protects `generation` (bumped on every finished piece, on
 * metadata and on stopping) and `fd`; reads and after_fork sleep on
 * `changed` until the generation moves.
 */
std::mutex lock;
std::condition_variable changed;
uint64_t generation;
int fd = -1;

uint64_t
now_ns ()
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
bump ()
{
  std::lock_guard<std::mutex> guard (lock);
  generation++;
  changed.notify_all ();
}

/* Bits per second on the command line, bytes per second for
 * libtorrent, which keeps rates in an int.
 */
int
parse_rate (const char *key, const char *value, int *out)
{
  int64_t bits = nbdkit_parse_size (value);
  if (bits == -1)
    return -1;
  if (bits / 8 > INT_MAX) {
    nbdkit_error ("%s: %s is too large", key, value);
    return -1;
  }
  *out = (int) (bits / 8);
  return 0;
}

int
torrent_config (const char *key, const char *value)
{
  if (strcmp (key, "torrent") == 0) {
    if (!params.torrent.empty ()) {
      nbdkit_error ("torrent: given more than once");
      return -1;
    }
    if (strncmp (value, "magnet:", 7) == 0) {
      params.torrent = value;
      params.magnet = true;
    }
    else {
      char *p = nbdkit_realpath (value);
      if (p == nullptr)
        return -1;
      params.torrent = p;
      free (p);
    }
  }
  else if (strcmp (key, "file") == 0)
    params.file = value;
  else if (strcmp (key, "cache") == 0) {
    char *p = nbdkit_absolute_path (value);
    if (p == nullptr)
      return -1;
    params.cache = p;
    free (p);
  }
  else if (strcmp (key, "connections-limit") == 0) {
    if (nbdkit_parse_int ("connections-limit", value,
                          &params.connections_limit) == -1)
      return -1;
    if (params.connections_limit < 2) {
      nbdkit_error ("connections-limit must be at least 2");
      return -1;
    }
  }
  else if (strcmp (key, "download-rate-limit") == 0)
    return parse_rate (key, value, &params.download_rate);
  else if (strcmp (key, "upload-rate-limit") == 0)
    return parse_rate (key, value, &params.upload_rate);
  else if (strcmp (key, "listen-interfaces") == 0)
    params.listen_interfaces = value;
  else if (strcmp (key, "outgoing-interfaces") == 0)
    params.outgoing_interfaces = value;
  else if (strcmp (key, "user-agent") == 0)
    params.user_agent = value;
  else if (strcmp (key, "timeout") == 0)
    return nbdkit_parse_unsigned ("timeout", value, &params.timeout);
  else {
    nbdkit_error ("unknown parameter '%s'", key);
    return -1;
  }
  return 0;
}

int
torrent_config_complete ()
{
  if (params.torrent.empty ()) {
    nbdkit_error ("a .torrent file or a magnet link is required "
                  "(torrent=...)");
    return -1;
  }
  if (params.cache.empty ()) {
    const char *tmp = getenv ("TMPDIR");
    std::string tmpl = std::string (tmp && *tmp ? tmp : "/var/tmp") +
      "/nbdkit-torrent-XXXXXX";
    if (mkdtemp (&tmpl[0]) == nullptr) {
      nbdkit_error ("mkdtemp: %s: %m", tmpl.c_str ());
      return -1;
    }
    params.cache = tmpl;
    params.cache_is_temp = true;
  }
  else if (mkdir (params.cache.c_str (), 0755) == -1 && errno != EEXIST) {
    nbdkit_error ("cache: mkdir: %s: %m", params.cache.c_str ());
    return -1;
  }
  nbdkit_debug ("torrent: cache directory %s", params.cache.c_str ());
  return 0;
}

/* Log what libtorrent says went wrong or changed, and wake the
 * waiters on each finished piece and on metadata.  Runs until unload.
 */
void
alert_loop ()
{
  std::vector<lt::alert *> alerts;
  while (!stopping) {
    session->wait_for_alert (std::chrono::milliseconds (200));
    session->pop_alerts (&alerts);
    for (lt::alert *a : alerts) {
      if (auto *pf = lt::alert_cast<lt::piece_finished_alert> (a)) {
        NBDKIT_PROBE (torrent_piece, (int64_t) pf->piece_index);
        bump ();
      }
      else if (lt::alert_cast<lt::metadata_received_alert> (a) ||
               lt::alert_cast<lt::torrent_checked_alert> (a)) {
        nbdkit_debug ("torrent: %s", a->message ().c_str ());
        bump ();
      }
      else if (a->category () & (lt::alert_category::error |
                                 lt::alert_category::status |
                                 lt::alert_category::tracker |
                                 lt::alert_category::connect))
        nbdkit_debug ("torrent: %s", a->message ().c_str ());
    }
  }
}

/* Wait, in slices so that stopping is noticed, until pred() holds or
 * the deadline (0: none) passes.  Returns pred()'s last value.
 */
template <typename Pred>
bool
wait_until (Pred pred, uint64_t deadline_ns)
{
  for (;;) {
    uint64_t gen;
    {
      std::lock_guard<std::mutex> guard (lock);
      gen = generation;
    }
    if (pred ())
      return true;
    if (stopping || (deadline_ns && now_ns () >= deadline_ns))
      return false;
    std::unique_lock<std::mutex> guard (lock);
    changed.wait_for (guard, std::chrono::milliseconds (500),
                      [gen] { return generation != gen; });
  }
}

uint64_t
deadline_from_now ()
{
  return params.timeout ? now_ns () + params.timeout * UINT64_C(1000000000)
    : 0;
}

int
choose_file ()
{
  std::shared_ptr<const lt::torrent_info> ti =
    served.handle.torrent_file ();
  const lt::file_storage &fs = ti->files ();
  lt::file_index_t chosen (-1);
  for (lt::file_index_t i : fs.file_range ()) {
    std::string path = fs.file_path (i);
    nbdkit_debug ("torrent: file %d: %s (%" PRIi64 " bytes)",
                  static_cast<int> (i), path.c_str (),
                  (int64_t) fs.file_size (i));
    if (fs.pad_file_at (i))
      continue;
    if (params.file.empty ()) {
      if (chosen == lt::file_index_t (-1) ||
          fs.file_size (i) > fs.file_size (chosen))
        chosen = i;
    }
    else if (path == params.file)
      chosen = i;
  }
  if (chosen == lt::file_index_t (-1)) {
    if (params.file.empty ())
      nbdkit_error ("the torrent has no files");
    else
      nbdkit_error ("file=%s: no such file in the torrent (see the list "
                    "with -v)", params.file.c_str ());
    return -1;
  }

  /* Only the chosen file is downloaded. */
  std::vector<lt::download_priority_t> prio (fs.num_files (),
                                             lt::dont_download);
  prio[static_cast<int> (chosen)] = lt::default_priority;
  served.handle.prioritize_files (prio);

  served.path = fs.file_path (chosen, params.cache);
  served.size = fs.file_size (chosen);
  served.offset = fs.file_offset (chosen);
  served.piece_length = ti->piece_length ();
  served.npieces = ti->num_pieces ();
  nbdkit_debug ("torrent: serving %s (%" PRIi64 " bytes at %" PRIi64
                " in the torrent, %d pieces of %" PRIi64 ")",
                fs.file_path (chosen).c_str (), served.size, served.offset,
                served.npieces, served.piece_length);
  NBDKIT_PROBE (torrent_ready, ti->name ().c_str (),
                fs.file_path (chosen).c_str (), served.size,
                served.piece_length, served.npieces);
  return 0;
}

/* Stop the alert thread and the session and remove a temporary cache;
 * from unload, and from after_fork when it fails (the server then
 * exits without unload, and a joinable std::thread would abort the
 * process).  Safe to call twice.
 */
void
teardown ()
{
  stopping = true;
  bump ();
  if (alert_thread.joinable ())
    alert_thread.join ();
  delete session;
  session = nullptr;
  if (fd >= 0)
    close (fd);
  fd = -1;
  if (params.cache_is_temp) {
    std::error_code ec;
    std::filesystem::remove_all (params.cache, ec);
    params.cache_is_temp = false;
  }
}

void
torrent_unload ()
{
  teardown ();
}

int
torrent_after_fork ()
{
  lt::settings_pack sp;
  sp.set_int (lt::settings_pack::alert_mask,
              lt::alert_category::error | lt::alert_category::status |
              lt::alert_category::storage |
              lt::alert_category::piece_progress |
              lt::alert_category::tracker | lt::alert_category::connect);
  /* Say goodbye to trackers quickly at exit: unload waits for it. */
  sp.set_int (lt::settings_pack::stop_tracker_timeout, 1);
  if (params.connections_limit > 0)
    sp.set_int (lt::settings_pack::connections_limit,
                params.connections_limit);
  sp.set_int (lt::settings_pack::download_rate_limit, params.download_rate);
  sp.set_int (lt::settings_pack::upload_rate_limit, params.upload_rate);
  if (!params.listen_interfaces.empty ())
    sp.set_str (lt::settings_pack::listen_interfaces,
                params.listen_interfaces);
  if (!params.outgoing_interfaces.empty ())
    sp.set_str (lt::settings_pack::outgoing_interfaces,
                params.outgoing_interfaces);
  if (!params.user_agent.empty ())
    sp.set_str (lt::settings_pack::user_agent, params.user_agent);

  lt::add_torrent_params atp;
  try {
    if (params.magnet)
      atp = lt::parse_magnet_uri (params.torrent);
    else
      atp.ti = std::make_shared<lt::torrent_info> (params.torrent);
    atp.save_path = params.cache;
    /* Start at once, not when the session's queue gets to it. */
    atp.flags &= ~(lt::torrent_flags::auto_managed |
                   lt::torrent_flags::paused);
    session = new lt::session (sp);
    served.handle = session->add_torrent (atp);
  }
  catch (const std::exception &e) {
    nbdkit_error ("torrent: %s: %s", params.torrent.c_str (), e.what ());
    teardown ();
    return -1;
  }
  alert_thread = std::thread (alert_loop);

  /* A magnet link's metadata (the list of files) comes from peers. */
  if (!wait_until ([] { return served.handle.status ().has_metadata; },
                   deadline_from_now ())) {
    nbdkit_error ("torrent: no metadata for %s after %u seconds",
                  params.torrent.c_str (), params.timeout);
    teardown ();
    return -1;
  }
  if (choose_file () == -1) {
    teardown ();
    return -1;
  }
  return 0;
}

void *
torrent_open (int readonly)
{
  return &served;   /* nothing per connection */
}

int64_t
torrent_get_size (void *handle)
{
  return served.size;
}

int
torrent_can_multi_conn (void *handle)
{
  return 1;   /* read-only: every connection sees the same bytes */
}

/* How many pieces in [first, last] the session does not have yet. */
int
count_missing (int first, int last)
{
  int missing = 0;
  for (int p = first; p <= last; p++)
    if (!served.handle.have_piece (lt::piece_index_t (p)))
      missing++;
  return missing;
}

int
torrent_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  uint64_t id = nbdkit_connection_id (), cookie = nbdkit_request_cookie ();
  /* The server has checked offset + count against the size, which is
   * one file's size, so none of this can wrap.
   */
  int64_t start = served.offset + (int64_t) offset;
  int first = start / served.piece_length;
  int last = (start + count - 1) / served.piece_length;
  if (count == 0 || first < 0 || last >= served.npieces) {
    nbdkit_error ("read outside the torrent's pieces");
    errno = EIO;
    return -1;
  }

  int missing = count_missing (first, last);
  if (missing > 0) {
    uint64_t t0 = now_ns ();
    NBDKIT_PROBE (torrent_wait_start, id, cookie, first, last, missing);
    /* Ask for these pieces before the rest of the file. */
    for (int p = first; p <= last; p++)
      if (!served.handle.have_piece (lt::piece_index_t (p)))
        served.handle.set_piece_deadline (lt::piece_index_t (p), 0);
    int left = missing;
    uint64_t deadline = deadline_from_now ();
    bool ok = wait_until ([&] {
      left = count_missing (first, last);
      return left == 0;
    }, deadline);
    NBDKIT_PROBE (torrent_wait_done, id, cookie, left, now_ns () - t0);
    if (!ok) {
      if (stopping)
        nbdkit_error ("torrent: the server is stopping");
      else
        nbdkit_error ("torrent: %d of pieces %d-%d still missing after "
                      "%u seconds", left, first, last, params.timeout);
      errno = EIO;
      return -1;
    }
  }

  int rfd;
  {
    std::lock_guard<std::mutex> guard (lock);
    if (fd == -1) {
      fd = open (served.path.c_str (), O_RDONLY | O_CLOEXEC);
      if (fd == -1) {
        nbdkit_error ("open: %s: %m", served.path.c_str ());
        return -1;
      }
    }
    rfd = fd;
  }
  ssize_t r = full_pread (rfd, buf, count, offset);
  if (r == -1) {
    nbdkit_error ("pread: %s: %m", served.path.c_str ());
    return -1;
  }
  if (r < (ssize_t) count) {
    /* The pieces are there, so the file must hold them. */
    nbdkit_error ("pread: %s: unexpected end of file at %" PRIu64,
                  served.path.c_str (), offset + r);
    errno = EIO;
    return -1;
  }
  return 0;
}

struct nbdkit_plugin plugin = [] {
  struct nbdkit_plugin pl = {};
  pl.name = "torrent";
  pl.longname = "nbdkit BitTorrent plugin";
  pl.version = PACKAGE_VERSION;
  pl.unload = torrent_unload;
  pl.config = torrent_config;
  pl.config_complete = torrent_config_complete;
  pl.config_help =
    "[torrent=]FILE.torrent|MAGNET (required) the torrent\n"
    "file=PATH                     the file to serve (default: largest)\n"
    "cache=DIR                     where pieces are kept\n"
    "connections-limit=N           peer connections\n"
    "download-rate-limit=BITS      per second (0: unlimited)\n"
    "upload-rate-limit=BITS        per second (0: unlimited)\n"
    "listen-interfaces=IP:PORT,... where peers connect to us\n"
    "outgoing-interfaces=IP,...    addresses our connections come from\n"
    "user-agent=STRING             name given to trackers and peers\n"
    "timeout=SECONDS               limit on one wait (0: none)";
  pl.magic_config_key = "torrent";
  pl.after_fork = torrent_after_fork;
  pl.open = torrent_open;
  pl.get_size = torrent_get_size;
  pl.can_multi_conn = torrent_can_multi_conn;
  pl.pread = torrent_pread;
  return pl;
} ();

} /* namespace */

NBDKIT_REGISTER_PLUGIN (plugin)
