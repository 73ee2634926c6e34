#!/usr/bin/env python3
"""Exec benchmark for kubelet exec plugins: spawn a command N times with a
request on stdin, as kubelet does, and report wall time (median, p99) and
peak resident memory (through /usr/bin/time). Several commands are measured in one run,
interleaved, so that they share the machine's state.

usage: exec_bench.py --runs N --stdin FILE --name NAME -- CMD ARGS... [--name NAME -- CMD ...]
"""
import argparse
import json
import os
import statistics
import sys
import time


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--stdin", required=True, help="request file fed to every run")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    own, _, rest = _split(argv)
    args = parser.parse_args(own)
    commands = []
    while rest:
        if rest[0] != "--name" or len(rest) < 3 or rest[2] != "--":
            parser.error("each command is: --name NAME -- CMD ARGS...")
        name, rest = rest[1], rest[3:]
        end = next((i for i, a in enumerate(rest) if a == "--name"), len(rest))
        commands.append((name, rest[:end]))
        rest = rest[end:]
    if not commands:
        parser.error("give at least one command")
    return args, commands


def _split(argv):
    i = next((i for i, a in enumerate(argv) if a == "--name"), len(argv))
    return argv[:i], None, argv[i:]


def peak_rss_mib(cmd, stdin_path, runs=20):
    """Peak resident memory through /usr/bin/time, whose own small footprint
    is the floor: a child spawned from Python would count Python's pages."""
    import subprocess
    peak = 0
    for _ in range(runs):
        with open(stdin_path, "rb") as stdin:
            out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdin=stdin,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
        peak = max(peak, int(out.stderr.decode().strip().splitlines()[-1]))
    return peak / 1024


def run_once(cmd, stdin_path):
    with open(stdin_path, "rb") as stdin, open(os.devnull, "wb") as devnull:
        start = time.perf_counter_ns()
        pid = os.posix_spawn(cmd[0], cmd, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, stdin.fileno(), 0),
            (os.POSIX_SPAWN_DUP2, devnull.fileno(), 1),
        ])
        _, status = os.waitpid(pid, 0)
        elapsed = time.perf_counter_ns() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed with status {os.waitstatus_to_exitcode(status)}")
    return elapsed / 1e6  # ms


def main():
    args, commands = parse(sys.argv[1:])
    times = {name: [] for name, _ in commands}
    for i in range(args.warmup + args.runs):
        for name, cmd in commands:
            ms = run_once(cmd, args.stdin)
            if i >= args.warmup:
                times[name].append(ms)
    results = []
    for name, cmd in commands:
        samples = sorted(times[name])
        results.append({
            "name": name,
            "runs": len(samples),
            "median_ms": round(statistics.median(samples), 3),
            "p99_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 3),
            "peak_rss_mib": round(peak_rss_mib(cmd, args.stdin), 2),
            "binary_bytes": os.path.getsize(cmd[0]),
        })
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'command':<34} {'runs':>5} {'median ms':>10} {'p99 ms':>8} {'peak RSS MiB':>13} {'binary':>12}")
    for r in results:
        print(f"{r['name']:<34} {r['runs']:>5} {r['median_ms']:>10.3f} {r['p99_ms']:>8.3f} {r['peak_rss_mib']:>13.2f} {r['binary_bytes']:>12,}")
    base = results[0]
    for r in results[1:]:
        print(f"{base['name']} / {r['name']}: wall {base['median_ms'] / r['median_ms']:.2f}x, "
              f"memory {base['peak_rss_mib'] / r['peak_rss_mib']:.2f}x")


if __name__ == "__main__":
    main()
