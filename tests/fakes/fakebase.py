"""What the scenario-driven fakes in this directory share (standard library only).

Each fake (gcp_server.py, azure_server.py, openstack_server.py) is run as
`python3 tests/fakes/NAME.py SCENARIO.json`, so this module, beside it, is on
its import path. It gives the fake:

- `LOCK`, the lock of the fake's shared state, and `REQUESTS`, its counters
  (`{"METHOD /path": count}` and any other key the fake counts);
- `FakeHandler`, a quiet request handler with `reply` (JSON unless the body
  is a string), `count` and `counters` (the answer to `GET /__requests`);
- `serve`, which reads the scenario named on the command line into the
  handler, binds 127.0.0.1 on a free port, prints the port on its first line
  and serves until killed.
"""

import json
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
REQUESTS = Counter()


class FakeHandler(BaseHTTPRequestHandler):
    scenario = {}

    def log_message(self, *args):  # keep test output quiet
        pass

    def reply(self, status, body, content_type="application/json", headers=()):
        if not isinstance(body, str):
            body = json.dumps(body)
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def count(self, key):
        with LOCK:
            REQUESTS[key] += 1

    def counters(self):
        """Answers `GET /__requests`: the counters so far (not counted)."""
        with LOCK:
            return self.reply(200, dict(REQUESTS))


class Server(ThreadingHTTPServer):
    daemon_threads = True


def serve(handler, server_class=Server, prepare=None):
    """Serves `handler` with the scenario of `sys.argv[1]` until killed;
    `prepare(server)` runs before the port is printed."""
    with open(sys.argv[1]) as f:
        handler.scenario = json.load(f)
    server = server_class(("127.0.0.1", 0), handler)
    if prepare is not None:
        prepare(server)
    print(server.server_address[1], flush=True)
    server.serve_forever()
