#!/usr/bin/env bash
# Demo of pv-topology-webhook over HTTPS on loopback: makes a CA and a serving
# certificate with `certs`, starts `serve` with an example rules file, sends four
# PersistentVolume CREATE reviews with curl (GCE PD CSI, in-tree EBS, a CSI driver
# known only from the rules file, NFS), prints each PV as patched, then stops the
# server with SIGTERM.
#
# Builds nothing: expects target/release/pv-topology-webhook (override with BIN=…).
# Needs curl and python3. Ports: PORT (default 18443) and METRICS_PORT (18080).
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/pv-topology-webhook}
PORT=${PORT:-18443}
METRICS_PORT=${METRICS_PORT:-18080}
DATA=tests/data/webhook

if [[ ! -x $BIN ]]; then
    echo "demo-webhook: $BIN not found; build it first: cargo build --release -p pv-topology-webhook" >&2
    exit 1
fi
for tool in curl python3; do
    command -v "$tool" >/dev/null || { echo "demo-webhook: $tool is needed" >&2; exit 1; }
done

work=$(mktemp -d)
server=""
cleanup() {
    if [[ -n $server ]] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "== certs: a CA and a serving certificate for 127.0.0.1"
"$BIN" certs --service pv-topology-webhook --namespace demo --out-dir "$work/certs" \
    --extra-san 127.0.0.1 --validity 1h >"$work/ca-bundle.txt" 2>"$work/certs.log"
sed 's/^/  /' "$work/certs.log"
echo "caBundle: $(head -c 48 "$work/ca-bundle.txt")… ($(wc -c <"$work/ca-bundle.txt") bytes)"

echo
echo "== serve on https://127.0.0.1:$PORT (rules: $DATA/rules.yaml)"
"$BIN" --log-level info serve \
    --tls-cert-file "$work/certs/tls.crt" --tls-key-file "$work/certs/tls.key" \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --rules "$DATA/rules.yaml" --shutdown-delay 1s 2>"$work/server.log" &
server=$!

for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null 2>&1; then break; fi
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null || { echo "never ready" >&2; cat "$work/server.log" >&2; exit 1; }
echo "ready"

# Applies the answer's JSON Patch (RFC 6902 add/replace/remove, which is all the
# webhook emits) to the review's object and prints what changed.
show() {
    python3 - "$1" "$2" <<'PY'
import base64, json, sys

review = json.load(open(sys.argv[1]))
answer = json.load(open(sys.argv[2]))
pv = review["request"]["object"]
response = answer["response"]
assert response["uid"] == review["request"]["uid"], "uid not echoed"

def walk(doc, path):
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    for token in tokens[:-1]:
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc, tokens[-1]

for op in json.loads(base64.b64decode(response["patch"])) if "patch" in response else []:
    parent, key = walk(pv, op["path"])
    if isinstance(parent, list):
        index = len(parent) if key == "-" else int(key)
        if op["op"] == "add":
            parent.insert(index, op["value"])
        elif op["op"] == "replace":
            parent[index] = op["value"]
        else:
            del parent[index]
    elif op["op"] in ("add", "replace"):
        parent[key] = op["value"]
    else:
        del parent[key]

source = {k: v for k, v in pv["spec"].items() if k not in ("capacity", "accessModes", "persistentVolumeReclaimPolicy", "nodeAffinity")}
print(f"PV {pv['metadata']['name']}: {json.dumps(source)}")
print(f"  allowed={response['allowed']} outcome={response.get('auditAnnotations', {}).get('outcome')} source={response.get('auditAnnotations', {}).get('source', '-')}")
for warning in response.get("warnings", []):
    print(f"  warning: {warning}")
print("  labels:", json.dumps(pv["metadata"].get("labels", {}), sort_keys=True))
print("  nodeAffinity:", json.dumps(pv["spec"].get("nodeAffinity"), sort_keys=True))
PY
}

for fixture in gce-pd-csi-zonal ebs-in-tree rules-driver nfs; do
    echo
    echo "== $fixture.json"
    curl -fsS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
        --data-binary "@$DATA/$fixture.json" "https://127.0.0.1:$PORT/mutate" >"$work/answer.json"
    show "$DATA/$fixture.json" "$work/answer.json"
done

echo
echo "== metrics"
curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" | grep '^pv_topology_webhook_admission_requests_total'

echo
echo "== SIGTERM: not ready for --shutdown-delay, then drain and exit"
kill -TERM "$server"
sleep 0.2
echo "readyz after SIGTERM: $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$METRICS_PORT/readyz")"
status=0
wait "$server" || status=$?
server=""
echo "server exited with status $status"
echo
echo "== server log"
cat "$work/server.log"
exit "$status"
