#!/usr/bin/env bash
# Build gpufleet's OCI image without a container daemon: dist/gpufleet-<version>.oci.tar.
#
#   image/build.sh [WHEEL]     (`make image` builds the wheel first and calls this)
#
# Two layers, from Debian's packages and the Python package index only:
#   1. Debian bookworm's Python 3.11 (mmdebstrap, variant essential + python3, ca-certificates,
#      tzdata), pruned: no dpkg, apt, perl or debconf, no docs; a non-root user gpufleet (65532).
#      Cached under $GPUFLEET_IMAGE_CACHE keyed by this script, so a warm build skips it.
#   2. gpufleet's wheel and its dependencies (pip --target, binary wheels for cp311 manylinux x86_64:
#      no compiler runs, and none is left), byte-compiled (unchecked-hash .pyc) so that a read-only
#      root filesystem starts as fast as a writable one; a `gpufleet` launcher as the entrypoint.
# umoci assembles the layers and the config (user 65532, entrypoint, OCI labels with the version,
# the source and the revision) into an OCI layout; the archive is that layout as a tar, which
# `skopeo copy oci-archive:dist/gpufleet-<version>.oci.tar docker://REGISTRY/gpufleet:<version>` pushes.
# Needs root (mmdebstrap's root mode; CI runs as root) and the packages in .ci/setup.d/image.sh.
# Measured in docs/image.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
SUITE=bookworm
MIRROR=${GPUFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
USER_ID=65532
SOURCE_URL=${GPUFLEET_SOURCE_URL:-https://github.com/gpufleet/gpufleet}
CACHE=${GPUFLEET_IMAGE_CACHE:-$HOME/.cache/gpufleet-image}
VERSION=$("$PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
OUT=${GPUFLEET_IMAGE_OUT:-dist/gpufleet-$VERSION.oci.tar}  # the tests write theirs elsewhere
WHEEL=${1:-dist/gpufleet-$VERSION-py3-none-any.whl}
[ -f "$WHEEL" ] || { echo "image: no wheel at $WHEEL (run: $PY -m build --wheel)" >&2; exit 2; }
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || { echo "image: $tool is missing (bash .ci/setup.d/image.sh installs it)" >&2; exit 2; }
done
# A fixed date (the last commit's) for the layers' files and the image's created time.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || REVISION="$REVISION-dirty"  # built from uncommitted changes

mkdir -p "$CACHE" "$(dirname "$OUT")"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-image.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
began=$(date +%s)

# --- layer 1: the Debian runtime (cached) -------------------------------------------------------
# What is removed after the packages are in: the package tools (dpkg, debconf; apt was never
# installed), perl (only their scripts use it), documentation, locales, caches, Python's ensurepip,
# idle, lib2to3 and the tk/turtle demos. /var/lib/dpkg/status stays: scanners read what is installed.
PRUNE='set -e; r="$1"
rm -rf "$r"/usr/bin/dpkg* "$r"/usr/sbin/dpkg* "$r"/usr/bin/debconf* "$r"/usr/sbin/dpkg-* "$r"/usr/share/debconf \
  "$r"/usr/lib/dpkg "$r"/usr/share/dpkg "$r"/etc/dpkg "$r"/var/lib/dpkg/info "$r"/var/lib/dpkg/triggers \
  "$r"/var/lib/dpkg/alternatives "$r"/var/cache/debconf \
  "$r"/usr/bin/perl* "$r"/usr/lib/x86_64-linux-gnu/perl* "$r"/usr/lib/x86_64-linux-gnu/libperl* "$r"/usr/share/perl* \
  "$r"/usr/share/doc "$r"/usr/share/man "$r"/usr/share/info "$r"/usr/share/locale "$r"/usr/share/lintian \
  "$r"/usr/share/bash-completion "$r"/usr/share/common-licenses "$r"/usr/lib/x86_64-linux-gnu/gconv \
  "$r"/usr/lib/python3.11/ensurepip "$r"/usr/lib/python3.11/idlelib "$r"/usr/lib/python3.11/lib2to3 \
  "$r"/usr/lib/python3.11/turtledemo "$r"/usr/lib/python3.11/pydoc_data \
  "$r"/var/cache/* "$r"/var/log/* "$r"/var/lib/apt
echo "gpufleet:x:'$USER_ID':'$USER_ID':gpufleet:/nonexistent:/usr/sbin/nologin" >> "$r"/etc/passwd
echo "gpufleet:x:'$USER_ID':" >> "$r"/etc/group
'
base_key=$( (echo "$SUITE $MIRROR"; echo "$PRUNE"; sed -n '/^# --- layer 1/,/^# --- layer 2/p' "$0") | sha256sum | cut -c1-16)
BASE=$CACHE/base-$SUITE-$base_key.tar
if [ ! -f "$BASE" ]; then
  step=$(date +%s)
  # --skip=output/dev: no device nodes in a layer (the runtime mounts /dev; unpacking needs no mknod)
  mmdebstrap --quiet --variant=essential --include=python3,ca-certificates,tzdata --skip=output/dev \
    --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook="$PRUNE" \
    "$SUITE" "$WORK/base.tar" "$MIRROR"
  mv "$WORK/base.tar" "$BASE"
  echo "image: Debian layer built in $(( $(date +%s) - step ))s: $BASE"
else
  echo "image: Debian layer reused: $BASE"
fi

# --- layer 2: gpufleet and its dependencies -------------------------------------------------------
step=$(date +%s)
STAGE=$WORK/stage
SITE=$STAGE/usr/local/lib/python3.11/dist-packages  # on Debian's python3 sys.path already
platforms=()
for minor in $(seq 5 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done  # glibc 2.36 is bookworm's
"$PY" -m pip install --quiet --no-compile --no-warn-script-location --target "$SITE" \
  --only-binary=:all: "${platforms[@]}" --platform manylinux2014_x86_64 --platform linux_x86_64 \
  --python-version 3.11 --implementation cp --abi cp311 "$WHEEL"
rm -rf "$SITE/bin"  # console scripts with this machine's interpreter in their #! line
find "$SITE" -name __pycache__ -type d -prune -exec rm -rf {} +
# unchecked-hash: the .pyc is trusted without looking at the source's time (the image never changes)
"$PY" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$STAGE" -p / "$SITE" >"$WORK/compile.log" 2>&1 \
  || { grep -v '^Listing' "$WORK/compile.log" | head -20 >&2; echo "image: some files did not byte-compile (listed above)" >&2; }
mkdir -p "$STAGE/usr/local/bin"
printf '#!/usr/bin/python3 -s\nfrom gpufleet.cli import main\n\nmain()\n' >"$STAGE/usr/local/bin/gpufleet"
chmod 0755 "$STAGE/usr/local/bin/gpufleet"
tar -C "$STAGE" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -cf "$WORK/app.tar" usr
echo "image: gpufleet layer built in $(( $(date +%s) - step ))s ($(du -sh "$SITE" | cut -f1) of Python packages)"

# --- the image: layout, config, archive ------------------------------------------------------------
LAYOUT=$WORK/oci
umoci init --layout "$LAYOUT"
umoci new --image "$LAYOUT:$VERSION"
umoci raw add-layer --image "$LAYOUT:$VERSION" --history.created "$CREATED" \
  --history.created_by "mmdebstrap $SUITE python3 ca-certificates tzdata, pruned (image/build.sh)" "$BASE"
umoci raw add-layer --image "$LAYOUT:$VERSION" --history.created "$CREATED" \
  --history.created_by "pip install $(basename "$WHEEL") (image/build.sh)" "$WORK/app.tar"
labels=(
  "org.opencontainers.image.title=gpufleet"
  "org.opencontainers.image.description=A queue in front of the card: the gpufleet CLI, admission webhook and recorder"
  "org.opencontainers.image.version=$VERSION"
  "org.opencontainers.image.source=$SOURCE_URL"
  "org.opencontainers.image.revision=$REVISION"
  "org.opencontainers.image.licenses=Apache-2.0"
  "org.opencontainers.image.created=$CREATED"
  "org.opencontainers.image.base.name=debian:$SUITE"
)
config=(--config.user "$USER_ID:$USER_ID" --config.entrypoint /usr/local/bin/gpufleet --config.workingdir /
  --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1
  --config.env LANG=C.UTF-8 --config.exposedports 8443/tcp --architecture amd64 --os linux --created "$CREATED"
  --history.created "$CREATED" --history.created_by "umoci config (image/build.sh)")
for label in "${labels[@]}"; do config+=(--config.label "$label" --manifest.annotation "$label"); done
umoci config --image "$LAYOUT:$VERSION" "${config[@]}"
umoci gc --layout "$LAYOUT"
# An oci-archive is the layout as a tar; the tag is the ref skopeo and podman name it by.
tar -C "$LAYOUT" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
echo "image: wrote $OUT ($(du -h "$OUT" | cut -f1), gzip-compressed layers) in $(( $(date +%s) - began ))s"
echo "image: push with: skopeo copy oci-archive:$OUT docker://REGISTRY/gpufleet:$VERSION"
