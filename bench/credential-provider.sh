#!/usr/bin/env bash
# Exec benchmark of `cloud-credential-provider static` (see docs/benchmarks.md).
# The floor is /bin/cat reading the same request: the cost of any exec.
#
# STATIC_TOO=1 also builds the same program linked statically (glibc with
# +crt-static, not what the archives ship) and runs it in the same
# interleaved run: the difference is the dynamic loader's share of an exec.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile small --locked -p cloud-credential-provider
BIN=$PWD/target/small/cloud-credential-provider
DATA=$PWD/tests/data/credential-provider
source bench/static-build.sh
static_command=()
if [[ ${STATIC_TOO:-0} == 1 ]]; then
  static_command=(--name "cloud-credential-provider static, static glibc (not shipped)" --
    "$(static_small_build)" static --docker-config "$DATA/docker-config.json" --cache-duration 10m)
fi
python3 bench/exec_bench.py --runs "${RUNS:-500}" --stdin "$DATA/request-static-v1.json" \
  --name "cloud-credential-provider static" -- "$BIN" static --docker-config "$DATA/docker-config.json" --cache-duration 10m \
  "${static_command[@]}" \
  --name "/bin/cat (exec floor)" -- /bin/cat
