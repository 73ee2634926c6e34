#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target from the suite's test data.

usage: fuzz/seeds.py OUT_DIR   (fuzz/run.sh passes fuzz/target/corpus)

Each seed comes from tests/data/ (or, where the suite keeps an answer only
as the fakes' scenario, from the fakes in tests/fakes/ rendering that
scenario, as the tests see it): nothing here is invented. OUT_DIR/<target>/
gets one file per seed, named by its source; existing files (what earlier
runs found) are kept.
"""
import glob
import json
import os
import re
import sys
import types

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, os.path.join(ROOT, "tests", "fakes"))
sys.dont_write_bytecode = True


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def data(*parts):
    return os.path.join(DATA, *parts)


def seeds():
    """(target, name, bytes) of every seed."""
    # The webhook: AdmissionReviews, and rules files.
    for path in sorted(glob.glob(data("webhook", "*.json"))):
        yield "webhook_review", os.path.basename(path), read(path, "rb")
    for path in [data("webhook", "rules.yaml"), data("cluster", "scheduling-rules.yaml"),
                 os.path.join(ROOT, "webhook", "examples", "rules.yaml")]:
        yield "webhook_rules", os.path.relpath(path, ROOT).replace("/", "_"), read(path, "rb")

    # The credential provider: requests, configs (JSON and YAML), and the
    # matchImages patterns of the configs against the requests' images.
    requests = sorted(glob.glob(data("credential-provider", "request-*.json")))
    for path in requests:
        yield "credential_request", os.path.basename(path), read(path, "rb")
    configs = sorted(p for p in glob.glob(data("credential-provider", "configs", "**", "*"), recursive=True)
                     if p.endswith((".yaml", ".yml", ".json")))
    configs += sorted(glob.glob(os.path.join(ROOT, "credential-provider", "examples", "*.yaml")))
    for path in configs:
        yield "credential_config", os.path.relpath(path, ROOT).replace("/", "_"), read(path, "rb")
    images = sorted({json.loads(read(p))["image"] for p in requests})
    patterns = set()
    durations = set()
    for path in configs:
        text = read(path)
        for match in re.finditer(r"matchImages:\s*\[([^\]]*)\]", text):
            patterns.update(p.strip().strip("\"'") for p in match.group(1).split(",") if p.strip())
        for match in re.finditer(r"matchImages\"\s*:\s*\[([^\]]*)\]", text):
            patterns.update(json.loads("[" + match.group(1) + "]"))
        durations.update(re.findall(r"[Cc]acheDuration\"?\s*:\s*\"?([^\",}\s]+)", text))
    for path in glob.glob(data("credential-provider", "response-*.json")):
        durations.update(re.findall(r"[Cc]acheDuration\"?\s*:\s*\"?([^\",}\s]+)", read(path)))
    for i, (pattern, image) in enumerate((p, i) for p in sorted(patterns) for i in images + sorted(patterns)):
        yield "image_matcher", f"pair-{i}", f"{pattern}\0{image}".encode()
    for duration in sorted(durations):
        yield "go_duration", "d-" + re.sub(r"[^A-Za-z0-9.]", "_", duration), duration.encode()

    # Metadata trees, NUL-separated path, body, path, body…
    for path in sorted(glob.glob(data("node-ip-helper", "metadata", "*.json"))):
        scenario = json.loads(read(path))
        parts = []
        for key, value in scenario["tree"].items():
            parts += [key, value if isinstance(value, str) else json.dumps(value)]
        yield f"metadata_{scenario['provider']}", os.path.basename(path), "\0".join(parts).encode()

    # Cloud API answers, as the fakes render the scenarios the tests use.
    import azure_server
    import gcp_server
    import openstack_server
    gcp = json.loads(read(data("gcp", "scenario.json")))["compute"]
    for disk in gcp.get("disks", []):
        answer = gcp_server.Handler.disk(disk["project"], "zones", disk["zone"], disk)
        yield "gce_disk", disk["name"] + ".json", json.dumps(answer).encode()
    for disk in gcp.get("regionDisks", []):
        answer = gcp_server.Handler.disk(disk["project"], "regions", disk["region"], disk)
        yield "gce_disk", disk["name"] + ".json", json.dumps(answer).encode()
    for disk in json.loads(read(data("azure", "scenario.json")))["arm"]["disks"]:
        answer = azure_server.Handler.disk(disk["subscription"], disk["resourceGroup"], disk)
        yield "azure_disk", disk["name"] + ".json", json.dumps(answer).encode()
    openstack = json.loads(read(data("openstack", "scenario.json")))
    project = openstack["keystone"]["projects"][0]["id"]
    for volume in openstack.get("cinder", {}).get("volumes", []):
        answer = {"volume": openstack_server.Handler.volume(volume, project)}
        yield "cinder_volume", volume["id"] + ".json", json.dumps(answer).encode()
    fake = types.SimpleNamespace(scenario=openstack, base=lambda: "https://openstack.example")
    issued = 1767225600  # 2026-01-01T00:00:00Z; the fake's lifetime after it
    expires = issued + openstack["keystone"].get("expires_in", 3600)
    token = {"token": {"methods": ["password"], "expires_at": openstack_server.timestamp(expires),
                       "issued_at": openstack_server.timestamp(issued), "project": {"id": project},
                       "catalog": openstack_server.Handler.catalog(fake, project)}}
    yield "keystone_token", "token.json", json.dumps(token).encode()

    # EC2 DescribeVolumes: the answer webhook/tests/ebs.rs serves, for the
    # volume of tests/data/webhook/ebs-csi.json.
    template = re.search(r'"(<DescribeVolumesResponse.*?</DescribeVolumesResponse>)"',
                         read(os.path.join(ROOT, "webhook", "tests", "ebs.rs"))).group(1)
    review = json.loads(read(data("webhook", "ebs-csi.json")))
    volume = review["request"]["object"]["spec"]["csi"]["volumeHandle"]
    xml = template.replace('\\"', '"').replace("{id}", volume)
    yield "ec2_describe_volumes", "describe-volumes.xml", xml.encode()

    for path in sorted(glob.glob(data("vsphere", "*.xml"))):
        yield "vsphere_soap", os.path.basename(path), read(path, "rb")
    for path in sorted(glob.glob(data("openstack", "*.conf"))):
        yield "gcfg", os.path.basename(path), read(path, "rb")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "target", "corpus")
    counts = {}
    for target, name, body in seeds():
        directory = os.path.join(out, target)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "seed-" + name), "wb") as f:
            f.write(body)
        counts[target] = counts.get(target, 0) + 1
    for target in sorted(counts):
        print(f"{target}: {counts[target]} seeds")


if __name__ == "__main__":
    main()
