#!/usr/bin/env python3
"""A cfdp-py source entity: sends one file to a CFDP entity over UDP and waits for the end.

    sender.py FILE --to HOST:PORT --dest-id 2 [--id 1] [--class 1|2] [--checksum crc32c]
              [--segment-size B] [--rate BPS] [--dest-file NAME] [--closure] [--timeout-s S]

Paces its PDUs with a token bucket (--rate bits/s, --burst bytes): unpaced, a receiver's socket
queue overflows while it is busy. Prints one JSON summary line on stdout:
  {"event": "summary", "transaction": "1-1", "condition": "NO_ERROR", "delivery_code":
   "DATA_COMPLETE", "file_status": ..., "bytes": N, "seconds": S, "goodput_mbps": X,
   "class": 2, "checksum": "crc32c", "pdus_sent": N, "file_data_pdus": N,
   "bytes_retransmitted": N, "naks_received": N, "id_width": 2, "seq_width": 2, ...}
(fault lines before it if any) and exits 0 when the transaction finished with NO_ERROR and, in
class 2 or with closure, a complete delivery; 1 otherwise; 3 on --timeout-s.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib.metadata import version
from pathlib import Path

from spacepackets.cfdp import DirectiveType, PduType, TransmissionMode
from spacepackets.cfdp.defs import DeliveryCode
from spacepackets.cfdp.pdu import PduHolder
from spacepackets.seqcount import SeqCountProvider

import common
from cfdppy import CfdpState, PacketDestination, PutRequest, get_packet_destination
from cfdppy.exceptions import (
    InvalidDestinationId,
    InvalidPduDirection,
    InvalidPduForSourceHandler,
    InvalidSourceId,
    InvalidTransactionSeqNum,
    NoRemoteEntityConfigFound,
    PduIgnoredForSource,
)
from cfdppy.handler.source import SourceHandler
from cfdppy.mib import (
    IndicationConfig,
    LocalEntityConfig,
    RemoteEntityConfig,
    RemoteEntityConfigTable,
)
from cfdppy.user import CfdpUserBase

IGNORED = (
    InvalidDestinationId,
    InvalidPduDirection,
    InvalidPduForSourceHandler,
    InvalidSourceId,
    InvalidTransactionSeqNum,
    NoRemoteEntityConfigFound,
    PduIgnoredForSource,
)


class User(CfdpUserBase):
    def __init__(self):
        super().__init__()
        self.transaction = None
        self.finished = None

    def transaction_indication(self, transaction_indication_params) -> None:
        self.transaction = transaction_indication_params.transaction_id

    def eof_sent_indication(self, transaction_id) -> None:
        pass

    def transaction_finished_indication(self, params) -> None:
        self.finished = params

    def metadata_recv_indication(self, params) -> None:
        pass

    def file_segment_recv_indication(self, params) -> None:
        pass

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--to", required=True, help="HOST:PORT of the receiving entity")
    ap.add_argument("--dest-id", type=int, required=True)
    ap.add_argument("--dest-file", help="name at the receiver (default: the file's name)")
    ap.add_argument("--id", type=int, default=1, help="this entity's id")
    ap.add_argument("--id-width", type=int, default=2, choices=[1, 2, 4, 8])
    ap.add_argument("--seq-width", type=int, default=2, choices=[1, 2, 4])
    ap.add_argument("--seq", type=int, default=0, help="transaction sequence number")
    ap.add_argument("--bind", default="127.0.0.1:0")
    ap.add_argument("--class", dest="cls", type=int, default=2, choices=[1, 2])
    ap.add_argument("--checksum", default="crc32c", choices=sorted(common.CHECKSUMS))
    ap.add_argument("--segment-size", type=int, default=1024, help="file data bytes per PDU")
    ap.add_argument("--closure", action="store_true", help="class 1: ask for a Finished PDU")
    ap.add_argument("--crc", action="store_true", help="CRC-16 on every PDU")
    ap.add_argument("--rate", type=float, default=100e6, help="pacing in bit/s (0: none)")
    ap.add_argument("--burst", type=int, default=256 * 1024, help="pacing bucket depth, bytes")
    ap.add_argument("--ack-timer-s", type=float, default=1.0)
    ap.add_argument("--ack-limit", type=int, default=30)
    ap.add_argument("--check-timer-s", type=float, default=5.0)
    ap.add_argument("--timeout-s", type=float, default=300.0)
    args = ap.parse_args()

    src = Path(args.file).resolve()
    dest_name = args.dest_file or src.name
    trans_mode = (
        TransmissionMode.ACKNOWLEDGED if args.cls == 2 else TransmissionMode.UNACKNOWLEDGED
    )
    dest_id = common.entity_id(args.dest_id, args.id_width)
    table = RemoteEntityConfigTable()
    table.add_config(
        RemoteEntityConfig(
            entity_id=dest_id,
            max_file_segment_len=args.segment_size,
            # Room for the header (up to 8-octet ids), the offset and an optional CRC.
            max_packet_len=args.segment_size + 64,
            closure_requested=args.closure,
            crc_on_transmission=args.crc,
            default_transmission_mode=trans_mode,
            crc_type=common.CHECKSUMS[args.checksum],
            positive_ack_timer_interval_seconds=args.ack_timer_s,
            positive_ack_timer_expiration_limit=args.ack_limit,
        )
    )
    # Each run is a new process: a receiver that remembers finished transactions (dtnkit
    # does) must see a new sequence number every time, so the caller chooses it.
    seq_provider = SeqCountProvider(args.seq_width * 8)
    seq_provider.count = args.seq
    user = User()
    faults = common.JsonFaultHandler()
    handler = SourceHandler(
        cfg=LocalEntityConfig(common.entity_id(args.id, args.id_width), IndicationConfig(), faults),
        user=user,
        remote_cfg_table=table,
        check_timer_provider=common.FixedCheckTimer(args.check_timer_s),
        seq_num_provider=seq_provider,
    )
    sock = common.udp_socket(common.parse_addr(args.bind))
    peer = common.parse_addr(args.to)
    pacer = common.Pacer(args.rate, args.burst)
    stats = {
        "pdus_sent": 0,
        "file_data_pdus": 0,
        "bytes_retransmitted": 0,
        "naks_received": 0,
        "pdus_received": 0,
        "malformed": 0,
        "ignored": 0,
        "errors": 0,
        "eof_sent": 0,
    }
    high_water = 0
    id_width = seq_width = None
    # Widths of the receiver's answers (CCSDS 727.0: the transaction's, whatever the entity's own).
    answer_widths = set()

    def pump_input(wait: float) -> None:
        for pdu, raw, _addr in common.recv_pdus(sock, wait):
            stats["pdus_received"] += 1
            if pdu is None:
                stats["malformed"] += 1
                if stats["malformed"] <= 20:
                    common.emit({"event": "malformed", "bytes": raw[:64].hex(), "len": len(raw)})
                continue
            answer_widths.add((pdu.source_entity_id.byte_len, pdu.transaction_seq_num.byte_len))
            if get_packet_destination(pdu) != PacketDestination.SOURCE_HANDLER:
                stats["ignored"] += 1
                continue
            if pdu.pdu_type == PduType.FILE_DIRECTIVE and pdu.directive_type == DirectiveType.NAK_PDU:
                stats["naks_received"] += 1
            step(pdu)

    def send(holder: PduHolder) -> None:
        nonlocal high_water, id_width, seq_width
        raw = holder.pack()
        # Pace: wait for tokens, answering input meanwhile (a NAK changes nothing already
        # queued; it is handed to the handler once the queue is empty).
        while True:
            wait = pacer.delay(len(raw))
            if wait <= 0:
                break
            time.sleep(min(wait, 0.002))
        pacer.take(len(raw))
        sock.sendto(raw, peer)
        stats["pdus_sent"] += 1
        pdu = holder.pdu
        id_width = pdu.source_entity_id.byte_len
        seq_width = pdu.transaction_seq_num.byte_len
        if holder.pdu_type == PduType.FILE_DATA:
            stats["file_data_pdus"] += 1
            fd = holder.to_file_data_pdu()
            end = fd.offset + len(fd.file_data)
            if end <= high_water:
                stats["bytes_retransmitted"] += len(fd.file_data)
            high_water = max(high_water, end)
        elif holder.pdu_directive_type == DirectiveType.EOF_PDU:
            stats["eof_sent"] += 1

    def step(pdu) -> None:
        try:
            handler.state_machine(pdu)
        except IGNORED as e:
            stats["ignored"] += 1
            if stats["ignored"] <= 20:
                common.emit({"event": "ignored", "reason": type(e).__name__, "detail": str(e)})
        except Exception as e:  # noqa: BLE001
            stats["errors"] += 1
            common.emit({"event": "error", "error": type(e).__name__, "detail": str(e)})
            if stats["errors"] > 50:
                raise
        while handler.packets_ready:
            send(handler.get_next_packet())

    put = PutRequest(
        destination_id=dest_id,
        source_file=src,
        dest_file=Path(dest_name),
        trans_mode=trans_mode,
        closure_requested=args.closure,
    )
    size = src.stat().st_size
    started = time.monotonic()
    deadline = started + args.timeout_s
    handler.put_request(put)
    while handler.state == CfdpState.BUSY:
        if time.monotonic() >= deadline:
            common.emit({"event": "timeout", "seconds": args.timeout_s, **stats})
            return 3
        # While file data is flowing, only look at queued input; otherwise wait for it.
        sending = handler.progress < (handler.file_size or 0)
        pump_input(0.0 if sending else 0.005)
        if handler.state != CfdpState.BUSY:
            break
        step(None)
    secs = time.monotonic() - started
    fin = user.finished
    fp = fin.finished_params if fin else None
    complete = fp is not None and fp.delivery_code == DeliveryCode.DATA_COMPLETE
    ok = fp is not None and fp.condition_code.name == "NO_ERROR"
    if args.cls == 2 or args.closure:
        ok = ok and complete
    common.emit(
        {
            "event": "summary",
            "transaction": common.tid_text(user.transaction),
            "file": str(src),
            "destination": f"{args.dest_id}:{dest_name}",
            "class": args.cls,
            "checksum": args.checksum,
            "segment_size": args.segment_size,
            "bytes": size,
            "seconds": round(secs, 6),
            "goodput_mbps": round(size * 8 / max(secs, 1e-9) / 1e6, 3),
            "condition": fp.condition_code.name if fp else None,
            "delivery_code": fp.delivery_code.name if fp else None,
            "file_status": fp.file_status.name if fp else None,
            "id_width": id_width,
            "seq_width": seq_width,
            "answer_widths": sorted(answer_widths),
            "faults": faults.faults,
            "cfdp_py": version("cfdp-py"),
            **stats,
        }
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
