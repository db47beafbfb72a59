# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --metrics: the live counters, their text, a real Prometheus scraping
# them, and scrapers that misbehave.
TESTS += test-metrics.sh test-metrics-prometheus.sh
