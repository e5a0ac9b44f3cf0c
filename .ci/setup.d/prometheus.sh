#!/usr/bin/env bash
# The evidence tests run a real Prometheus over backfilled DCGM series: they need Debian's
# `prometheus` package, which ships both /usr/bin/prometheus and /usr/bin/promtool.
# Idempotent: does nothing when both binaries are already there.
set -euo pipefail
if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends prometheus
# The package's own service is not wanted: the tests start their own server on loopback.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl stop prometheus || true
fi
/usr/bin/prometheus --version | head -1
/usr/bin/promtool --version | head -1
