#!/usr/bin/env python3
"""A fake cloud instance metadata server, written from each provider's
documented API, for tests: AWS IMDSv2, GCE, Azure IMDS, OpenStack,
DigitalOcean and Hetzner Cloud. No packaged emulator exists for most of
them (moto covers part of AWS's, and the tests use moto for that part).

It serves one scenario file:
  {"provider": "aws", "tree": {"latest/meta-data/local-ipv4": "10.0.1.25", ...},
   "mode": "normal" | "token-refused" | "slow" | "server-error"}
Paths ending in "/" are listed from the tree's keys, as the AWS and GCE
services list directories. It enforces what the documentation requires:
AWS's IMDSv2 session token, GCE's `Metadata-Flavor: Google`, Azure's
`Metadata: true` header and a supported `api-version` (Azure IMDS,
"Versioning": a request without one, or with one the service does not
know, gets 400 with the newest versions listed; the load balancer
endpoint exists from 2020-10-01 on).

Mode "server-error" answers every request with HTTP 500, as a metadata
service does while failing.

usage: metadata_server.py SCENARIO.json  (prints the port it listens on)
It listens on 127.0.0.1, on a free port; METADATA_FAKE_ADDRESS and
METADATA_FAKE_PORT say otherwise (IPv6 addresses too: AWS's IPv6 IMDS
endpoint is [fd00:ec2::254]:80, given in a test's own network namespace).
"""
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

TOKEN = "fake-imdsv2-session-token"

# Azure IMDS's published API versions ("Supported API versions" in Azure's
# Instance Metadata Service documentation). The load balancer endpoint was
# added in 2020-10-01 and answers only that version and later ones.
AZURE_VERSIONS = [
    "2017-03-01", "2017-04-02", "2017-08-01", "2017-10-01", "2017-12-01",
    "2018-02-01", "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11",
    "2019-04-30", "2019-06-01", "2019-06-04", "2019-08-01", "2019-08-15",
    "2019-11-01", "2020-06-01", "2020-07-15", "2020-09-01", "2020-10-01",
    "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01", "2021-05-01",
    "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13", "2023-07-01",
    "2023-11-15",
]
AZURE_FIRST_VERSION = {"metadata/loadbalancer": "2020-10-01"}


def azure_version_error(path, versions):
    """Azure's 400 for a missing or unsupported api-version, else None."""
    supported = [v for v in AZURE_VERSIONS if v >= AZURE_FIRST_VERSION.get(path, "")]
    newest = sorted(supported, reverse=True)[:3]
    if len(versions) != 1 or not versions[0]:
        error = "Bad request. api-version was not specified in the request"
    elif versions[0] not in supported:
        error = "Bad request. api-version is invalid or was not specified in the request"
    else:
        return None
    return json.dumps({
        "error": error + ". For more information refer to aka.ms/azureimds",
        "newest-versions": newest,
    })


def load(path):
    with open(path) as f:
        return json.load(f)


class Handler(BaseHTTPRequestHandler):
    scenario = {}

    def log_message(self, *args):  # keep test output quiet
        pass

    def reply(self, status, body="", content_type="text/plain"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def common(self):
        mode = self.scenario.get("mode", "normal")
        if mode == "slow":
            time.sleep(5)
        if mode == "server-error":
            self.reply(500, "internal error")
            return False
        return True

    def do_PUT(self):
        if not self.common():
            return
        provider = self.scenario["provider"]
        if provider != "aws" or urlsplit(self.path).path != "/latest/api/token":
            return self.reply(405 if provider == "aws" else 404, "not found")
        if self.scenario.get("mode") == "token-refused":
            return self.reply(403, "Forbidden")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self.reply(400, "Bad Request")
        return self.reply(200, TOKEN)

    def do_GET(self):
        if not self.common():
            return
        provider = self.scenario["provider"]
        url = urlsplit(self.path)
        path = url.path.lstrip("/")
        if provider == "aws":
            if not path.startswith("latest/"):
                return self.reply(404, "not found")
            if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                return self.reply(401, "Unauthorized")
        elif provider == "gce":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, "Missing Metadata-Flavor:Google header.")
            if not path.startswith("computeMetadata/v1/"):
                return self.reply(404, "not found")
        elif provider == "azure":
            if self.headers.get("Metadata") != "true":
                return self.reply(400, json.dumps({"error": "Bad request. Required metadata header not specified"}))
            versions = parse_qs(url.query, keep_blank_values=True).get("api-version", [])
            error = azure_version_error(path, versions)
            if error:
                return self.reply(400, error, "application/json")
        return self.serve_tree(path)

    def serve_tree(self, path):
        tree = self.scenario.get("tree", {})
        if path in tree:
            value = tree[path]
            if isinstance(value, (dict, list)):
                return self.reply(200, json.dumps(value), "application/json")
            return self.reply(200, str(value))
        if path == "" or path.endswith("/"):
            children = sorted({key[len(path):].split("/")[0] + ("/" if "/" in key[len(path):] else "")
                               for key in tree if key.startswith(path) and key != path})
            if children:
                return self.reply(200, "\n".join(children))
        return self.reply(404, "not found")


class Server(ThreadingHTTPServer):
    address_family = socket.AF_INET


class Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def main():
    Handler.scenario = load(sys.argv[1])
    address = os.environ.get("METADATA_FAKE_ADDRESS", "127.0.0.1")
    port = int(os.environ.get("METADATA_FAKE_PORT", "0"))
    server = (Server6 if ":" in address else Server)((address, port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
