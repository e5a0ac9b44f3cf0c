#!/usr/bin/env bash
# The monitoring tests judge the rendered Alertmanager routing with Debian's prometheus-alertmanager:
# /usr/bin/amtool (check-config, config routes test) and /usr/bin/prometheus-alertmanager (a real
# server on loopback, started by the tests themselves).
# Idempotent: does nothing when both binaries are already there.
set -euo pipefail
if [ -x /usr/bin/amtool ] && [ -x /usr/bin/prometheus-alertmanager ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends prometheus-alertmanager tzdata
# The package's own service is not wanted: the tests start their own server on loopback.
if command -v systemctl >/dev/null; then
  systemctl stop prometheus-alertmanager 2>/dev/null || true
  systemctl disable prometheus-alertmanager 2>/dev/null || true
fi
if [ -x /etc/init.d/prometheus-alertmanager ]; then  # machines without systemd: the package's init script
  /etc/init.d/prometheus-alertmanager stop >/dev/null 2>&1 || true
fi
/usr/bin/amtool --version 2>&1 | head -1
/usr/bin/prometheus-alertmanager --version 2>&1 | head -1
