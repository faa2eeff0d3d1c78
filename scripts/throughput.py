#!/usr/bin/env python3
"""End-to-end throughput of dtnkit against the machine's own ceiling, measured in one run (issue 9).

Called by scripts/bench.sh (which builds the release binary and installs iperf3). For every point it runs the
ceiling (iperf3 at the same datagram size, or TCP) and the dtnkit transfer back to back, REPS times, and reports
min / median / max, the ratio of the medians, node CPU seconds per GB and the peak RSS of each node.

Every point runs with both store modes (--store both, the default):
  durable   the node default: every commit is fsynced before anything is acknowledged. Both nodes write each
            bundle once to the same disk, so the durable ceiling is min(network ceiling, disk / 2), where disk is
            this machine's sequential write+fsync rate, measured next to the run (--disk-mb rewritten in 8 MiB
            writes, each followed by fdatasync, in the directory the stores live in).
  volatile  the same store without fsync (`durable = false`): what the stack costs without the disk.
The ratio column is dtnkit / the ceiling that applies to the mode.

Memory check (--rss-bytes, default 5 GB, 0 skips it): one transfer of that size with 5 MB bundles over LTP
(8192-byte segments) and over TCPCL, durable, reporting each node's peak RSS (issue 9: under 200 MB).

Points:
  ltp    BP over LTP between two nodes on loopback: red sessions, no emulator, no rate limit, for every segment
         size in --segment-sizes and every bundle size in --ltp-bundle-sizes; ceiling = iperf3 UDP at -l SEGMENT.
  tcpcl  BP over TCPCLv4 between two nodes on loopback for every bundle size in --tcpcl-bundle-sizes;
         ceiling = iperf3 TCP.
  stcp   BP over STCP (ION's and HDTN's simple TCP: a length before each bundle, no acknowledgment) for every
         bundle size in --stcp-bundle-sizes; ceiling = iperf3 TCP. `--only tcp` runs the tcpcl and stcp points
         alone, side by side.
  relay  A -> B -> C (B stores and forwards; static routes) next to the direct pair A -> C, run back to back in
         each repetition, for every CLA:SEGMENT:BUNDLE in --relay-points: goodput of both, their ratio, the relay's
         spread, and the middle node's peak RSS and CPU per GB (OUT/relay.csv, OUT/relay.md).

Large bundles (--only large; not part of the default run, which would become hours long): bundles beyond the
64 MiB frame limit are streamed by `dtnkit send --size` and stored as fragments of the node's [bp]
max_fragment_bytes (16 MiB); the receiving node delivers an ADU it does not reassemble fragment by fragment and
`dtnkit recv --count` counts it once, when all its bytes arrived (docs/node.md). Rows:
  matrix  TCPCL with every bundle size in --large-tcpcl-bundle-sizes (1 MB, 50 MB, 1 GB) and LTP with
          --large-segment-byte segments (8192) and every size in --large-ltp-bundle-sizes (500 kB, 50 MB, 1 GB),
          --large-bytes per run (2 GB), next to the network ceiling as above;
  single  one bundle of --single-bytes (4 GiB; 0 skips) per CLA in --single-clas, whose SHA-256 is checked against
          the generator's (same bytes as `dtnkit send --size`): `dtnkit recv --out-dir` writes the ADU into
          --sha-dir (/dev/shm) and it is hashed after the timing (`recv --hash` hashes in order and holds at most
          256 MiB of fragments arriving ahead, which LTP's parallel sessions exceed with GB ADUs).
  Every row reports goodput, node CPU seconds per GB for each node and per thread, and each node's peak RSS
  (VmHWM), the memory target being 200 MB per node whatever the bundle size (OUT/large.csv, OUT/large.md).
  Stores of these rows get a quota of the run's bytes + 1 GiB + one bundle (the default 1 GiB would refuse a
  4 GiB ADU), and LTP spans aggregate at most 16 MiB (one fragment) per block.

Every point also records the CPU seconds per GB of each node thread (from /proc/PID/task/*/stat), summarised in
summary.md.

Outputs: OUT/throughput.csv (one row per run), OUT/summary.csv and OUT/summary.md (one row per point).
"""

import argparse
import csv
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port(kind=socket.SOCK_DGRAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_seconds(pid):
    """User + system CPU seconds of a live process (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def disk_write_mbps(args):
    """Sequential overwrite rate of the disk the stores use, with fdatasync after every 8 MiB (Mbit/s).

    The file is written once before timing, so the timed pass rewrites allocated blocks, as a store that reuses its
    space does (first writes to a fresh file also pay the file system's block allocation and journal)."""
    chunk = os.urandom(1 << 20) * 8
    total = max(1, args.disk_mb // 8)
    fd, path = tempfile.mkstemp(prefix="dtnkit-disk-", dir=args.workdir)
    try:
        for _ in range(total):
            os.write(fd, chunk)
        os.fsync(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        t0 = time.monotonic()
        for _ in range(total):
            os.write(fd, chunk)
            os.fdatasync(fd)
        elapsed = time.monotonic() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return total * len(chunk) * 8 / elapsed / 1e6


def run_iperf(args, tcp, length):
    """Receiver-side goodput in Mbit/s of one iperf3 run (UDP: payload delivered, i.e. sent minus lost), and the CPU
    seconds both iperf3 processes spent per GB delivered (user + system, iperf3's own `cpu_utilization_percent` of
    the client and the server over the run): what moving the bytes through the kernel costs on this machine with no
    protocol, store or application work, the floor dtnkit's CPU s/GB (both nodes) is compared with."""
    port = free_port(socket.SOCK_STREAM)
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(args.iperf_seconds), "-J"]
        if not tcp:
            cmd += ["-u", "-l", str(length), "-b", "0"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.iperf_seconds + 30)
        j = json.loads(out.stdout)
        if "error" in j:
            raise RuntimeError(f"iperf3: {j['error']}")
        end = j["end"]
        cpu = end.get("cpu_utilization_percent", {})
        cores = (cpu.get("host_total", float("nan")) + cpu.get("remote_total", float("nan"))) / 100
        if tcp:
            s = end["sum_received"]
            delivered = s["bytes"]
            mbps = s["bits_per_second"] / 1e6
        else:
            s = end["sum"]
            delivered = s["bytes"] * (1 - s["lost_percent"] / 100)
            mbps = s["bits_per_second"] * (1 - s["lost_percent"] / 100) / 1e6
        cpu_per_gb = cores * s["seconds"] / (delivered / 1e9) if delivered > 0 else float("nan")
        return mbps, cpu_per_gb
    finally:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


class NodeChain:
    """`dtnkit node` processes on loopback in a line, node 1 -> 2 -> ... -> N, neighbours joined by one LTP span or
    one TCPCL connection; node 1 reaches node N through static routes (N = 2: the direct pair)."""

    def __init__(self, args, work, cla, segment, bundle, durable, nodes=2, quota=None):
        self.args, self.work, self.procs, self.nodes = args, work, [], nodes
        ports = [free_port() for _ in range(nodes)]
        tcp_ports = [free_port(socket.SOCK_STREAM) for _ in range(nodes)]
        for n in range(1, nodes + 1):
            lines = [
                f"node = {n}",
                f'bind = "127.0.0.1:{ports[n - 1]}"',
                "[store]",
                f'path = "{work}/s{n}"',
                f"durable = {'true' if durable else 'false'}",
            ]
            if quota:
                lines.append(f"quota_bytes = {quota}")
            if args.store_extra:
                lines.append(args.store_extra.replace("\\n", "\n"))
            neighbours = [p for p in (n - 1, n + 1) if 1 <= p <= nodes]
            if cla == "ltp":
                for peer in neighbours:
                    lines += [
                        "[[span]]",
                        f"peer = {peer}",
                        f'address = "127.0.0.1:{ports[peer - 1]}"',
                        f"max_segment_size = {segment}",
                        "max_sessions = 64",
                        # One block aggregates at most 16 MiB, a fragment of a streamed ADU (the
                        # node's [bp] max_fragment_bytes): waiting for a GB of bundles helps nothing.
                        f"aggregation_bytes = {min(bundle, 16 << 20)}",
                        "aggregation_ms = 1",
                        "rto_ms = 500",
                    ]
                    if args.ltp_auth:
                        # RFC 5327 HMAC-SHA1-80 on every span, one shared key (docs/node.md).
                        key = Path(work, "ltp-auth.key")
                        key.write_text("5a" * 20 + "\n")
                        lines += ['auth_suite = "hmac-sha1-80"', f'auth_key_file = "{key}"']
            elif cla == "stcp":
                lines += stcp_config(n, nodes, tcp_ports)
            else:
                lines += tcpcl_config(n, nodes, tcp_ports)
            # Towards the last node through the next one, and back through the previous one.
            if n < nodes - 1:
                lines += ["[[route]]", f"dest = {nodes}", f"via = {n + 1}"]
            if n > 2:
                lines += ["[[route]]", "dest = 1", f"via = {n - 1}"]
            if args.node_extra:
                lines.append(args.node_extra.replace("\\n", "\n"))
            Path(work, f"n{n}.toml").write_text("\n".join(lines) + "\n")
        for n in range(1, nodes + 1):
            self.procs.append(subprocess.Popen([args.bin, "node", "--config", f"{work}/n{n}.toml"],
                                               stdout=subprocess.DEVNULL,
                                               stderr=open(f"{work}/n{n}.log", "w")))
        deadline = time.time() + 15
        while not all(Path(work, f"s{n}", "app.sock").exists() for n in range(1, nodes + 1)):
            if time.time() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"nodes did not start; see the n*.log files in {work}")
            time.sleep(0.05)

    def stop(self):
        """Stops every node; returns per node (CPU seconds, peak RSS MB, {thread name: CPU seconds})."""
        stats = []
        for p in self.procs:
            try:
                total, threads = proc_cpu_seconds(p.pid), thread_cpu_seconds(p.pid)
                # Threads that already ended (an application connection's reader and writer once its
                # client left) are in the process's total but no longer listed.
                threads["(ended threads)"] = max(0.0, total - sum(threads.values()))
                stats.append((total, proc_peak_rss_mb(p.pid), threads))
            except (OSError, IndexError, ValueError):
                stats.append((float("nan"), float("nan"), {}))
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        return stats


def thread_cpu_seconds(pid):
    """CPU seconds (user + system) of a live process's threads, summed by thread name with digits dropped
    (`app-conn-3` and `app-conn-4` count as `app-conn-`)."""
    shares = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        name = head.split("(", 1)[1].rstrip("0123456789")
        fields = tail.split()
        shares[name] = shares.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return shares


def tcpcl_config(n, nodes, tcp_ports):
    """Node configuration lines for the TCPCLv4 neighbours of node n in a line of nodes (docs/node.md, TCPCL):
    each node connects to the next one and accepts the previous one's session, answering over it."""
    lines = ["[tcpcl]", f'listen = "127.0.0.1:{tcp_ports[n - 1]}"']
    if n > 1:
        lines += ["[[tcp_peer]]", f"peer = {n - 1}"]
    if n < nodes:
        lines += ["[[tcp_peer]]", f"peer = {n + 1}", f'address = "127.0.0.1:{tcp_ports[n]}"']
    return lines


def stcp_config(n, nodes, tcp_ports):
    """Node configuration lines for the STCP neighbours of node n in a line of nodes (docs/stcp.md): STCP
    connections carry bundles one way, so each node listens and connects to both of its neighbours."""
    lines = ["[stcp]", f'listen = "127.0.0.1:{tcp_ports[n - 1]}"']
    for peer in (n - 1, n + 1):
        if 1 <= peer <= nodes:
            lines += ["[[stcp_peer]]", f"peer = {peer}", f'address = "127.0.0.1:{tcp_ports[peer - 1]}"']
    return lines


def generated_sha256(index, size):
    """SHA-256 of `dtnkit send --size SIZE`'s payload number `index` (cmd::send::generated_payload: `dtnkit:I:`,
    then a 4 KiB block of letters from an xorshift seeded by the index, repeated), computed piecewise."""
    mask = (1 << 64) - 1
    x = ((index * 0x9E3779B97F4A7C15) & mask) | 1
    block = bytearray()
    for _ in range(4096 // 8):
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        block += bytes(ord("a") + ((x >> (8 * k)) & 0xFF) % 26 for k in range(8))
    header = f"dtnkit:{index}:".encode()[:size]
    h = hashlib.sha256(header)
    left = size - len(header)
    big = bytes(block) * 256  # 1 MiB, a whole number of blocks
    while left >= len(big):
        h.update(big)
        left -= len(big)
    h.update(big[:left])
    return h.hexdigest()


def node_status(args, work, node):
    """Node `node`'s `dtnkit status --json` as a dict; None if it cannot be had."""
    try:
        out = subprocess.run([args.bin, "status", "--socket", f"{work}/s{node}/app.sock", "--json"], check=True,
                             capture_output=True, text=True, timeout=10).stdout
        return json.loads(out)
    except (subprocess.SubprocessError, OSError, ValueError):
        return None


def ltp_resent_pct(args, work):
    """Share of node 1's LTP data segments that were retransmissions (%), from its status; nan if unknown."""
    try:
        spans = node_status(args, work, 1)["ltp"]["spans"].values()
        sent = sum(s["data_segments_sent"] for s in spans)
        return 100.0 * sum(s["data_segments_retransmitted"] for s in spans) / sent if sent else float("nan")
    except (KeyError, TypeError):
        return float("nan")


def hot_hit_pct(args, work, node):
    """Share of node `node`'s reads of stored bundles' bytes that its store's hot cache served (%), from its status;
    nan if unknown or nothing was read. A miss is a read back from the store's files (a copy and a CRC pass)."""
    try:
        st = node_status(args, work, node)["store"]
        reads = st["hot_cache_hits"] + st["hot_cache_misses"]
        return 100.0 * st["hot_cache_hits"] / reads if reads else float("nan")
    except (KeyError, TypeError):
        return float("nan")


def run_dtnkit(args, cla, segment, bundle, durable, total_bytes, nodes=2, detail=False, quota=None,
               check_sha=False, resent=None, hot=None):
    """One transfer of total_bytes from node 1 to node `nodes`; returns (goodput Mbit/s, CPU s per GB (sum of all
    nodes), peak RSS MB of the sender, of the receiver), and with detail=True also the per-node stats of
    NodeChain.stop. check_sha: the receiver writes every ADU into --sha-dir and each must have the generator's
    SHA-256 (RuntimeError otherwise); quota: the stores' quota_bytes; resent: a list that gets the share of LTP
    data segments node 1 sent again (%, ltp_resent_pct); hot: a list that gets the hot-cache hit shares of the
    sender and the receiver (%, hot_hit_pct)."""
    count = max(1, total_bytes // bundle)
    work = tempfile.mkdtemp(prefix="dtnkit-bench-", dir=args.workdir)
    chain, rx_dir = None, None
    try:
        chain = NodeChain(args, work, cla, segment, bundle, durable, nodes, quota)
        timeout = str(args.transfer_timeout)
        # With check_sha the receiver writes each ADU into a directory in memory (tmpfs: its final fsync is
        # free), hashed after the timing: `recv --hash` hashes in order and holds at most 256 MiB of fragments
        # that arrive ahead, which LTP's parallel sessions (and their retransmissions) exceed with GB ADUs.
        rx_dir = tempfile.mkdtemp(prefix="dtnkit-bench-rx-", dir=args.sha_dir) if check_sha else None
        recv = subprocess.Popen([args.bin, "recv", "--socket", f"{work}/s{nodes}/app.sock", "--endpoint",
                                 f"ipn:{nodes}.1", "--count", str(count), "--timeout", timeout]
                                + (["--out-dir", rx_dir] if check_sha else []),
                                stdout=subprocess.DEVNULL, stderr=open(f"{work}/recv.log", "w"))
        time.sleep(0.3)
        t0 = time.monotonic()
        subprocess.run([args.bin, "send", "--socket", f"{work}/s1/app.sock", "--dst", f"ipn:{nodes}.1",
                        "--size", str(bundle), "--count", str(count), "--quiet",
                        "--store-full-wait", str(args.transfer_timeout)],
                       check=True, stdout=subprocess.DEVNULL, stderr=open(f"{work}/send.log", "w"),
                       timeout=args.transfer_timeout)
        rc = recv.wait(timeout=args.transfer_timeout)
        elapsed = time.monotonic() - t0
        if rc != 0:
            raise RuntimeError(f"recv failed ({rc}): {Path(work, 'recv.log').read_text().strip()}")
        if resent is not None and cla == "ltp":
            resent.append(ltp_resent_pct(args, work))
        if hot is not None:
            hot.append((hot_hit_pct(args, work, 1), hot_hit_pct(args, work, nodes)))
        stats = chain.stop()
        chain = None
        if check_sha:
            got = set()
            for p in Path(rx_dir).iterdir():
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    while block := f.read(1 << 24):
                        h.update(block)
                got.add((p.stat().st_size, h.hexdigest()))
            for i in range(count):
                want = (bundle, generated_sha256(i, bundle))
                if want not in got:
                    raise RuntimeError(f"bundle {i}: no ADU of {want[0]} bytes with SHA-256 {want[1]} received; "
                                       f"got {sorted(got)}")
        gb = count * bundle / 1e9
        cpu = sum(s[0] for s in stats) / gb
        result = (count * bundle * 8 / elapsed / 1e6, cpu, stats[0][1], stats[-1][1])
        return result + (stats,) if detail else result
    finally:
        if chain:
            chain.stop()
        if rx_dir:
            shutil.rmtree(rx_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run_cfdp(args, cla, segment, file_segment, checksum, durable, total_bytes):
    """One CFDP class-2 put of total_bytes between two nodes (one PDU per bundle); returns goodput Mbit/s."""
    work = tempfile.mkdtemp(prefix="dtnkit-bench-cfdp-", dir=args.workdir)
    pair = None
    try:
        pair = NodeChain(args, work, cla, segment, file_segment + 64, durable)
        src = Path(work, "src.bin")
        with open(src, "wb") as f:
            block = os.urandom(1 << 20)
            left = total_bytes
            while left > 0:
                f.write(block[:min(left, len(block))])
                left -= len(block)
        timeout = args.transfer_timeout
        serve = subprocess.Popen([args.bin, "cfdp", "serve", "--root", f"{work}/rx", "--id", "2",
                                  "--node", f"{work}/s2/app.sock", "--count", "1", "--json"],
                                 stdout=open(f"{work}/serve.log", "w"), stderr=subprocess.STDOUT)
        time.sleep(0.3)
        t0 = time.monotonic()
        subprocess.run([args.bin, "cfdp", "put", str(src), "2:dst.bin", "--id", "1", "--node", f"{work}/s1/app.sock",
                        "--segment-size", str(file_segment), "--checksum", checksum, "--quiet", "--json",
                        "--timeout-s", str(timeout)],
                       check=True, stdout=open(f"{work}/put.log", "w"), stderr=subprocess.STDOUT, timeout=timeout + 10)
        elapsed = time.monotonic() - t0
        serve.wait(timeout=30)
        if Path(work, "rx", "dst.bin").stat().st_size != total_bytes:
            raise RuntimeError("cfdp: received file has the wrong size")
        return total_bytes * 8 / elapsed / 1e6
    finally:
        if pair:
            pair.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def cfdp_family(args, out):
    """CFDP class 2 over BP next to plain BP with bundles of the same size (PDU = bundle), per checksum."""
    rows = []
    f = open(out / "cfdp.csv", "w", newline="")
    w = csv.writer(f)
    w.writerow(["cla", "segment_bytes", "file_segment", "checksum", "rep", "bp_mbps", "cfdp_mbps"])
    clas = [(c, 8192 if c == "ltp" else 0) for c in args.cfdp_clas.split(",")]
    for cla, seg in clas:
        for checksum in args.cfdp_checksums.split(","):
            bps, cps = [], []
            for r in range(1, args.reps + 1):
                bundle = args.cfdp_segment + 16  # File Data PDU header + offset, the bundle's payload
                b, _, _, _ = run_dtnkit(args, cla, seg, bundle, args.cfdp_durable, args.cfdp_bytes)
                c = run_cfdp(args, cla, seg, args.cfdp_segment, checksum, args.cfdp_durable, args.cfdp_bytes)
                bps.append(b), cps.append(c)
                w.writerow([cla, seg, args.cfdp_segment, checksum, r, f"{b:.1f}", f"{c:.1f}"])
                f.flush()
                print(f"[cfdp] {cla} {checksum} rep {r}: BP {b:.0f} Mbit/s, CFDP {c:.0f} Mbit/s ({c / b:.2f})",
                      flush=True)
            rows.append((cla, seg, checksum, min(bps), statistics.median(bps), max(bps), min(cps),
                         statistics.median(cps), max(cps)))
    f.close()
    md = [f"CFDP class 2 over BP: {args.cfdp_bytes / 1e6:.0f} MB files, {args.cfdp_segment}-byte file segments "
          f"(one PDU per bundle), {'durable' if args.cfdp_durable else 'volatile'} stores, {args.reps} reps; "
          "plain BP sends bundles of the same size.", "",
          "| CLA | checksum | BP Mbit/s (min/med/max) | CFDP Mbit/s (min/med/max) | CFDP / BP |", "|---|---|---|---|---|"]
    for cla, seg, ck, b0, b1, b2, c0, c1, c2 in rows:
        md.append(f"| {cla}{' ' + str(seg) if seg else ''} | {ck} | {b0:.0f} / {b1:.0f} / {b2:.0f} | "
                  f"{c0:.0f} / {c1:.0f} / {c2:.0f} | **{c1 / b1:.2f}** |")
    (out / "cfdp.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def relay_family(args, out, modes):
    """A -> B -> C with B storing and forwarding, next to the direct pair A -> C of the same repetition (issue 21):
    goodput of both, their ratio, the relay's spread, and the middle node's CPU and peak RSS."""
    points = []
    for spec in args.relay_points.split(","):
        cla, seg, bundle = spec.split(":")
        points.extend((cla, int(seg), int(bundle), m) for m in modes)
    f = open(out / "relay.csv", "w", newline="")
    w = csv.writer(f)
    w.writerow(["cla", "segment_bytes", "bundle_bytes", "store", "rep", "direct_mbps", "relay_mbps", "ratio",
                "cpu_s_per_gb_direct", "cpu_s_per_gb_relay", "rss_mb_middle", "cpu_s_per_gb_middle"])
    rows = []
    for cla, seg, bundle, mode in points:
        durable = mode == "durable"
        ds, rs, mids, mcpus = [], [], [], []
        for r in range(1, args.reps + 1):
            d, dcpu, _, _ = run_dtnkit(args, cla, seg, bundle, durable, args.relay_bytes, nodes=2)
            rl, rcpu, _, _, stats = run_dtnkit(args, cla, seg, bundle, durable, args.relay_bytes, nodes=3,
                                               detail=True)
            mid_cpu = stats[1][0] / (max(1, args.relay_bytes // bundle) * bundle / 1e9)
            ds.append(d), rs.append(rl), mids.append(stats[1][1]), mcpus.append(mid_cpu)
            w.writerow([cla, seg, bundle, mode, r, f"{d:.1f}", f"{rl:.1f}", f"{rl / d:.3f}", f"{dcpu:.2f}",
                        f"{rcpu:.2f}", f"{stats[1][1]:.1f}", f"{mid_cpu:.2f}"])
            f.flush()
            print(f"[relay] {cla} seg={seg or '-'} bundle={bundle} {mode} rep {r}: direct {d:.0f} Mbit/s, "
                  f"relay {rl:.0f} Mbit/s ({rl / d:.2f}), middle node RSS {stats[1][1]:.0f} MB", flush=True)
        med = statistics.median(rs)
        rows.append((cla, seg, bundle, mode, min(ds), statistics.median(ds), max(ds), min(rs), med, max(rs),
                     med / statistics.median(ds), (max(rs) - min(rs)) / med, max(mids), statistics.median(mcpus)))
    f.close()
    md = [f"Relay: {args.relay_bytes / 1e6:.0f} MB per run, {args.reps} reps; the direct pair and the three-node "
          "line run back to back in each repetition.", "",
          "| CLA | segment B | bundle B | store | direct Mbit/s (min/med/max) | relay Mbit/s (min/med/max) | "
          "relay / direct | relay spread | middle node peak RSS MB | middle node CPU s/GB |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for cla, seg, b, mode, d0, d1, d2, r0, r1, r2, ratio, spread, mid, mcpu in rows:
        md.append(f"| {cla} | {seg or '-'} | {b} | {mode} | {d0:.0f} / {d1:.0f} / {d2:.0f} | "
                  f"{r0:.0f} / {r1:.0f} / {r2:.0f} | **{ratio:.2f}** | {100 * spread:.0f} % | {mid:.0f} | "
                  f"{mcpu:.2f} |")
    md += ["", "Spread = (max - min) / median of the relay's goodput."]
    (out / "relay.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def large_family(args, out, modes):
    """Bundles of 50 MB to GBs (streamed, stored and delivered as fragments) next to the usual sizes, and one single
    bundle of --single-bytes per CLA with its SHA-256 checked: goodput, CPU s/GB per node and thread, peak RSS."""
    points = [("tcpcl", 0, b, args.large_bytes) for b in map(int, filter(None, args.large_tcpcl_bundle_sizes.split(",")))]
    points += [("ltp", args.large_segment, b, args.large_bytes)
               for b in map(int, filter(None, args.large_ltp_bundle_sizes.split(",")))]
    if args.single_bytes > 0:
        points += [(cla, args.large_segment if cla == "ltp" else 0, args.single_bytes, args.single_bytes)
                   for cla in args.single_clas.split(",")]
    f = open(out / "large.csv", "w", newline="")
    w = csv.writer(f)
    w.writerow(["cla", "segment_bytes", "bundle_bytes", "bundles", "store", "rep", "network_ceiling_mbps",
                "dtnkit_mbps", "cpu_s_per_gb", "cpu_s_per_gb_sender", "cpu_s_per_gb_receiver", "rss_mb_sender",
                "rss_mb_receiver", "sha256", "hot_hit_pct_sender", "hot_hit_pct_receiver", "network_cpu_s_per_gb"])
    rows, thread_rows = [], {}
    for i, (cla, seg, b, total) in enumerate(points, 1):
        count = max(1, total // b)
        gb = count * b / 1e9
        single = total == b and b == args.single_bytes
        for mode in modes:
            for r in range(1, args.reps + 1):
                c, ncpu = (float("nan"), float("nan")) if single else run_iperf(args, cla in ("tcpcl", "stcp"), seg)
                hot = []
                d, cpu, m1, m2, stats = run_dtnkit(args, cla, seg, b, mode == "durable", total, detail=True,
                                                   quota=total + b + (1 << 30), check_sha=single, hot=hot)
                h1, h2 = hot[-1]
                for role, st in (("sender", stats[0]), ("receiver", stats[-1])):
                    thread_rows.setdefault((cla, seg, b, mode, role), []).append(
                        {n: v / gb for n, v in st[2].items()})
                tx, rx = stats[0][0] / gb, stats[-1][0] / gb
                sha = "equal" if single else "-"
                w.writerow([cla, seg, b, count, mode, r, f"{c:.1f}", f"{d:.1f}", f"{cpu:.2f}", f"{tx:.2f}",
                            f"{rx:.2f}", f"{m1:.1f}", f"{m2:.1f}", sha, f"{h1:.1f}", f"{h2:.1f}", f"{ncpu:.2f}"])
                f.flush()
                rows.append((cla, seg, b, count, mode, r, c, d, cpu, tx, rx, m1, m2, sha, h1, h2, ncpu))
                print(f"[large {i}/{len(points)}] {cla} seg={seg or '-'} bundle={b} x{count} {mode} rep {r}: "
                      f"network {c:.0f} Mbit/s (iperf3 CPU s/GB {ncpu:.2f}), dtnkit {d:.0f} Mbit/s, CPU s/GB {cpu:.2f} "
                      f"(sender {tx:.2f}, receiver {rx:.2f}), peak RSS {m1:.0f}/{m2:.0f} MB, "
                      f"hot cache hits {h1:.0f}/{h2:.0f} %{', SHA-256 equal' if single else ''}", flush=True)
    f.close()
    md = [f"Large bundles: {args.large_bytes / 1e9:.1f} GB per matrix run, single bundles of "
          f"{args.single_bytes} bytes; {args.reps} rep(s).", "",
          "| CLA | segment B | bundle B | bundles | store | rep | network Mbit/s | dtnkit Mbit/s | CPU s/GB (both) | "
          "CPU s/GB sender | CPU s/GB receiver | peak RSS MB sender | peak RSS MB receiver | SHA-256 | "
          "hot cache hits % (tx/rx) | iperf3 CPU s/GB |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cla, seg, b, n, mode, r, c, d, cpu, tx, rx, m1, m2, sha, h1, h2, ncpu in rows:
        md.append(f"| {cla} | {seg or '-'} | {b} | {n} | {mode} | {r} | {c:.0f} | {d:.0f} | {cpu:.2f} | {tx:.2f} | "
                  f"{rx:.2f} | {m1:.0f} | {m2:.0f} | {sha} | {h1:.0f} / {h2:.0f} | {ncpu:.2f} |")
    md += ["", "CPU by thread (user + system, per GB moved; threads under 2 % of their node left out):", ""]
    md += thread_table(thread_rows)
    (out / "large.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def thread_table(thread_rows):
    """Markdown table of CPU seconds per GB by thread, per point and node (medians over repetitions)."""
    md = ["| CLA | segment B | bundle B | store | node | CPU s/GB by thread (median; share of the node) |",
          "|---|---|---|---|---|---|"]
    for (cla, seg, b, mode, role), reps in thread_rows.items():
        names = sorted({n for r in reps for n in r})
        med = {n: statistics.median(r.get(n, 0.0) for r in reps) for n in names}
        total = sum(med.values()) or float("nan")
        top = sorted(med.items(), key=lambda kv: -kv[1])
        cells = ", ".join(f"{n} {v:.2f} ({100 * v / total:.0f} %)" for n, v in top if v / total >= 0.02)
        md.append(f"| {cla} | {seg or '-'} | {b} | {mode} | {role} | {cells} |")
    return md


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="release dtnkit binary")
    ap.add_argument("--out", default="bench-results")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bytes", type=int, default=500_000_000, help="payload bytes per dtnkit run")
    ap.add_argument("--iperf-seconds", type=int, default=5)
    ap.add_argument("--segment-sizes", default="1024,1400,8192,65000")
    ap.add_argument("--ltp-bundle-sizes", default="500000,5000000")
    ap.add_argument("--tcpcl-bundle-sizes", default="100000,1000000,5000000")
    ap.add_argument("--stcp-bundle-sizes", default="1000000,5000000")
    ap.add_argument("--only", choices=["ltp", "tcpcl", "stcp", "tcp", "relay", "cfdp", "large"],
                    help="run one family of points (large: only this way)")
    ap.add_argument("--large-bytes", type=int, default=2_000_000_000, help="payload bytes per large-matrix run")
    ap.add_argument("--large-tcpcl-bundle-sizes", default="1000000,50000000,1000000000")
    ap.add_argument("--large-ltp-bundle-sizes", default="500000,50000000,1000000000")
    ap.add_argument("--large-segment", type=int, default=8192, help="LTP segment size of the large rows")
    ap.add_argument("--single-bytes", type=int, default=4 << 30,
                    help="size of the single-bundle rows of --only large (0: skip them)")
    ap.add_argument("--single-clas", default="tcpcl,ltp", help="convergence layers of the single-bundle rows")
    ap.add_argument("--sha-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where the single-bundle rows' receiver writes the ADU to hash it after the timing "
                         "(default /dev/shm: memory, so the file's fsync costs nothing; needs --single-bytes free)")
    ap.add_argument("--relay-bytes", type=int, default=200_000_000, help="payload bytes per relay row run")
    ap.add_argument("--relay-points", default="ltp:8192:500000,tcpcl:0:1000000",
                    help="relay rows as CLA:SEGMENT:BUNDLE, comma-separated")
    ap.add_argument("--cfdp-bytes", type=int, default=500_000_000, help="file size of the CFDP rows")
    ap.add_argument("--cfdp-segment", type=int, default=60_000, help="CFDP file data bytes per PDU (and bundle)")
    ap.add_argument("--cfdp-checksums", default="crc32c,crc32,modular,null,proximity1")
    ap.add_argument("--cfdp-clas", default="tcpcl,ltp", help="convergence layers of the CFDP rows")
    ap.add_argument("--cfdp-durable", action="store_true", help="CFDP rows with durable stores (default volatile)")
    ap.add_argument("--store", choices=["both", "durable", "volatile"], default="both",
                    help="store modes to measure (default both)")
    ap.add_argument("--no-fsync", dest="store", action="store_const", const="volatile",
                    help="same as --store volatile")
    ap.add_argument("--disk-mb", type=int, default=256, help="MB written per disk-ceiling measurement")
    ap.add_argument("--rss-bytes", type=int, default=5_000_000_000,
                    help="bytes of the memory-check transfers (0: skip them)")
    ap.add_argument("--workdir", default=None, help="where node stores live (default: the system temp dir)")
    ap.add_argument("--transfer-timeout", type=int, default=300)
    ap.add_argument("--ltp-auth", action="store_true",
                    help="LTP spans authenticated with RFC 5327 HMAC-SHA1-80 (a shared key per run)")
    ap.add_argument("--node-extra", default="",
                    help="TOML appended to every node's configuration ('\\n' for a line break), e.g. "
                         "'[ltp]\\ngso = false' to compare LTP without UDP GSO")
    ap.add_argument("--store-extra", default="",
                    help="TOML lines added to every node's [store] table ('\\n' for a line break), e.g. "
                         "'hot_cache_mb = 128'")
    ap.add_argument("--keep", action="store_true", help="keep node work directories")
    args = ap.parse_args()
    modes = ["durable", "volatile"] if args.store == "both" else [args.store]

    points = []
    if args.only in (None, "ltp"):
        for seg in map(int, args.segment_sizes.split(",")):
            for b in map(int, args.ltp_bundle_sizes.split(",")):
                points.extend(("ltp", seg, b, m) for m in modes)
    if args.only in (None, "tcpcl", "tcp"):
        for b in map(int, args.tcpcl_bundle_sizes.split(",")):
            points.extend(("tcpcl", 0, b, m) for m in modes)
    if args.only in (None, "stcp", "tcp"):
        for b in map(int, args.stcp_bundle_sizes.split(",")):
            points.extend(("stcp", 0, b, m) for m in modes)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only == "cfdp":
        cfdp_family(args, out)
        return
    if args.only == "relay":
        relay_family(args, out, modes)
        return
    if args.only == "large":
        large_family(args, out, modes)
        return
    runs_f = open(out / "throughput.csv", "w", newline="")
    runs = csv.writer(runs_f)
    runs.writerow(["cla", "segment_bytes", "bundle_bytes", "store", "rep", "network_ceiling_mbps",
                   "disk_write_mbps", "ceiling_mbps", "dtnkit_mbps", "cpu_s_per_gb", "rss_mb_sender",
                   "rss_mb_receiver", "ltp_resent_pct", "hot_hit_pct_sender", "hot_hit_pct_receiver",
                   "network_cpu_s_per_gb"])
    summary = []
    thread_rows = {}
    for i, (cla, seg, b, mode) in enumerate(points, 1):
        durable = mode == "durable"
        cs, disks, eff, ds, cpus, rss1, rss2, resent, hot, ncpus = [], [], [], [], [], [], [], [], [], []
        for r in range(1, args.reps + 1):
            # Ceilings are re-measured next to every dtnkit run, so both see the same machine state.
            c, ncpu = run_iperf(args, cla in ("tcpcl", "stcp"), seg)
            disk = disk_write_mbps(args) if durable else float("nan")
            ceiling = min(c, disk / 2) if durable else c
            d, cpu, m1, m2, stats = run_dtnkit(args, cla, seg, b, durable, args.bytes, detail=True, resent=resent,
                                               hot=hot)
            rs = resent[-1] if cla == "ltp" else float("nan")
            h1, h2 = hot[-1]
            gb = max(1, args.bytes // b) * b / 1e9
            for role, st in (("sender", stats[0]), ("receiver", stats[-1])):
                thread_rows.setdefault((cla, seg, b, mode, role), []).append(
                    {n: v / gb for n, v in st[2].items()})
            cs.append(c), disks.append(disk), eff.append(ceiling), ds.append(d)
            cpus.append(cpu), rss1.append(m1), rss2.append(m2), ncpus.append(ncpu)
            runs.writerow([cla, seg, b, mode, r, f"{c:.1f}", f"{disk:.1f}", f"{ceiling:.1f}", f"{d:.1f}",
                           f"{cpu:.2f}", f"{m1:.1f}", f"{m2:.1f}", f"{rs:.2f}", f"{h1:.1f}", f"{h2:.1f}",
                           f"{ncpu:.2f}"])
            runs_f.flush()
            resent_note = f", {rs:.1f} % of LTP data resent" if cla == "ltp" else ""
            disk_note = f", disk {disk:.0f} Mbit/s" if durable else ""
            print(f"[{i}/{len(points)}] {cla} seg={seg or '-'} bundle={b} {mode} rep {r}: "
                  f"network {c:.0f} Mbit/s{disk_note}, dtnkit {d:.0f} Mbit/s ({d / ceiling:.2f} of the ceiling), "
                  f"{cpu:.1f} CPU s/GB (iperf3 {ncpu:.2f}), RSS {m1:.0f}/{m2:.0f} MB{resent_note}, "
                  f"hot cache hits {h1:.0f}/{h2:.0f} %", flush=True)
        summary.append({
            "cla": cla, "segment_bytes": seg, "bundle_bytes": b, "store": mode,
            "network_min": min(cs), "network_median": statistics.median(cs), "network_max": max(cs),
            "disk_median": statistics.median(disks) if durable else float("nan"),
            "ceiling_median": statistics.median(eff),
            "dtnkit_min": min(ds), "dtnkit_median": statistics.median(ds), "dtnkit_max": max(ds),
            "ratio": statistics.median(ds) / statistics.median(eff),
            "ratio_network": statistics.median(ds) / statistics.median(cs),
            "cpu_s_per_gb": statistics.median(cpus),
            "network_cpu_s_per_gb": statistics.median(ncpus),
            "rss_mb_sender": max(rss1), "rss_mb_receiver": max(rss2),
            "ltp_resent_pct": statistics.median(resent) if resent else float("nan"),
            "hot_hit_pct_sender": statistics.median(h[0] for h in hot),
            "hot_hit_pct_receiver": statistics.median(h[1] for h in hot),
        })

    memory = []
    if args.rss_bytes > 0:
        for cla, seg in (("ltp", 8192), ("tcpcl", 0)):
            d, cpu, m1, m2 = run_dtnkit(args, cla, seg, 5_000_000, True, args.rss_bytes)
            runs.writerow([cla, seg, 5_000_000, "durable-memory-check", 1, "", "", "", f"{d:.1f}", f"{cpu:.2f}",
                           f"{m1:.1f}", f"{m2:.1f}"])
            runs_f.flush()
            print(f"[memory] {cla} {args.rss_bytes / 1e9:.1f} GB of 5 MB bundles: {d:.0f} Mbit/s, "
                  f"peak RSS {m1:.0f} / {m2:.0f} MB", flush=True)
            memory.append((cla, seg, d, m1, m2))
    runs_f.close()

    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        for s in summary:
            w.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in s.items()})
    md = [f"Reps per point: {args.reps}; {args.bytes / 1e6:.0f} MB per dtnkit run.", "",
          "| CLA | segment B | bundle B | store | network ceiling Mbit/s (min/med/max) | disk/2 Mbit/s | "
          "dtnkit Mbit/s (min/med/max) | ratio | ratio to network | CPU s/GB | iperf3 CPU s/GB | peak RSS MB (tx/rx) | "
          "LTP data resent % | hot cache hits % (tx/rx) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        disk = f"{s['disk_median'] / 2:.0f}" if s["store"] == "durable" else "-"
        md.append(f"| {s['cla']} | {s['segment_bytes'] or '-'} | {s['bundle_bytes']} | {s['store']} | "
                  f"{s['network_min']:.0f} / {s['network_median']:.0f} / {s['network_max']:.0f} | {disk} | "
                  f"{s['dtnkit_min']:.0f} / {s['dtnkit_median']:.0f} / {s['dtnkit_max']:.0f} | "
                  f"**{s['ratio']:.2f}** | {s['ratio_network']:.2f} | {s['cpu_s_per_gb']:.1f} | "
                  f"{s['network_cpu_s_per_gb']:.2f} | "
                  f"{s['rss_mb_sender']:.0f} / {s['rss_mb_receiver']:.0f} | "
                  + (f"{s['ltp_resent_pct']:.1f} |" if s["cla"] == "ltp" else "- |")
                  + f" {s['hot_hit_pct_sender']:.0f} / {s['hot_hit_pct_receiver']:.0f} |")
    md += ["", "Network ceiling: iperf3 UDP -l SEG (ltp) or iperf3 TCP (tcpcl, stcp), measured back to back with each "
           "dtnkit run. Durable rows: ratio = dtnkit / min(network, disk/2), disk = sequential write+fdatasync "
           "rate of the store's disk measured in the same repetition (both nodes write every bundle once). "
           "CPU s/GB: both dtnkit nodes, user + system, per GB delivered; iperf3 CPU s/GB: the iperf3 client and "
           "server of the ceiling run the same way (their own `cpu_utilization_percent`), the cost of moving the "
           "bytes through the kernel alone on this machine. "
           "Volatile rows (no fsync): ratio = dtnkit / network. LTP data resent: the share of the sending node's "
           "LTP data segments that were retransmissions (its `dtnkit status` after the run; median over the reps). "
           "Hot cache hits: the share of each node's reads of stored bundles served from memory by its store's hot "
           "cache (`store.hot_cache_hits / (hits + misses)`); a miss reads the bundle back from the store's files."]
    if memory:
        md += ["", f"Memory check: one durable transfer of {args.rss_bytes / 1e9:.1f} GB in 5 MB bundles.", "",
               "| CLA | segment B | dtnkit Mbit/s | peak RSS MB sender | peak RSS MB receiver |",
               "|---|---|---|---|---|"]
        for cla, seg, d, m1, m2 in memory:
            md.append(f"| {cla} | {seg or '-'} | {d:.0f} | {m1:.0f} | {m2:.0f} |")
    md += ["", "CPU by thread (user + system, per GB moved; threads under 2 % of their node left out):", ""]
    md += thread_table(thread_rows)
    (out / "summary.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    if args.only is None:
        relay_family(args, out, modes)
        cfdp_family(args, out)
    print(f"\nresults: {out}/throughput.csv, {out}/summary.csv, {out}/summary.md")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
