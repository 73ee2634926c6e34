#!/usr/bin/env bash
# `make image`: the pv-topology-webhook OCI image, built with buildah (vfs
# storage, chroot isolation: no daemon, no user namespaces) from
# webhook/Containerfile, kept as target/image/pv-topology-webhook.tar
# (oci-archive). The binary is built here on the host by
# scripts/webhook-static.sh: static (glibc with crt-static: this machine has
# no musl target), with its dependency list embedded by cargo auditable; the
# release archive (scripts/dist.sh) holds the same binary. Prints the image's
# size and layers.
#
# Needs buildah and cargo-auditable (`make tools`).
# Env: VERSION (default: the workspace version), SOURCE (the OCI source label).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/image
ARCHIVE=$OUT/pv-topology-webhook.tar
BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
VERSION=${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)}
SOURCE=${SOURCE:-$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n 1)}
IMAGE=localhost/pv-topology-webhook:$VERSION
BUILDAH=(buildah --storage-driver vfs)

command -v buildah >/dev/null || { echo "image: buildah is missing (make tools)" >&2; exit 1; }
[[ -s $BUNDLE ]] || { echo "image: no CA bundle at $BUNDLE (set CA_BUNDLE; Debian: ca-certificates)" >&2; exit 1; }

# The static binary the release archive holds too (scripts/webhook-static.sh).
bin=$(bash scripts/webhook-static.sh)

rm -rf "$OUT/context" && mkdir -p "$OUT/context"
cp "$bin" "$OUT/context/pv-topology-webhook"
cp -L "$BUNDLE" "$OUT/context/ca-certificates.crt"
chmod 0555 "$OUT/context/pv-topology-webhook"
chmod 0444 "$OUT/context/ca-certificates.crt"

"${BUILDAH[@]}" bud --isolation chroot --quiet -f webhook/Containerfile \
    --build-arg VERSION="$VERSION" --build-arg SOURCE="$SOURCE" \
    --timestamp 0 -t "$IMAGE" "$OUT/context" >/dev/null
rm -f "$ARCHIVE"
"${BUILDAH[@]}" push --quiet "$IMAGE" "oci-archive:$ARCHIVE:$IMAGE"
# The archive is what is kept; the local store would only grow.
"${BUILDAH[@]}" rmi "$IMAGE" >/dev/null

python3 - "$ARCHIVE" <<'PY'
import io, json, sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as tar:
    blob = lambda d: tar.extractfile("blobs/" + d.replace(":", "/")).read()
    index = json.loads(tar.extractfile("index.json").read())
    manifest = json.loads(blob(index["manifests"][0]["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    print(f"image: {path}: {len(manifest['layers'])} layer(s), "
          f"{sum(l['size'] for l in manifest['layers']) / 1e6:.1f} MB compressed")
    for layer in manifest["layers"]:
        with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"]))) as content:
            files = [f"/{m.name} ({m.size} bytes, {m.uid}:{m.gid} {m.mode:o})" for m in content if m.isfile()]
        print(f"  layer {layer['digest'][:19]}  {layer['size'] / 1e6:.1f} MB: {', '.join(files)}")
c = config["config"]
print(f"  user {c.get('User')}, entrypoint {c.get('Entrypoint')}, cmd {c.get('Cmd')}")
for k, v in sorted(c.get("Labels", {}).items()):
    print(f"  label {k}={v}")
PY
ls -l "$bin" "$ARCHIVE" | awk '{print "  " $5 " bytes  " $9}'

# The SBOM beside the archive (CycloneDX, scripts/sbom.sh of the release archives).
bash scripts/sbom.sh pv-topology-webhook "$OUT/pv-topology-webhook.cdx.json"
echo "  SBOM: $OUT/pv-topology-webhook.cdx.json"
