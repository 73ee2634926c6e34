#!/usr/bin/env python3
"""Shares of a folded profile (inferno-collapse-perf output) by category, for issue 18.

Two tables:
  self:      each sample goes to one category, found by walking its stack from the
             leaf towards the root and taking the first frame that matches one
             (generic frames such as memcpy, Vec or String code match none and are
             passed over, so their time goes to the code that called them; malloc and
             free are the allocator's own time);
  inclusive: the share of samples with at least one frame of the category anywhere
             on the stack (allocation done for JSON parsing counts for both).
The kernel's self time is split by the system call that entered it, and the
allocator's by the category of the code that called malloc or free.
Usage: profile-categories.py FILE.folded [TOP]
"""

import re
import sys
from collections import Counter

# Order matters for "self": a frame is given the first category whose pattern it
# matches.
CATEGORIES = [
    ("kernel (syscalls, loopback TCP, scheduler)", r"_\[k\]$"),
    ("allocator (malloc/free)",
     r"^(__libc_)?(malloc|free|realloc|calloc|cfree)\b|_int_(malloc|free|realloc)|"
     r"malloc_consolidate|unlink_chunk|tcache_|sysmalloc|__rust_(alloc|dealloc|realloc)|"
     r"__rdl_|__GI___libc_(malloc|free|realloc)"),
    ("tracing", r"\btracing(_core|_subscriber)?::"),
    ("metrics", r"\bprometheus_client::|pv_topology_webhook::metrics"),
    ("TLS (rustls, ring)", r"\brustls::|\bring::|ring_core_|\btokio_rustls::"),
    ("JSON parse (serde_json::de, Deserialize)",
     r"serde_json::de|serde_json::value::de|serde::de::|[Dd]eserial|serde_json::read|"
     r"serde_path_to_error|drop_in_place<kube_core::admission::Admission"),
    ("encoding (serde_json::ser, Serialize, base64)",
     r"serde_json::ser|serde::ser::|[^e]Serialize|[^e]serialize|\bbase64::|serde_json::value::ser"),
    ("patch build", r"\bjson_patch::|pv_topology_webhook::patch"),
    ("decision (rules, resolve, topology)",
     r"pv_topology_webhook::(decision|rules|resolve|topology|builtin|gce|ebs|azure|cinder|"
     r"vsphere|source|validate|lookup|model)|\bregex(_automata)?::|\bglobset::"),
    ("HTTP/2 (h2, hyper, http)", r"\bh2::|\bhyper(_util)?::|\bhttp::|\bhttpparse::|\bhttp_body"),
    ("other webhook code (review, audit, server)", r"pv_topology_webhook::"),
    ("tokio runtime", r"\btokio::"),
]
KERNEL = CATEGORIES[0][0]
ALLOCATOR = CATEGORIES[1][0]
KERNEL_BY = {
    "writev": "kernel: writev (TCP send; on loopback also the receiver's softirq)",
    "recv": "kernel: recv",
    "epoll": "kernel: epoll_wait",
    "clock_gettime": "kernel: clock_gettime (vDSO)",
    "": f"{KERNEL}: other",
}
COMPILED = [(name, re.compile(pattern)) for name, pattern in CATEGORIES]


def category(frame):
    for name, pattern in COMPILED:
        if pattern.search(frame):
            return name
    return None


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    self_time, inclusive, leaves, by_caller = Counter(), Counter(), Counter(), Counter()
    total = 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        count = int(count)
        frames = stack.split(";")
        total += count
        cats = [category(f) for f in frames]
        leaf = next((c for c in reversed(cats) if c), "other (libc, std, unattributed)")
        if leaf == KERNEL:
            # Split the kernel's time by the user-space frame that entered it.
            entry = next(i for i, c in enumerate(cats) if c == KERNEL)
            caller = frames[entry - 1] if entry else ""
            leaf = KERNEL_BY.get(next((k for k in KERNEL_BY if k in caller), ""), f"{KERNEL}: other")
        self_time[leaf] += count
        if leaf == ALLOCATOR:
            # Who allocated: the first other category above the allocator's frames.
            depth = max(i for i, c in enumerate(cats) if c == ALLOCATOR)
            by_caller[next((c for c in reversed(cats[:depth]) if c and c != ALLOCATOR), "other")] += count
        for c in set(c for c in cats if c):
            inclusive[c] += count
        leaves[frames[-1]] += count
    if not total:
        sys.exit(f"{path}: no samples")
    print(f"{total} (sum of sample periods)")
    print("| category | self % | inclusive % |")
    print("|---|---|---|")
    for name, count in self_time.most_common():
        inc = "-" if name.startswith("kernel") else f"{100 * inclusive.get(name, 0) / total:.1f}"
        print(f"| {name} | {100 * count / total:.1f} | {inc} |")
    print(f"| kernel, all | {100 * inclusive.get(KERNEL, 0) / total:.1f} | - |")
    print("allocator time by the code that called it (% of all samples):")
    for name, count in by_caller.most_common():
        print(f"  {100 * count / total:5.1f}%  {name}")
    print(f"top {top} leaf frames:")
    for frame, count in leaves.most_common(top):
        print(f"  {100 * count / total:5.1f}%  {frame[:140]}")


if __name__ == "__main__":
    main()
