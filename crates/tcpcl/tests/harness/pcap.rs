//! A pcap of a recorded session with synthesised Ethernet/IPv4/TCP framing (handshake,
//! consistent sequence and acknowledgment numbers, checksums, FIN), BPv7 test bundles, and a
//! bounded tshark run: the Wireshark oracle shared by the tshark tests of both versions.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::Dir;

pub const PORT_A: u16 = 40_123;
pub const PORT_B: u16 = 4_557;

/// A classic pcap file (microsecond timestamps, Ethernet link type).
struct Pcap {
    out: Vec<u8>,
    usec: u64,
}

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum = 0u32;
    let mut odd: Option<u8> = None;
    for c in chunks {
        for &b in *c {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One direction of the TCP connection.
struct Side {
    ip: [u8; 4],
    port: u16,
    mac: [u8; 6],
    seq: u32,
}

impl Pcap {
    fn new() -> Self {
        let mut out = Vec::new();
        out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&262_144u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        Pcap {
            out,
            usec: 1_700_000_000_000_000,
        }
    }

    fn packet(&mut self, from: &Side, to: &Side, flags: u8, ack: u32, payload: &[u8]) {
        let mut tcp = Vec::with_capacity(20 + payload.len());
        tcp.extend_from_slice(&from.port.to_be_bytes());
        tcp.extend_from_slice(&to.port.to_be_bytes());
        tcp.extend_from_slice(&from.seq.to_be_bytes());
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.push(5 << 4);
        tcp.push(flags);
        tcp.extend_from_slice(&65_535u16.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(payload);
        let tcp_len = tcp.len() as u16;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&from.ip);
        pseudo.extend_from_slice(&to.ip);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&tcp_len.to_be_bytes());
        let c = checksum(&[&pseudo, &tcp]);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());

        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(20 + tcp_len).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&from.ip);
        ip.extend_from_slice(&to.ip);
        let c = checksum(&[&ip]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());

        let mut frame = Vec::new();
        frame.extend_from_slice(&to.mac);
        frame.extend_from_slice(&from.mac);
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&tcp);

        self.usec += 100;
        self.out
            .extend_from_slice(&((self.usec / 1_000_000) as u32).to_le_bytes());
        self.out
            .extend_from_slice(&((self.usec % 1_000_000) as u32).to_le_bytes());
        self.out
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.extend_from_slice(&frame);
    }
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;

pub fn pcap_of(wire: &[(Dir, Vec<u8>)]) -> Vec<u8> {
    let mut pcap = Pcap::new();
    let mut a = Side {
        ip: [10, 0, 0, 1],
        port: PORT_A,
        mac: [2, 0, 0, 0, 0, 1],
        seq: 1_000,
    };
    let mut b = Side {
        ip: [10, 0, 0, 2],
        port: PORT_B,
        mac: [2, 0, 0, 0, 0, 2],
        seq: 5_000_000,
    };
    pcap.packet(&a, &b, SYN, 0, &[]);
    a.seq += 1;
    pcap.packet(&b, &a, SYN | ACK, a.seq, &[]);
    b.seq += 1;
    pcap.packet(&a, &b, ACK, b.seq, &[]);
    for (dir, bytes) in wire {
        let (from, to) = match dir {
            Dir::AtoB => (&mut a, &mut b),
            Dir::BtoA => (&mut b, &mut a),
        };
        for chunk in bytes.chunks(8_192) {
            pcap.packet(from, to, ACK | PSH, to.seq, chunk);
            from.seq = from.seq.wrapping_add(chunk.len() as u32);
        }
        // The receiver acknowledges.
        pcap.packet(to, from, ACK, from.seq, &[]);
    }
    pcap.packet(&a, &b, FIN | ACK, b.seq, &[]);
    a.seq += 1;
    pcap.packet(&b, &a, FIN | ACK, a.seq, &[]);
    b.seq += 1;
    pcap.packet(&a, &b, ACK, b.seq, &[]);
    pcap.out
}

pub fn bpv7_bundle(payload_len: usize, seq: u8) -> Bytes {
    let payload: Vec<u8> = (0..payload_len).map(|i| (i as u8) ^ seq).collect();
    let b = bpv7::BundleBuilder::new(
        "ipn:1.1".parse().expect("eid"),
        "ipn:2.1".parse().expect("eid"),
    )
    .crc_type(bpv7::CrcType::Crc32c)
    .hop_limit(16)
    .payload(Bytes::from(payload))
    .build()
    .expect("bundle");
    Bytes::from(b.encode())
}

/// Runs tshark with a bounded wait; returns stdout.
pub fn tshark(args: &[&str]) -> String {
    let mut child = Command::new("tshark")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tshark must be installed (Debian package `tshark`, see ../shared/PEERS.md)");
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).expect("utf-8 output");
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "tshark failed: {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tshark did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.join().expect("reader")
}

/// The values of `field` in every frame of `file` (TCPCL on [`PORT_B`]), split at commas and
/// white space.
pub fn tshark_fields(file: &str, field: &str) -> Vec<String> {
    let decode_as = format!("tcp.port=={PORT_B},tcpcl");
    tshark(&[
        "-2", "-r", file, "-d", &decode_as, "-T", "fields", "-e", field,
    ])
    .split(|c: char| c == ',' || c.is_whitespace())
    .filter(|s| !s.is_empty())
    .map(str::to_string)
    .collect()
}

/// The numbers of the frames of `file` (TCPCL on [`PORT_B`]) that match the display `filter`.
pub fn tshark_frames(file: &str, filter: &str) -> Vec<String> {
    let decode_as = format!("tcp.port=={PORT_B},tcpcl");
    tshark(&[
        "-2",
        "-r",
        file,
        "-d",
        &decode_as,
        "-Y",
        filter,
        "-T",
        "fields",
        "-e",
        "frame.number",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// What a clean capture must not contain: malformed packets, bad BPv7 CRCs, expert errors.
pub const FLAGGED: &str = "_ws.malformed || _ws.expert.severity == error || bpv7.crc_status == 0";
