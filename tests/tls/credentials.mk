# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS with PSK and X.509 credentials, --tls=require, and the TLS
# probes (tests/tls-info-plugin.c reports the client's identity).
TESTS += test-tls-psk.sh test-tls-x509.sh test-tls-require.sh \
	test-tls-probes.sh
