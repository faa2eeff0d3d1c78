#!/usr/bin/env python3
"""`dtnkit send --file` of one large file into a local node: the payload through the socket against the payload
passed as a file descriptor (SendFd). docs/throughput.md, OS facilities.

For every repetition and every variant (BIN[:FLAGS], e.g. `old/dtnkit`, `new/dtnkit`, `new/dtnkit:--no-fd`), in
turn: a fresh node (store in --workdir, `durable` as asked), one `dtnkit send --file FILE --dst ipn:1.9 --quiet`
of --bytes bytes (the file is written once and read once beforehand, so it is in the page cache), and the wall time
of the send, its CPU seconds (user + system, from the child's rusage) and the node's CPU seconds during the send
(from /proc/PID/stat). Prints one row per variant: medians, and CPU-s/GB of each process.
"""

import argparse
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def one(binary, flags, path, size, work, durable):
    store = Path(work, "store")
    shutil.rmtree(store, ignore_errors=True)
    cfg = Path(work, "node.toml")
    cfg.write_text(f'node = 1\nbind = "127.0.0.1:{free_port()}"\n[store]\npath = "{store}"\n'
                   f"durable = {'true' if durable else 'false'}\nquota_bytes = {size * 2 + (1 << 30)}\n")
    node = subprocess.Popen([binary, "node", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=open(Path(work, "node.log"), "w"))
    sock = store / "app.sock"
    deadline = time.time() + 15
    while not sock.exists():
        if time.time() > deadline or node.poll() is not None:
            raise SystemExit(f"node did not start: {Path(work, 'node.log').read_text()}")
        time.sleep(0.05)
    try:
        cpu0 = proc_cpu(node.pid)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run([binary, "send", "--socket", str(sock), "--dst", "ipn:1.9", "--file", str(path),
                            "--quiet", *flags], capture_output=True, text=True)
        secs = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        node_cpu = proc_cpu(node.pid) - cpu0
        if r.returncode != 0:
            raise SystemExit(f"send failed: {r.stderr}")
        send_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return secs, send_cpu, node_cpu, r.stderr.strip().splitlines()
    finally:
        node.terminate()
        node.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="BIN or BIN:FLAG[,FLAG...]")
    ap.add_argument("--bytes", type=int, default=1_000_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--durable", action="store_true", help="durable store (default: volatile)")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sendfd-bench-", dir=args.workdir)
    try:
        path = Path(work, "payload.bin")
        block = os.urandom(1 << 20)
        with open(path, "wb") as f:
            left = args.bytes
            while left > 0:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass
        results = {v: [] for v in args.variants}
        for _ in range(args.reps):
            for v in args.variants:
                binary, _, flags = v.partition(":")
                flags = [x for x in flags.split(",") if x]
                results[v].append(one(binary, flags, path, args.bytes, work, args.durable))
        gb = args.bytes / 1e9
        print(f"{args.bytes} bytes, {'durable' if args.durable else 'volatile'} store, {args.reps} reps (medians)")
        print("| variant | send wall s | Gb/s | send CPU s/GB | node CPU s/GB | both CPU s/GB | send said |")
        print("|---|---|---|---|---|---|---|")
        for v, rows in results.items():
            med = lambda k: sorted(r[k] for r in rows)[len(rows) // 2]
            secs, tx, node = med(0), med(1), med(2)
            said = rows[-1][3][-1] if rows[-1][3] else ""
            print(f"| {v} | {secs:.2f} | {args.bytes * 8 / secs / 1e9:.2f} | {tx / gb:.2f} | {node / gb:.2f} | "
                  f"{(tx + node) / gb:.2f} | {said} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
