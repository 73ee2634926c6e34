#!/usr/bin/env bash
# Pod creation → Running on the cluster tier's real node (kubelet v1.37.2,
# containerd 1.6.20) for a private image in a TLS + htpasswd registry
# (distribution 2.8.2), pulled (imagePullPolicy Always) with an
# imagePullSecret on kubelet without a credential provider, then with
# cloud-credential-provider `static` installed by the README's script from
# `make dist`'s archive. BENCH_PODS pods each (default here 5), one at a time,
# each deleted before the next; the image's layers are already in containerd
# (a warm-up pod), so the figures are kubelet's and the pull's overhead: the
# first provider pod execs the plugin, the rest use kubelet's cache.
# Prints the median and each pod's time, and the plugin's exec count.
#
# Needs root and the cluster tier's binaries (tests/cluster/build.sh) and
# `make dist`. Usage: bench/node-pull.sh   (env: BENCH_PODS=5; `make test` runs it with 1)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f target/dist/SHA256SUMS ] || make dist
bash tests/cluster/build.sh
cargo test -p cluster-harness --locked --test node_credential_provider --no-run
BENCH_PODS=${BENCH_PODS:-5} cargo test -p cluster-harness --locked --test node_credential_provider -- \
  --exact pod_to_running_plugin_vs_image_pull_secret --nocapture 2>&1 |
  grep -E '^node-pull:|panicked|test result'
