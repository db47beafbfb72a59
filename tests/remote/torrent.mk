# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the torrent plugin (libtorrent-rasterbar): a swarm on
# 127.0.0.1 (opentracker and a python3-libtorrent seeder), each test in
# its own network namespace (tests/torrent-seed.sh).
TESTS += test-torrent-plugin.sh test-torrent-probes.sh \
	test-torrent-debian.sh
EXTRA_DIST += torrent-seed.sh torrent-seeder.py
