#!/usr/bin/env bash
# Build (or reuse) the testbed's control-plane binaries from the Go modules pinned in go.mod/go.sum.
#
# The binaries land in ${GPUFLEET_TESTBED_CACHE:-~/.cache/gpufleet-testbed}/<versions-hash>/bin, where
# <versions-hash> covers go.mod, go.sum, the etcd main and this script, so changing a pin builds a new
# set beside the old one and an unchanged checkout reuses its binaries in well under a second.
# Kueue's CRDs and webhook manifests are copied from the very module that was built, into .../kueue.
# Prints the cache folder as its last line. Honours GOFLAGS (e.g. -p=1 on a shared machine).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
hash="$(cat go.mod go.sum cmd/etcd/main.go build.sh | sha256sum | cut -c1-16)"
root="${GPUFLEET_TESTBED_CACHE:-$HOME/.cache/gpufleet-testbed}/$hash"
tools=(kube-apiserver kube-scheduler kube-controller-manager kubectl kueue kwok etcd)

complete() {
  for t in "${tools[@]}"; do [ -x "$root/bin/$t" ] || return 1; done
  [ -s "$root/kueue/webhooks.yaml" ] && compgen -G "$root/kueue/crds/*.yaml" >/dev/null
}

if complete; then
  echo "testbed binaries up to date" >&2
  echo "$root"
  exit 0
fi

mkdir -p "$root/bin" "$root/kueue/crds"
k8s_version="$("$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="$(echo "$k8s_version" | cut -d. -f2)"
# Kubernetes reads its own version from these variables; an unset one reports v0.0.0 to clients.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
declare -A pkg=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kueue]=sigs.k8s.io/kueue/cmd/kueue
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [etcd]=./cmd/etcd
)
for t in "${tools[@]}"; do
  [ -x "$root/bin/$t" ] && continue
  start=$(date +%s)
  "$GO" build -trimpath -ldflags "$ldflags" -o "$root/bin/.$t.tmp" "${pkg[$t]}"
  mv "$root/bin/.$t.tmp" "$root/bin/$t"
  echo "built $t in $(( $(date +%s) - start ))s" >&2
done

kueue_dir="$("$GO" list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
cp "$kueue_dir"/config/components/crd/bases/*.yaml "$root/kueue/crds/"
cp "$kueue_dir/config/components/webhook/manifests.yaml" "$root/kueue/webhooks.yaml.tmp"
mv "$root/kueue/webhooks.yaml.tmp" "$root/kueue/webhooks.yaml"
echo "$root"
