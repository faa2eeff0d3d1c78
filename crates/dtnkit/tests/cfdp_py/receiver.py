#!/usr/bin/env python3
"""A cfdp-py destination entity on a UDP port: receives files into a root directory.

    receiver.py --id 2 --bind 127.0.0.1:PORT --root DIR [--count N] [--timeout-s S] ...

Prints one JSON object per line on stdout:
  {"event": "ready", "entity": 2, "port": PORT, "rcvbuf": ..., "cfdp_py": "0.7.0"}
  {"event": "metadata", "transaction": "1-1", "source_file": ..., "dest_file": ..., "file_size": N}
  {"event": "fault", "transaction": ..., "condition": "...", "handler": "..."}
  {"event": "finished", "transaction": "1-1", "condition": "NO_ERROR", "delivery_code":
   "DATA_COMPLETE", "file_status": "FILE_RETAINED", "file": "<dest name>", "path": "<root/dest>",
   "bytes": N, "file_size": N, "class": 1|2, "seconds": S, "id_width": W, "seq_width": W,
   "file_data_pdus": N, "naks_sent": N, "malformed": N, "ignored": N}
  {"event": "exit", "finished": N, "pdus_received": N, ...}
and exits 0 once --count transactions have finished (and the last one was closed: its Finished
acknowledged, or its positive ACK procedure given up), 3 on --timeout-s.

cfdp-py's DestHandler serves one transaction at a time; the sender's address is learned from the
datagrams (answers go back where the PDUs came from). Sources with any entity id are accepted.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib.metadata import version
from pathlib import Path

from spacepackets.cfdp import DirectiveType, TransmissionMode
from spacepackets.cfdp.pdu import PduHolder

import common
from cfdppy import CfdpState, PacketDestination, RestrictedFilestore, get_packet_destination
from cfdppy.exceptions import (
    InvalidDestinationId,
    InvalidPduDirection,
    InvalidPduForDestHandler,
    NoRemoteEntityConfigFound,
    PduIgnoredForDest,
)
from cfdppy.handler.dest import DestHandler
from cfdppy.mib import (
    IndicationConfig,
    LocalEntityConfig,
    RemoteEntityConfig,
    RemoteEntityConfigTable,
)
from cfdppy.user import CfdpUserBase

# A PDU cfdp-py refuses for a reason of its own protocol state: counted, never fatal.
IGNORED = (
    InvalidDestinationId,
    InvalidPduDirection,
    InvalidPduForDestHandler,
    NoRemoteEntityConfigFound,
    PduIgnoredForDest,
)


class AnySource(RemoteEntityConfigTable):
    """Remote configuration for any source entity: the template with the source's id."""

    def __init__(self, template: dict):
        super().__init__()
        self.template = template

    def get_cfg(self, remote_entity_id):
        cfg = super().get_cfg(remote_entity_id)
        if cfg is None:
            cfg = RemoteEntityConfig(entity_id=remote_entity_id, **self.template)
            self.add_config(cfg)
        return cfg


class User(CfdpUserBase):
    """Indications to JSON lines; the finished ones are collected for the main loop."""

    def __init__(self, root: Path):
        super().__init__(vfs=RestrictedFilestore(root))
        self.root = root
        self.handler: DestHandler | None = None
        self.current: dict = {}
        self.finished: list[dict] = []

    def transaction_indication(self, transaction_indication_params) -> None:
        pass

    def eof_sent_indication(self, transaction_id) -> None:
        pass

    def metadata_recv_indication(self, params) -> None:
        self.current["dest_file"] = params.dest_file_name
        common.emit(
            {
                "event": "metadata",
                "transaction": common.tid_text(params.transaction_id),
                "source_file": params.source_file_name,
                "dest_file": params.dest_file_name,
                "file_size": params.file_size,
            }
        )

    def file_segment_recv_indication(self, params) -> None:
        self.current["file_data_pdus"] = self.current.get("file_data_pdus", 0) + 1

    def report_indication(self, transaction_id, status_report) -> None:
        pass

    def suspended_indication(self, transaction_id, cond_code) -> None:
        pass

    def resumed_indication(self, transaction_id, progress) -> None:
        pass

    def fault_indication(self, transaction_id, cond_code, progress) -> None:
        pass

    def abandoned_indication(self, transaction_id, cond_code, progress) -> None:
        pass

    def eof_recv_indication(self, transaction_id) -> None:
        pass

    def transaction_finished_indication(self, params) -> None:
        h = self.handler
        fp = params.finished_params
        dest = self.current.get("dest_file")
        started = self.current.get("started", time.monotonic())
        line = {
            "event": "finished",
            "transaction": common.tid_text(params.transaction_id),
            "condition": fp.condition_code.name,
            "delivery_code": fp.delivery_code.name,
            "file_status": fp.file_status.name,
            "file": dest,
            "path": str(self.root / dest) if dest else None,
            "bytes": h.progress if h else None,
            "file_size": h.file_size if h else None,
            "class": 2 if h and h.transmission_mode == TransmissionMode.ACKNOWLEDGED else 1,
            "seconds": round(time.monotonic() - started, 6),
            "id_width": self.current.get("id_width"),
            "seq_width": self.current.get("seq_width"),
            "file_data_pdus": self.current.get("file_data_pdus", 0),
            "naks_sent": self.current.get("naks_sent", 0),
            "malformed": self.current.get("malformed", 0),
            "ignored": self.current.get("ignored", 0),
        }
        self.finished.append(line)
        common.emit(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--id", type=int, required=True, help="this entity's id")
    ap.add_argument("--id-width", type=int, default=2, choices=[1, 2, 4, 8])
    ap.add_argument("--bind", required=True, help="HOST:PORT to receive PDUs on")
    ap.add_argument("--root", required=True, help="directory received files are written under")
    ap.add_argument("--count", type=int, default=1, help="exit after N finished transactions")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="give up (exit 3) after S s")
    ap.add_argument("--deferred", action="store_true", help="NAK only after EOF (not at gaps)")
    ap.add_argument("--nak-timer-s", type=float, default=1.0)
    ap.add_argument("--nak-limit", type=int, default=30)
    ap.add_argument("--ack-timer-s", type=float, default=1.0)
    ap.add_argument("--ack-limit", type=int, default=30)
    ap.add_argument("--check-timer-s", type=float, default=2.0)
    ap.add_argument("--check-limit", type=int, default=3)
    ap.add_argument("--max-packet", type=int, default=65000, help="largest PDU it sends (NAKs)")
    args = ap.parse_args()

    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    user = User(root)
    table = AnySource(
        {
            "max_file_segment_len": None,
            "max_packet_len": args.max_packet,
            "closure_requested": False,
            "crc_on_transmission": False,
            "default_transmission_mode": TransmissionMode.ACKNOWLEDGED,
            "crc_type": common.CHECKSUMS["crc32"],
            "positive_ack_timer_interval_seconds": args.ack_timer_s,
            "positive_ack_timer_expiration_limit": args.ack_limit,
            "check_limit": args.check_limit,
            "immediate_nak_mode": not args.deferred,
            "nak_timer_interval_seconds": args.nak_timer_s,
            "nak_timer_expiration_limit": args.nak_limit,
        }
    )
    faults = common.JsonFaultHandler()
    handler = DestHandler(
        cfg=LocalEntityConfig(
            common.entity_id(args.id, args.id_width), IndicationConfig(), faults
        ),
        user=user,
        remote_cfg_table=table,
        check_timer_provider=common.FixedCheckTimer(args.check_timer_s),
    )
    user.handler = handler
    sock = common.udp_socket(common.parse_addr(args.bind))
    common.emit(
        {
            "event": "ready",
            "entity": args.id,
            "port": sock.getsockname()[1],
            "cfdp_py": version("cfdp-py"),
            "spacepackets": version("spacepackets"),
            **common.socket_buffers(sock),
        }
    )

    totals = {"pdus_received": 0, "pdus_sent": 0, "malformed": 0, "ignored": 0, "errors": 0}
    peer = None

    def send_ready() -> None:
        while handler.packets_ready:
            holder: PduHolder = handler.get_next_packet()
            raw = holder.pack()
            if holder.pdu_directive_type == DirectiveType.NAK_PDU:
                user.current["naks_sent"] = user.current.get("naks_sent", 0) + 1
            if peer is not None:
                sock.sendto(raw, peer)
                totals["pdus_sent"] += 1

    def step(pdu) -> None:
        try:
            handler.state_machine(pdu)
        except IGNORED as e:
            totals["ignored"] += 1
            user.current["ignored"] = user.current.get("ignored", 0) + 1
            if totals["ignored"] <= 20:
                common.emit({"event": "ignored", "reason": type(e).__name__, "detail": str(e)})
        except Exception as e:  # noqa: BLE001 - a cfdp-py failure is reported, then the loop goes on
            totals["errors"] += 1
            common.emit({"event": "error", "error": type(e).__name__, "detail": str(e)})
            if totals["errors"] > 50:
                raise
        send_ready()

    start = time.monotonic()
    deadline = start + args.timeout_s
    while True:
        done = len(user.finished) >= args.count
        if done and handler.state == CfdpState.IDLE:
            break
        now = time.monotonic()
        if now >= deadline:
            common.emit({"event": "timeout", "seconds": args.timeout_s, **totals})
            return 3
        busy = handler.state == CfdpState.BUSY
        for pdu, raw, addr in common.recv_pdus(sock, 0.005 if busy else 0.1):
            totals["pdus_received"] += 1
            peer = addr
            if pdu is None:
                totals["malformed"] += 1
                user.current["malformed"] = user.current.get("malformed", 0) + 1
                if totals["malformed"] <= 20:
                    common.emit({"event": "malformed", "bytes": raw[:64].hex(), "len": len(raw)})
                continue
            if get_packet_destination(pdu) != PacketDestination.DEST_HANDLER:
                totals["ignored"] += 1
                continue
            if handler.state == CfdpState.IDLE:
                # A new transaction: its counters start here.
                user.current = {
                    "started": time.monotonic(),
                    "id_width": pdu.source_entity_id.byte_len,
                    "seq_width": pdu.transaction_seq_num.byte_len,
                }
            step(pdu)
        # Timers (NAK, positive ACK, check) advance on calls without a PDU.
        step(None)
    common.emit({"event": "exit", "finished": len(user.finished), **totals})
    return 0


if __name__ == "__main__":
    sys.exit(main())
