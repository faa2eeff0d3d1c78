#!/usr/bin/env python3
"""Does MSG_ZEROCOPY pay off for TCP writes on this machine? (docs/throughput.md, OS facilities)

Sends --bytes over one loopback TCP connection in writes of each size in --write-sizes, with plain send() and with send(MSG_ZEROCOPY) (SO_ZEROCOPY set; completions reaped from the error
queue as they come, the buffer never changed), alternating the two --reps times. Prints goodput and CPU seconds per
GB of the sender and of the receiver, and how many zero-copy sends the kernel reported as copied after all
(SO_EE_CODE_ZEROCOPY_COPIED: on loopback every one is, because the receiving socket needs its own copy).

Both modes run the same Python loop, so its overhead cancels out in the comparison; at 64 KiB writes it is not
negligible in absolute terms.
"""

import argparse
import errno
import multiprocessing
import resource
import select
import socket
import struct
import time

SO_ZEROCOPY = 60
MSG_ZEROCOPY = 0x4000000
SO_EE_ORIGIN_ZEROCOPY = 5
SO_EE_CODE_ZEROCOPY_COPIED = 1


def receive(listener, total):
    conn, _ = listener.accept()
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if n == 0:
            break
        got += n
    conn.close()


def reap(sock, pending, wait):
    """Reads zero-copy completions; returns (sends completed, of which copied)."""
    done = copied = 0
    while pending - done > 0:
        if wait:
            select.select([], [], [sock], 1.0)
        try:
            _, anc, _, _ = sock.recvmsg(0, 256, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            if not wait:
                break
            continue
        for _level, _type, data in anc:
            ee_errno, origin, _t, code, _pad, info, hi = struct.unpack("=IBBBBII", data[:16])
            if origin != SO_EE_ORIGIN_ZEROCOPY:
                continue
            n = hi - info + 1
            done += n
            if code & SO_EE_CODE_ZEROCOPY_COPIED:
                copied += n
    return done, copied


def run_one(total, write, zerocopy):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    child = multiprocessing.Process(target=receive, args=(listener, total))
    child.start()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    if zerocopy:
        s.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
    s.connect(listener.getsockname())
    payload = memoryview(bytes(range(256)) * (write // 256 + 1))[:write]
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    sent = pending = done = copied = 0
    flags = MSG_ZEROCOPY if zerocopy else 0
    while sent < total:
        part = payload[: min(write, total - sent)]
        try:
            n = s.send(part, flags)
        except OSError as e:
            if e.errno == errno.ENOBUFS:  # too many completions outstanding
                d, c = reap(s, pending - done, True)
                done, copied = done + d, copied + c
                continue
            raise
        sent += n
        if zerocopy:
            pending += 1
            d, c = reap(s, pending - done, False)
            done, copied = done + d, copied + c
    if zerocopy:
        d, c = reap(s, pending - done, True)
        done, copied = done + d, copied + c
    s.shutdown(socket.SHUT_WR)
    child.join()
    secs = time.perf_counter() - t0
    after_self = resource.getrusage(resource.RUSAGE_SELF)
    s.close()
    listener.close()
    cpu_tx = (after_self.ru_utime + after_self.ru_stime) - (before_self.ru_utime + before_self.ru_stime)
    return secs, cpu_tx, pending, copied


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=1_000_000_000)
    ap.add_argument("--write-sizes", default="65536,1048576")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    multiprocessing.set_start_method("fork")
    gb = args.bytes / 1e9
    print("| write bytes | mode | goodput Gb/s (median) | sender CPU s/GB | receiver CPU s/GB | sends copied |")
    print("|---|---|---|---|---|---|")
    for write in [int(x) for x in args.write_sizes.split(",")]:
        rows = {False: [], True: []}
        for _ in range(args.reps):
            for zc in (False, True):
                before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
                secs, cpu_tx, pending, copied = run_one(args.bytes, write, zc)
                after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu_rx = (after_children.ru_utime + after_children.ru_stime) - (
                    before_children.ru_utime + before_children.ru_stime)
                rows[zc].append((args.bytes * 8 / secs / 1e9, cpu_tx / gb, cpu_rx / gb, pending, copied))
        for zc in (False, True):
            r = sorted(rows[zc])
            mid = r[len(r) // 2]
            tx = sorted(x[1] for x in r)[len(r) // 2]
            rx = sorted(x[2] for x in r)[len(r) // 2]
            copied = f"{mid[4]}/{mid[3]}" if zc else "-"
            print(f"| {write} | {'MSG_ZEROCOPY' if zc else 'copy'} | {mid[0]:.2f} | {tx:.2f} | {rx:.2f} | {copied} |")


if __name__ == "__main__":
    main()
