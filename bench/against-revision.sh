#!/usr/bin/env bash
# Today's binaries against those of an earlier revision, side by side in one run
# (docs/benchmarks.md, "Against an earlier revision"): a refactor must not cost
# time. BASE (a git revision, default the parent of HEAD) is checked out in a
# worktree under .cache/bench-base/ and built there once (its release
# pv-topology-webhook and small cloud-credential-provider, as `make bench` builds
# today's).
#
# 1. cloud-credential-provider static: exec_bench.py runs both revisions
#    interleaved, RUNS execs each.
# 2. pv-topology-webhook serve: both servers up at once on loopback (PORT, PORT+2),
#    loaded in turn, ROUNDS rounds of DURATION each (HTTP/1.1 with CONNECTIONS
#    connections): a GCE PD CSI PV (built-in handle), an NFS PV (admitted
#    unchanged), a PV resolved by a rule (rules-driver) and an EBS CSI PV
#    resolved by --aws-ebs-lookup (moto's EC2, one volume: the first review asks
#    moto, the rest are answered by the lookup cache in front of it, so the row
#    is the cached lookup path), with the ratio of medians.
#
# Needs: oha, curl, openssl, .cache/venv (make tools: moto_server, boto3).
# Usage: bench/against-revision.sh   (env: BASE, RUNS, ROUNDS, DURATION, CONNECTIONS, PORT, OHA)
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-HEAD~1}
RUNS=${RUNS:-300}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNECTIONS=${CONNECTIONS:-32}
PORT=${PORT:-19543}
base_rev=$(git rev-parse --short=12 "$BASE")
tree=$PWD/.cache/bench-base/$base_rev

if [[ ! -d $tree ]]; then
    mkdir -p "$(dirname "$tree")"
    git worktree add --detach "$tree" "$base_rev" >/dev/null
fi
(cd "$tree" && cargo build --release --locked -p pv-topology-webhook &&
    cargo build --profile small --locked -p cloud-credential-provider) >&2
cargo build --release --locked -p pv-topology-webhook >&2
cargo build --profile small --locked -p cloud-credential-provider >&2

OHA=${OHA:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}
[[ -x $OHA ]] || { echo "bench: oha is needed (cargo install --locked oha)" >&2; exit 1; }

DATA=$PWD/tests/data
echo "# today: $(git rev-parse --short=12 HEAD); base: $base_rev; $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## cloud-credential-provider, $RUNS execs each, interleaved"
echo
python3 bench/exec_bench.py --runs "$RUNS" --stdin "$DATA/credential-provider/request-static-v1.json" \
    --name "static, today" -- "$PWD/target/small/cloud-credential-provider" \
    static --docker-config "$DATA/credential-provider/docker-config.json" --cache-duration 10m \
    --name "static, base" -- "$tree/target/small/cloud-credential-provider" \
    static --docker-config "$DATA/credential-provider/docker-config.json" --cache-duration 10m

# shellcheck source=bench/webhook-common.sh
source bench/webhook-common.sh
webhook_certs target/release/pv-topology-webhook

# moto's EC2 with one volume, and the EBS CSI review of it.
VENV=.cache/venv
[[ -x $VENV/bin/moto_server ]] || { echo "bench: $VENV/bin/moto_server missing: run make tools" >&2; exit 1; }
MOTO_PORT=$((PORT + 10))
export AWS_ENDPOINT_URL="http://127.0.0.1:$MOTO_PORT" AWS_ACCESS_KEY_ID=AKIDBENCH \
    AWS_SECRET_ACCESS_KEY=bench-secret AWS_EC2_METADATA_DISABLED=true AWS_REGION=us-east-1
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT" >"$work/moto.log" 2>&1 &
pids+=("$!")
for _ in $(seq 200); do
    curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null && break
    sleep 0.05
done
"$VENV/bin/python" - "$DATA/webhook/ebs-csi.json" >"$work/ebs-csi.json" <<'PY'
import json, os, sys
import boto3
ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
volume = ec2.create_volume(AvailabilityZone="us-east-1b", Size=1)["VolumeId"]
review = json.load(open(sys.argv[1]))
review["request"]["object"]["spec"]["csi"]["volumeHandle"] = volume
json.dump(review, sys.stdout)
PY

serve() { # BIN PORT LOG
    "$1" serve --tls-cert-file "$work/certs/tls.crt" --tls-key-file "$work/certs/tls.key" \
        --listen "127.0.0.1:$2" --metrics-listen "127.0.0.1:$(($2 + 1))" \
        --shutdown-delay 0s --rules "$DATA/webhook/rules.yaml" --aws-ebs-lookup 2>"$3" &
    pids+=("$!")
    for _ in $(seq 200); do
        curl -fsS --cacert "$work/certs/ca.crt" -o /dev/null -H 'Content-Type: application/json' \
            --data-binary "@$DATA/webhook/nfs.json" "https://127.0.0.1:$2/mutate" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench: $1 never answered on $2" >&2
    exit 1
}
serve target/release/pv-topology-webhook "$PORT" "$work/today.log"
serve "$tree/target/release/pv-topology-webhook" "$((PORT + 2))" "$work/base.log"

rps() { # PORT BODY
    "$OHA" --no-tui --output-format json -z "$DURATION" -m POST -T application/json -D "$2" \
        --cacert "$work/certs/ca.crt" -c "$CONNECTIONS" "https://127.0.0.1:$1/mutate" >"$work/oha.json"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); c=r.get("statusCodeDistribution",{}); assert set(c)=={"200"}, c; print(round(r["summary"]["requestsPerSec"]))' "$work/oha.json"
}

# Each server's answer to each review, checked once before the load: the same
# outcome from both, and the EBS one found by the lookup.
for body in "$DATA/webhook/gce-pd-csi-zonal.json" "$DATA/webhook/nfs.json" "$DATA/webhook/rules-driver.json" "$work/ebs-csi.json"; do
    outcomes=()
    for port in "$PORT" "$((PORT + 2))"; do
        outcomes+=("$(curl -fsS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
            --data-binary "@$body" "https://127.0.0.1:$port/mutate" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["response"]["auditAnnotations"]["outcome"])')")
    done
    [[ ${outcomes[0]} == "${outcomes[1]}" ]] || { echo "bench: $body: today ${outcomes[0]}, base ${outcomes[1]}" >&2; exit 1; }
done
grep -q '"labeled"' <(curl -fsS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
    --data-binary "@$work/ebs-csi.json" "https://127.0.0.1:$PORT/mutate") ||
    { echo "bench: the EBS review was not labeled from moto's answer" >&2; exit 1; }

echo
echo "## pv-topology-webhook serve, reviews/s (HTTP/1.1, $CONNECTIONS connections, $DURATION per run, $ROUNDS rounds in turn)"
echo
echo "| PV | today (runs) | base (runs) | today/base of medians |"
echo "|---|---|---|---|"
for body in gce-pd-csi-zonal nfs rules-driver ebs-csi-lookup; do
    file=$DATA/webhook/$body.json
    [[ $body == ebs-csi-lookup ]] && file=$work/ebs-csi.json
    today=() base=()
    for _ in $(seq "$ROUNDS"); do
        today+=("$(rps "$PORT" "$file")")
        base+=("$(rps "$((PORT + 2))" "$file")")
    done
    python3 - "$body" "${today[*]}" "${base[*]}" <<'PY'
import statistics, sys
name, today, base = sys.argv[1], [int(x) for x in sys.argv[2].split()], [int(x) for x in sys.argv[3].split()]
print(f"| {name} | {statistics.median(today)} ({' '.join(map(str, today))}) | {statistics.median(base)} ({' '.join(map(str, base))}) | {statistics.median(today) / statistics.median(base):.3f} |")
PY
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
