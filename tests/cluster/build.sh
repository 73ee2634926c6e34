#!/usr/bin/env bash
# Builds the cluster tier's Go binaries from the Go module proxy, at the
# versions pinned in tests/cluster/go.mod, into
# .cache/cluster-bin/<k8s-version>/ : kube-apiserver, etcd, kube-scheduler,
# kube-controller-manager, kubelet, cloud-node-controller, the kubelet-side test programs (kubelet-credcheck,
# kubelet-nodeip), kustomize-render, vsphere-sim (govmomi's simulator) and, from its own module (acr/go.mod),
# cloud-provider-azure's acr-credential-provider, and helm (go install at its
# own version). A binary already
# there is not rebuilt unless its inputs (Go version, go.mod, go.sum, the
# program's sources) changed. Go's caches live in .cache/go/.
#
#   bash tests/cluster/build.sh                   # every binary
#   bash tests/cluster/build.sh kubelet-nodeip    # only the ones named
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="$root/.cache"
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}"
export GOCACHE="${GOCACHE:-$cache/go/cache}"
export GOPATH="${GOPATH:-$cache/go/path}"
export GOFLAGS="${GOFLAGS:--mod=mod -p=2}"
export CGO_ENABLED="${CGO_ENABLED:-0}"
export GOTOOLCHAIN=local

k8s_version="$(awk '$1=="k8s.io/kubernetes"{print $2; exit} $2=="k8s.io/kubernetes"{print $3; exit}' "$here/go.mod")"
[ -n "$k8s_version" ] || { echo "build.sh: no k8s.io/kubernetes version in go.mod" >&2; exit 1; }
out="${CLUSTER_BIN_DIR:-$cache/cluster-bin/$k8s_version}"
mkdir -p "$out"

now() { date +%s; }
# The stamp of one binary: the Go version and its inputs, so an edit (or a
# new Go) rebuilds it.
stamp() { { go version; echo "$version_ldflags"; cat "$here/go.mod" "$here/go.sum" "$@"; } | sha256sum | cut -c1-16; }
# The version Kubernetes' own build stamps (hack/lib/version.sh), so that
# kubelet reports v1.37.2 in its Node's nodeInfo and the apiserver at /version,
# not v0.0.0-master.
k8s_minor="${k8s_version#v1.}"; k8s_minor="${k8s_minor%%.*}"
version_ldflags=""
for version_pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	version_ldflags+=" -X $version_pkg.gitVersion=$k8s_version -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$k8s_minor -X $version_pkg.gitTreeState=clean"
done

only=("$@")
build() { # name stamp-inputs... -- package
	local name="$1"; shift
	if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qxF "$name"; then
		return
	fi
	local inputs=()
	while [ "$1" != "--" ]; do inputs+=("$1"); shift; done
	shift
	local pkg="$1" want have t0
	want="$(stamp "${inputs[@]}")"
	have="$(cat "$out/.$name.stamp" 2>/dev/null || true)"
	if [ -x "$out/$name" ] && [ "$want" = "$have" ]; then
		echo "build.sh: $name $k8s_version cached"
		return
	fi
	t0=$(now)
	echo "build.sh: building $name ($pkg) ..."
	(cd "${build_dir:-$here}" && nice -n 19 go build -trimpath -ldflags "$version_ldflags" -o "$out/$name.tmp.$$" "$pkg")
	mv "$out/$name.tmp.$$" "$out/$name"
	echo "$want" > "$out/.$name.stamp"
	echo "build.sh: built $name in $(( $(now) - t0 ))s"
}

t_start=$(now)
build etcd "$here/cmd/etcd/main.go" -- ./cmd/etcd
build kube-apiserver -- k8s.io/kubernetes/cmd/kube-apiserver
# After kube-apiserver, whose packages (client-go, apiserver, the API types)
# they share from Go's build cache.
build kube-scheduler -- k8s.io/kubernetes/cmd/kube-scheduler
build kube-controller-manager -- k8s.io/kubernetes/cmd/kube-controller-manager
# The real node's kubelet (harness/src/node.rs), and the cloud controller
# manager's node controller on cloud-provider's fake cloud.
build kubelet -- k8s.io/kubernetes/cmd/kubelet
build cloud-node-controller "$here"/cmd/cloud-node-controller/*.go -- ./cmd/cloud-node-controller
build kubelet-credcheck "$here"/cmd/kubelet-credcheck/*.go -- ./cmd/kubelet-credcheck
build kustomize-render "$here"/cmd/kustomize-render/*.go -- ./cmd/kustomize-render
build kubelet-nodeip "$here"/cmd/kubelet-nodeip/*.go -- ./cmd/kubelet-nodeip
# govmomi's vCenter simulator with the tagging API, for the webhook's vSphere
# lookup tests (harness/tests/vsphere.rs).
build vsphere-sim "$here"/cmd/vsphere-sim/*.go -- ./cmd/vsphere-sim
# Upstream's ACR plugin at its released dependencies (acr/go.mod's tool line),
# for the differential test and bench/acr.sh.
build_dir="$here/acr" build acr-credential-provider "$here/acr/go.mod" "$here/acr/go.sum" -- sigs.k8s.io/cloud-provider-azure/cmd/acr-credential-provider
# helm, for the chart's tests (helm.rs, make chart-test): `go install` at its
# own released dependencies (no go.mod of ours, no replace directives).
HELM_VERSION=v3.22.0
build_helm() {
	if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qxF helm; then
		return
	fi
	local want have t0 gobin
	want="$({ go version; echo "helm.sh/helm/v3 $HELM_VERSION k8s 1.37"; } | sha256sum | cut -c1-16)"
	have="$(cat "$out/.helm.stamp" 2>/dev/null || true)"
	if [ -x "$out/helm" ] && [ "$want" = "$have" ]; then
		echo "build.sh: helm $HELM_VERSION cached"
		return
	fi
	t0=$(now)
	echo "build.sh: building helm (helm.sh/helm/v3/cmd/helm@$HELM_VERSION) ..."
	gobin="$(mktemp -d "$out/.helm.XXXXXX")"
	# The ldflags of helm's Makefile: its version, and the Kubernetes version
	# of its client-go (v0.37: 1.37) as the default of `helm template` and
	# `helm lint` (else 1.20, whose API deprecation checks and .Capabilities are
	# years old).
	local ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
	local pkg
	for pkg in lint/rules chartutil; do
		ldflags+=" -X helm.sh/helm/v3/pkg/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/$pkg.k8sVersionMinor=37"
	done
	(cd "$here" && GOBIN="$gobin" GOFLAGS="${GOFLAGS/-mod=mod/}" nice -n 19 go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
	mv "$gobin/helm" "$out/helm"
	rmdir "$gobin"
	echo "$want" > "$out/.helm.stamp"
	echo "build.sh: built helm in $(( $(now) - t0 ))s"
}
build_helm
echo "build.sh: cluster binaries in $out ($(( $(now) - t_start ))s)"
