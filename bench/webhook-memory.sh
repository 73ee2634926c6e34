#!/usr/bin/env bash
# Peak memory of answering one large AdmissionReview: `pv-topology-webhook review` on a
# generated CREATE of a CSI PV (the GCE PD driver, so the review is answered and patched
# without any lookup), measured as the process's maximum resident set size
# (/usr/bin/time -v). The same code path answers over HTTPS, so this is the per-request
# cost of a request body; the server adds its body buffer and its fixed baseline.
#
# Shapes (each padded to SIZE bytes of review):
#   labels    many small labels (`"l123456":"v"`), the shape of issue 9, item 2;
#   affinity  many empty nodeSelectorTerms: each gets our requirement, so the answer
#             (one patch operation per term) is the largest an input of this size
#             can produce;
#   values    one nodeSelector requirement with many one-character values;
#   expressions  one term with many requirements: the most structure per byte.
# Reviews over the body limit are refused before parsing, so SIZE above it measures
# nothing but the read.
#
# Usage: bench/webhook-memory.sh   (env: BIN, SIZES="1048576 3145728 4190000", SHAPES, RUNS)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/release/pv-topology-webhook}
SIZES=${SIZES:-"1048576 3145728 4190000"}
SHAPES=${SHAPES:-"labels affinity values expressions"}
RUNS=${RUNS:-3}

if [[ ! -x $BIN ]]; then
    cargo build --release --locked -p pv-topology-webhook
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

generate() { # shape size file
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
shape, size, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
review = {
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {
        "uid": "00000000-0000-0000-0000-00000000b3e7",
        "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
        "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
        "name": "big", "operation": "CREATE", "userInfo": {"username": "admin"},
        "object": {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "big", "labels": {}},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": "pd.csi.storage.gke.io",
                        "volumeHandle": "projects/p/zones/us-central1-a/disks/big"},
            },
        },
        "dryRun": False,
    },
}
obj = review["request"]["object"]
base = len(json.dumps(review, separators=(",", ":")))
if shape == "labels":
    labels, i, used = obj["metadata"]["labels"], 0, base
    while True:
        entry = len(f'"l{i}":"v",')
        if used + entry > size:
            break
        labels[f"l{i}"] = "v"
        used += entry
        i += 1
elif shape == "affinity":
    # 3 bytes per term: `{},`
    terms = max(1, (size - base - 60) // 3)
    obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{}] * terms}}
elif shape == "values":
    # One requirement with many one-character values: 4 bytes each, `"a",`
    values = max(1, (size - base - 160) // 4)
    obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/rack", "operator": "In", "values": ["a"] * values}]}]}}
elif shape == "expressions":
    # One term with many requirements: 28 bytes each, `{"key":"a","operator":"In"},`
    count = max(1, (size - base - 120) // 28)
    obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions":
        [{"key": "a", "operator": "In"}] * count}]}}
else:
    sys.exit(f"unknown shape {shape}")
text = json.dumps(review, separators=(",", ":"))
text += " " * max(0, size - len(text))
open(path, "w").write(text)
EOF
}

peak_kib() { # file
    if ! /usr/bin/time -o "$work/time.txt" -v "$BIN" review <"$1" >"$work/answer.json" 2>"$work/stderr.txt"; then
        echo "bench: $BIN review failed on $1: $(tail -n 3 "$work/stderr.txt")" >&2
        return 1
    fi
    awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt"
}

echo "# pv-topology-webhook review, peak RSS (KiB, best of $RUNS); $(uname -r), $("$BIN" --version)"
empty="$work/empty.json"
generate labels 0 "$empty"
baseline=$(peak_kib "$empty")
echo "baseline (a minimal review): ${baseline} KiB"
printf '%-11s %10s %12s %12s %8s\n' shape bytes peak_KiB over_base per_byte
for shape in $SHAPES; do
    for size in $SIZES; do
        file="$work/$shape-$size.json"
        generate "$shape" "$size" "$file"
        best=
        for _ in $(seq "$RUNS"); do
            kib=$(peak_kib "$file")
            if [[ -z $best || $kib -lt $best ]]; then best=$kib; fi
        done
        bytes=$(stat -c %s "$file")
        over=$((best - baseline))
        printf '%-11s %10d %12d %12d %8.1f\n' "$shape" "$bytes" "$best" "$over" \
            "$(awk -v o="$over" -v b="$bytes" 'BEGIN {print o * 1024 / b}')"
    done
done
