# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the S3 plugin (libcurl, SigV4): a disk in an S3 bucket.
