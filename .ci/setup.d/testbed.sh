#!/usr/bin/env bash
# Build (or reuse) the testbed's control-plane binaries for the end-to-end tests (tests/e2e).
# Idempotent: testbed/build.sh caches them under ~/.cache/gpufleet-testbed/<versions-hash>/, so a
# warm machine finishes in about a second. Needs Go >= 1.26 (go.mod says which) and the Go module
# proxy. A cold build is the long part of CI (see docs/testbed.md for measured times).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v go >/dev/null; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  else
    echo "testbed: Go >= 1.26 is required to build the control plane (put it at /usr/local/go)" >&2
    exit 1
  fi
fi
# Kueue reads a metrics certificate from this fixed path when it does not manage its own; the
# testbed writes one there on first start, which needs the folder to be writable (CI runs as root).
mkdir -p /etc/kueue/metrics/certs

start=$(date +%s)
root="$(bash testbed/build.sh | tail -n 1)"
echo "testbed binaries in $root ($(( $(date +%s) - start ))s)"
