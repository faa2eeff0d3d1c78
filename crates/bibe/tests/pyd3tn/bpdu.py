"""Encodes BIBE protocol data units with pyd3tn (uD3TN's Python library), for
crates/bibe/tests/pyd3tn_bpdu.rs.

Reads one JSON list of cases on stdin: {"tid", "rtime", "compat", "payload_len", "seq"}.
For each, pyd3tn encodes a bundle ipn:1.1 -> ipn:3.1 with that many payload bytes, then the
BPDU administrative record carrying it (record type 64443, or 7 with compat). Writes one JSON
list: {"inner": hex of the bundle, "record": hex of the administrative record}.
"""
import json
import sys

from pyd3tn.bundle7 import BibeProtocolDataUnit, serialize_bundle7


def main():
    out = []
    for case in json.load(sys.stdin):
        payload = bytes((i * 7 + 3) % 256 for i in range(case["payload_len"]))
        inner = serialize_bundle7(
            "ipn:1.1",
            "ipn:3.1",
            payload,
            creation_timestamp=1_700_000_000,
            sequence_number=case["seq"],
            lifetime=3600,
        )
        bpdu = BibeProtocolDataUnit(
            inner,
            transmission_id=case["tid"],
            retransmission_time=case["rtime"],
            compatibility=case["compat"],
        )
        out.append({"inner": inner.hex(), "record": bpdu.data.hex()})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
