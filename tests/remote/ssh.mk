# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ssh plugin (libssh): a file over SFTP.
