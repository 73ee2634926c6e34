#!/usr/bin/env bash
# Benchmark of `pv-topology-webhook serve` over TLS on loopback, with keep-alive:
#   1. throughput at max concurrency (HTTP/1.1, CONNECTIONS connections; and HTTP/2,
#      H2_CONNECTIONS connections x H2_STREAMS streams, as kube-apiserver uses);
#   2. latency percentiles at a fixed rate of RATE reviews/s;
#   3. resident memory (VmHWM, the peak, and VmRSS) of the server after the runs.
# Load: only 127.0.0.1; each run lasts DURATION. The load generator (oha, from
# crates.io) shares the machine's cores with the server.
#
# Optional Go peer (kubernetes-sigs/cloud-pv-admission-labeler), for a ratio on NFS
# PVs (which it admits without any cloud call). The Go module proxy does not serve
# it (403 for sigs.k8s.io/cloud-pv-admission-labeler), so PEER_BIN must point at a
# binary of its commit 115578b built outside this repository; without PEER_BIN the
# peer's runs are skipped.
#
# Usage: bench/webhook.sh   (env: BIN, OHA, PEER_BIN, DURATION, CONNECTIONS,
#                            H2_CONNECTIONS, H2_STREAMS, RATE, PORT)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/release/pv-topology-webhook}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
H2_CONNECTIONS=${H2_CONNECTIONS:-4}
H2_STREAMS=${H2_STREAMS:-16}
RATE=${RATE:-1000}
PORT=${PORT:-19443}
METRICS_PORT=$((PORT + 1))
PEER_PORT=$((PORT + 2))
PEER_BIN=${PEER_BIN:-}
DATA=tests/data/webhook

if [[ ! -x $BIN ]]; then
    cargo build --release --locked -p pv-topology-webhook
fi
OHA=${OHA:-$(command -v oha || true)}
if [[ -z $OHA ]]; then
    echo "bench: installing oha from crates.io (a few minutes)" >&2
    cargo install --locked oha --root "${OHA_ROOT:-$HOME/.cargo}"
    OHA=${OHA_ROOT:-$HOME/.cargo}/bin/oha
fi
command -v python3 >/dev/null || { echo "bench: python3 is needed" >&2; exit 1; }

# shellcheck source=bench/webhook-common.sh
source bench/webhook-common.sh
webhook_certs "$BIN"

wait_https() { # URL BODY
    for _ in $(seq 200); do
        if curl -fsS --cacert "$work/certs/ca.crt" -o /dev/null -H 'Content-Type: application/json' \
            --data-binary "@$2" "$1" 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "bench: $1 never answered" >&2
    return 1
}

# oha with a JSON summary; prints "rps p50_ms p99_ms successes errors".
load() { # NAME URL BODY OHA_ARGS...
    local name=$1 url=$2 body=$3
    shift 3
    "$OHA" --no-tui --output-format json -z "$DURATION" -m POST -T application/json \
        -D "$body" --cacert "$work/certs/ca.crt" "$@" "$url" >"$work/$name.json"
    python3 - "$work/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s, p = r["summary"], r["latencyPercentiles"]
codes = r.get("statusCodeDistribution", {})
# Requests still in flight when the duration ends are cut by oha itself: not errors.
cut = {"aborted due to deadline"}
errors = sum(v for k, v in r.get("errorDistribution", {}).items() if k not in cut)
errors += sum(v for k, v in codes.items() if k != "200")
print(f'{s["requestsPerSec"]:.0f} {p["p50"] * 1000:.3f} {p["p99"] * 1000:.3f} {codes.get("200", 0)} {errors}')
PY
}

memory() { # PID
    awk '/^VmHWM|^VmRSS/ {printf "%s %.1f MiB  ", $1, $2 / 1024}' "/proc/$1/status"
}

row() { # LABEL RESULT
    read -r rps p50 p99 ok errors <<<"$2"
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$rps" "$p50" "$p99" "$ok" "$errors"
}

"$BIN" serve --tls-cert-file "$work/certs/tls.crt" --tls-key-file "$work/certs/tls.key" \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --shutdown-delay 0s --rules "$DATA/rules.yaml" 2>"$work/ours.log" &
ours=$!
pids+=("$ours")
url="https://127.0.0.1:$PORT/mutate"
wait_https "$url" "$DATA/nfs.json"
idle=$(memory "$ours")

echo "# pv-topology-webhook bench: $(nproc) cores, $(uname -r), DURATION=$DURATION"
echo "# $("$BIN" --version), $("$OHA" --version | head -1); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | reviews/s | p50 ms | p99 ms | 200s | errors |"
echo "|---|---|---|---|---|---|"
row "ours, GCE PD CSI (labeled), HTTP/1.1, $CONNECTIONS conns" \
    "$(load h1-gce "$url" "$DATA/gce-pd-csi-zonal.json" -c "$CONNECTIONS")"
row "ours, GCE PD CSI (labeled), HTTP/2, $H2_CONNECTIONS conns x $H2_STREAMS streams" \
    "$(load h2-gce "$url" "$DATA/gce-pd-csi-zonal.json" --http2 -c "$H2_CONNECTIONS" -p "$H2_STREAMS")"
row "ours, NFS (admitted unchanged), HTTP/1.1, $CONNECTIONS conns" \
    "$(load h1-nfs "$url" "$DATA/nfs.json" -c "$CONNECTIONS")"
row "ours, GCE PD CSI, fixed $RATE/s, HTTP/2, 1 conn" \
    "$(load rate-gce "$url" "$DATA/gce-pd-csi-zonal.json" --http2 -c 1 -p 16 -q "$RATE" --latency-correction)"
row "ours, GCE PD CSI, fixed $RATE/s, HTTP/1.1, 16 conns" \
    "$(load rate-gce-h1 "$url" "$DATA/gce-pd-csi-zonal.json" -c 16 -q "$RATE" --latency-correction)"
ours_memory=$(memory "$ours")

if [[ -n $PEER_BIN ]]; then
    "$PEER_BIN" --addr "127.0.0.1:$PEER_PORT" --tls-cert-path "$work/certs/tls.crt" \
        --tls-key-path "$work/certs/tls.key" 2>"$work/peer.log" &
    peer=$!
    pids+=("$peer")
    peer_url="https://127.0.0.1:$PEER_PORT/admit"
    wait_https "$peer_url" "$DATA/nfs.json"
    peer_idle=$(memory "$peer")
    row "Go PV labeler, NFS, HTTP/1.1, $CONNECTIONS conns" \
        "$(load peer-h1-nfs "$peer_url" "$DATA/nfs.json" -c "$CONNECTIONS")"
    row "Go PV labeler, NFS, HTTP/2, $H2_CONNECTIONS conns x $H2_STREAMS streams" \
        "$(load peer-h2-nfs "$peer_url" "$DATA/nfs.json" --http2 -c "$H2_CONNECTIONS" -p "$H2_STREAMS")"
    row "Go PV labeler, NFS, fixed $RATE/s, HTTP/2, 1 conn" \
        "$(load peer-rate-nfs "$peer_url" "$DATA/nfs.json" --http2 -c 1 -p 16 -q "$RATE" --latency-correction)"
    row "ours, NFS, HTTP/2, $H2_CONNECTIONS conns x $H2_STREAMS streams (same run as the peer)" \
        "$(load h2-nfs "$url" "$DATA/nfs.json" --http2 -c "$H2_CONNECTIONS" -p "$H2_STREAMS")"
    echo
    echo "Go PV labeler memory: idle: $peer_idle; after load: $(memory "$peer")"
fi
echo
echo "pv-topology-webhook memory: idle: $idle; after load: $ours_memory"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows here)"
