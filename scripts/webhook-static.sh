#!/usr/bin/env bash
# The webhook's static binary, the one its image runs and its release archive
# holds (scripts/image.sh, scripts/dist.sh): glibc with crt-static (this
# machine has no musl target), its dependency list embedded by cargo
# auditable. Checks both and prints the binary's path.
#
# Needs cargo-auditable (`make tools`).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-gnu
# cc's build scripts (ring, psm) rerun when SOURCE_DATE_EPOCH changes, and
# everything above them is rebuilt: `make dist` sets it to the last commit's
# time, so `make image` must see the same, or each rebuilds after the other.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
cargo auditable --version >/dev/null 2>&1 || { echo "webhook-static: cargo-auditable is missing (make tools)" >&2; exit 1; }
# --target keeps RUSTFLAGS off build scripts and proc macros, and the static
# build in its own directory (target/$TARGET/release), apart from target/release.
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo auditable build --locked --release --target "$TARGET" -p pv-topology-webhook >&2
bin=target/$TARGET/release/pv-topology-webhook
if readelf -l "$bin" | grep -q INTERP || readelf -d "$bin" | grep -q NEEDED; then
    echo "webhook-static: $bin is not static:" >&2
    readelf -d "$bin" | grep NEEDED >&2 || true
    exit 1
fi
readelf -S "$bin" | grep -q '\.dep-v0' || { echo "webhook-static: $bin carries no cargo-auditable section (.dep-v0)" >&2; exit 1; }
echo "$bin"
