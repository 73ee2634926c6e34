#!/usr/bin/env bash
# Soak of `pv-topology-webhook serve` under faults (issue 15), loopback only.
#
# The release binary serves at a steady RATE (bench/soak_client.py: WORKERS HTTP/1.1
# keep-alive connections with a client certificate, a new connection every 25 requests,
# each answer checked against the expected one in tests/data/webhook/soak-expected/, for
# the EBS CSI reviews with the zone moto reports for the volume) for SOAK_SECONDS, while:
#   - the serving certificate is replaced every CERT_EVERY seconds (a new key and
#     certificate from the same CA, swapped in by a symlink rename as a Secret volume
#     does; --tls-reload-interval 1s);
#   - the client CA file is replaced every CA_EVERY seconds, alternating between the
#     clients' CA alone and a bundle of it and a second CA (a rotation's two steps);
#   - moto (the EC2 API behind --aws-ebs-lookup, the lookup cache kept 5 s so that
#     lookups keep reaching it) is stopped with SIGSTOP for 3 s, longer than
#     --lookup-timeout 1s, then SIGCONT, at 15 % and 50 % of the run;
#   - moto is killed (SIGKILL) and restarted 4 s later, at 30 % and 80 % of the run;
#     it keeps no state, so its volumes are created again (new IDs, the same zones)
#     and the client's EBS reviews follow them (SIGHUP);
#   - the instance is replaced at 65 %: a second server on another port, the client
#     moved to it, then the first sent SIGTERM (--shutdown-delay 3s) and waited for.
# During a lookup fault and for GRACE seconds after it, an EBS review may be refused
# with outcome lookup-failed (--on-lookup-error=deny); outside those windows that
# counts as a wrong answer.
#
# Before the soak, `pv-topology-webhook review` (the same decision flags, offline but for
# moto) must give the expected answers, so that they cannot drift from the program
# unseen; SOAK_WRITE_EXPECTED=1 writes them again from review's answers and stops.
#
# Reports: answers by class, wrong answers, p50/p99 latency, each server's resident
# memory (VmRSS) at its start, its peak and its end (sampled every second), and the
# certificate reload and lookup counters. The bound checked: no instance's RSS grows
# by more than RSS_BOUND_MIB over its RSS after the first answers.
#
# Usage: bench/soak.sh   (env: SOAK_SECONDS=180, RATE=50, WORKERS=4, CERT_EVERY=3,
#                         CA_EVERY=10, GRACE=4, RSS_BOUND_MIB=16, BIN, PORT=19543,
#                         SOAK_WRITE_EXPECTED)
# Needs: openssl, curl, python3, .cache/venv (make tools: moto_server and boto3).
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_SECONDS=${SOAK_SECONDS:-180}
RATE=${RATE:-50}
WORKERS=${WORKERS:-4}
CERT_EVERY=${CERT_EVERY:-3}
CA_EVERY=${CA_EVERY:-10}
GRACE=${GRACE:-4}
RSS_BOUND_MIB=${RSS_BOUND_MIB:-16}
BIN=${BIN:-target/release/pv-topology-webhook}
PORT=${PORT:-19543}
MOTO_PORT=$((PORT + 10))
VENV=.cache/venv
DATA=tests/data/webhook
EXPECTED=$DATA/soak-expected
# The fixtures answered without a lookup, each expected as $EXPECTED/NAME.json.
LOCAL_FIXTURES=(nfs gce-pd-csi-zonal regional-pd ebs-in-tree)
# How serve and review decide (serve adds its listeners and TLS).
decision=(--aws-ebs-lookup --aws-region us-east-1 --lookup-timeout 1s --lookup-cache-ttl 5s
    --on-lookup-error deny --rules "$DATA/rules.yaml")

if [[ ! -x $BIN ]]; then
    cargo build --release --locked -p pv-topology-webhook
fi
for tool in openssl curl python3; do
    command -v "$tool" >/dev/null || { echo "soak: $tool is needed" >&2; exit 1; }
done
[[ -x $VENV/bin/moto_server ]] || { echo "soak: $VENV/bin/moto_server missing: run make tools" >&2; exit 1; }

work=$(mktemp -d)
pids=()
moto=
cleanup() {
    [[ -n $moto ]] && kill -CONT "$moto" 2>/dev/null || true
    for pid in "${pids[@]}" $moto; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
log() { echo "soak: $(date -u +%T) $*" >&2; }

# --- certificates -------------------------------------------------------------------
ca() { # NAME
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=soak $1" -keyout "$work/$1.key" -out "$work/$1.crt" 2>/dev/null
}
leaf() { # CA OUT_DIR USAGE CN
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$4" \
        -keyout "$2/tls.key" -out "$2/tls.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=%s\n' "$3" >"$2/ext"
    openssl x509 -req -in "$2/tls.csr" -CA "$work/$1.crt" -CAkey "$work/$1.key" -CAcreateserial \
        -days 2 -extfile "$2/ext" -out "$2/tls.crt" 2>/dev/null
}
ca serving
ca clients
ca clients-next
mkdir -p "$work/client" "$work/serving"
leaf clients "$work/client" clientAuth apiserver
generation=0
swap_serving() { # a new pair in a new directory, then the "live" symlink renamed over
    generation=$((generation + 1))
    local dir="$work/serving/gen-$generation"
    mkdir -p "$dir"
    leaf serving "$dir" serverAuth localhost
    ln -sfn "gen-$generation" "$work/serving/live.tmp"
    mv -T "$work/serving/live.tmp" "$work/serving/live"
    # Keep the previous generation: a reload in progress may still read it.
    rm -rf "$work/serving/gen-$((generation - 2))"
}
swap_serving
cp "$work/clients.crt" "$work/client-ca.crt"
ca_swaps=0
swap_client_ca() {
    ca_swaps=$((ca_swaps + 1))
    if ((ca_swaps % 2)); then
        cat "$work/clients.crt" "$work/clients-next.crt" >"$work/client-ca.tmp"
    else
        cp "$work/clients.crt" "$work/client-ca.tmp"
    fi
    mv "$work/client-ca.tmp" "$work/client-ca.crt"
}

# --- moto and the EBS volumes ---------------------------------------------------------
export AWS_ENDPOINT_URL="http://127.0.0.1:$MOTO_PORT" AWS_ACCESS_KEY_ID=AKIDSOAK \
    AWS_SECRET_ACCESS_KEY=soak-secret AWS_EC2_METADATA_DISABLED=true AWS_REGION=us-east-1
ZONES=(us-east-1a us-east-1b us-east-1c us-east-1d)
start_moto() {
    "$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT" >>"$work/moto.log" 2>&1 &
    moto=$!
    for _ in $(seq 200); do
        curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null && break
        sleep 0.05
    done
    # A volume in each zone; its zone as moto then describes it, which the answer to
    # its review must name.
    "$VENV/bin/python" - "${ZONES[@]}" >"$work/volumes" <<'PY'
import sys, os
import boto3
ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for zone in sys.argv[1:]:
    created = ec2.create_volume(AvailabilityZone=zone, Size=1)["VolumeId"]
    described = ec2.describe_volumes(VolumeIds=[created])["Volumes"][0]
    print(described["AvailabilityZone"], described["VolumeId"])
PY
}
ebs_reviews() { # one review of an EBS CSI volume per zone, from the fixture
    while read -r zone id; do
        python3 - "$DATA/ebs-csi.json" "$id" >"$work/ebs-$zone.tmp" <<'PY'
import json, sys
review = json.load(open(sys.argv[1]))
review["request"]["object"]["spec"]["csi"]["volumeHandle"] = sys.argv[2]
review["request"]["object"]["metadata"]["name"] = "ebs-" + sys.argv[2]
json.dump(review, sys.stdout)
PY
        mv "$work/ebs-$zone.tmp" "$work/ebs-$zone.json"
    done <"$work/volumes"
}
start_moto
ebs_reviews
fixtures=()
for name in "${LOCAL_FIXTURES[@]}"; do
    fixtures+=(--fixture "$name=$DATA/$name.json")
done
while read -r zone _; do
    fixtures+=(--fixture "ebs-csi-$zone=$work/ebs-$zone.json")
done <"$work/volumes"

# --- the expected answers, checked against review -----------------------------------------
answers=()
for name in "${LOCAL_FIXTURES[@]}"; do
    "$BIN" review "${decision[@]}" <"$DATA/$name.json" >"$work/answer-$name.json"
    answers+=(--answer "$name=$work/answer-$name.json")
done
while read -r zone _; do
    "$BIN" review "${decision[@]}" <"$work/ebs-$zone.json" >"$work/answer-ebs-csi-$zone.json"
    answers+=(--answer "ebs-csi-$zone=$work/answer-ebs-csi-$zone.json")
done <"$work/volumes"
python3 bench/soak_client.py --expected-dir "$EXPECTED" "${answers[@]}" ${SOAK_WRITE_EXPECTED:+--write}
[[ -z ${SOAK_WRITE_EXPECTED:-} ]] || exit 0

# --- servers --------------------------------------------------------------------------
serve() { # PORT LOG
    "$BIN" serve --tls-cert-file "$work/serving/live/tls.crt" --tls-key-file "$work/serving/live/tls.key" \
        --client-ca-file "$work/client-ca.crt" --tls-reload-interval 1s \
        --listen "127.0.0.1:$1" --metrics-listen "127.0.0.1:$(($1 + 1))" \
        --shutdown-delay 3s --drain-timeout 10s "${decision[@]}" 2>"$2" &
    pids+=($!)
    for _ in $(seq 200); do
        curl -fsS -o /dev/null "http://127.0.0.1:$(($1 + 1))/readyz" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "soak: the server on $1 never got ready: $(cat "$2")" >&2
    exit 1
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
sample_rss() { # PID NAME: one line a second while it runs
    while kill -0 "$1" 2>/dev/null; do
        echo "$(date +%s) $(rss_kib "$1")" >>"$work/rss-$2"
        sleep 1
    done
}

serve "$PORT" "$work/server-1.log"
first=${pids[-1]}
echo "$PORT" >"$work/port"
sample_rss "$first" 1 &

python3 bench/soak_client.py --expected-dir "$EXPECTED" --port-file "$work/port" --ca "$work/serving.crt" \
    --cert "$work/client/tls.crt" --key "$work/client/tls.key" "${fixtures[@]}" \
    --rate "$RATE" --workers "$WORKERS" --fault-file "$work/fault" \
    --ready-file "$work/expected.json" --out "$work/summary.json" &
client=$!
for _ in $(seq 600); do [[ -s $work/expected.json ]] && break; sleep 0.05; done
[[ -s $work/expected.json ]] || { echo "soak: the client never started" >&2; exit 1; }
sleep 1
rss_start_1=$(rss_kib "$first")
log "serving; client at $RATE/s; RSS $rss_start_1 KiB; faults begin"

# --- faults ---------------------------------------------------------------------------
start=$(date +%s)
at() { echo $((start + SOAK_SECONDS * $1 / 100)); }
faults=0
fault_on() { faults=$((faults + 1)); echo "$faults" >"$work/fault"; log "fault: $*"; }
fault_off() { # the flag goes GRACE s later, unless another fault began meanwhile
    local id=$faults
    (sleep "$GRACE"; [[ $(cat "$work/fault" 2>/dev/null) == "$id" ]] && rm -f "$work/fault") &
}
events=("$(at 15) stop-moto" "$(at 30) kill-moto" "$(at 50) stop-moto" "$(at 65) replace" "$(at 80) kill-moto")
next_cert=$((start + CERT_EVERY))
next_ca=$((start + CA_EVERY))
second=
while (($(date +%s) < start + SOAK_SECONDS)); do
    now=$(date +%s)
    if ((now >= next_cert)); then swap_serving; next_cert=$((now + CERT_EVERY)); fi
    if ((now >= next_ca)); then swap_client_ca; next_ca=$((now + CA_EVERY)); fi
    if ((${#events[@]})) && ((now >= ${events[0]%% *})); then
        event=${events[0]#* }
        events=("${events[@]:1}")
        case $event in
        stop-moto)
            fault_on "moto stopped (SIGSTOP) for 3 s"
            kill -STOP "$moto"; sleep 3; kill -CONT "$moto"
            fault_off
            ;;
        kill-moto)
            fault_on "moto killed (SIGKILL), restarted in 4 s"
            kill -KILL "$moto"; wait "$moto" 2>/dev/null || true
            sleep 4
            start_moto
            ebs_reviews
            kill -HUP "$client"
            fault_off
            log "moto back"
            ;;
        replace)
            serve $((PORT + 2)) "$work/server-2.log"
            second=${pids[-1]}
            sample_rss "$second" 2 &
            rss_start_2=$(rss_kib "$second")
            echo $((PORT + 2)) >"$work/port"
            log "instance replaced: client moved to port $((PORT + 2)); SIGTERM to the first"
            sleep 1
            swaps_1="$((generation - 1)) serving, $ca_swaps client CA"
            metrics_1=$(curl -fsS "http://127.0.0.1:$((PORT + 1))/metrics" || true)
            rss_end_1=$(rss_kib "$first")
            term_at=$(date +%s.%N)
            kill -TERM "$first"
            (while kill -0 "$first" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$first/status" 2>/dev/null; do
                sleep 0.1
            done; date +%s.%N >"$work/first-gone") &
            ;;
        esac
    fi
    sleep 0.2
done

kill -TERM "$client"
wait "$client" || true
if [[ -n $second ]]; then last_metrics_port=$((PORT + 3)); else last_metrics_port=$((PORT + 1)); fi
# Proof that the client CA file is read again, not only rewritten: without the clients'
# CA in it, the client's certificate must be refused on a new connection.
cp "$work/clients-next.crt" "$work/client-ca.crt"
sleep 2.5
if curl -fsS -o /dev/null --cacert "$work/serving.crt" --cert "$work/client/tls.crt" --key "$work/client/tls.key" \
    -H 'Content-Type: application/json' --data-binary @"$DATA/nfs.json" \
    "https://127.0.0.1:$((last_metrics_port - 1))/mutate" 2>/dev/null; then
    ca_reload="NO: the client was still served after its CA was removed"
else
    ca_reload="yes: the client was refused 2.5 s after its CA was removed"
fi
last=${second:-$first}
metrics_last=$(curl -fsS "http://127.0.0.1:$last_metrics_port/metrics" || true)
first_status=
if [[ -n $second ]]; then
    wait "$first" && first_status=0 || first_status=$?
fi
rss_end_last=$(rss_kib "$last")

# --- report ---------------------------------------------------------------------------
python3 - "$work" "$RSS_BOUND_MIB" "$rss_start_1" "${rss_end_1:-}" "${rss_start_2:-}" "$rss_end_last" \
    "${term_at:-}" "$((generation - 1))" "$ca_swaps" "$first_status" <<PY
import json, os, sys
work, bound = sys.argv[1], float(sys.argv[2])
start1, end1, start2, end_last, term_at, certs, cas, first_status = sys.argv[3:11]
s = json.load(open(os.path.join(work, "summary.json")))
print("# pv-topology-webhook soak: $(nproc) cores, $(uname -r), SOAK_SECONDS=$SOAK_SECONDS RATE=$RATE WORKERS=$WORKERS")
print("# $("$BIN" --version); load average: $(cut -d' ' -f1-3 /proc/loadavg)")
print(f"requests: {s['requests']} in {s['seconds']} s ({s['rate']}/s)")
for kind in ("ok", "lookup-failed", "wrong", "non-200", "failed"):
    print(f"  {kind}: {s['kinds'].get(kind, 0)}")
for what, n in s["extra"].items():
    print(f"  {what}: {n}")
print(f"latency, all reviews: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms")
print(f"latency, reviews needing no lookup: p50 {s['no_lookup_p50_ms']} ms, p99 {s['no_lookup_p99_ms']} ms, "
      f"max {s['no_lookup_max_ms']} ms")
print("by fixture:", json.dumps(s["by_fixture"], sort_keys=True))
for kind, samples in s["samples"].items():
    for line in samples:
        print(f"  e.g. {kind}: {line}")
print("client CA reload takes effect: $ca_reload")
print(f"serving certificates swapped: {certs}; client CA swapped: {cas} (while the first instance served: ${swaps_1:-all})")
def series(n):
    path = os.path.join(work, f"rss-{n}")
    return [int(l.split()[1]) for l in open(path)] if os.path.exists(path) else []
ok = True
for n, start, end in (("1", start1, end1), ("2", start2, end_last if start2 else "")):
    if not start:
        continue
    start, peak = int(start), max(series(n) + [int(start)])
    end = int(end) if end else series(n)[-1]
    grew = (peak - start) / 1024
    print(f"server {n} RSS: start {start/1024:.1f} MiB, peak {peak/1024:.1f} MiB, end {end/1024:.1f} MiB "
          f"(grew {grew:.1f} MiB; bound {bound:.0f} MiB)")
    ok = ok and grew <= bound
if term_at and os.path.exists(os.path.join(work, "first-gone")):
    gone = float(open(os.path.join(work, "first-gone")).read())
    print(f"first instance: exit status {first_status}, gone {gone - float(term_at):.1f} s after SIGTERM")
wrong = s["kinds"].get("wrong", 0) + s["kinds"].get("non-200", 0) + s["kinds"].get("failed", 0)
ok = ok and "$ca_reload".startswith("yes")
print("RESULT:", "pass" if ok and wrong == 0 else "FAIL", f"({wrong} wrong, non-200 or failed; RSS bound and client CA reload: {'held' if ok else 'NOT held'})")
PY
for name in metrics_1 metrics_last; do
    echo "$name:"
    grep -E '^pv_topology_webhook_(certificate_reloads|lookups|tls_handshake_errors)_total|^pv_topology_webhook_admission_requests_total' <<<"${!name:-}" | sed 's/^/  /' || true
done
