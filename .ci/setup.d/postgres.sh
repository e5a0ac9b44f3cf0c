#!/usr/bin/env bash
# The ledger's tests run a real PostgreSQL server (Debian's binaries, started by the test setup on
# loopback). Install the server package if it is missing; nothing is started here.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends postgresql
fi
id postgres >/dev/null 2>&1 || useradd --system --home /var/lib/postgresql --shell /bin/bash postgres
