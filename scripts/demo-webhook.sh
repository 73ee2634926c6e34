#!/usr/bin/env bash
# Demo of pv-topology-webhook: first offline, `review -f` on a manifest of
# PersistentVolumes (what the webhook adds to each, a PV as it will be stored, a
# refusal); then over HTTPS on loopback: makes a CA and a serving certificate
# with `certs`, starts `serve` with an example rules file, sends a PV CREATE
# review with curl, shows that `review` answers it with the same bytes, then
# stops the server with SIGTERM.
#
# Builds nothing: expects target/release/pv-topology-webhook (override with BIN=…).
# Needs curl. Ports: PORT (default 18443) and METRICS_PORT (18080).
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
command -v curl >/dev/null || { echo "demo-webhook: curl is needed" >&2; exit 1; }

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

# Prints a command, then runs it (its exit status shown when not 0).
run() {
    echo "\$ ${*/#$BIN/pv-topology-webhook}"
    local status=0
    "$@" || status=$?
    if ((status != 0)); then echo "(exit status $status)"; fi
}

echo "== review -f: what the webhook adds to each PV of a manifest (-o diff, the default for PVs)"
run "$BIN" review --rules "$DATA/rules.yaml" -f "$DATA/files/manifest.yaml"

echo
echo "== review -o pv: the PV as it will be stored"
run "$BIN" review -f "$DATA/files/pd-zonal.yaml" -o pv

echo
echo "== review --validate: a PV whose labels name the wrong zone is refused (exit status 2)"
run "$BIN" review --validate -f "$DATA/files/lying-zone.yaml"

echo
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

echo
echo "== POST /mutate: the AdmissionReview of a PV CREATE ($DATA/gce-pd-csi-zonal.json), answered"
curl -fsS --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
    --data-binary "@$DATA/gce-pd-csi-zonal.json" "https://127.0.0.1:$PORT/mutate" >"$work/answer.json"
cat "$work/answer.json"
"$BIN" review <"$DATA/gce-pd-csi-zonal.json" >"$work/offline.json"
if cmp -s "$work/answer.json" "$work/offline.json"; then
    echo "(the same bytes as: pv-topology-webhook review < $DATA/gce-pd-csi-zonal.json)"
else
    echo "demo-webhook: the server and \`review\` answered differently" >&2
    exit 1
fi
echo "\$ pv-topology-webhook review -o diff < $DATA/gce-pd-csi-zonal.json"
"$BIN" review -o diff <"$DATA/gce-pd-csi-zonal.json"

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
