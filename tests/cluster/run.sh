#!/usr/bin/env bash
# The cluster test tier (docs/testing.md): builds the Go binaries if they are
# not cached (build.sh), builds the workspace's binaries, then runs the
# cluster-harness tests against a real etcd + kube-apiserver and kubelet's own
# credential-provider code. Exits non-zero if anything fails.
#
#   bash tests/cluster/run.sh                      # the whole tier
#   bash tests/cluster/run.sh --test manifests     # one test file
#   CLUSTER_TEST_FILTER=static bash tests/cluster/run.sh   # tests by name
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
CARGO="${CARGO:-cargo}"

now() { date +%s; }
t0=$(now)
bash "$here/build.sh"
# moto (AWS APIs) for the ECR test; `make test` has installed it already.
if [ -z "${MOTO_SERVER:-}" ] && [ ! -x "$root/.cache/venv/bin/moto_server" ]; then
	make -C "$root" tools
fi
t1=$(now)
"$CARGO" build --workspace --locked
t2=$(now)
# The tier's crate is left out of the workspace's default members and of
# `make test`'s first cargo run, so that only this script (which builds the Go
# binaries first) runs its tests.
# shellcheck disable=SC2086
"$CARGO" test -p cluster-harness --locked "$@" -- ${CLUSTER_TEST_FILTER:-}
t3=$(now)
echo "cluster tier: go binaries $((t1 - t0))s, cargo build $((t2 - t1))s, tests $((t3 - t2))s, total $((t3 - t0))s"
