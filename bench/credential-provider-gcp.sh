#!/usr/bin/env bash
# Exec benchmark of `cloud-credential-provider gcp` (node flow: the default
# service account's token and scopes from the GCE metadata fake,
# tests/fakes/gcp_server.py on loopback) beside `static` and the exec floor
# (/bin/cat) in one run, and the fake's own answer time for the same two
# metadata requests, so that the plugin's cost above the server's is known.
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${RUNS:-500}
cargo build --profile small --locked -p cloud-credential-provider
BIN=$ROOT/target/small/cloud-credential-provider
DATA=$ROOT/tests/data/credential-provider

ports=$(mktemp)
python3 tests/fakes/gcp_server.py tests/data/gcp/scenario.json >"$ports" &
fake=$!
trap 'kill $fake 2>/dev/null; rm -f "$ports"' EXIT
for _ in $(seq 50); do [ -s "$ports" ] && break; sleep 0.1; done
port=$(head -n1 "$ports")
export GCE_METADATA_HOST=127.0.0.1:$port

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The fake's own answer time: the two GETs the node flow makes (token and
# scopes, each on a new connection as the plugin's one-shot process makes
# them), from a Python client in one process: each alone, and one after the
# other (the plugin sends them side by side, so the pair is an upper bound).
python3 - "$port" "$RUNS" <<'PY'
import http.client, statistics, sys, time
port, runs = int(sys.argv[1]), int(sys.argv[2])
root = "/computeMetadata/v1/instance/service-accounts/default/"
def get(path):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", root + path, headers={"Metadata-Flavor": "Google"})
    r = c.getresponse(); r.read(); c.close()
    assert r.status == 200, r.status
for name, fn in (("fake: token", lambda: get("token")),
                 ("fake: scopes", lambda: get("scopes")),
                 ("fake: token, then scopes", lambda: (get("token"), get("scopes")))):
    for _ in range(20): fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter_ns(); fn(); samples.append((time.perf_counter_ns() - t) / 1e6)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"{name:<34} median {statistics.median(samples):6.3f} ms  p99 {p99:6.3f} ms")
PY

python3 bench/exec_bench.py --runs "$RUNS" --stdin "$DATA/request-static-v1.json" \
  --name "cloud-credential-provider gcp" -- "$BIN" gcp \
  --name "cloud-credential-provider static" -- "$BIN" static --docker-config "$DATA/docker-config.json" --cache-duration 10m \
  --name "/bin/cat (exec floor)" -- /bin/cat
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
