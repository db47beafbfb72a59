#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A BitTorrent seeder for the torrent tests, on Debian's
# python3-libtorrent: seeds TORRENT from SAVE_PATH on 127.0.0.1:PORT,
# announcing to the torrent's tracker, with DHT, local discovery and
# port mapping off, uploading at most UPLIMIT bytes a second (0: no
# limit) to every peer, local ones too.  Runs until killed, or SECONDS
# (a bound for a test).  With HOLD given (and an UPLIMIT), it uploads
# at 1 byte a second until it gets SIGUSR1, then at UPLIMIT: a test
# decides when the download starts, so no piece it will read can have
# arrived before its read.  It writes its process id to PIDFILE when
# one is given.
# Usage: torrent-seeder.py TORRENT SAVE_PATH PORT SECONDS [UPLIMIT [HOLD [PIDFILE]]]
import os
import signal
import sys
import time

import libtorrent as lt

torrent, save_path, port, seconds = sys.argv[1:5]
uplimit = int(sys.argv[5]) if len(sys.argv) > 5 else 0
hold = len(sys.argv) > 6 and sys.argv[6] == "hold" and uplimit > 0
released = False
ses = lt.session({
    "listen_interfaces": "127.0.0.1:%s" % port,
    "enable_dht": False, "enable_lsd": False,
    "enable_upnp": False, "enable_natpmp": False,
    # The tracker lists the seeder to itself: a connection to itself
    # would make it refuse 127.0.0.1, the client's address too.
    "seeding_outgoing_connections": False,
    "upload_rate_limit": 1 if hold else uplimit,
    "alert_mask": lt.alert.category_t.error_notification |
                  lt.alert.category_t.status_notification |
                  lt.alert.category_t.peer_notification,
})
if uplimit:
    # libtorrent leaves peers on the local network out of the rate
    # limits: put every address in the global class, which has them.
    f = lt.ip_filter()
    f.add_rule("0.0.0.0", "255.255.255.255", 1 << lt.session.global_peer_class_id)
    ses.set_peer_class_filter(f)
ses.add_torrent({
    "ti": lt.torrent_info(torrent), "save_path": save_path,
    # The data is there: no need to hash it before serving.
    "flags": lt.torrent_flags.seed_mode,
})


def release(signum, frame):
    global released
    released = True


signal.signal(signal.SIGUSR1, release)
if len(sys.argv) > 7:
    with open(sys.argv[7] + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(sys.argv[7] + ".tmp", sys.argv[7])
end = time.monotonic() + float(seconds)
while time.monotonic() < end:
    if released and hold:
        ses.apply_settings({"upload_rate_limit": uplimit})
        print("released: uploading at %d bytes/s" % uplimit, flush=True)
        hold = False
    ses.wait_for_alert(50 if hold else 500)
    for a in ses.pop_alerts():
        print(a.message(), flush=True)
