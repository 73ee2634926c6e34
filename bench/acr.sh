#!/usr/bin/env bash
# Exec benchmark: `cloud-credential-provider acr` against cloud-provider-azure's
# acr-credential-provider v1.36.5 (built by tests/cluster/build.sh from the Go
# module proxy), both in service-principal mode, which answers offline (no
# network call in either program: a fair comparison of exec cost), for the
# same v1 request, interleaved in one run. See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

cargo build --profile small --locked -p cloud-credential-provider
bash tests/cluster/build.sh acr-credential-provider >/dev/null
k8s=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' tests/cluster/go.mod)
peer=${CLUSTER_BIN_DIR:-$ROOT/.cache/cluster-bin/$k8s}/acr-credential-provider
config=$ROOT/tests/data/azure/service-principal.json

request=$(mktemp)
trap 'rm -f "$request"' EXIT
echo '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"demo.azurecr.io/team/app"}' > "$request"

echo "# acr bench: $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/exec_bench.py --runs "${RUNS:-300}" --stdin "$request" \
  --name "cloud-credential-provider acr" -- "$ROOT/target/small/cloud-credential-provider" acr "$config" \
  --name "acr-credential-provider v1.36.5" -- "$peer" "$config"
