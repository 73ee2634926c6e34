#!/usr/bin/env python3
"""Hostile cloud answers against `pv-topology-webhook serve` (issue 24, "Done when"):
while lookups meet each answer below, does the webhook still answer reviews that need
no lookup within 100 ms, and does its memory stay within the pod's 128Mi?

Each attack runs against a fresh `serve` process (release build) on 127.0.0.1, with
every lookup pointed at a fake on loopback:

  vsphere-attrs    vCenter answers RetrievePropertiesEx with 1 MiB of one element
                   carrying 100,000 attributes (D1);
  vsphere-objects  vCenter answers a 28.6 MiB page of empty <objects/> (D2);
  vsphere-token    vCenter pages forever with the same continuation token (D2);
  vsphere-echo     vCenter's REST session answers 401 quoting the request's
                   Authorization header (Basic base64(user:password)) (D3);
  gce-zones        Compute's regions.get lists 10,000 zones, every disks.get is 404 (D4;
                   tests/fakes/gcp_server.py);
  keystone-echo    Keystone answers 401 quoting the password it was sent (D3;
                   tests/fakes/openstack_server.py with echo_credentials);
  audit-continue   not `serve`: `audit` against an apiserver whose PV list repeats its
                   continue token forever (D7): its exit status, time and peak memory.

During each attack, ATTACKERS (3) clients send reviews of PVs that need the hostile
lookup, one after another, each with a PV the cache has not seen; a probe opens a new
TLS connection every 50 ms and sends a review that needs no lookup (a GCE PD CSI
handle naming its zone) and GET /healthz on the metrics port. Reported: the probe's
review and /healthz latencies (median, p99, max), how many lookup reviews were answered
and how (allowed, denied), whether any answer or log line held a secret in any encoding
(raw, base64 as Basic sends it, URL-encoded), and peak RSS (VmHWM).

Usage: bench/hostile-lookups.py [--bin PATH] [--attacks a,b] [--seconds 20]
       (build first: cargo build --release -p pv-topology-webhook)
Python 3 standard library only; loopback only.
"""

import argparse
import base64
import http.client
import http.server
import json
import os
import signal
import socket
import socketserver
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER = "bench@vsphere.local"
PASSWORD = "vc-Bench-Pa55word~do-not-log"
KEYSTONE_PASSWORD = "wrong-password~Xy7-do-not-log"
ATTACKERS = 3
# The datastores the fake vCenter lists, within one page of the 20 objects the client asks for.
DATASTORES = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def secret_forms(secret, user=None):
    """Every way a client sends `secret`, as 12-character runs to look for."""
    forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}
    if user is not None:
        forms.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    runs = set()
    for form in forms:
        for i in range(0, max(1, len(form) - 11)):
            runs.add(form[i:i + 12])
    return runs


# --- a fake vCenter (vim25 SOAP at /sdk, the Automation REST API at /rest) ----------

def envelope(body):
    return ('<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope '
            'xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>'
            f'{body}</soapenv:Body></soapenv:Envelope>').encode()


def datastore_object(name, host):
    return (f'<objects><obj type="Datastore">{name}</obj>'
            f'<propSet><name>name</name><val>{name}</val></propSet>'
            '<propSet><name>host</name><val><DatastoreHostMount>'
            f'<key type="HostSystem">{host}</key><mountInfo><mounted>true</mounted>'
            '<accessible>true</accessible></mountInfo></DatastoreHostMount></val></propSet></objects>')


class VcenterHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "attrs"
    big = b""

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", "text/xml; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode(errors="replace")
        if self.path.startswith("/rest/com/vmware/cis/session"):
            echoed = self.headers.get("Authorization", "")
            text = json.dumps({"type": "com.vmware.vapi.std.errors.unauthenticated",
                               "value": {"messages": [{"default_message": f"refused {echoed}"}]}})
            return self.reply(401, text.encode())
        if "RetrieveServiceContent" in body:
            return self.reply(200, envelope(
                '<RetrieveServiceContentResponse xmlns="urn:vim25"><returnval>'
                '<rootFolder type="Folder">group-d1</rootFolder>'
                '<propertyCollector type="PropertyCollector">propertyCollector</propertyCollector>'
                '<sessionManager type="SessionManager">SessionManager</sessionManager>'
                '</returnval></RetrieveServiceContentResponse>'))
        if "<Login" in body:
            return self.reply(200, envelope('<LoginResponse xmlns="urn:vim25"><returnval>'
                                            '<key>k</key></returnval></LoginResponse>'),
                              [("Set-Cookie", 'vmware_soap_session="bench-session-0123456789"; Path=/')])
        if "RetrieveProperties" in body:
            mode = self.mode
            if mode in ("attrs", "objects"):
                return self.reply(200, self.big)
            if mode == "token":
                page = datastore_object("ds-endless", "host-1") * 20  # maxObjects
                return self.reply(200, envelope(
                    '<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><token>same</token>'
                    f'{page}</returnval></RetrievePropertiesExResponse>'))
            # echo: one datastore per name asked for, then its host's ancestors.
            if "<pathSet>parent</pathSet>" in body:
                return self.reply(200, envelope(
                    '<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects>'
                    '<obj type="HostSystem">host-1</obj><propSet><name>name</name><val>h1</val></propSet>'
                    '</objects></returnval></RetrievePropertiesExResponse>'))
            pages = "".join(datastore_object(f"ds-{i}", "host-1") for i in range(DATASTORES))
            return self.reply(200, envelope(
                f'<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>{pages}'
                '</returnval></RetrievePropertiesExResponse>'))
        return self.reply(500, envelope('<soapenv:Fault><faultstring>unknown call</faultstring>'
                                        '</soapenv:Fault>'))


def start_vcenter(mode):
    handler = type("Handler", (VcenterHandler,), {"mode": mode})
    if mode == "attrs":
        attrs = " ".join(f"a{i}=\"\"" for i in range(100_000))
        handler.big = envelope('<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>'
                               f'<objects {attrs}/></returnval></RetrievePropertiesExResponse>')
    elif mode == "objects":
        count = (28_600 * 1024) // len("<objects/>")
        handler.big = envelope('<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>'
                               + "<objects/>" * count + '</returnval></RetrievePropertiesExResponse>')
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


# --- the other fakes: the suite's own, from tests/fakes --------------------------------

def start_fake(script, scenario, workdir):
    path = os.path.join(workdir, os.path.basename(script) + ".json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/fakes", script), path],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().split()[-1])
    return proc, port


def gce_scenario():
    with open(os.path.join(ROOT, "tests/data/gcp/scenario.json")) as f:
        scenario = json.load(f)
    scenario["compute"]["regions"] = {
        "us-central1": [f"us-central1-{i}" for i in range(10_000)]}
    return scenario


def keystone_scenario():
    with open(os.path.join(ROOT, "tests/data/openstack/scenario.json")) as f:
        scenario = json.load(f)
    scenario["keystone"]["echo_credentials"] = True
    return scenario


# --- the webhook -----------------------------------------------------------------------

def review(name, spec, labels=None):
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{name}", "operation": "CREATE", "name": name,
            "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
            "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
            "userInfo": {"username": "bench"},
            "object": {"apiVersion": "v1", "kind": "PersistentVolume",
                       "metadata": {"name": name, "labels": labels or {}},
                       "spec": dict({"capacity": {"storage": "1Gi"},
                                     "accessModes": ["ReadWriteOnce"]}, **spec)}}}).encode()


def no_lookup_review(i):
    return review(f"probe-{i}", {"csi": {"driver": "pd.csi.storage.gke.io",
                                         "volumeHandle": f"projects/p/zones/us-central1-a/disks/probe-{i}"}})


def attack_review(attack, i):
    if attack.startswith("vsphere"):
        # Failed lookups are not cached: every review asks vCenter again.
        return review(f"vs-{i}", {"vsphereVolume": {"volumePath": f"[ds-{i % DATASTORES}] kubevols/pv-{i}.vmdk"}})
    if attack == "gce-zones":
        return review(f"gce-{i}", {"gcePersistentDisk": {"pdName": f"missing-{i}"}})
    if attack == "keystone-echo":
        return review(f"cinder-{i}", {"cinder": {"volumeID": f"5a1c9e0e-1f6e-4d55-9a3e-{i:012d}"}})
    raise ValueError(attack)


class Webhook:
    def __init__(self, binary, workdir, attack):
        self.port, self.metrics_port = free_port(), free_port()
        self.fakes = []
        certs = os.path.join(workdir, "certs")
        if not os.path.isdir(certs):
            subprocess.run([binary, "certs", "--service", "bench", "--namespace", "bench",
                            "--out-dir", certs, "--extra-san", "127.0.0.1"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = dict(os.environ)
        args = [binary, "serve", "--shutdown-delay", "0s", "--log-level", "info",
                "--tls-cert-file", os.path.join(certs, "tls.crt"),
                "--tls-key-file", os.path.join(certs, "tls.key"),
                "--listen", f"127.0.0.1:{self.port}",
                "--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        if attack.startswith("vsphere"):
            server, port = start_vcenter(attack.split("-", 1)[1])
            self.fakes.append(server)
            config = os.path.join(workdir, "vsphere.conf")
            with open(config, "w") as f:
                f.write(f'[VirtualCenter "127.0.0.1"]\nuser = "{USER}"\npassword = "{PASSWORD}"\n')
            args += ["--vsphere-lookup", f"--vsphere-config={config}",
                     f"--vsphere-endpoint=http://127.0.0.1:{port}/"]
        elif attack == "gce-zones":
            proc, port = start_fake("gcp_server.py", gce_scenario(), workdir)
            self.fakes.append(proc)
            env["GCE_METADATA_HOST"] = f"127.0.0.1:{port}"
            args += ["--gce-lookup", "--gce-project=demo-project", "--gce-region=us-central1",
                     f"--gce-compute-endpoint=http://127.0.0.1:{port}/compute/v1/"]
        elif attack == "keystone-echo":
            proc, port = start_fake("openstack_server.py", keystone_scenario(), workdir)
            self.fakes.append(proc)
            config = os.path.join(workdir, "cloud.conf")
            with open(config, "w") as f:
                f.write(f"[Global]\nauth-url = http://127.0.0.1:{port}/identity\n"
                        f"username = cinder-reader\npassword = \"{KEYSTONE_PASSWORD}\"\n"
                        "user-domain-name = Default\ntenant-name = demo\ndomain-name = Default\n"
                        "region = RegionOne\n")
            args += ["--openstack-cinder-lookup", f"--openstack-cloud-config={config}"]
        self.log = open(os.path.join(workdir, f"{attack}.log"), "w+")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 20
        while not self.healthz()[0] == 200:
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"{attack}: the server never became ready")
            time.sleep(0.05)
        self.context = ssl.create_default_context()
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE  # loopback, our own throwaway certificate

    def healthz(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=5)
            conn.request("GET", "/healthz")
            status = conn.getresponse().status
            conn.close()
            return status, None
        except OSError as e:
            return None, e

    def mutate(self, body, timeout=30):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.context)
        try:
            conn.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fake in self.fakes:
            if isinstance(fake, subprocess.Popen):
                fake.kill()
                fake.wait()
            else:
                fake.shutdown()
        self.log.seek(0)
        return self.log.read()


def run_attack(binary, workdir, attack, seconds):
    hook = Webhook(binary, workdir, attack)
    baseline = status_kib(hook.proc.pid, "VmRSS")
    stop = threading.Event()
    outcomes = {"allowed": 0, "denied": 0, "failed": 0}
    answers = []
    counter = iter(range(10**9))
    lock = threading.Lock()

    def attacker():
        while not stop.is_set():
            with lock:
                i = next(counter)
            try:
                status, body = hook.mutate(attack_review(attack, i))
                answer = json.loads(body)["response"]
                with lock:
                    outcomes["allowed" if answer["allowed"] else "denied"] += 1
                    if len(answers) < 50:
                        answers.append(body.decode(errors="replace"))
            except (OSError, ValueError, KeyError):
                with lock:
                    outcomes["failed"] += 1

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(ATTACKERS)]
    for t in threads:
        t.start()
    time.sleep(1)  # the lookups are under way
    probe, health, probe_failures = [], [], 0
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        i += 1
        started = time.monotonic()
        try:
            status, _ = hook.mutate(no_lookup_review(i), timeout=10)
            probe.append(time.monotonic() - started) if status == 200 else None
            probe_failures += status != 200
        except OSError:
            probe_failures += 1
        started = time.monotonic()
        status, _ = hook.healthz()
        if status == 200:
            health.append(time.monotonic() - started)
        else:
            probe_failures += 1
        time.sleep(0.05)
    stop.set()
    peak = status_kib(hook.proc.pid, "VmHWM")
    for t in threads:
        t.join(40)
    log = hook.stop()
    leaked = secret_forms(PASSWORD, USER) | secret_forms(KEYSTONE_PASSWORD, None)
    shown = "".join(answers) + log
    leaks = sorted(run for run in leaked if run in shown)
    return {
        "attack": attack, "baseline_mib": baseline / 1024, "peak_mib": peak / 1024,
        "probe_reviews": len(probe), "probe_failures": probe_failures,
        "review_ms": summary(probe), "healthz_ms": summary(health),
        "lookup_reviews": outcomes, "secret_runs_shown": len(leaks),
        "a_denial": next((json.loads(a)["response"].get("status", {}).get("message", "")
                          for a in answers if '"allowed":false' in a), "")[:300],
    }


def summary(values):
    if not values:
        return {}
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return {"median": round(statistics.median(values) * 1000, 1), "p99": round(p99 * 1000, 1),
            "max": round(values[-1] * 1000, 1)}


# --- audit against an apiserver that pages forever -------------------------------------

class ApiserverHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        items = [{"metadata": {"name": f"pv-{i}"},
                  "spec": {"csi": {"driver": "pd.csi.storage.gke.io",
                                   "volumeHandle": f"projects/p/zones/us-central1-a/disks/d{i}"}}}
                 for i in range(100)]
        body = json.dumps({"kind": "PersistentVolumeList", "apiVersion": "v1",
                           "metadata": {"resourceVersion": "1", "continue": "same-token"},
                           "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def run_audit(binary, workdir, seconds):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), ApiserverHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = os.path.join(workdir, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{server.server_address[1]}"}}}}]
users: [{{name: u, user: {{token: bench-token-0123456789abcdef}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")
    started = time.monotonic()
    proc = subprocess.Popen([binary, "audit", "--kubeconfig", kubeconfig],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, status = 0, None
    while status is None and time.monotonic() - started < seconds * 3:
        try:
            peak = max(peak, status_kib(proc.pid, "VmHWM"))
        except OSError:
            pass
        status = proc.poll()
        time.sleep(0.05)
    if status is None:
        proc.kill()
        status = "killed"
    err = proc.communicate()[1]
    server.shutdown()
    lines = err.strip().splitlines()
    return {"attack": "audit-continue", "exit": status, "seconds": round(time.monotonic() - started, 2),
            "peak_mib": peak / 1024, "stderr": [line[:300] for line in lines][-3:]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/pv-topology-webhook"))
    parser.add_argument("--attacks", default="vsphere-attrs,vsphere-objects,vsphere-token,vsphere-echo,"
                                             "gce-zones,keystone-echo,audit-continue")
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        for attack in args.attacks.split(","):
            if attack == "audit-continue":
                result = run_audit(args.bin, workdir, args.seconds)
            else:
                result = run_attack(args.bin, workdir, attack, args.seconds)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
