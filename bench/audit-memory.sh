#!/usr/bin/env bash
# Peak memory of `pv-topology-webhook audit` by cluster size: the binary lists COUNT
# PersistentVolumes from a fake apiserver on loopback (Python, standard library; pages
# by `limit` and `continue` as the API conventions say, the bearer token required) and
# judges each; measured as the process's maximum resident set size (/usr/bin/time -v).
# Each PV is a GCE PD CSI volume as the apiserver returns it (labels, nodeAffinity,
# annotations, managedFields: about 1.3 KiB of JSON), judged by built-in knowledge,
# so no lookup runs. Half lack their labels (missing-labels), so rows differ.
#
# PAD=BYTES adds an annotation of that many bytes to each PV: PAD=60000 makes a page of
# 500 about 30 MiB, near the page cap (32 MiB), the most one page can hold.
#
# Usage: bench/audit-memory.sh   (env: BIN, COUNTS="10000 50000", OUTPUTS="json table", PAD=0)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/release/pv-topology-webhook}
COUNTS=${COUNTS:-"10000 50000"}
OUTPUTS=${OUTPUTS:-"json table"}
export PAD=${PAD:-0}

if [[ ! -x $BIN ]]; then
    cargo build --release --locked -p pv-topology-webhook
fi
work=$(mktemp -d)
trap 'kill "${fake:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

python3 - "$work/port" <<'EOF' &
import json, os, sys, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "bench-token-0123456789abcdef"
PAD = int(os.environ["PAD"])

def pv(n):
    name = f"pv-{n:07d}"
    labels = {"topology.kubernetes.io/zone": "europe-west1-b", "topology.kubernetes.io/region": "europe-west1"} if n % 2 else None
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {
            "name": name, "uid": f"0f7c{n:08d}-5b1e-4c1a-9d3e-1b2c3d4e5f60", "resourceVersion": str(100000 + n),
            "creationTimestamp": "2026-11-30T10:00:00Z", "labels": labels,
            "annotations": {"pv.kubernetes.io/provisioned-by": "manual", "team": "storage", "pad": "x" * PAD},
            "finalizers": ["kubernetes.io/pv-protection"],
            "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {"f:accessModes": {}, "f:capacity": {".": {}, "f:storage": {}},
                                            "f:csi": {".": {}, "f:driver": {}, "f:fsType": {}, "f:volumeHandle": {}},
                                            "f:nodeAffinity": {".": {}, "f:required": {}},
                                            "f:persistentVolumeReclaimPolicy": {}, "f:volumeMode": {}}}}],
        },
        "spec": {
            "capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem",
            "csi": {"driver": "pd.csi.storage.gke.io", "fsType": "ext4",
                    "volumeHandle": f"projects/bench-project/zones/europe-west1-b/disks/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.gke.io/zone", "operator": "In", "values": ["europe-west1-b"]}]}]}},
        },
        "status": {"phase": "Available"},
    }

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.answer(401, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401, "message": "Unauthorized"})
        if url.path != "/api/v1/persistentvolumes":
            return self.answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})
        query = dict(urllib.parse.parse_qsl(url.query))
        # The cluster's size, set per run in a file beside the port's.
        with open(sys.argv[1] + ".count") as f:
            count = int(f.read())
        start = int(query.get("continue") or 0)
        end = min(count, start + int(query.get("limit") or count))
        metadata = {"resourceVersion": "99"}
        if end < count:
            metadata["continue"] = str(end)
        self.answer(200, {"kind": "PersistentVolumeList", "apiVersion": "v1", "metadata": metadata,
                          "items": [pv(n) for n in range(start, end)]})

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
EOF
fake=$!
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")
cat >"$work/kubeconfig" <<EOF
{"apiVersion": "v1", "kind": "Config",
 "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:$port"}}],
 "users": [{"name": "u", "user": {"token": "bench-token-0123456789abcdef"}}],
 "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
 "current-context": "x"}
EOF

echo "# audit peak RSS (KiB); $(uname -r), $($BIN --version)"
printf '%-8s %-6s %10s %8s %6s\n' PVS OUTPUT MAX_RSS_KIB SECONDS EXIT
for count in $COUNTS; do
    echo "$count" >"$work/port.count"
    for output in $OUTPUTS; do
        set +e
        /usr/bin/time -v "$BIN" audit --kubeconfig "$work/kubeconfig" --output "$output" \
            >"$work/out" 2>"$work/err"
        code=$?
        set -e
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/err")
        secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/err")
        rows=$(grep -c . "$work/out" || true)
        printf '%-8s %-6s %10s %8s %6s  (%s lines)\n' "$count" "$output" "$rss" "$secs" "$code" "$rows"
    done
done
