# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the curl plugin (libcurl): a disk over HTTP(S).
