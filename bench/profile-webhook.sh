#!/usr/bin/env bash
# Issue 18: where pv-topology-webhook's time goes under load, as flame graphs.
#
# Builds the webhook with release settings plus debug information and symbols (a
# `profiling` profile defined on the command line with --config, so the root
# Cargo.toml is untouched and target/release is not rebuilt), serves it pinned to
# CPU $SERVER_CPU like bench/webhook-vs-labeler.sh, drives it with h2load on CPU
# $LOAD_CPU (HTTP/2, 4 connections x 16 streams) with one body at a time, and records
# it with `perf record --call-graph dwarf` (root needed). For each load it writes:
#   $FOLDED/webhook-<load>.folded  the folded stacks (inferno-collapse-perf; default
#                                  .cache/bench/profile, a few MB each, not committed),
#   $OUT/webhook-<load>.svg      the flame graph (inferno-flamegraph),
#   and prints the share of samples by category (bench/profile-categories.py).
# Loads: labeled (tests/data/webhook/gce-pd-csi-zonal.json: labels and nodeAffinity)
# and unchanged (nfs.json: admitted without a patch).
#
# Usage: sudo bench/profile-webhook.sh
#   env: OUT (docs/benchmarks), SECONDS_PER_LOAD (8), FREQ (999), PORT (29643),
#        STAT_REVIEWS (200000: reviews counted under `perf stat` for syscalls per review),
#        SERVER_CPU (1), LOAD_CPU (0), BIN (skip the build), INFERNO (dir with the
#        inferno binaries; default: PATH, then .cache/bench/inferno/bin, else
#        `cargo install --locked inferno` there)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/benchmarks}
FOLDED=${FOLDED:-.cache/bench/profile}
SECONDS_PER_LOAD=${SECONDS_PER_LOAD:-8}
FREQ=${FREQ:-999}
PORT=${PORT:-29643}
STAT_REVIEWS=${STAT_REVIEWS:-200000}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
DATA=tests/data/webhook
say() { echo "profile-webhook: $*" >&2; }

[[ $(id -u) == 0 ]] || { say "perf needs root here (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid))"; exit 1; }
PERF=${PERF:-$(command -v perf || echo /usr/bin/perf)}
[[ -x $PERF ]] || { say "perf is needed (Debian: linux-perf)"; exit 1; }
H2LOAD=${H2LOAD:-$(command -v h2load || true)}
if [[ -z $H2LOAD ]]; then
    say "installing h2load (Debian package nghttp2-client)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client; } >/dev/null
    H2LOAD=$(command -v h2load)
fi
if [[ -z ${INFERNO:-} ]]; then
    if command -v inferno-flamegraph >/dev/null; then
        INFERNO=$(dirname "$(command -v inferno-flamegraph)")
    else
        INFERNO=.cache/bench/inferno/bin
        if [[ ! -x $INFERNO/inferno-flamegraph ]]; then
            say "installing inferno from crates.io into .cache/bench/inferno"
            cargo install --locked inferno --root .cache/bench/inferno
        fi
    fi
fi

if [[ -z ${BIN:-} ]]; then
    # Release settings (LTO, one codegen unit, opt-level 3) with debug info kept, so
    # inlined frames still have names; built into target/profiling/.
    CARGO_INCREMENTAL=0 cargo build --locked -q -p pv-topology-webhook --profile profiling \
        --config 'profile.profiling.inherits="release"' \
        --config 'profile.profiling.debug=true' \
        --config 'profile.profiling.strip=false'
    BIN=target/profiling/pv-topology-webhook
fi

# shellcheck source=bench/webhook-common.sh
source bench/webhook-common.sh
webhook_certs "$BIN"
taskset -c "$SERVER_CPU" "$BIN" serve --tls-cert-file "$work/certs/tls.crt" \
    --tls-key-file "$work/certs/tls.key" --listen "127.0.0.1:$PORT" \
    --metrics-listen "127.0.0.1:$((PORT + 1))" --shutdown-delay 0s \
    --rules "$DATA/rules.yaml" 2>"$work/server.log" &
server=$!
pids+=("$server")
url="https://127.0.0.1:$PORT/mutate"
for _ in $(seq 200); do
    curl -fsS --cacert "$work/certs/ca.crt" -o /dev/null -H 'Content-Type: application/json' \
        --data-binary "@$DATA/nfs.json" "$url" 2>/dev/null && break
    sleep 0.05
done

# Syscalls and CPU per review: a fixed number of reviews under `perf stat`.
per_review() { # LABEL BODY
    local stat
    "$PERF" stat -x, -o "$work/stat.csv" -p "$server" -e task-clock,context-switches \
        -e syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait &
    stat=$!
    sleep 0.5
    taskset -c "$LOAD_CPU" "$H2LOAD" -c 4 -m 16 -n "$STAT_REVIEWS" -d "$2" \
        -H 'content-type: application/json' "$url" >"$work/h2load-stat.txt"
    kill -INT "$stat"
    wait "$stat" || true
    python3 - "$work/stat.csv" "$STAT_REVIEWS" "$1" <<'PY'
import sys
n = int(sys.argv[2])
per = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0] and not line.startswith("#"):
        try:
            per[f[2]] = float(f[0])
        except ValueError:
            pass
cpu = per.get("task-clock", 0) * 1000 / n  # msec -> us
calls = ", ".join(f"{k.split('sys_enter_')[-1]} {v / n:.3f}" for k, v in per.items() if "sys_enter" in k)
print(f"{sys.argv[3]}: per review over {n} reviews: {cpu:.1f} us of server CPU (profiling build), "
      f"context switches {per.get('context-switches', 0) / n:.3f}, syscalls: {calls}")
PY
}

mkdir -p "$OUT" "$FOLDED"
echo "# $("$BIN" --version) (profiling build), $("$PERF" --version), $("$H2LOAD" --version | head -1)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for load in labeled unchanged; do
    case $load in
    labeled) body=$DATA/gce-pd-csi-zonal.json ;;
    unchanged) body=$DATA/nfs.json ;;
    esac
    # The load runs 2 s longer than the recording on each side: no ramp-up or drain.
    taskset -c "$LOAD_CPU" "$H2LOAD" -c 4 -m 16 -D $((SECONDS_PER_LOAD + 4)) -d "$body" \
        -H 'content-type: application/json' "$url" >"$work/h2load-$load.txt" &
    loader=$!
    sleep 2
    "$PERF" record -q -F "$FREQ" --call-graph dwarf,16384 -p "$server" -o "$work/perf-$load.data" \
        -- sleep "$SECONDS_PER_LOAD" 2>"$work/perf-$load.err"
    wait "$loader"
    grep -E '^(finished|requests|status codes)' "$work/h2load-$load.txt" | sed "s/^/# $load: /"
    "$PERF" script -i "$work/perf-$load.data" 2>/dev/null |
        "$INFERNO/inferno-collapse-perf" --all >"$FOLDED/webhook-$load.folded"
    "$INFERNO/inferno-flamegraph" --title "pv-topology-webhook, $load load (h2load 4x16, one core)" \
        --minwidth 0.2 <"$FOLDED/webhook-$load.folded" >"$OUT/webhook-$load.svg"
    echo "## $load: $(wc -l <"$FOLDED/webhook-$load.folded") distinct stacks," \
        "$(du -k "$OUT/webhook-$load.svg" | cut -f1) KiB of SVG"
    python3 bench/profile-categories.py "$FOLDED/webhook-$load.folded"
    per_review "$load" "$body"
done
# h2 0.4 copies a DATA frame into its write buffer only up to 256 bytes (with vectored
# writes); a larger answer is flushed on its own. The NFS review again with a uid 101
# bytes longer (answer 184 -> 285 bytes): same path, only the answer's size differs.
python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); r["request"]["uid"] += "-" + "x" * 100
json.dump(r, open(sys.argv[2], "w"))' "$DATA/nfs.json" "$work/nfs-long-uid.json"
for body in "$DATA/nfs.json" "$work/nfs-long-uid.json"; do
    size=$(curl -fsS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
        --data-binary "@$body" "$url" | wc -c)
    per_review "unchanged, $(basename "$body" .json), answer $size B" "$body"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
