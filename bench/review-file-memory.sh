#!/usr/bin/env bash
# Peak memory of `pv-topology-webhook review -f` on a large manifest: COUNT
# PersistentVolumes in one YAML List as `kubectl get pv -o yaml` writes it (GCE PD CSI
# volumes with labels, nodeAffinity, annotations, managedFields and status: about
# 1.6 KB each), reviewed offline (`-o diff`, built-in knowledge: no lookup, no
# network); measured as the process's maximum resident set size (/usr/bin/time -v).
#
# FORMAT=documents writes the same PVs as separate YAML documents (`---`) instead.
#
# Usage: bench/review-file-memory.sh   (env: BIN, COUNTS="1000 10000", FORMAT=list|documents)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/release/pv-topology-webhook}
COUNTS=${COUNTS:-"1000 10000"}
export FORMAT=${FORMAT:-list}
if [[ ! -x $BIN ]]; then
    cargo build --release --locked -p pv-topology-webhook
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-8s %10s %14s %8s\n' PVs bytes "peak RSS KiB" seconds
for count in $COUNTS; do
    python3 - "$count" >"$work/pvs.yaml" <<'EOF'
import os, sys, textwrap
n = int(sys.argv[1])
as_list = os.environ["FORMAT"] == "list"
if as_list:
    print("apiVersion: v1\nitems:")
for i in range(n):
    zone = "europe-west1-" + "bcd"[i % 3]
    pv = (f"""- apiVersion: v1
  kind: PersistentVolume
  metadata:
    annotations:
      pv.kubernetes.io/provisioned-by: pd.csi.storage.gke.io
    creationTimestamp: "2026-12-01T10:00:00Z"
    finalizers:
    - kubernetes.io/pv-protection
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:spec:
          f:accessModes: {{}}
          f:capacity:
            .: {{}}
            f:storage: {{}}
          f:csi:
            .: {{}}
            f:driver: {{}}
            f:fsType: {{}}
            f:volumeHandle: {{}}
          f:persistentVolumeReclaimPolicy: {{}}
          f:storageClassName: {{}}
          f:volumeMode: {{}}
      manager: kubectl-create
      operation: Update
      time: "2026-12-01T10:00:00Z"
    name: pv-{i:06d}
    resourceVersion: "{1000 + i}"
    uid: 00000000-0000-4000-8000-{i:012d}
  spec:
    accessModes:
    - ReadWriteOnce
    capacity:
      storage: 10Gi
    csi:
      driver: pd.csi.storage.gke.io
      fsType: ext4
      volumeHandle: projects/demo/zones/{zone}/disks/disk-{i:06d}
    persistentVolumeReclaimPolicy: Retain
    storageClassName: standard
    volumeMode: Filesystem
  status:
    lastPhaseTransitionTime: "2026-12-01T10:00:00Z"
    phase: Available""")
    if as_list:
        print(pv)
    else:
        print("---\n" + textwrap.dedent("  " + pv[2:]))
if as_list:
    print("kind: List\nmetadata:\n  resourceVersion: \"\"")
EOF
    bytes=$(stat -c %s "$work/pvs.yaml")
    start=$(date +%s.%N)
    /usr/bin/time -v "$BIN" review -f "$work/pvs.yaml" -o diff >"$work/out" 2>"$work/time" || {
        status=$?
        # 2: a PV refused (none is here); anything else is a failure.
        [[ $status == 2 ]] || { cat "$work/time" >&2; exit 1; }
    }
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
    grep -q "pv-$(printf '%06d' $((count - 1)))" "$work/out" || { echo "the last PV is not in the diff" >&2; exit 1; }
    printf '%-8s %10s %14s %8.2f\n' "$count" "$bytes" "$rss" "$seconds"
done
