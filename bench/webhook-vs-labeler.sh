#!/usr/bin/env bash
# Issue 18: pv-topology-webhook against the Go PV labeler
# (kubernetes-sigs/cloud-pv-admission-labeler), one core each, in one run.
#
#   - Both servers run pinned to CPU $SERVER_CPU (taskset), one at a time under load;
#     the load generator is pinned to CPU $LOAD_CPU.
#   - Throughput: h2load (nghttp2-client), HTTP/2, $H2_CONNECTIONS connections x
#     $H2_STREAMS streams, $DURATION per run, $ROUNDS rounds alternating ours/peer
#     (even rounds start with the peer) so drift shows instead of averaging away.
#     Bodies: tests/data/webhook/nfs.json (admitted unchanged: both servers) and
#     gce-pd-csi-zonal.json (labels and nodeAffinity: ours only, the peer cannot label
#     a CSI PV).
#   - Cost per review: 1e6 / reviews/s (the server's core is saturated), and the
#     server's own CPU time per review from /proc/PID/stat (utime+stime).
#   - p99 at a fixed $RATE reviews/s: oha -q $RATE --latency-correction (no coordinated
#     omission), HTTP/2, 1 connection x 16 streams, pinned like h2load.
#   - Peak RSS: VmHWM of each server after its loads (and idle, before them).
#   - Contention: the load average before and after, and the CPU time used by anything
#     other than the server and the load generator during each run ("others", in
#     cores, from /proc/stat). A run with load average > 1.5 before it, or others >
#     0.15 core, is marked contended.
#
# The peer is built by bench/build-pv-labeler.sh (mirror, checkout, module proxy or
# git clone; cached in .cache/bench/) unless PEER_BIN names a binary. Without any
# source the script stops with exit 1, or with ALLOW_NO_PEER=1 skips the peer's runs.
#
# Usage: bench/webhook-vs-labeler.sh
#   env: BIN (default: cargo build --release -p pv-topology-webhook), PEER_BIN,
#        ALLOW_NO_PEER, DURATION (10), ROUNDS (3), H2_CONNECTIONS (4), H2_STREAMS (16),
#        RATE (1000), RATE_DURATION (10s), PORT (29543), SERVER_CPU (1), LOAD_CPU (0),
#        OHA, H2LOAD
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
H2_CONNECTIONS=${H2_CONNECTIONS:-4}
H2_STREAMS=${H2_STREAMS:-16}
RATE=${RATE:-1000}
RATE_DURATION=${RATE_DURATION:-10s}
PORT=${PORT:-29543}
METRICS_PORT=$((PORT + 1))
PEER_PORT=$((PORT + 2))
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
DATA=tests/data/webhook
say() { echo "webhook-vs-labeler: $*" >&2; }

# --- tools -------------------------------------------------------------------------
if [[ -z ${BIN:-} ]]; then
    CARGO_INCREMENTAL=0 cargo build --release --locked -q -p pv-topology-webhook
    BIN=target/release/pv-topology-webhook
fi
H2LOAD=${H2LOAD:-$(command -v h2load || true)}
if [[ -z $H2LOAD ]]; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        say "installing h2load (Debian package nghttp2-client)"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client; } >/dev/null
        H2LOAD=$(command -v h2load)
    else
        say "h2load is needed: apt-get install nghttp2-client (as root)"
        exit 1
    fi
fi
OHA=${OHA:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}
[[ -x $OHA ]] || { say "oha is needed (cargo install --locked oha)"; exit 1; }
command -v taskset >/dev/null || { say "taskset (util-linux) is needed"; exit 1; }
if [[ -z ${PEER_BIN:-} ]]; then
    if ! PEER_BIN=$(bash bench/build-pv-labeler.sh); then
        if [[ ${ALLOW_NO_PEER:-0} == 1 ]]; then
            say "the Go peer is SKIPPED (no source, see above; ALLOW_NO_PEER=1): no ratio"
            PEER_BIN=
        else
            say "no Go peer (see above); ALLOW_NO_PEER=1 runs ours alone"
            exit 1
        fi
    fi
fi
(($(nproc --all) > SERVER_CPU && $(nproc --all) > LOAD_CPU)) || {
    say "CPUs $SERVER_CPU and $LOAD_CPU are needed"
    exit 1
}

# shellcheck source=bench/webhook-common.sh
source bench/webhook-common.sh
webhook_certs "$BIN"

answer() { # URL BODY -> the response body
    curl -fsS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
        --data-binary "@$2" "$1"
}
wait_https() { # URL BODY
    for _ in $(seq 200); do
        answer "$1" "$2" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    say "$1 never answered"
    return 1
}
# Checks that a body takes the path it is meant to measure.
expect_patch() { # URL BODY yes|no
    answer "$1" "$2" | python3 -c '
import json, sys
r = json.load(sys.stdin)["response"]
has = bool(r.get("patch"))
want = sys.argv[1] == "yes"
if not r.get("allowed") or has != want:
    sys.exit("unexpected answer for %s: allowed=%s patch=%s" % (sys.argv[2], r.get("allowed"), has))
' "$3" "$2"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
hwm_mib() { awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
# Resident now, split: anonymous (heap, stacks) and file-backed (mostly the binary's code).
rss_split() { awk '/^RssAnon|^RssFile/ {printf "%s %.1f MiB ", $1, $2 / 1024}' "/proc/$1/status"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

declare -A server_pid
start_ours() {
    taskset -c "$SERVER_CPU" "$BIN" serve --tls-cert-file "$work/certs/tls.crt" \
        --tls-key-file "$work/certs/tls.key" --listen "127.0.0.1:$PORT" \
        --metrics-listen "127.0.0.1:$METRICS_PORT" --shutdown-delay 0s \
        --rules "$DATA/rules.yaml" 2>"$work/ours.log" &
    server_pid[ours]=$!
    pids+=($!)
}
start_peer() {
    taskset -c "$SERVER_CPU" "$PEER_BIN" --addr "127.0.0.1:$PEER_PORT" \
        --tls-cert-path "$work/certs/tls.crt" --tls-key-path "$work/certs/tls.key" \
        2>"$work/peer.log" &
    server_pid[peer]=$!
    pids+=($!)
}
declare -A url=([ours]="https://127.0.0.1:$PORT/mutate" [peer]="https://127.0.0.1:$PEER_PORT/admit")
declare -A body=([nfs]="$DATA/nfs.json" [gce]="$DATA/gce-pd-csi-zonal.json")

start_ours
wait_https "${url[ours]}" "${body[nfs]}"
expect_patch "${url[ours]}" "${body[nfs]}" no
expect_patch "${url[ours]}" "${body[gce]}" yes
idle_ours=$(hwm_mib "${server_pid[ours]}")
if [[ -n $PEER_BIN ]]; then
    start_peer
    wait_https "${url[peer]}" "${body[nfs]}"
    expect_patch "${url[peer]}" "${body[nfs]}" no
    idle_peer=$(hwm_mib "${server_pid[peer]}")
fi

# One h2load run; appends "server body round rps us_per_review cpu_us_per_review
# succeeded failed others_cores" to $work/runs and prints it as a table row.
hz=$(getconf CLK_TCK)
run() { # SERVER BODY ROUND
    local s=$1 b=$2 r=$3 pid=${server_pid[$1]} out=$work/h2load-$1-$2-$3
    local c0 b0 c1 b1
    c0=$(cpu_ticks "$pid")
    b0=$(busy_ticks)
    # The shell reaps h2load, so its cutime/cstime is h2load's CPU time.
    env OUT="$out" sh -c '"$@" >"$OUT"; cat /proc/$$/stat >"$OUT.stat"' sh \
        taskset -c "$LOAD_CPU" "$H2LOAD" -c "$H2_CONNECTIONS" -m "$H2_STREAMS" \
        -D "$DURATION" -d "${body[$b]}" \
        -H 'content-type: application/json' "${url[$s]}"
    c1=$(cpu_ticks "$pid")
    b1=$(busy_ticks)
    python3 - "$out" "$s" "$b" "$r" "$((c1 - c0))" "$((b1 - b0))" "$hz" <<'PY' | tee -a "$work/runs"
import re, sys
out, s, b, r, server, busy, hz = sys.argv[1:]
text = open(out).read()
if "Application protocol: h2" not in text:
    sys.exit("h2load did not speak HTTP/2:\n" + text)
rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", text).group(1))
req = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                r"(\d+) errored, (\d+) timeout", text)
done, failed = int(req.group(2)), int(req.group(4)) + int(req.group(5)) + int(req.group(6))
codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
two, bad = int(codes.group(1)), sum(int(codes.group(i)) for i in (2, 3, 4))
st = open(out + ".stat").read().rsplit(")", 1)[1].split()
client = int(st[13]) + int(st[14])  # cutime, cstime (fields 16, 17)
hz = float(hz)
wall = done / rps if rps else 1
# Everything else the machine ran meanwhile (other processes, interrupts, steal), in cores.
others = max(0.0, (int(busy) - int(server) - client) / hz / wall)
cpu_us = int(server) / hz * 1e6 / done if done else 0
print(f"{s} {b} {r} {rps:.0f} {1e6 / rps:.1f} {cpu_us:.1f} {two} {failed + bad} {others:.2f}")
PY
}

# p99 at a fixed rate: prints "p50_ms p99_ms max_ms successes errors".
fixed_rate() { # SERVER BODY
    taskset -c "$LOAD_CPU" "$OHA" --no-tui --output-format json -z "$RATE_DURATION" -m POST \
        -T application/json -D "${body[$2]}" --cacert "$work/certs/ca.crt" --http2 -c 1 -p 16 \
        -q "$RATE" --latency-correction "${url[$1]}" >"$work/rate-$1-$2.json"
    python3 - "$work/rate-$1-$2.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["latencyPercentiles"]
codes = r.get("statusCodeDistribution", {})
cut = {"aborted due to deadline"}
errors = sum(v for k, v in r.get("errorDistribution", {}).items() if k not in cut)
errors += sum(v for k, v in codes.items() if k != "200")
print(f'{p["p50"] * 1000:.3f} {p["p99"] * 1000:.3f} {r["summary"]["slowest"] * 1000:.3f} {codes.get("200", 0)} {errors}')
PY
}

servers=(ours)
[[ -n $PEER_BIN ]] && servers+=(peer)
# Warm-up (page faults, allocator, connection pools), not counted.
for s in "${servers[@]}"; do
    taskset -c "$LOAD_CPU" "$H2LOAD" -c "$H2_CONNECTIONS" -m "$H2_STREAMS" -D 2 \
        -d "${body[nfs]}" -H 'content-type: application/json' "${url[$s]}" >/dev/null
done

load_before=$(loadavg)
echo "# webhook vs Go PV labeler: $(nproc --all) CPUs, $(uname -r); servers on CPU $SERVER_CPU, load generator on CPU $LOAD_CPU"
echo "# $("$BIN" --version); peer: ${PEER_BIN:-skipped}$([[ -n $PEER_BIN && -f $(dirname "$PEER_BIN")/source ]] && echo " ($(cat "$(dirname "$PEER_BIN")/source"))")"
echo "# $("$H2LOAD" --version | head -1): HTTP/2, $H2_CONNECTIONS connections x $H2_STREAMS streams, ${DURATION}s per run, $ROUNDS rounds"
echo "# load average before: $load_before"
echo
echo "server body round reviews/s us/review server_cpu_us/review 2xx errors others_cores"
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order=("${servers[@]}"); else order=($(printf '%s\n' "${servers[@]}" | tac)); fi
    for s in "${order[@]}"; do
        run "$s" nfs "$r"
        [[ $s == ours ]] && run ours gce "$r"
    done
done
echo
echo "fixed $RATE reviews/s, HTTP/2, 1 conn x 16 streams, $RATE_DURATION (oha --latency-correction):"
echo "server body p50_ms p99_ms max_ms 200s errors"
echo "ours gce $(fixed_rate ours gce)" | tee -a "$work/rates"
echo "ours nfs $(fixed_rate ours nfs)" | tee -a "$work/rates"
[[ -n $PEER_BIN ]] && echo "peer nfs $(fixed_rate peer nfs)" | tee -a "$work/rates"
load_after=$(loadavg)
hwm_ours=$(hwm_mib "${server_pid[ours]}")
split_ours=$(rss_split "${server_pid[ours]}")
if [[ -n $PEER_BIN ]]; then
    hwm_peer=$(hwm_mib "${server_pid[peer]}")
    split_peer=$(rss_split "${server_pid[peer]}")
fi

echo
echo "## summary (medians over $ROUNDS rounds; min-max in brackets)"
python3 - "$work/runs" "$work/rates" "$load_before" "$load_after" \
    "$idle_ours" "$hwm_ours" "${idle_peer:-}" "${hwm_peer:-}" "$split_ours" "${split_peer:-}" <<'PY'
import statistics, sys
runs, rates, before, after, idle_o, hwm_o, idle_p, hwm_p, split_o, split_p = sys.argv[1:]
rows = [l.split() for l in open(runs) if l.strip()]
def col(s, b, i):
    return [float(r[i]) for r in rows if r[0] == s and r[1] == b]
def fmt(xs, f="{:.0f}"):
    return f"{f.format(statistics.median(xs))} [{f.format(min(xs))}-{f.format(max(xs))}]" if xs else "-"
on, og, pn = col("ours", "nfs", 3), col("ours", "gce", 3), col("peer", "nfs", 3)
print(f"ours NFS (unchanged):      {fmt(on)} reviews/s")
print(f"ours GCE PD CSI (labeled): {fmt(og)} reviews/s")
if pn:
    print(f"Go peer NFS (unchanged):   {fmt(pn)} reviews/s")
    # Per round, so drift between rounds does not enter the ratio.
    ratios = [o / p for o, p in zip(on, pn)]
    print(f"ratio ours/peer, NFS:      {fmt(ratios, '{:.2f}')}x   (aim >= 3x)")
lab = [g / n for g, n in zip(col("ours", "gce", 4), col("ours", "nfs", 4))]
cpu = [g / n for g, n in zip(col("ours", "gce", 5), col("ours", "nfs", 5))]
print(f"labeled/unchanged cost:    {fmt(lab, '{:.2f}')}x by us/review "
      f"({fmt(col('ours', 'gce', 4), '{:.1f}')} vs {fmt(col('ours', 'nfs', 4), '{:.1f}')} us); "
      f"{fmt(cpu, '{:.2f}')}x by server CPU per review   (aim <= 1.1x)")
if pn:
    print(f"server CPU us/review, NFS: ours {fmt(col('ours', 'nfs', 5), '{:.1f}')}, "
          f"peer {fmt(col('peer', 'nfs', 5), '{:.1f}')}")
for l in open(rates):
    s, b, p50, p99, mx, ok, err = l.split()
    print(f"p99 at fixed rate, {s} {b}: {p99} ms (p50 {p50} ms, max {mx} ms, {err} errors)   (aim < 1 ms)")
print(f"peak RSS (VmHWM) after load: ours {hwm_o} MiB (idle {idle_o} MiB)   (aim <= 12 MiB)"
      + (f"; peer {hwm_p} MiB (idle {idle_p} MiB)" if hwm_p else ""))
print(f"resident after load: ours {split_o}" + (f"; peer {split_p}" if split_p else ""))
errors = sum(int(r[7]) for r in rows)
print(f"non-2xx or failed requests: {errors}")
others = max(float(r[8]) for r in rows)
lb = float(before.split()[0])
contended = lb > 1.5 or others > 0.15
print(f"load average before: {before}; after: {after} (the bench's own two busy "
      f"processes may show in the after value); other work during the runs: up to {others:.2f} cores")
print("CONTENDED: other work shared the CPUs; re-measure on a quiet machine" if contended
      else "quiet: load average before <= 1.5 and other work <= 0.15 core in every run")
PY
