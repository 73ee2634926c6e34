#!/usr/bin/env python3
"""Memory of `pv-topology-webhook serve` under clients that hold resources (issue 9,
items 1 and 3), each attack against a fresh server on 127.0.0.1:

  h1-bodies     20 TLS HTTP/1.1 connections each POST /mutate with Content-Length
                7,000,000, send 6.5 MB and stop (the issue's); -3mb: 3,000,000
                declared (under the body limit), 2.9 MB sent;
  h2-streams    one TLS HTTP/2 connection with 20 streams of 5 MB each, sent as
                fast as flow control allows, then held (the issue's); -3mb: streams
                under the body limit, on 1 and on 4 connections; -500conns: 500
                connections x 32 streams x 3,000,000 declared (the re-test's F1:
                what the HTTP/2 windows of many connections hold);
  h1-heads      1000 TLS HTTP/1.1 connections each sending 15 KiB of a request head
                that never ends;
  h2-idle       3000 TLS HTTP/2 connections that send the preface and nothing more,
                held 75 s (past the 60 s idle timeout);
  admin-partial 1000 plain connections to --metrics-listen with half a request head;
  combined      h1-bodies-3mb, h2-streams-3mb-4conns and 600 of h1-heads at once;
Each ends with SIGTERM (--shutdown-delay 0s): how long until the process exits.

For each: connections opened (TLS handshake done; for admin-partial, TCP connected, which
the kernel's backlog does without the server), the most connections the server held at
once (its open sockets, sampled every 0.5 s), connections still open at the end of the
hold, bytes sent (taken by the kernel: written minus still buffered), the server's peak resident memory (VmHWM from
/proc/PID/status) and its RSS at the end. Loopback only; stdlib only (asyncio, ssl;
HTTP/2 frames are written by hand).

Usage: bench/webhook-attacks.py [--bin PATH] [--attacks a,b] [--hold SECONDS]
       [--label TEXT]      (build first: cargo build --release -p pv-topology-webhook)
"""

import argparse
import asyncio
import logging
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024 * 1024


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


class Server:
    """A `serve` process with a fresh certificate and its two ports."""

    def __init__(self, binary, workdir):
        self.binary = binary
        self.port, self.metrics_port = free_port(), free_port()
        certs = os.path.join(workdir, "certs")
        subprocess.run(
            [binary, "certs", "--service", "bench", "--namespace", "bench", "--out-dir", certs,
             "--extra-san", "127.0.0.1"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proc = subprocess.Popen(
            [binary, "serve", "--shutdown-delay", "0s",
             "--tls-cert-file", os.path.join(certs, "tls.crt"),
             "--tls-key-file", os.path.join(certs, "tls.key"),
             "--listen", f"127.0.0.1:{self.port}",
             "--metrics-listen", f"127.0.0.1:{self.metrics_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not self.ready():
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("server never became ready")
            time.sleep(0.05)
        self.baseline_kib = status_kib(self.proc.pid, "VmRSS")
        # The listeners and the runtime's own (signal) sockets, once the probe's is closed.
        time.sleep(0.5)
        self.own_sockets = self.sockets()

    def ready(self):
        try:
            with socket.create_connection(("127.0.0.1", self.metrics_port), timeout=1) as s:
                s.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
                return s.recv(64).split(b" ")[1:2] == [b"200"]
        except OSError:
            return False

    def peak_kib(self):
        return status_kib(self.proc.pid, "VmHWM")

    def rss_kib(self):
        return status_kib(self.proc.pid, "VmRSS")

    def sockets(self):
        """Sockets the server holds open."""
        fd_dir = f"/proc/{self.proc.pid}/fd"
        count = 0
        for fd in os.listdir(fd_dir):
            try:
                count += os.readlink(os.path.join(fd_dir, fd)).startswith("socket:")
            except OSError:
                pass
        return count

    async def sample_sockets(self, into):
        while True:
            into[0] = max(into[0], self.sockets() - self.own_sockets)
            await asyncio.sleep(0.5)

    def stop(self):
        """SIGTERM; seconds until exit (None if killed after 60 s)."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
            return time.monotonic() - started
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def tls_context(alpn):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # loopback, our own throwaway certificate
    ctx.set_alpn_protocols([alpn])
    return ctx


class Conn:
    """One attacking connection: its streams, bytes the server took, and when it closed."""

    def __init__(self):
        self.reader = self.writer = None
        self.sent = 0
        self.closed = None
        self.opened = False

    async def open(self, port, ctx, timeout):
        try:
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=ctx, limit=1 << 20), timeout)
            self.opened = True
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            self.closed = time.monotonic()

    def taken(self):
        """Bytes handed to the kernel (written minus what still waits in the buffer)."""
        if self.writer is None:
            return 0
        return self.sent - self.writer.transport.get_write_buffer_size()

    async def watch_close(self):
        """Reads (and drops) until EOF; records when the server closed."""
        try:
            while await self.reader.read(65536):
                pass
        except (OSError, ssl.SSLError):
            pass
        if self.closed is None:
            self.closed = time.monotonic()

    def close(self):
        if self.writer is not None:
            self.writer.transport.abort()


async def write_some(conn, data, chunk=65536):
    """Writes `data`, giving up when the server stops reading (2 s without progress)."""
    for i in range(0, len(data), chunk):
        if conn.closed is not None:
            return
        conn.writer.write(data[i:i + chunk])
        conn.sent += len(data[i:i + chunk])
        try:
            await asyncio.wait_for(conn.writer.drain(), 2)
        except (asyncio.TimeoutError, OSError, ssl.SSLError):
            return


async def h1_bodies(server, conns, declared, send, hold):
    ctx = tls_context("http/1.1")
    head = (f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n").encode()
    body = b" " * send
    all_conns = [Conn() for _ in range(conns)]
    await asyncio.gather(*(c.open(server.port, ctx, 30) for c in all_conns))
    watchers = [asyncio.ensure_future(c.watch_close()) for c in all_conns if c.opened]

    async def attack(c):
        c.writer.write(head)
        await write_some(c, body)

    await asyncio.gather(*(attack(c) for c in all_conns if c.opened))
    await asyncio.sleep(hold)
    return all_conns, watchers


async def h1_heads(server, conns, head_bytes, hold):
    """Request heads that never end: a long header value, no blank line."""
    ctx = tls_context("http/1.1")
    head = b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"a" * head_bytes
    all_conns = [Conn() for _ in range(conns)]

    async def attack(c):
        await c.open(server.port, ctx, hold)
        if c.opened:
            await write_some(c, head)
            await c.watch_close()

    tasks = [asyncio.ensure_future(attack(c)) for c in all_conns]
    await asyncio.sleep(hold)
    return all_conns, tasks


# HTTP/2 by hand: enough framing to open streams, honour flow control and answer pings.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    name, value = name.encode(), value.encode()
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def post_headers(stream, length):
    block = b"".join(hpack_literal(n, v) for n, v in [
        (":method", "POST"), (":scheme", "https"), (":path", "/mutate"),
        (":authority", "localhost"), ("content-type", "application/json"),
        ("content-length", str(length))])
    return frame(0x1, 0x4, stream, block)


class H2:
    """An HTTP/2 connection that sends request bodies as fast as the server's windows allow."""

    def __init__(self, conn):
        self.conn = conn
        self.conn_window = 65535
        self.initial = 65535
        self.windows = {}
        self.done = set()
        self.changed = asyncio.Event()

    async def read_frames(self):
        r = self.conn.reader
        try:
            while True:
                head = await r.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = await r.readexactly(length)
                if kind == 0x4 and not flags & 1:  # SETTINGS
                    for i in range(0, len(payload), 6):
                        ident, value = struct.unpack(">HI", payload[i:i + 6])
                        if ident == 0x4:
                            for s in self.windows:
                                self.windows[s] += value - self.initial
                            self.initial = value
                    self.conn.writer.write(frame(0x4, 1, 0))
                elif kind == 0x6 and not flags & 1:  # PING: answer, as a live client does
                    self.conn.writer.write(frame(0x6, 1, 0, payload))
                elif kind == 0x8:  # WINDOW_UPDATE
                    inc = int.from_bytes(payload, "big") & 0x7FFFFFFF
                    if stream == 0:
                        self.conn_window += inc
                    elif stream in self.windows:
                        self.windows[stream] += inc
                elif kind in (0x1, 0x3):  # a response or RST_STREAM: the stream is over
                    self.done.add(stream)
                elif kind == 0x7:  # GOAWAY
                    self.done.update(self.windows)
                self.changed.set()
        except (asyncio.IncompleteReadError, OSError, ssl.SSLError):
            pass
        if self.conn.closed is None:
            self.conn.closed = time.monotonic()
        self.changed.set()

    async def send_streams(self, streams, length, budget_seconds):
        w = self.conn.writer
        ids = [1 + 2 * i for i in range(streams)]
        left = {}
        for s in ids:
            w.write(post_headers(s, length))
            self.windows[s] = self.initial
            left[s] = length
        deadline = time.monotonic() + budget_seconds
        while time.monotonic() < deadline and self.conn.closed is None:
            progressed = False
            for s in ids:
                if s in self.done or left[s] == 0:
                    continue
                n = min(16384, left[s], self.windows[s], self.conn_window)
                if n <= 0:
                    continue
                w.write(frame(0x0, 0, s, b" " * n))
                self.windows[s] -= n
                self.conn_window -= n
                left[s] -= n
                self.conn.sent += n
                progressed = True
            try:
                await asyncio.wait_for(w.drain(), 1)
            except asyncio.TimeoutError:
                continue
            except (OSError, ssl.SSLError):
                break
            if all(s in self.done or left[s] == 0 for s in ids):
                break
            if not progressed:
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), 1)
                except asyncio.TimeoutError:
                    pass


async def h2_streams(server, conns, streams, length, hold):
    ctx = tls_context("h2")
    all_conns = [Conn() for _ in range(conns)]
    await asyncio.gather(*(c.open(server.port, ctx, 30) for c in all_conns))
    h2s = [H2(c) for c in all_conns if c.opened]
    for h in h2s:  # the preface first: the reader may answer the server's SETTINGS at once
        h.conn.writer.write(PREFACE + frame(0x4, 0, 0))
    readers = [asyncio.ensure_future(h.read_frames()) for h in h2s]
    await asyncio.gather(*(h.send_streams(streams, length, 30) for h in h2s))
    await asyncio.sleep(hold)
    return all_conns, readers


async def h2_idle(server, conns, hold):
    ctx = tls_context("h2")
    all_conns = [Conn() for _ in range(conns)]

    async def hello(c):
        # A handshake may wait for a free slot: give it the whole hold.
        await c.open(server.port, ctx, hold)
        if c.opened:
            c.writer.write(PREFACE + frame(0x4, 0, 0))
            c.sent += len(PREFACE) + 9
            await H2(c).read_frames()

    tasks = [asyncio.ensure_future(hello(c)) for c in all_conns]
    await asyncio.sleep(hold)
    return all_conns, tasks


async def admin_partial(server, conns, hold):
    all_conns = [Conn() for _ in range(conns)]

    async def open_plain(c):
        try:
            c.reader, c.writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", server.metrics_port), 10)
            c.opened = True
            c.writer.write(b"GET /metrics HTTP/1.1\r\nHost: bench")
            c.sent += 32
        except (OSError, asyncio.TimeoutError):
            c.closed = time.monotonic()

    await asyncio.gather(*(open_plain(c) for c in all_conns))
    watchers = [asyncio.ensure_future(c.watch_close()) for c in all_conns if c.opened]
    await asyncio.sleep(hold)
    return all_conns, watchers


async def combined(server, hold):
    """Bodies on both protocols while heads take the remaining connection slots."""
    results = await asyncio.gather(
        h1_bodies(server, 20, 3_000_000, 2_900_000, hold),
        h2_streams(server, 4, 20, 3_000_000, hold),
        h1_heads(server, 600, 15 * 1024, hold))
    return [c for r in results for c in r[0]], [t for r in results for t in r[1]]


ATTACKS = {
    "h1-bodies": lambda s, a: h1_bodies(s, 20, 7_000_000, 6_500_000, a.hold),
    "h1-bodies-3mb": lambda s, a: h1_bodies(s, 20, 3_000_000, 2_900_000, a.hold),
    "h2-streams": lambda s, a: h2_streams(s, 1, 20, 5_000_000, a.hold),
    "h2-streams-3mb": lambda s, a: h2_streams(s, 1, 20, 3_000_000, a.hold),
    "h2-streams-3mb-4conns": lambda s, a: h2_streams(s, 4, 20, 3_000_000, a.hold),
    "h2-streams-3mb-500conns": lambda s, a: h2_streams(s, 500, 32, 3_000_000, a.hold),
    "h1-heads": lambda s, a: h1_heads(s, 1000, 15 * 1024, a.hold),
    "h2-idle": lambda s, a: h2_idle(s, 3000, a.idle_hold),
    "admin-partial": lambda s, a: admin_partial(s, 1000, a.hold),
    "combined": lambda s, a: combined(s, a.hold),
}


def run(binary, name, args):
    with tempfile.TemporaryDirectory() as workdir:
        server = Server(binary, workdir)
        started = time.monotonic()
        loop = asyncio.get_event_loop()
        most_sockets = [0]
        sampler = loop.create_task(server.sample_sockets(most_sockets))
        conns, tasks = loop.run_until_complete(ATTACKS[name](server, args))
        sampler.cancel()
        held = time.monotonic() - started
        opened = sum(c.opened for c in conns)
        still_open = sum(c.opened and c.closed is None for c in conns)
        sent = sum(c.taken() for c in conns)
        peak, rss = server.peak_kib(), server.rss_kib()
        stop = server.stop()
        for c in conns:
            c.close()
        for t in tasks:
            t.cancel()
        loop.run_until_complete(asyncio.sleep(0.1))
        return {
            "attack": name, "opened": opened, "most_sockets": most_sockets[0], "open_at_end": still_open, "held_s": held,
            "sent": sent, "baseline": server.baseline_kib, "peak": peak, "rss": rss, "stop_s": stop,
        }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "target/release/pv-topology-webhook"))
    p.add_argument("--attacks", default=",".join(ATTACKS))
    p.add_argument("--hold", type=float, default=20, help="seconds to hold after sending (body attacks, admin)")
    p.add_argument("--idle-hold", type=float, default=75, help="seconds to hold idle HTTP/2 connections")
    p.add_argument("--label", default="")
    args = p.parse_args()
    asyncio.set_event_loop(asyncio.new_event_loop())
    # Writes to connections the server closed are the expected outcome, not news.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    load = os.getloadavg()
    print(f"# webhook-attacks {args.label}: {args.bin}; {os.cpu_count()} cores; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| attack | connections opened | most served at once | open at end | held | bytes sent | baseline RSS | peak RSS (VmHWM) | RSS at end | exit after SIGTERM |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.attacks.split(","):
        r = run(args.bin, name, args)
        stop = "killed after 60 s" if r["stop_s"] is None else f"{r['stop_s']:.1f} s"
        print(f"| {r['attack']} | {r['opened']} | {r['most_sockets']} | {r['open_at_end']} | {r['held_s']:.0f} s | "
              f"{r['sent'] / 1e6:,.1f} MB | {r['baseline'] / 1024:.1f} MiB | "
              f"**{r['peak'] / 1024:.1f} MiB** | {r['rss'] / 1024:.1f} MiB | {stop} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
