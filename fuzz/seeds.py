#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target from the suite's test data.

usage: fuzz/seeds.py OUT_DIR   (fuzz/run.sh passes fuzz/target/corpus)

Each seed comes from tests/data/ (or, where the suite keeps an answer only
as the fakes' scenario, from the fakes in tests/fakes/ rendering that
scenario, as the tests see it): nothing here is invented. OUT_DIR/<target>/
gets one file per seed, named by its source; existing files (what earlier
runs found) are kept.
"""
import base64
import copy
import glob
import io
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


def render(handler, method, *args, scenario=None, headers=None, body=b""):
    """(status, body, headers) of what a fake's handler `method` answers,
    called without a server: the request is `headers` and `body`."""
    answers = []
    fake = handler.__new__(handler)
    fake.scenario = scenario if scenario is not None else handler.scenario
    fake.headers = {"Content-Length": str(len(body)), **(headers or {})}
    fake.rfile = io.BytesIO(body)

    def reply(status, data, content_type="application/json", headers=()):
        answers.append((status, data if isinstance(data, str) else json.dumps(data), dict(headers)))

    fake.reply = reply
    getattr(fake, method)(*args)
    return answers[0]


def form(fields):
    import urllib.parse
    return urllib.parse.urlencode(fields).encode()


def cloud_answers():
    """(target, name, bytes) of the cloud answers with credentials, and of
    error bodies (the secret the call held after a NUL)."""
    import azure_server
    import gcp_server
    import openstack_server

    def rust_source(*parts):
        return read(os.path.join(ROOT, *parts))

    # AWS, as moto answers (recorded by fuzz/record-aws-answers.py), and
    # the XML of cloud/src/aws/sts.rs's own test.
    aws = lambda name: read(data("fuzz", "aws", name), "rb")
    yield "aws_answers", "sts-moto.xml", b"\x00" + aws("sts-assume-role-with-web-identity.xml")
    xml = re.search(r'r#"(<AssumeRoleWithWebIdentityResponse.*?)"#', rust_source("cloud", "src", "aws", "sts.rs"))
    yield "aws_answers", "sts-unit-test.xml", b"\x00" + xml.group(1).encode()
    yield "aws_answers", "imds-role-credentials.json", b"\x01" + aws("imds-role-credentials.json")
    yield "aws_answers", "ecr-moto.json", b"\x02" + aws("ecr-get-authorization-token.json")
    yield "error_bodies", "sts-moto.xml", b"\x00" + aws("sts-error.xml")
    yield "error_bodies", "ecr-moto.json", b"\x01" + aws("ecr-error.json")
    # The STS refusal credential-provider/tests/common/aws_fake.rs echoes a token in.
    echo = re.search(r'"(<ErrorResponse><Error><Code>InvalidIdentityToken.*?</ErrorResponse>)"',
                     rust_source("credential-provider", "tests", "common", "aws_fake.rs")).group(1)
    token = read(data("azure", "federated-token.jwt")).strip()
    yield "error_bodies", "sts-echoes-token.xml", b"\x00" + echo.replace("{cut}", token[:-3]).encode() + b"\0" + token.encode()

    # Google, as tests/fakes/gcp_server.py answers its scenario.
    scenario = json.loads(read(data("gcp", "scenario.json")))
    gcp = gcp_server.Handler
    tree = scenario["metadata"]["tree"]
    _, body, _ = render(gcp, "metadata_token", scenario["metadata"], tree, ("Metadata-Flavor", "Google"),
                        scenario=scenario)
    yield "gcp_answers", "metadata-token.json", b"\x00" + body.encode()
    exchange = {"audience": scenario["sts"]["audience"], "grant_type": gcp_server.TOKEN_EXCHANGE,
                "requested_token_type": gcp_server.ACCESS_TOKEN, "subject_token_type": gcp_server.JWT,
                "scope": "https://www.googleapis.com/auth/cloud-platform",
                "subject_token": scenario["sts"]["subject_tokens"][0]}
    json_headers = {"Content-Type": "application/json"}
    _, body, _ = render(gcp, "sts", scenario=scenario, headers=json_headers, body=json.dumps(exchange).encode())
    yield "gcp_answers", "sts-token.json", b"\x01" + body.encode()
    refused = read(data("gcp", "refused-subject-token.jwt")).strip()
    _, body, _ = render(gcp, "sts", scenario=scenario, headers=json_headers,
                        body=json.dumps({**exchange, "subject_token": refused}).encode())
    yield "error_bodies", "gcp-sts-echoes-token.json", b"\x02" + body.encode() + b"\0" + refused.encode()
    federated = gcp_server.issue("federated", 3600, [exchange["scope"]])
    account = scenario["iam"]["service_accounts"][0]
    request = json.dumps({"scope": [exchange["scope"]], "lifetime": "3600s"}).encode()
    for name, who, bearer in [("iam-token.json", account, federated),
                              ("iam-denied.json", "other@demo-project.iam.gserviceaccount.com", federated),
                              ("iam-unauthenticated.json", account, "ya29.not-issued-token")]:
        status, body, _ = render(gcp, "generate_access_token", who, scenario=scenario,
                                 headers={**json_headers, "Authorization": f"Bearer {bearer}"}, body=request)
        if status == 200:
            yield "gcp_answers", name, b"\x02" + body.encode()
        else:
            yield "error_bodies", "gcp-" + name, b"\x02" + body.encode() + b"\0" + bearer.encode()
    yield "gcp_answers", "google-dockercfg.json", b"\x03" + tree["instance/attributes/google-dockercfg"].encode()
    for path in sorted(glob.glob(data("credential-provider", "docker-config*.json"))):
        yield "gcp_answers", "dockercfg-" + os.path.basename(path), b"\x03" + read(path, "rb")

    # Azure, as tests/fakes/azure_server.py answers its scenario.
    scenario = json.loads(read(data("azure", "scenario.json")))
    az = azure_server.Handler
    imds = {"Metadata": "true"}
    query = {"api-version": "2018-02-01", "resource": azure_server.ACR_AUDIENCE}
    _, body, _ = render(az, "imds_token", query, scenario=scenario, headers=imds)
    yield "azure_answers", "imds-token-strings.json", b"\x00" + body.encode()
    numbers = copy.deepcopy(scenario)
    numbers["imds"]["identity"]["numbers"] = True
    _, body, _ = render(az, "imds_token", query, scenario=numbers, headers=imds)
    yield "azure_answers", "imds-token-numbers.json", b"\x00" + body.encode()
    tenant, clients = next(iter(scenario["entra"]["tenants"].items()))
    client_id, client = next((c, v) for c, v in clients.items() if v.get("secrets"))
    entra = {"grant_type": "client_credentials", "scope": "https://management.azure.com/.default",
             "client_id": client_id, "client_secret": client["secrets"][0]}
    _, body, _ = render(az, "entra_token", tenant, scenario=scenario, body=form(entra))
    yield "azure_answers", "entra-token.json", b"\x00" + body.encode()
    echoing = copy.deepcopy(scenario)
    echoing["entra"]["echo_credentials"] = True
    wrong = client["secrets"][0][::-1]
    _, body, _ = render(az, "entra_token", tenant, scenario=echoing, body=form({**entra, "client_secret": wrong}))
    yield "error_bodies", "entra-echoes-secret.json", b"\x03" + body.encode() + b"\0" + wrong.encode()
    host = {"Host": "127.0.0.1:5000"}
    _, _, headers = render(az, "acr_challenge", scenario=scenario, headers=host)
    challenge = headers["Www-Authenticate"]
    yield "azure_answers", "acr-www-authenticate.txt", b"\x01" + challenge.encode()
    yield "azure_answers", "acr-challenge.txt", b"\x04" + challenge.encode()
    access = azure_server.issue("imds", 3600, azure_server.ACR_AUDIENCE)
    acr = {"grant_type": "access_token", "service": host["Host"], "tenant": scenario["acr"]["tenant"],
           "access_token": access}
    _, body, _ = render(az, "acr_exchange", scenario=scenario, headers=host, body=form(acr))
    yield "azure_answers", "acr-exchange.json", b"\x03" + body.encode()
    yield "azure_answers", "acr-refresh-token.jwt", b"\x02" + json.loads(body)["refresh_token"].encode()
    echoing = copy.deepcopy(scenario)
    echoing["acr"]["echo_access_token"] = True
    expired = "imds-token-never-issued-0001"
    _, body, _ = render(az, "acr_exchange", scenario=echoing, headers=host, body=form({**acr, "access_token": expired}))
    yield "error_bodies", "acr-echoes-token.json", b"\x03" + body.encode() + b"\0" + expired.encode()
    _, body, _ = render(az, "arm_disk", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d",
                        {"api-version": "2023-04-02"}, scenario=scenario)
    yield "error_bodies", "arm-unauthenticated.json", b"\x03" + body.encode()

    # OpenStack, as tests/fakes/openstack_server.py answers its scenario.
    scenario = json.loads(read(data("openstack", "scenario.json")))
    scenario["keystone"]["echo_credentials"] = True
    user = scenario["keystone"]["users"][0]
    wrong = user["password"][::-1]
    auth = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": user["name"], "domain": {"name": user["domain"]}, "password": wrong}}}}}
    _, body, _ = render(openstack_server.Handler, "keystone", json.dumps(auth).encode(), scenario=scenario)
    yield "error_bodies", "keystone-echoes-password.json", b"\x04" + body.encode() + b"\0" + wrong.encode()
    _, body, _ = render(openstack_server.Handler, "cinder", "/nothing", scenario=scenario)
    yield "error_bodies", "cinder-not-found.json", b"\x04" + body.encode()

    # The token-exchange backend's endpoint, as credential-provider/tests/common/token_server.rs
    # answers (its one-line JSON answers, with its opaque token), and with a JWT as the token.
    server = rust_source("credential-provider", "tests", "common", "token_server.rs")
    opaque = re.search(r'OPAQUE_TOKEN: &str = "([^"]*)"', server).group(1)
    for i, answer in enumerate(re.findall(r'json!\((\{"access_token": OPAQUE_TOKEN[^)]*\})\)', server)):
        answer = answer.replace("OPAQUE_TOKEN", json.dumps(opaque))
        yield "token_exchange_answer", f"token-server-{i}.json", b"\x3c" + answer.encode()
    jwt_answer = {"access_token": token, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                  "token_type": "N_A", "expires_in": 7200}
    yield "token_exchange_answer", "jwt.json", b"\x3c" + json.dumps(jwt_answer).encode()
    subject = read(data("gcp", "subject-token.jwt")).strip()
    denied = {"error": "invalid_grant", "error_description": f"subject token {subject} is not trusted by this issuer"}
    yield "error_bodies", "oauth-echoes-token.json", b"\x05" + json.dumps(denied).encode() + b"\0" + subject.encode()


def volume_handle(review):
    """The volume handle of an AdmissionReview's PV (CSI or in-tree), or None."""
    spec = ((review.get("request") or {}).get("object") or {}).get("spec") or {}
    fields = {"csi": "volumeHandle", "awsElasticBlockStore": "volumeID", "gcePersistentDisk": "pdName",
              "azureDisk": "diskURI", "cinder": "volumeID", "vsphereVolume": "volumePath"}
    for source, field in fields.items():
        if isinstance(spec.get(source), dict) and isinstance(spec[source].get(field), str):
            return spec[source][field]
    return None


def seeds():
    """(target, name, bytes) of every seed."""
    # The webhook: AdmissionReviews, and rules files.
    for path in sorted(glob.glob(data("webhook", "*.json"))):
        yield "webhook_review", os.path.basename(path), read(path, "rb")
        yield "webhook_validate", os.path.basename(path), read(path, "rb")
    # webhook_rules: a rules file, a NUL and a volume handle: each file alone, and
    # with the handle of each AdmissionReview's PV.
    handles = sorted({handle for path in glob.glob(data("webhook", "*.json"))
                      for handle in [volume_handle(json.loads(read(path)))] if handle})
    for path in [data("webhook", "rules.yaml"), data("cluster", "scheduling-rules.yaml"),
                 os.path.join(ROOT, "webhook", "examples", "rules.yaml")]:
        name = os.path.relpath(path, ROOT).replace("/", "_")
        yield "webhook_rules", name, read(path, "rb")
        for i, handle in enumerate(handles):
            yield "webhook_rules", f"{name}-{i}", read(path, "rb") + b"\0" + handle.encode()

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

    yield from cloud_answers()


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
