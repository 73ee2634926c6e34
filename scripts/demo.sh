#!/usr/bin/env bash
# `make demo`: each program on embedded defaults, no cloud or cluster needed.
set -euo pipefail
cd "$(dirname "$0")/.."
# `make demo` builds target/demo/ (a quick-to-build profile); default: the release build.
BIN=${DEMO_BIN_DIR:-target/release}
DATA=tests/data/credential-provider

section() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

section "pv-topology-webhook: PVs reviewed offline (review -f), then over HTTPS by a local server"
BIN="$BIN/pv-topology-webhook" bash scripts/demo-webhook.sh

section "cloud-credential-provider: kubelet asks for registry.example.com/team-b/app (static backend)"
request='{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"registry.example.com/team-b/app"}'
echo "stdin:  $request"
echo "run:    cloud-credential-provider static --docker-config $DATA/docker-config.json --cache-duration 10m"
printf 'stdout: '
echo "$request" | "$BIN/cloud-credential-provider" static --docker-config "$DATA/docker-config.json" --cache-duration 10m

section "cloud-credential-provider: a broken request fails with one line on stderr (exit 1)"
echo '{"apiVersion":"credentialprovider.kubelet.k8s.io/v9","kind":"CredentialProviderRequest","image":"x"}' \
  | "$BIN/cloud-credential-provider" static --docker-config "$DATA/docker-config.json" || echo "exit status: $?"

section "cloud-credential-provider explain: which providers kubelet runs for an image, and why (exit 2: none)"
"$BIN/cloud-credential-provider" explain --config "$DATA/configs/multi.yaml" registry.example.com:5000/app
for image in registry.example.com/team/app:v1 123456789012.dkr.ecr.eu-west-1.amazonaws.com/app quay.io/org/app; do
  "$BIN/cloud-credential-provider" explain --config "$DATA/configs/multi.yaml" "$image" | head -1 || true
done

section "cloud-credential-provider explain: what kubelet records of a pull with each provider's credentials (KEP-2535), under the node's KubeletConfiguration"
for image in harbor.example.com/team/app:1 registry.example.org/team/app:1 cdn.example.net/app:1 harbor.example.com/base/debian:12; do
  "$BIN/cloud-credential-provider" explain --config "$DATA/configs/two-audiences.yaml" \
    --kubelet-config "$DATA/kubelet-config/allowlisted.yaml" "$image" | grep -E '^[^ ].*: kubelet looks up|  record: |^once on the node' || true
done

section "cloud-credential-provider: Docker Hub pulled through a Harbor proxy project (containerd's hosts.toml): the mirror's credentials, answered under docker.io"
request='{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"docker.io/library/nginx"}'
echo "run:    cloud-credential-provider static --docker-config $DATA/mirrors/docker-config.json --containerd-hosts-dir $DATA/mirrors/certs.d"
printf 'stdout: '
echo "$request" | "$BIN/cloud-credential-provider" static --docker-config "$DATA/mirrors/docker-config.json" \
  --containerd-hosts-dir "$DATA/mirrors/certs.d"
"$BIN/cloud-credential-provider" explain --config "$DATA/configs/mirrors.yaml" nginx:1.27 | grep -E 'kubelet looks up|  mirror: '

section "cloud-credential-provider check-config --rbac: the nodes' grant for the config's audiences (KEP-4412), for kubectl apply -f -"
"$BIN/cloud-credential-provider" check-config --rbac "$DATA/configs/two-audiences.yaml"

section "cloud-credential-provider check-config: the shipped kubelet configs, a broken one, a typo'd flag (exit 2)"
for config in manifests/credential-provider/*.yaml "$DATA/configs/bad-rules.yaml" "$DATA/plugin-args/ecr-typo.yaml"; do
  "$BIN/cloud-credential-provider" check-config "$config" || true
done

section "node-ip-helper detect --source local: this machine's node IP, with the reasons"
"$BIN/node-ip-helper" detect --source local --output json || true
"$BIN/node-ip-helper" detect --source local --output flags || true

section "node-ip-helper detect --source gce: a GCE VM's metadata (a local fake of the documented API, on loopback): the node IP and the provider ID its CCM writes"
# --skip-local-check: the VM's addresses are not on this machine.
coproc FAKE { exec python3 tests/fakes/metadata_server.py tests/data/node-ip-helper/metadata/gce.json; }
read -r port <&"${FAKE[0]}"
"$BIN/node-ip-helper" detect --source gce --metadata-endpoint "http://127.0.0.1:$port/" --skip-local-check --output flags || true
"$BIN/node-ip-helper" detect --source gce --metadata-endpoint "http://127.0.0.1:$port/" --skip-local-check --output env || true
kill "$FAKE_PID"; wait "$FAKE_PID" 2>/dev/null || true

section "node-ip-helper check: KEP-3705's example instance, a good and a stuck --node-ip"
"$BIN/node-ip-helper" check --node-ip 1.2.3.4,abcd::1234 --cloud-addresses tests/data/node-ip-helper/kep-3705-cloud.json || true
"$BIN/node-ip-helper" check --node-ip 9.10.11.12 --cloud-addresses tests/data/node-ip-helper/kep-3705-cloud.json || true
