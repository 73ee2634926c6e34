#!/usr/bin/env bash
# scripts/sbom.sh PACKAGE OUT_FILE: a CycloneDX 1.5 JSON SBOM of the binary
# of workspace package PACKAGE (e.g. pv-topology-webhook), written to
# OUT_FILE. `make dist` calls it for each archive's binary; the webhook image
# calls it for its binary.
#
# Made by cargo-cyclonedx (`make tools` installs it): the package's
# dependencies for the build's target (default x86_64-unknown-linux-gnu,
# SBOM_TARGET to change), without build-time dependencies, each with name,
# version, purl, licence and Cargo.lock's SHA-256; then made deterministic
# (scripts/sbom.py --normalize: timestamp SOURCE_DATE_EPOCH, by default the
# last commit's time; serial number from the content; no absolute paths).
# Without cargo-cyclonedx, scripts/sbom.py writes the same components from
# `cargo metadata --locked` (and says so on stderr).
set -euo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: scripts/sbom.sh PACKAGE OUT_FILE" >&2
  exit 2
fi
package=$1
out=$2
target=${SBOM_TARGET:-x86_64-unknown-linux-gnu}
CARGO=${CARGO:-cargo}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$(dirname "$out")"
cd "$root"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

if ! $CARGO cyclonedx --version > /dev/null 2>&1; then
  echo "sbom.sh: cargo-cyclonedx is not installed (make tools): $package's SBOM from cargo metadata" >&2
  exec python3 scripts/sbom.py "$package" "$out" "$target"
fi

# The package's directory, and every member's (cargo-cyclonedx writes an
# SBOM into each member's directory, under a name of our choosing).
dirs=$($CARGO metadata --locked --no-deps --format-version 1 | python3 -c '
import json, os, sys
m = json.load(sys.stdin)
pkgs = [p for p in m["packages"] if p["id"] in m["workspace_members"]]
want = [p for p in pkgs if p["name"] == sys.argv[1]]
if not want:
    sys.exit(f"sbom.sh: {sys.argv[1]}: not a package of this workspace")
print(os.path.dirname(want[0]["manifest_path"]))
for p in pkgs:
    print(os.path.dirname(p["manifest_path"]))
' "$package")
dir=$(head -1 <<<"$dirs")
name=".sbom-$$-$RANDOM"
cleanup() { while read -r d; do rm -f "$d/$name.json"; done <<<"$dirs"; }
trap cleanup EXIT
$CARGO cyclonedx --manifest-path "$dir/Cargo.toml" --format json --spec-version 1.5 \
  --no-build-deps --target "$target" --override-filename "$name" --quiet
python3 scripts/sbom.py --normalize "$root" "$dir/$name.json" "$out"
