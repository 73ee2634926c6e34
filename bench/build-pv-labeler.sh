#!/usr/bin/env bash
# Builds the Go peer of pv-topology-webhook, kubernetes-sigs/cloud-pv-admission-labeler
# (last commit 115578b, 31 Oct 2023), and prints the path of its binary on stdout.
#
# Sources, first available wins (the one used is said on stderr):
#   1. $PEER_SRC: a checkout of the repository;
#   2. the local mirror /work/.mirror/kubernetes-sigs+cloud-pv-admission-labeler/repo
#      (a bare git dir; $PEER_MIRROR overrides), commit $PEER_COMMIT;
#   3. the Go module proxy: go mod download sigs.k8s.io/cloud-pv-admission-labeler@$PEER_COMMIT
#      (today it answers 403 "This module version is not available");
#   4. git clone https://github.com/kubernetes-sigs/cloud-pv-admission-labeler.
# With none, exits 1 with a line saying so.
#
# The binary is cached in .cache/bench/pv-labeler-<key>/pv-labeler, keyed by the commit
# (or, for $PEER_SRC, a hash of its go.mod, go.sum and .go files) and the Go version,
# so a rerun is instant. Go's caches are .cache/go/{mod,cache} as in tests/cluster/build.sh.
# Building from scratch takes about 3 minutes (it links the AWS, Azure, GCE and vSphere
# providers: a 136 MB binary).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}"
export GOCACHE="${GOCACHE:-$cache/go/cache}"
export GOPATH="${GOPATH:-$cache/go/path}"
export GOFLAGS="${GOFLAGS:--mod=mod}"
export CGO_ENABLED="${CGO_ENABLED:-0}"
export GOTOOLCHAIN=local
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-pv-labeler: no go toolchain" >&2; exit 1; }

PEER_COMMIT=${PEER_COMMIT:-115578b67634b4cab04987623b7288a5a5500294}
PEER_MIRROR=${PEER_MIRROR:-/work/.mirror/kubernetes-sigs+cloud-pv-admission-labeler/repo}
module=sigs.k8s.io/cloud-pv-admission-labeler
say() { echo "build-pv-labeler: $*" >&2; }
gov=$(go env GOVERSION)

src=$(mktemp -d)
trap 'chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"' EXIT

if [[ -n ${PEER_SRC:-} ]]; then
    [[ -f $PEER_SRC/go.mod ]] || { say "PEER_SRC=$PEER_SRC has no go.mod"; exit 1; }
    key=src-$( (cd "$PEER_SRC" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort |
        xargs cat) | sha256sum | cut -c1-12)
    from="checkout $PEER_SRC"
    fill() { cp -a "$PEER_SRC"/. "$src/"; }
else
    key=${PEER_COMMIT:0:12}
    if git -C "$PEER_MIRROR" cat-file -e "$PEER_COMMIT^{commit}" 2>/dev/null; then
        from="mirror $PEER_MIRROR at $PEER_COMMIT"
        fill() { git -C "$PEER_MIRROR" archive "$PEER_COMMIT" | tar -x -C "$src"; }
    elif (cd "$src" && go mod download -json "$module@$PEER_COMMIT" >"$src/.dl.json" 2>"$src/.dl.err"); then
        from="Go module proxy, $module@$PEER_COMMIT"
        fill() {
            local dir
            dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Dir"])' "$src/.dl.json")
            cp -a "$dir"/. "$src/" && chmod -R u+w "$src"
        }
    elif [[ ${PEER_NO_CLONE:-0} != 1 ]] &&
        git clone -q https://github.com/kubernetes-sigs/cloud-pv-admission-labeler "$src/clone" 2>"$src/.clone.err" &&
        git -C "$src/clone" checkout -q "$PEER_COMMIT" 2>>"$src/.clone.err"; then
        from="git clone of github.com/kubernetes-sigs/cloud-pv-admission-labeler at $PEER_COMMIT"
        fill() { cp -a "$src/clone"/. "$src/" && rm -rf "$src/clone"; }
    else
        say "no source for the Go peer: no PEER_SRC, no mirror at $PEER_MIRROR," \
            "the module proxy refused ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("Error","").replace("\n"," "))' "$src/.dl.json" 2>/dev/null || tail -1 "$src/.dl.err"))," \
            "and git clone failed ($(tail -1 "$src/.clone.err" 2>/dev/null || echo skipped))"
        exit 1
    fi
fi

out="$cache/bench/pv-labeler-$key-${gov}"
if [[ -x $out/pv-labeler ]]; then
    say "cached $out/pv-labeler ($(cat "$out/source"))"
    echo "$out/pv-labeler"
    exit 0
fi
say "building from the $from with $gov (about 3 minutes) ..."
fill
mkdir -p "$out"
t0=$(date +%s)
(cd "$src" && nice -n 10 go build -trimpath -o "$out/pv-labeler.tmp.$$" .)
mv "$out/pv-labeler.tmp.$$" "$out/pv-labeler"
echo "$from" >"$out/source"
say "built $out/pv-labeler in $(($(date +%s) - t0))s"
echo "$out/pv-labeler"
