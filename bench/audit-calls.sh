#!/usr/bin/env bash
# Cloud calls of `pv-topology-webhook audit` (issue 30): COUNT EBS CSI PersistentVolumes
# served by a fake apiserver on loopback (Python, paged by `limit` and `continue`),
# their volumes created in moto (request authentication on: tests/fakes/moto_auth.py
# bootstraps an IAM user whose key the audit signs with), the audit's EC2 calls
# counted by a loopback proxy in front of moto. Today's binary and BASE's (a git
# revision, default the parent of the first batched commit: one DescribeVolumes per
# PV) run the same audit in one run; wall time and peak RSS from /usr/bin/time -v.
#
# Needs: .cache/venv (make tools: moto_server, boto3).
# Usage: bench/audit-calls.sh   (env: COUNT=10000, BASE=472fcc0~1, PAGE_SIZE=500)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-10000}
BASE=${BASE:-472fcc0~1}
PAGE_SIZE=${PAGE_SIZE:-500}
VENV=$PWD/.cache/venv
base_rev=$(git rev-parse --short=12 "$BASE")
tree=$PWD/.cache/bench-base/$base_rev
if [[ ! -d $tree ]]; then
    mkdir -p "$(dirname "$tree")"
    git worktree add --detach "$tree" "$base_rev" >/dev/null
fi
(cd "$tree" && cargo build --release --locked -p pv-topology-webhook) >&2
cargo build --release --locked -p pv-topology-webhook >&2

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

# moto, authenticated after the bootstrap's 5 calls.
env INITIAL_NO_AUTH_ACTION_COUNT=5 "$VENV/bin/moto_server" -H 127.0.0.1 -p 0 >"$work/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    moto_port=$(sed -n 's/.*Running on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/moto.log" | head -1)
    [[ -n $moto_port ]] && break
    sleep 0.1
done
moto=http://127.0.0.1:$moto_port
keys=$("$VENV/bin/python3" tests/fakes/moto_auth.py bootstrap "$moto")
key=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["access_key_id"])' "$keys")
secret=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secret_access_key"])' "$keys")
"$VENV/bin/python3" tests/fakes/moto_auth.py create-volumes "$moto" "$key" "$secret" us-east-1 us-east-1a "$COUNT" >"$work/volumes"
echo "# $COUNT volumes created in moto" >&2

# The counting proxy: every request to moto passes, DescribeVolumes calls counted.
python3 - "$moto_port" "$work/proxy-port" "$work/calls" <<'PY' &
import http.client, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
upstream, port_file, calls_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock, count = threading.Lock(), [0]
class Proxy(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if b"Action=DescribeVolumes" in body:
            with lock:
                count[0] += 1
                open(calls_file, "w").write(str(count[0]))
        conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
        conn.request("POST", self.path, body, {k: v for k, v in self.headers.items()})
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
open(port_file, "w").write(str(server.server_address[1]))
server.serve_forever()
PY
pids+=($!)

# The fake apiserver: COUNT EBS CSI PVs, one per volume, without labels.
python3 - "$work/volumes" "$work/api-port" <<'PY' &
import json, sys, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
volumes = open(sys.argv[1]).read().split()
TOKEN = "bench-token-0123456789abcdef"
def pv(n, volume):
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"pv-{n:07d}", "uid": f"0f7c{n:08d}-5b1e-4c1a-9d3e-1b2c3d4e5f60",
                         "resourceVersion": str(100000 + n), "creationTimestamp": "2026-12-06T10:00:00Z"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "csi": {"driver": "ebs.csi.aws.com", "fsType": "ext4", "volumeHandle": volume}},
            "status": {"phase": "Available"}}
class Api(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401); self.end_headers(); return
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        limit = int(query.get("limit", ["500"])[0])
        start = int(query.get("continue", ["0"])[0] or 0)
        items = [pv(n, volumes[n]) for n in range(start, min(start + limit, len(volumes)))]
        token = str(start + limit) if start + limit < len(volumes) else ""
        body = json.dumps({"apiVersion": "v1", "kind": "PersistentVolumeList",
                           "metadata": {"resourceVersion": "1", "continue": token}, "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
open(sys.argv[2], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
pids+=($!)
for _ in $(seq 100); do [[ -s $work/proxy-port && -s $work/api-port ]] && break; sleep 0.1; done
cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "http://127.0.0.1:$(cat "$work/api-port")"}}]
users: [{name: bench, user: {token: bench-token-0123456789abcdef}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
KC

echo "# audit of $COUNT EBS PVs, --page-size $PAGE_SIZE, EBS lookup on moto (authenticated) through a counting proxy"
printf '%-14s %10s %12s %10s %12s %6s\n' REVISION CALLS CALLS_PER_PV SECONDS MAX_RSS_KIB EXIT
for bin in "$tree/target/release/pv-topology-webhook" target/release/pv-topology-webhook; do
    rev=$([[ $bin == "$tree"* ]] && echo "$base_rev" || git rev-parse --short=12 HEAD)
    # The proxy counts from its start: each run's calls are the difference.
    before=$(cat "$work/calls" 2>/dev/null || echo 0)
    set +e
    env -i PATH="$PATH" HOME="$HOME" AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$work/proxy-port")" \
        AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret" AWS_EC2_METADATA_DISABLED=true \
        AWS_CONFIG_FILE=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent PV_TOPOLOGY_WEBHOOK_LOG_LEVEL="${LOG_LEVEL:-warn}" \
        /usr/bin/time -v "$bin" audit --kubeconfig "$work/kubeconfig" --page-size "$PAGE_SIZE" \
        --aws-ebs-lookup --aws-region us-east-1 --lookup-timeout 30s --deadline 60m --output json \
        >"$work/out.json" 2>"$work/time.log"
    status=$?
    set -e
    calls=$(( $(cat "$work/calls" 2>/dev/null || echo 0) - before ))
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.log")
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.log")
    resolved=$(python3 -c 'import json,sys; rows=json.load(open(sys.argv[1])); print(sum(1 for r in rows if r["status"]!="unresolvable"))' "$work/out.json" 2>/dev/null || echo "?")
    if [[ -n ${KEEP_LOG:-} ]]; then grep -i "batch\|retrying\|error" "$work/time.log" | head -5 >&2 || true; fi
    printf '%-14s %10s %12s %10s %12s %6s  (%s of %s PVs resolved)\n' \
        "$rev" "$calls" "$(python3 -c "print(f'{$calls/$COUNT:.4f}')")" "$wall" "$rss" "$status" "$resolved" "$COUNT"
done
