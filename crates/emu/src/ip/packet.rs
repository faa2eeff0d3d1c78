//! IP packets as the TUN devices hand them over: the `virtio_net_hdr` in front of each packet, and the
//! segmentation of a TCP segmentation-offload (TSO) packet into the packets that would cross a real link.
//!
//! With offloads on, the kernel gives the emulator one TSO packet of up to 64 KiB where a real interface would have
//! sent `ceil(payload / gso_size)` packets of at most the MTU. The channel model decides per *wire* packet, so the
//! emulator asks [`Packet::segments`] for their lengths; when every segment is delivered at the same time the TSO
//! packet travels whole (the receiving kernel accepts it as it is, checksum still partial), otherwise
//! [`Packet::write_segment`] builds the surviving segments one by one with complete IPv4/IPv6 and TCP checksums, as
//! the kernel's own software segmentation would (sequence numbers advanced, IPv4 ids incremented, FIN/PSH only on
//! the last segment, CWR only on the first).
//!
//! Everything here reads packets from the kernel, not from a peer, but is still written as a strict decoder: a
//! malformed header is a typed [`PacketError`], never a panic.

/// Bytes of the `virtio_net_hdr` before each packet (IFF_VNET_HDR without mergeable buffers).
pub const VNET_HDR_LEN: usize = 10;
/// `flags`: the checksum from `csum_start` on is partial and must be completed.
pub const F_NEEDS_CSUM: u8 = 1;
/// `gso_type`: not a GSO packet.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4.
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: TCP over IPv6.
pub const GSO_TCPV6: u8 = 4;

const PROTO_TCP: u8 = 6;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Why a packet could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than the virtio header or the IP/TCP headers it announces.
    #[error("truncated packet ({0} bytes)")]
    Truncated(usize),
    /// A GSO type the emulator did not enable (only TCPv4/TCPv6 segmentation is offered to the kernel).
    #[error("unsupported GSO type {0}")]
    UnsupportedGso(u8),
    /// A GSO packet that is not IPv4/IPv6 + TCP, or with inconsistent lengths.
    #[error("malformed GSO packet: {0}")]
    Malformed(&'static str),
}

/// The parsed `virtio_net_hdr` (little-endian fields: the emulator runs on little-endian hosts, where the TUN
/// driver uses the host's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM` and others.
    pub flags: u8,
    /// `GSO_*`.
    pub gso_type: u8,
    /// Header bytes (IP + TCP) as the kernel states them.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the partial checksum starts.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Parses the first [`VNET_HDR_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Result<VnetHdr, PacketError> {
        let h = b
            .get(..VNET_HDR_LEN)
            .ok_or(PacketError::Truncated(b.len()))?;
        let u16le = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        Ok(VnetHdr {
            flags: h[0],
            gso_type: h[1],
            hdr_len: u16le(2),
            gso_size: u16le(4),
            csum_start: u16le(6),
            csum_offset: u16le(8),
        })
    }

    /// Writes the header into `out[..VNET_HDR_LEN]`.
    pub fn write(&self, out: &mut [u8]) {
        if let Some(h) = out.get_mut(..VNET_HDR_LEN) {
            h[0] = self.flags;
            h[1] = self.gso_type;
            h[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
            h[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
            h[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
            h[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        }
    }
}

/// A packet read from a TUN device with offloads: header and IP packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The virtio header.
    pub hdr: VnetHdr,
    /// The IP packet (for GSO: headers once, then the payload of every segment).
    pub ip: &'a [u8],
    /// For GSO packets: the TCP/IP layout.
    tso: Option<Tso>,
}

/// Layout of a TSO packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tso {
    v6: bool,
    /// IP header length.
    l3: usize,
    /// IP + TCP header length.
    headers: usize,
    /// Payload bytes per segment.
    mss: usize,
    /// Number of segments.
    count: usize,
}

impl<'a> Packet<'a> {
    /// Parses `buf` = virtio header + IP packet.
    pub fn parse(buf: &'a [u8]) -> Result<Packet<'a>, PacketError> {
        let hdr = VnetHdr::parse(buf)?;
        let ip = buf.get(VNET_HDR_LEN..).unwrap_or(&[]);
        let tso = match hdr.gso_type {
            GSO_NONE => None,
            GSO_TCPV4 | GSO_TCPV6 => Some(tso_layout(ip, hdr)?),
            other => return Err(PacketError::UnsupportedGso(other & 0x7f)),
        };
        Ok(Packet { hdr, ip, tso })
    }

    /// Number of wire packets this stands for (1 unless it is a TSO packet).
    pub fn segment_count(&self) -> usize {
        self.tso.map_or(1, |t| t.count)
    }

    /// IP length of wire packet `i` (`i < segment_count()`).
    pub fn segment_len(&self, i: usize) -> usize {
        match self.tso {
            None => self.ip.len(),
            Some(t) => t.headers + segment_payload(&t, self.ip, i).len(),
        }
    }

    /// Writes wire packet `i` of a TSO packet, as a plain packet with a virtio header (no GSO, checksums
    /// complete), into `out`; returns the bytes written. `out` must hold `VNET_HDR_LEN + segment_len(i)`.
    /// For a packet that is not TSO, copies it as it is.
    pub fn write_segment(&self, i: usize, out: &mut [u8]) -> Option<usize> {
        let Some(t) = self.tso else {
            let n = VNET_HDR_LEN + self.ip.len();
            let dst = out.get_mut(..n)?;
            self.hdr.write(dst);
            dst[VNET_HDR_LEN..].copy_from_slice(self.ip);
            return Some(n);
        };
        let payload = segment_payload(&t, self.ip, i);
        let seg_len = t.headers + payload.len();
        let n = VNET_HDR_LEN + seg_len;
        let dst = out.get_mut(..n)?;
        VnetHdr::default().write(dst);
        let pkt = &mut dst[VNET_HDR_LEN..];
        pkt[..t.headers].copy_from_slice(self.ip.get(..t.headers)?);
        pkt[t.headers..].copy_from_slice(payload);
        let last = i + 1 == t.count;
        let first = i == 0;
        // IP header: lengths (and for IPv4 the id and header checksum).
        if t.v6 {
            let plen = u16::try_from(seg_len - 40).ok()?;
            pkt[4..6].copy_from_slice(&plen.to_be_bytes());
        } else {
            let tot = u16::try_from(seg_len).ok()?;
            pkt[2..4].copy_from_slice(&tot.to_be_bytes());
            let id = u16::from_be_bytes([pkt[4], pkt[5]]).wrapping_add(i as u16);
            pkt[4..6].copy_from_slice(&id.to_be_bytes());
            pkt[10..12].copy_from_slice(&[0, 0]);
            let c = fold(sum(&pkt[..t.l3], 0));
            pkt[10..12].copy_from_slice(&(!c).to_be_bytes());
        }
        // TCP header: sequence number, flags, checksum.
        let tcp = t.l3;
        let seq = u32::from_be_bytes([pkt[tcp + 4], pkt[tcp + 5], pkt[tcp + 6], pkt[tcp + 7]])
            .wrapping_add((i * t.mss) as u32);
        pkt[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = pkt[tcp + 13];
        if !last {
            flags &= !(TCP_FIN | TCP_PSH);
        }
        if !first {
            flags &= !TCP_CWR;
        }
        pkt[tcp + 13] = flags;
        pkt[tcp + 16..tcp + 18].copy_from_slice(&[0, 0]);
        let tcp_len = seg_len - t.l3;
        let pseudo = if t.v6 {
            let mut s = sum(&pkt[8..40], 0);
            s += tcp_len as u32 + u32::from(PROTO_TCP);
            s
        } else {
            let mut s = sum(&pkt[12..20], 0);
            s += tcp_len as u32 + u32::from(PROTO_TCP);
            s
        };
        let c = fold(sum(&pkt[tcp..], pseudo));
        pkt[tcp + 16..tcp + 18].copy_from_slice(&(!c).to_be_bytes());
        Some(n)
    }
}

/// The payload bytes of segment `i` of a TSO packet (empty beyond the last).
fn segment_payload<'p>(t: &Tso, ip: &'p [u8], i: usize) -> &'p [u8] {
    let start = t
        .headers
        .saturating_add(i.saturating_mul(t.mss))
        .min(ip.len());
    let end = start.saturating_add(t.mss).min(ip.len());
    ip.get(start..end).unwrap_or(&[])
}

fn tso_layout(ip: &[u8], hdr: VnetHdr) -> Result<Tso, PacketError> {
    let first = *ip.first().ok_or(PacketError::Truncated(0))?;
    let (v6, l3) = match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 || ip.get(9) != Some(&PROTO_TCP) {
                return Err(PacketError::Malformed("IPv4 TSO packet without TCP"));
            }
            (false, ihl)
        }
        6 => {
            if ip.get(6) != Some(&PROTO_TCP) {
                return Err(PacketError::Malformed(
                    "IPv6 TSO packet with extension headers or without TCP",
                ));
            }
            (true, 40)
        }
        _ => return Err(PacketError::Malformed("not IPv4 or IPv6")),
    };
    let doff = usize::from(*ip.get(l3 + 12).ok_or(PacketError::Truncated(ip.len()))? >> 4) * 4;
    if doff < 20 {
        return Err(PacketError::Malformed("TCP data offset below 20"));
    }
    let headers = l3 + doff;
    if ip.len() < headers {
        return Err(PacketError::Truncated(ip.len()));
    }
    let mss = usize::from(hdr.gso_size);
    if mss == 0 {
        return Err(PacketError::Malformed("gso_size 0"));
    }
    let payload = ip.len() - headers;
    Ok(Tso {
        v6,
        l3,
        headers,
        mss,
        count: payload.div_ceil(mss).max(1),
    })
}

/// One's-complement sum of `b` (big-endian 16-bit words) added to `acc`.
fn sum(b: &[u8], mut acc: u32) -> u32 {
    let mut chunks = b.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
        // Fold early so the accumulator cannot overflow on 64 KiB inputs.
        if acc > 0xffff_0000 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TSO packet as the kernel hands it over: virtio header, IPv4 or IPv6, TCP with 12 bytes of options.
    fn tso(v6: bool, payload: &[u8], mss: u16, flags: u8) -> Vec<u8> {
        let tcp_len = 32;
        let mut ip = Vec::new();
        if v6 {
            ip.extend_from_slice(&[0x60, 0, 0, 0]);
            ip.extend_from_slice(&((tcp_len + payload.len()) as u16).to_be_bytes());
            ip.extend_from_slice(&[PROTO_TCP, 64]);
            ip.extend_from_slice(&[0xfd; 16]);
            ip.extend_from_slice(&[0xfe; 16]);
        } else {
            ip.extend_from_slice(&[0x45, 0]);
            ip.extend_from_slice(&((20 + tcp_len + payload.len()) as u16).to_be_bytes());
            ip.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, PROTO_TCP, 0, 0]);
            ip.extend_from_slice(&[10, 201, 0, 1, 10, 201, 0, 2]);
        }
        let mut tcp = vec![0u8; tcp_len];
        tcp[0..2].copy_from_slice(&5001u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&40000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&0xffff_fff0u32.to_be_bytes()); // wraps within the packet
        tcp[12] = 8 << 4;
        tcp[13] = flags;
        ip.extend_from_slice(&tcp);
        ip.extend_from_slice(payload);
        let mut buf = vec![0u8; VNET_HDR_LEN];
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: 0,
            gso_size: mss,
            csum_start: 0,
            csum_offset: 16,
        }
        .write(&mut buf);
        buf.extend_from_slice(&ip);
        buf
    }

    fn verify(v6: bool, seg: &[u8]) -> (u32, u8, Vec<u8>) {
        let h = VnetHdr::parse(seg).unwrap();
        assert_eq!((h.gso_type, h.flags), (GSO_NONE, 0));
        let p = &seg[VNET_HDR_LEN..];
        let l3 = if v6 { 40 } else { 20 };
        let pseudo = if v6 {
            assert_eq!(usize::from(u16::from_be_bytes([p[4], p[5]])), p.len() - 40);
            sum(&p[8..40], 0) + (p.len() - l3) as u32 + 6
        } else {
            assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), p.len());
            assert_eq!(fold(sum(&p[..20], 0)), 0xffff, "IPv4 header checksum");
            sum(&p[12..20], 0) + (p.len() - l3) as u32 + 6
        };
        assert_eq!(fold(sum(&p[l3..], pseudo)), 0xffff, "TCP checksum");
        let seq = u32::from_be_bytes([p[l3 + 4], p[l3 + 5], p[l3 + 6], p[l3 + 7]]);
        (seq, p[l3 + 13], p[l3 + 32..].to_vec())
    }

    #[test]
    fn tso_packets_split_into_valid_wire_packets() {
        let payload: Vec<u8> = (0..5001u32).map(|i| (i * 7 + 3) as u8).collect();
        for v6 in [false, true] {
            let buf = tso(v6, &payload, 1448, TCP_PSH | TCP_FIN | TCP_CWR | 0x10);
            let p = Packet::parse(&buf).unwrap();
            assert_eq!(p.segment_count(), 4);
            let l3 = if v6 { 40 } else { 20 };
            assert_eq!(p.segment_len(0), l3 + 32 + 1448);
            assert_eq!(p.segment_len(3), l3 + 32 + 5001 - 3 * 1448);
            let mut joined = Vec::new();
            for i in 0..4 {
                let mut out = vec![0u8; VNET_HDR_LEN + p.segment_len(i)];
                let n = p.write_segment(i, &mut out).unwrap();
                assert_eq!(n, out.len());
                let (seq, flags, data) = verify(v6, &out);
                assert_eq!(seq, 0xffff_fff0u32.wrapping_add(1448 * i as u32));
                assert_eq!(
                    flags & (TCP_FIN | TCP_PSH) != 0,
                    i == 3,
                    "FIN/PSH on the last only"
                );
                assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR on the first only");
                assert_eq!(flags & 0x10, 0x10, "ACK kept");
                if !v6 {
                    let id = u16::from_be_bytes([out[VNET_HDR_LEN + 4], out[VNET_HDR_LEN + 5]]);
                    assert_eq!(id, 0x1234 + i as u16);
                }
                joined.extend_from_slice(&data);
            }
            assert_eq!(joined, payload);
        }
    }

    #[test]
    fn malformed_headers_are_errors_not_panics() {
        assert_eq!(
            Packet::parse(&[0; 4]).unwrap_err(),
            PacketError::Truncated(4)
        );
        let mut buf = tso(false, &[1; 100], 50, 0);
        buf[VNET_HDR_LEN + 9] = 17; // UDP
        assert!(matches!(
            Packet::parse(&buf),
            Err(PacketError::Malformed(_))
        ));
        let mut buf = tso(false, &[1; 100], 0, 0);
        assert!(Packet::parse(&buf).is_err());
        buf[1] = 3; // UFO was never enabled
        assert_eq!(
            Packet::parse(&buf).unwrap_err(),
            PacketError::UnsupportedGso(3)
        );
        for cut in 0..VNET_HDR_LEN + 52 {
            let b = tso(false, &[1; 100], 50, 0);
            let _ = Packet::parse(&b[..cut]);
        }
        // A plain (non-GSO) packet is one segment, copied as it is.
        let mut plain = vec![0u8; VNET_HDR_LEN];
        plain.extend_from_slice(&[0x45; 60]);
        let p = Packet::parse(&plain).unwrap();
        assert_eq!((p.segment_count(), p.segment_len(0)), (1, 60));
    }
}
