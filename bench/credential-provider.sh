#!/usr/bin/env bash
# Exec benchmark of `cloud-credential-provider static` (see docs/benchmarks.md).
# The floor is /bin/cat reading the same request: the cost of any exec.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile small --locked -p cloud-credential-provider
BIN=$PWD/target/small/cloud-credential-provider
DATA=$PWD/tests/data/credential-provider
python3 bench/exec_bench.py --runs "${RUNS:-500}" --stdin "$DATA/request-static-v1.json" \
  --name "cloud-credential-provider static" -- "$BIN" static --docker-config "$DATA/docker-config.json" --cache-duration 10m \
  --name "/bin/cat (exec floor)" -- /bin/cat
