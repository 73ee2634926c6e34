#!/usr/bin/env python3
"""A CycloneDX 1.5 JSON SBOM of one workspace package's binary, from
`cargo metadata --locked` (called by scripts/sbom.sh when cargo-cyclonedx is
not installed).

Components: every package the binary links, i.e. the package's normal
(not dev, not build-script) dependencies, transitively, for the target
platform, with the features the workspace resolves; each with name,
version, purl, licence (the crate's SPDX expression) and, for crates from
crates.io, the SHA-256 that Cargo.lock pins. Deterministic: the timestamp is
SOURCE_DATE_EPOCH and the serial number a UUIDv5 of the content.

usage: sbom.py PACKAGE OUT_FILE [TARGET_TRIPLE]
       sbom.py --normalize WORKSPACE_ROOT IN_FILE OUT_FILE
The second form makes cargo-cyclonedx's SBOM deterministic: its timestamp
becomes SOURCE_DATE_EPOCH, its serial number a UUIDv5 of the content, and
the workspace's absolute path `.`.
"""

import json
import os
import subprocess
import sys
import tomllib
import uuid
from datetime import datetime, timezone
from urllib.parse import quote


def purl(pkg, root):
    base = f"pkg:cargo/{quote(pkg['name'])}@{quote(pkg['version'])}"
    source = pkg.get("source") or ""
    if source.startswith("registry+https://github.com/rust-lang/crates.io-index"):
        return base
    if pkg.get("source") is None:
        # A crate of this workspace: no registry; its path in the repository.
        rel = os.path.relpath(os.path.dirname(pkg["manifest_path"]), root)
        return f"{base}?download_url=file://{quote(rel)}"
    return f"{base}?repository_url={quote(source, safe='')}"


def licences(pkg):
    if pkg.get("license"):
        return [{"expression": pkg["license"]}]
    if pkg.get("license_file"):
        return [{"license": {"name": "LicenseRef-file:" + os.path.basename(pkg["license_file"])}}]
    return []


def source_date():
    epoch = os.environ.get("SOURCE_DATE_EPOCH") or subprocess.run(
        ["git", "log", "-1", "--format=%ct"], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write(bom, out):
    bom["serialNumber"] = ""
    body = json.dumps(bom, sort_keys=True)
    bom["serialNumber"] = "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, body))
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(bom, f, indent=2)
        f.write("\n")
    os.replace(tmp, out)


def normalize(root, src, out):
    with open(src) as f:
        text = f.read()
    root = os.path.realpath(root)
    # Inside JSON strings: file:///work/main/cloud -> file://./cloud.
    text = text.replace("file://" + root + "/", "file://./").replace("file://" + root + "#", "file://.#")
    bom = json.loads(text)
    bom["metadata"]["timestamp"] = source_date()
    write(bom, out)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--normalize":
        normalize(*sys.argv[2:])
        return
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: sbom.py PACKAGE OUT_FILE [TARGET_TRIPLE]")
    name, out = sys.argv[1], sys.argv[2]
    triple = sys.argv[3] if len(sys.argv) == 4 else None
    cmd = ["cargo", "metadata", "--locked", "--format-version", "1"]
    if triple:
        cmd += ["--filter-platform", triple]
    meta = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout)
    root = meta["workspace_root"]
    pkgs = {p["id"]: p for p in meta["packages"]}
    members = [pkgs[i] for i in meta["workspace_members"]]
    top = [p for p in members if p["name"] == name]
    if not top:
        sys.exit(f"sbom.py: {name}: not a package of this workspace "
                 f"(members: {', '.join(sorted(p['name'] for p in members))})")
    top = top[0]
    with open(os.path.join(root, "Cargo.lock"), "rb") as f:
        lock = tomllib.load(f)
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock.get("package", [])}

    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}

    def linked(node):
        # Dependencies of kind null (normal) for any platform left by --filter-platform.
        for dep in node["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]):
                yield dep["pkg"]

    seen, stack = {top["id"]}, [top["id"]]
    edges = {}
    while stack:
        cur = stack.pop()
        edges[cur] = sorted(set(linked(nodes[cur])))
        for d in edges[cur]:
            if d not in seen:
                seen.add(d)
                stack.append(d)

    ref = {i: purl(pkgs[i], root) for i in seen}

    def component(pkg, kind):
        c = {
            "type": kind,
            "bom-ref": ref[pkg["id"]],
            "name": pkg["name"],
            "version": pkg["version"],
        }
        if pkg.get("description"):
            c["description"] = " ".join(pkg["description"].split())
        lic = licences(pkg)
        if lic:
            c["licenses"] = lic
        c["purl"] = ref[pkg["id"]]
        digest = checksums.get((pkg["name"], pkg["version"]))
        if digest and pkg.get("source"):
            c["hashes"] = [{"alg": "SHA-256", "content": digest}]
        return c

    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": "",
        "version": 1,
        "metadata": {
            "timestamp": source_date(),
            "tools": {"components": [{"type": "application", "name": "scripts/sbom.py",
                                      "description": "cargo metadata --locked"}]},
            "component": component(top, "application"),
        },
        "components": sorted((component(pkgs[i], "library") for i in seen if i != top["id"]),
                             key=lambda c: (c["name"], c["version"], c["purl"])),
        "dependencies": sorted(({"ref": ref[i], "dependsOn": sorted(ref[d] for d in edges[i])}
                                for i in seen), key=lambda d: d["ref"]),
    }
    if triple:
        bom["metadata"]["properties"] = [{"name": "cdx:rustc:sbom:target:triple", "value": triple}]
    write(bom, out)


if __name__ == "__main__":
    main()
