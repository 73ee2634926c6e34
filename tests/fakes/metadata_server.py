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
`Metadata: true` and `api-version`.

usage: metadata_server.py SCENARIO.json  (prints the port it listens on)
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

TOKEN = "fake-imdsv2-session-token"


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
            if "api-version" not in parse_qs(url.query):
                return self.reply(400, json.dumps({"error": "Bad request. api-version was not specified"}))
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


def main():
    Handler.scenario = load(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
