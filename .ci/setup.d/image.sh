#!/usr/bin/env bash
# The image build (image/build.sh, `make image`) and the tests that run the webhook and recorder from
# its filesystem (tests/e2e/test_image_on_api_server.py): mmdebstrap builds the Debian layer, umoci
# assembles the OCI image and unpacks it, skopeo is what the README pushes with. Debian's packages
# only; nothing is built here (the tests build the image once, about two minutes cold: docs/image.md).
set -euo pipefail
missing=()
for tool in mmdebstrap umoci skopeo; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
