#!/usr/bin/env bash
# Exec benchmark: `cloud-credential-provider ecr` against the upstream
# ecr-credential-provider (k8s.io/cloud-provider-aws, built from the Go module
# proxy), both answering the same v1 request from the same moto server, in one
# run. See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PEER_VERSION=${PEER_VERSION:-v1.37.0}
BIN_DIR=$ROOT/.cache/bench-bin
mkdir -p "$BIN_DIR"

make tools >/dev/null
cargo build --profile small --locked -p cloud-credential-provider
if [ ! -x "$BIN_DIR/ecr-credential-provider-$PEER_VERSION" ]; then
  echo "building ecr-credential-provider $PEER_VERSION from the Go module proxy (several minutes)"
  GOBIN=$BIN_DIR nice -n 10 go install "k8s.io/cloud-provider-aws/cmd/ecr-credential-provider@$PEER_VERSION"
  mv "$BIN_DIR/ecr-credential-provider" "$BIN_DIR/ecr-credential-provider-$PEER_VERSION"
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$ROOT/.cache/venv/bin/moto_server" -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null' EXIT
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done

request=$(mktemp)
echo '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"}' > "$request"
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench-secret \
  AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true

# STATIC_TOO=1: also the same program linked statically (bench/static-build.sh).
source bench/static-build.sh
static_command=()
if [[ ${STATIC_TOO:-0} == 1 ]]; then
  static_command=(--name "cloud-credential-provider ecr, static glibc (not shipped)" -- "$(static_small_build)" ecr)
fi
python3 bench/exec_bench.py --runs "${RUNS:-300}" --stdin "$request" \
  --name "cloud-credential-provider ecr" -- "$ROOT/target/small/cloud-credential-provider" ecr \
  "${static_command[@]}" \
  --name "ecr-credential-provider $PEER_VERSION" -- "$BIN_DIR/ecr-credential-provider-$PEER_VERSION"
