#!/usr/bin/env bash
# `make push-test`: `make push` against a real registry on 127.0.0.1 (Debian's
# docker-registry, the CNCF distribution registry, plain HTTP on a free port):
# the registry then serves pv-topology-webhook:<tag> with the digest `make push`
# printed and the archive's image (the same config digest, the image ID); a
# registry it cannot reach fails the push; buildah's store is left as it was.
#
# Needs docker-registry (apt-get install docker-registry), buildah (make tools) and
# the archive (make image; IMAGE_ARCHIVE names another).
set -euo pipefail
cd "$(dirname "$0")/../.."

ARCHIVE=${IMAGE_ARCHIVE:-target/image/pv-topology-webhook.tar}
TAG=${IMAGE_TAG:-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)}
fail() { echo "push-test: $*" >&2; exit 1; }
command -v docker-registry >/dev/null || fail "docker-registry is missing (apt-get install docker-registry)"
[[ -s $ARCHIVE ]] || fail "no $ARCHIVE (make image)"

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/config.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/data}}
http: {addr: "127.0.0.1:$port"}
EOF
docker-registry serve "$work/config.yml" >"$work/registry.log" 2>&1 &
registry=$!
trap 'kill "$registry" 2>/dev/null || true; wait "$registry" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$port/v2/" >/dev/null || fail "the registry did not start: $(cat "$work/registry.log")"

images_before=$(buildah --storage-driver vfs images --quiet)
start=$(date +%s.%N)
out=$(make -s push REGISTRY="127.0.0.1:$port" PUSH_FLAGS=--tls-verify=false \
    IMAGE_ARCHIVE="$ARCHIVE" IMAGE_TAG="$TAG")
echo "$out"
echo "push-test: make push took $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
printed=$(sed -n 's/^push: .* (\(sha256:[0-9a-f]\{64\}\))$/\1/p' <<<"$out")
[[ -n $printed ]] || fail "make push printed no digest: $out"

manifest=$work/manifest.json
served=$(curl -fs -D - -o "$manifest" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
    "http://127.0.0.1:$port/v2/pv-topology-webhook/manifests/$TAG" |
    sed -n 's/^docker-content-digest: *//Ip' | tr -d '\r')
[[ $served == "$printed" ]] || fail "the registry serves $served, make push printed $printed"
python3 - "$ARCHIVE" "$manifest" <<'PY'
import json, sys, tarfile
archive, pushed = sys.argv[1], json.load(open(sys.argv[2]))
with tarfile.open(archive) as tar:
    blob = lambda d: tar.extractfile("blobs/" + d.replace(":", "/")).read()
    index = json.loads(tar.extractfile("index.json").read())
    config = json.loads(blob(index["manifests"][0]["digest"]))["config"]["digest"]
if pushed["config"]["digest"] != config:
    sys.exit(f"push-test: pushed config {pushed['config']['digest']}, the archive's {config}")
print(f"push-test: the registry serves the archive's image (config {config[:19]})")
PY
[[ $(buildah --storage-driver vfs images --quiet) == "$images_before" ]] ||
    fail "make push left images in buildah's store"

# A registry that is not there: the push fails, and nothing is left behind.
kill "$registry"
wait "$registry" 2>/dev/null || true
if make -s push REGISTRY="127.0.0.1:$port" PUSH_FLAGS=--tls-verify=false \
    IMAGE_ARCHIVE="$ARCHIVE" IMAGE_TAG="$TAG" >/dev/null 2>&1; then
    fail "make push to a stopped registry succeeded"
fi
[[ $(buildah --storage-driver vfs images --quiet) == "$images_before" ]] ||
    fail "a failed make push left images in buildah's store"
echo "push-test: ok"
