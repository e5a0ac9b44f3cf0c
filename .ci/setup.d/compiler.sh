#!/usr/bin/env bash
# `make compiled` (gpufleet/compiled.py) builds the simulator's hot path with mypyc: a C compiler and
# the headers of the Python that runs the suite. Install gcc if it is missing; fail early and clearly
# if the headers are (a Python built without them cannot build extension modules).
set -euo pipefail
if ! command -v gcc >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends gcc libc6-dev
fi
include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -e "$include/Python.h" ]; then
  echo "compiler.sh: no Python.h in $include: install the headers of $(command -v python3) (python3-dev)" >&2
  exit 1
fi
