#!/usr/bin/env python3
"""The steady client of bench/soak.sh: POSTs AdmissionReviews to the webhook at a fixed
rate over TLS (HTTP/1.1 keep-alive, a client certificate), round-robin over fixtures,
and checks each answer against the answer expected for that fixture, which does not
come from the server under test: tests/data/webhook/soak-expected/NAME.json (allowed,
the patch, the outcome annotation and the warnings), written by
`pv-topology-webhook review` and kept in the repository. The EBS CSI reviews
(fixtures named ebs-csi-ZONE, ZONE being the zone moto reports for the volume) are
expected to be answered as soak-expected/ebs-csi.json, written for a volume in
us-east-1a, with ZONE and its region put in.

Each of WORKERS threads keeps one connection, opens a new one every RECONNECT requests
(so that swapped serving certificates and client CAs are met by new handshakes) and
whenever the port in PORT_FILE changes (the instance being replaced). A request that
fails on a reused connection before any answer, because the server closed it while idle,
is sent again once on a new connection, as Go's and most HTTP clients do; such retries
are counted apart.

Answers are classed as:
  ok            status 200 and the expected answer;
  lookup-failed status 200, outcome lookup-failed (--on-lookup-error=deny), while a
                lookup fault is on (FAULT_FILE exists): expected; outside one, wrong;
  wrong         any other 200;
  non-200       another status;
  failed        no answer (connection refused or reset, timeout).
SIGHUP reads the fixture files again. Writes a JSON summary to --out when stopped
(SIGTERM or SIGINT). Loopback only.

With --answer NAME=PATH (repeated) it only checks, before the soak, that the answers
`pv-topology-webhook review` gave offline (PATH, an AdmissionReview) are the expected
ones, so that the fixtures cannot drift from the program silently, and exits 1 naming
each that differs; with --write as well it writes them as the expected answers instead.
"""

import argparse
import base64
import http.client
import json
import os
import signal
import socket
import ssl
import threading
import time

stop = threading.Event()


# The zone the EBS CSI expected answer was written for, and its region.
TEMPLATE_ZONE, TEMPLATE_REGION = "us-east-1a", "us-east-1"


def answer_of(body):
    """What an answer must say: allowed, the patch (decoded), the outcome, the warnings."""
    response = json.loads(body)["response"]
    patch = response.get("patch")
    return {
        "allowed": response.get("allowed"),
        "patch": json.loads(base64.b64decode(patch)) if patch else None,
        "outcome": response.get("auditAnnotations", {}).get("outcome"),
        "warnings": response.get("warnings", []),
    }


def key_of(answer):
    return json.dumps(answer, sort_keys=True)


def answer_key(status, body):
    """The comparable form of an answer, and its outcome."""
    if status != 200:
        return None, None
    answer = answer_of(body)
    return key_of(answer), answer["outcome"]


def expected_answer(directory, name):
    """The answer expected for fixture NAME, from soak-expected/ (not from the server)."""
    if name.startswith("ebs-csi-"):
        zone = name[len("ebs-csi-"):]
        # An AWS zone is its region and a letter (us-east-1a: us-east-1).
        with open(os.path.join(directory, "ebs-csi.json")) as f:
            text = f.read()
        text = text.replace(json.dumps(TEMPLATE_ZONE), json.dumps(zone))
        text = text.replace(json.dumps(TEMPLATE_REGION), json.dumps(zone[:-1]))
        return json.loads(text)
    with open(os.path.join(directory, name + ".json")) as f:
        return json.load(f)


def check_answers(args):
    """--answer: compare review's offline answers with the expected ones (or write them)."""
    drifted, checked = [], 0
    for spec in args.answer:
        name, path = spec.split("=", 1)
        with open(path, "rb") as f:
            got = answer_of(f.read())
        if args.write:
            if name.startswith("ebs-csi-") and name != "ebs-csi-" + TEMPLATE_ZONE:
                pass  # checked below against the one written for the template zone
            else:
                target = "ebs-csi" if name.startswith("ebs-csi-") else name
                with open(os.path.join(args.expected_dir, target + ".json"), "w") as f:
                    json.dump(got, f, indent=2, sort_keys=True)
                    f.write("\n")
                print(f"soak client: wrote {target}.json")
                continue
        expected = expected_answer(args.expected_dir, name)
        checked += 1
        if key_of(got) != key_of(expected):
            drifted.append(f"{name}: review answers {key_of(got)}, expected {key_of(expected)}")
    if drifted:
        raise SystemExit(
            "soak client: the expected answers in " + args.expected_dir + " are not what review gives "
            "(a change of behaviour to look at; SOAK_WRITE_EXPECTED=1 bench/soak.sh writes them again):\n  "
            + "\n  ".join(drifted)
        )
    print(f"soak client: review gives the expected answer to each of the {checked} reviews checked")


def detail(status, body):
    """The message of a refusal, else the start of the body."""
    try:
        return f"{status} {json.loads(body)['response']['status']['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{status} {body[:300]!r}"


class Worker(threading.Thread):
    def __init__(self, args, context, fixtures, expected, index, stats):
        super().__init__(daemon=True)
        self.args, self.context, self.fixtures = args, context, fixtures
        self.expected, self.index, self.stats = expected, index, stats
        self.conn, self.port, self.used = None, None, 0
        self.latencies = []

    def connect(self):
        if self.conn is not None:
            self.conn.close()
        self.port = read_port(self.args.port_file)
        # The serving certificates name 127.0.0.1 (an IP SAN).
        self.conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=self.args.timeout
        )
        self.used = 0

    def post(self, body):
        self.conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        return response.status, response.read()

    def run(self):
        interval = self.args.workers / self.args.rate
        next_at = time.monotonic() + self.index * interval / self.args.workers
        n = self.index
        while not stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            next_at += interval
            name, body = self.fixtures[n % len(self.fixtures)]
            n += self.args.workers
            if self.conn is None or self.used >= self.args.reconnect or read_port(self.args.port_file) != self.port:
                self.connect()
            started = time.monotonic()
            reused = self.used > 0
            try:
                status, answer = self.post(body)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError) as e:
                if not reused:
                    self.record(name, "failed", started, repr(e))
                    self.conn = None
                    continue
                self.stats.count("retried (server closed an idle keep-alive connection)")
                try:
                    self.connect()
                    status, answer = self.post(body)
                except (OSError, http.client.HTTPException) as e:
                    self.record(name, "failed", started, repr(e))
                    self.conn = None
                    continue
            except (OSError, http.client.HTTPException) as e:
                self.record(name, "failed", started, repr(e))
                self.conn = None
                continue
            self.used += 1
            key, outcome = answer_key(status, answer)
            if status != 200:
                kind = "non-200"
            elif key == self.expected[name]:
                kind = "ok"
            elif outcome == "lookup-failed" and os.path.exists(self.args.fault_file):
                kind = "lookup-failed"
            else:
                kind = "wrong"
            if kind == "wrong" and outcome != "lookup-failed":
                why = f"answered {key}, expected {self.expected[name]}"
            else:
                why = None if kind == "ok" else detail(status, answer)
            self.record(name, kind, started, why)

    def record(self, name, kind, started, detail):
        self.latencies.append((name, time.monotonic() - started))
        self.stats.add(name, kind, detail)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.kinds, self.by_fixture, self.extra, self.samples = {}, {}, {}, {}

    def add(self, name, kind, detail):
        with self.lock:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            per = self.by_fixture.setdefault(name, {})
            per[kind] = per.get(kind, 0) + 1
            if detail is not None and len(self.samples.setdefault(kind, [])) < 5:
                self.samples[kind].append(f"{time.strftime('%H:%M:%S')} {name}: {detail}")

    def count(self, what):
        with self.lock:
            self.extra[what] = self.extra.get(what, 0) + 1


def read_port(path):
    with open(path) as f:
        return int(f.read().strip())


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--expected-dir", required=True, help="tests/data/webhook/soak-expected")
    p.add_argument("--answer", action="append", help="NAME=PATH: check review's answer, then exit")
    p.add_argument("--write", action="store_true", help="with --answer: write the expected answers")
    p.add_argument("--port-file")
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--fixture", action="append", help="NAME=PATH")
    p.add_argument("--rate", type=float, default=50)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--reconnect", type=int, default=25)
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--fault-file")
    p.add_argument("--ready-file")
    p.add_argument("--out")
    args = p.parse_args()
    if args.answer:
        return check_answers(args)
    for needed in ("port_file", "ca", "cert", "key", "fixture", "fault_file", "ready_file", "out"):
        if getattr(args, needed) is None:
            p.error(f"--{needed.replace('_', '-')} is needed")

    context = ssl.create_default_context(cafile=args.ca)
    context.load_cert_chain(args.cert, args.key)
    fixtures, paths = [], {}
    for spec in args.fixture:
        name, path = spec.split("=", 1)
        paths[name] = path
        with open(path, "rb") as f:
            fixtures.append((name, f.read()))

    # The expected answers, from soak-expected/; the server, before any fault, must give
    # them.
    expected = {name: key_of(expected_answer(args.expected_dir, name)) for name, _ in fixtures}
    probe = Worker(args, context, fixtures, expected, 0, Stats())
    probe.connect()
    for name, body in fixtures:
        status, answer = probe.post(body)
        key, _ = answer_key(status, answer)
        if key != expected[name]:
            raise SystemExit(
                f"soak client: {name}: before any fault the server answers {detail(status, answer)} "
                f"{key}, expected {expected[name]}"
            )
    probe.conn.close()
    with open(args.ready_file, "w") as f:
        json.dump({n: json.loads(k) for n, k in expected.items()}, f)

    def reload(*_):
        # moto keeps no state across a restart: its volumes come back with new IDs, in
        # the same zones (soak.sh checks), so the answers expected stay the same.
        for i, (name, _) in enumerate(fixtures):
            with open(paths[name], "rb") as f:
                fixtures[i] = (name, f.read())

    signal.signal(signal.SIGHUP, reload)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stats = Stats()
    workers = [Worker(args, context, fixtures, expected, i, stats) for i in range(args.workers)]
    started = time.monotonic()
    for w in workers:
        w.start()
    while not stop.is_set():
        stop.wait(0.5)
    for w in workers:
        w.join(args.timeout + 5)
    elapsed = time.monotonic() - started
    latencies = [x for w in workers for _, x in w.latencies]
    # Reviews that need no lookup: what a cloud's faults must not slow down.
    local = [x for w in workers for n, x in w.latencies if not n.startswith("ebs-csi")]
    summary = {
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "rate": round(len(latencies) / elapsed, 1),
        "kinds": stats.kinds,
        "by_fixture": stats.by_fixture,
        "extra": stats.extra,
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "max_ms": round(max(latencies, default=0) * 1000, 1),
        "no_lookup_p50_ms": round(percentile(local, 50) * 1000, 2),
        "no_lookup_p99_ms": round(percentile(local, 99) * 1000, 2),
        "no_lookup_max_ms": round(max(local, default=0) * 1000, 1),
        "samples": stats.samples,
        "expected": {n: json.loads(k) for n, k in expected.items()},
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
