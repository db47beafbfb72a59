#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=luks with images that qemu-img made in other ciphers, modes,
# IV generators and hashes than the default: aes-128 and aes-256, xts,
# cbc, ecb and ctr, plain, plain64 and essiv, sha1 to sha512 and md5.
# Each is read through the filter and written through it, and qemu's
# own luks driver must read back what was written.  The checks live in
# test-luks-filter.sh (its "ciphers" part), split out for time.
exec "$(dirname "$0")/test-luks-filter.sh" ciphers
