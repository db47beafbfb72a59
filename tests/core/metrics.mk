# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --metrics: the live counters, their text, a real Prometheus scraping
# them, scrapers that misbehave, and plugins' and filters' own counters.
TESTS += test-metrics.sh test-metrics-prometheus.sh test-metrics-modules.sh
