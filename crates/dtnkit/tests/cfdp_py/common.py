"""Shared parts of the cfdp-py peers of dtnkit's CFDP interop tests (receiver.py, sender.py).

Written against the cfdp-py 0.7 library API (package `cfdppy`) and spacepackets; each peer is one
cfdp-py handler (DestHandler or SourceHandler) driven by a single-threaded loop over one UDP
socket, one PDU per datagram. Everything printed on stdout is one JSON object per line.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time
from datetime import timedelta

from spacepackets.cfdp import ChecksumType, ConditionCode, TransactionId
from spacepackets.cfdp.pdu import PduFactory
from spacepackets.countdown import Countdown
from spacepackets.util import UnsignedByteField

from cfdppy.mib import CheckTimerProvider, DefaultFaultHandlerBase

CHECKSUMS = {
    "modular": ChecksumType.MODULAR,
    "crc32c": ChecksumType.CRC_32C,
    "crc32": ChecksumType.CRC_32,
    "null": ChecksumType.NULL_CHECKSUM,
}

# Kernel socket buffers asked for: the Python loop is slow next to a Rust sender, and a class-1
# transfer has no second chance, so the receive queue should hold a whole burst (64 MiB: all of a
# 50 MB file in 60 kB PDUs). SO_RCVBUFFORCE/SO_SNDBUFFORCE (root or CAP_NET_ADMIN) go past
# net.core.rmem_max/wmem_max; without the right the plain options are capped there. The granted
# sizes are reported ("rcvbuf", "sndbuf").
SOCKET_BUFFER = 64 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)

# Largest UDP payload (a PDU is never larger).
MAX_DATAGRAM = 65535


def emit(obj: dict) -> None:
    """One JSON line on stdout, flushed (the test reads it while the process runs)."""
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def entity_id(value: int, width: int) -> UnsignedByteField:
    """An entity id of `width` octets (cfdp-py accepts 1, 2, 4 or 8)."""
    return UnsignedByteField(value, width)


def tid_text(tid: TransactionId | None) -> str:
    """`SOURCE-SEQ`, the form dtnkit prints."""
    if tid is None:
        return "?"
    return f"{tid.source_id.value}-{tid.seq_num.value}"


def udp_socket(bind: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER)
    sock.bind(bind)
    return sock


def socket_buffers(sock: socket.socket) -> dict:
    return {
        "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        "sndbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
    }


def parse_addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return (host or "127.0.0.1", int(port))


def recv_pdus(sock: socket.socket, timeout: float, limit: int = 256):
    """Waits up to `timeout` s for a datagram, then takes what is queued (at most `limit`).
    Yields (pdu or None, raw bytes, sender address); None when spacepackets cannot decode it."""
    ready, _, _ = select.select([sock], [], [], max(timeout, 0.0))
    n = 0
    while ready and n < limit:
        try:
            data, addr = sock.recvfrom(MAX_DATAGRAM, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        n += 1
        try:
            holder = PduFactory.from_raw_to_holder(data)
            yield holder.pdu, data, addr
        except Exception:  # noqa: BLE001 - a peer's malformed PDU is counted, never fatal
            yield None, data, addr


class JsonFaultHandler(DefaultFaultHandlerBase):
    """Every fault cfdp-py declares becomes a JSON line ("fault") and is counted."""

    def __init__(self):
        super().__init__()
        self.faults: list[str] = []

    def _report(self, kind: str, tid: TransactionId, cond: ConditionCode, progress: int) -> None:
        self.faults.append(cond.name)
        emit(
            {
                "event": "fault",
                "handler": kind,
                "transaction": tid_text(tid),
                "condition": cond.name,
                "progress": progress,
            }
        )

    def notice_of_suspension_cb(self, transaction_id, cond, progress) -> None:
        self._report("suspension", transaction_id, cond, progress)

    def notice_of_cancellation_cb(self, transaction_id, cond, progress) -> None:
        self._report("cancellation", transaction_id, cond, progress)

    def abandoned_cb(self, transaction_id, cond, progress) -> None:
        self._report("abandon", transaction_id, cond, progress)

    def ignore_cb(self, transaction_id, cond, progress) -> None:
        self._report("ignore", transaction_id, cond, progress)


class FixedCheckTimer(CheckTimerProvider):
    """Class 1 check timer (receiver after an incomplete EOF; sender waiting for Finished)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def provide_check_timer(self, local_entity_id, remote_entity_id, entity_type) -> Countdown:
        return Countdown(timedelta(seconds=self.seconds))


class Pacer:
    """Token bucket: at most `rate_bps` on average with bursts of `burst` bytes (0: unpaced)."""

    def __init__(self, rate_bps: float, burst: int):
        self.rate = rate_bps / 8.0
        self.burst = float(burst)
        self.tokens = float(burst)
        self.last = time.monotonic()

    def delay(self, size: int) -> float:
        """Seconds to wait before `size` bytes may leave (0 when they may leave now)."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= size:
            return 0.0
        return (size - self.tokens) / self.rate

    def take(self, size: int) -> None:
        if self.rate > 0:
            self.tokens -= size
