#!/usr/bin/env bash
# `make dist`: release archives of the three programs in target/dist/:
#   <program>-<version>-<arch>-linux.tar.gz   binary, examples, LICENSE, README.md
#   <program>-<version>-<arch>-linux.cdx.json CycloneDX SBOM of the binary
#   SHA256SUMS                                 over the archives and SBOMs
# The node programs are built with the `small` profile; the webhook's archive
# holds its image's static binary (scripts/webhook-static.sh: one release
# build serves both). Archives are reproducible from the same binaries: entries sorted
# by name, mtime SOURCE_DATE_EPOCH (default: the last commit's time), owner
# and group 0, modes 0755/0644, gzip without name or time.
# DIST_SKIP_BUILD=1 packs the binaries already in target/ without cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
OUT=${DIST_DIR:-target/dist}

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
fi
export SOURCE_DATE_EPOCH

if [ "${DIST_SKIP_BUILD:-}" != 1 ]; then
  $CARGO build --locked --profile small -p cloud-credential-provider -p node-ip-helper
  bash scripts/webhook-static.sh > /dev/null
fi

version=$($CARGO metadata --locked --no-deps --format-version 1 |
  python3 -c 'import json,sys; print({p["name"]: p["version"] for p in json.load(sys.stdin)["packages"]}["pv-topology-webhook"])')
arch=$(rustc -vV | sed -n 's/^host: \([^-]*\)-.*/\1/p')
# The licence: the repository has no licence file, so each archive's LICENSE
# states the packages' `license` field (Cargo.toml's workspace.package).
licence=$($CARGO metadata --locked --no-deps --format-version 1 |
  python3 -c 'import json,sys; print(sorted({p["license"] for p in json.load(sys.stdin)["packages"] if p["name"] == "pv-topology-webhook"})[0])')

rm -rf "$OUT"
mkdir -p "$OUT"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# pack PROGRAM PROFILE [DEST=SOURCE ...]: one archive; DEST is the path in the archive.
pack() {
  local program=$1 profile=$2
  shift 2
  local name="$program-$version-$arch-linux"
  local dir="$stage/$name"
  mkdir -p "$dir"
  install -m 0755 "target/$profile/$program" "$dir/$program"
  sed -e "s/@PROGRAM@/$program/g" -e "s/@VERSION@/$version/g" -e "s/@ARCH@/$arch/g" \
    "packaging/$program.README.md" > "$dir/README.md"
  cat > "$dir/LICENSE" <<EOF
$program $version is part of cloud-node-suite.

SPDX-License-Identifier: $licence

The license field of the suite's Cargo.toml says $licence; the repository
has no licence file of its own. The licence's text:
https://spdx.org/licenses/$licence.html
EOF
  local pair
  for pair in "$@"; do
    install -D -m 0644 "${pair#*=}" "$dir/${pair%%=*}"
  done
  chmod 0644 "$dir/README.md" "$dir/LICENSE"
  find "$dir" -type d -exec chmod 0755 {} +
  (cd "$stage" && tar --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" \
    --owner=0 --group=0 --numeric-owner -cf - "$name") | gzip -9 -n > "$OUT/$name.tar.gz"
  bash scripts/sbom.sh "$program" "$OUT/$name.cdx.json"
}

pack cloud-credential-provider small \
  $(for f in manifests/credential-provider/*.yaml; do echo "examples/${f##*/}=$f"; done)
pack node-ip-helper small \
  systemd/node-ip-helper.service=manifests/node-ip-helper/node-ip-helper.service \
  systemd/20-node-ip-helper.conf=manifests/node-ip-helper/20-node-ip-helper.conf \
  default.env=manifests/node-ip-helper/default.env \
  examples/kubeadm-join.yaml=manifests/node-ip-helper/kubeadm-join.yaml
pack pv-topology-webhook x86_64-unknown-linux-gnu/release

(cd "$OUT" && sha256sum -- *.tar.gz *.cdx.json > SHA256SUMS)
ls -l "$OUT"
