#!/usr/bin/env bash
# Headless Chromium for the report test (tests/report): it opens report.html and screenshots it.
set -euo pipefail
if command -v chromium >/dev/null; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
