//! Putting together the application data units a node delivers fragment by fragment (ADUs
//! larger than it reassembles in memory): each fragment's payload goes at its offset, overlaps
//! and re-offered fragments are de-duplicated by byte ranges, and the ADU is complete once every
//! byte arrived.
//!
//! With an output directory the ADU is written in place into `NAME.part`, the ranges received
//! are appended to `NAME.ranges` before each fragment is acknowledged (so a restarted `dtnkit
//! recv` resumes where it was), and `NAME.part` becomes `NAME` when complete. Without one, with
//! `--hash`, only its SHA-256 is computed, in order: fragments ahead of the next expected byte
//! wait in memory (bounded). Without either only the byte ranges received are kept (nothing of
//! the data), however out of order the fragments arrive.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Most bytes of out-of-order fragments held while hashing an ADU in order.
const MAX_HELD_BYTES: u64 = 256 << 20;

/// Byte ranges received, merged: start → end.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    /// Adds `[start, end)`.
    pub fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        // Merge with every range that touches or overlaps [start, end).
        let touching: Vec<(u64, u64)> = self
            .0
            .range(..=end)
            .filter(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.0.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.0.insert(start, end);
    }

    /// Bytes covered.
    #[cfg(test)]
    pub fn covered(&self) -> u64 {
        self.0.iter().map(|(s, e)| e - s).sum()
    }

    /// True when `[0, total)` is covered.
    pub fn complete(&self, total: u64) -> bool {
        total == 0 || self.0.get(&0).is_some_and(|&e| e >= total)
    }
}

/// The identity of an ADU: source, creation time and sequence number.
pub type AduId = (String, u64, u64);

/// One ADU being written to a file.
struct AduFile {
    part: PathBuf,
    done: PathBuf,
    ranges_path: PathBuf,
    file: File,
    ranges_log: File,
    total: u64,
    have: Ranges,
}

/// One ADU being hashed in order.
struct AduHash {
    total: u64,
    next: u64,
    held: BTreeMap<u64, Bytes>,
    held_bytes: u64,
    hasher: Sha256,
}

/// What a fragment completed.
#[derive(Debug)]
pub struct Completed {
    /// The ADU's total length.
    pub len: u64,
    /// Its SHA-256, when asked for.
    pub sha256: Option<String>,
}

/// ADUs in progress.
pub struct Assembler {
    out_dir: Option<PathBuf>,
    hash: bool,
    files: HashMap<AduId, AduFile>,
    hashes: HashMap<AduId, AduHash>,
    /// ADUs only counted (no output directory, no hash): their length and the ranges received.
    counts: HashMap<AduId, (u64, Ranges)>,
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

impl Assembler {
    /// Writes ADUs under `out_dir` (or only hashes them); `hash`: compute their SHA-256.
    pub fn new(out_dir: Option<PathBuf>, hash: bool) -> Self {
        Self {
            out_dir,
            hash,
            files: HashMap::new(),
            hashes: HashMap::new(),
            counts: HashMap::new(),
        }
    }

    /// Takes the fragment at `offset` of the ADU `id` of `total` bytes. `Some` when the ADU
    /// is complete with it. Returns only once the bytes are written (and their range logged).
    pub fn add(
        &mut self,
        id: &AduId,
        name: &str,
        offset: u64,
        total: u64,
        data: &[u8],
    ) -> anyhow::Result<Option<Completed>> {
        let end = offset.saturating_add(data.len() as u64);
        if end > total {
            anyhow::bail!(
                "fragment at offset {offset} with {} bytes lies beyond its ADU of {total} bytes",
                data.len()
            );
        }
        match self.out_dir.clone() {
            Some(dir) => self.add_to_file(&dir, id, name, offset, total, data),
            None if self.hash => self.add_to_hash(id, offset, total, data),
            None => self.add_to_count(id, offset, total, data.len() as u64),
        }
    }

    fn add_to_count(
        &mut self,
        id: &AduId,
        offset: u64,
        total: u64,
        len: u64,
    ) -> anyhow::Result<Option<Completed>> {
        let (known, have) = self
            .counts
            .entry(id.clone())
            .or_insert_with(|| (total, Ranges::default()));
        if *known != total {
            anyhow::bail!("fragment says its ADU has {total} bytes, earlier ones said {known}");
        }
        have.insert(offset, offset + len);
        if !have.complete(total) {
            return Ok(None);
        }
        self.counts.remove(id);
        Ok(Some(Completed {
            len: total,
            sha256: None,
        }))
    }

    fn add_to_file(
        &mut self,
        dir: &Path,
        id: &AduId,
        name: &str,
        offset: u64,
        total: u64,
        data: &[u8],
    ) -> anyhow::Result<Option<Completed>> {
        if !self.files.contains_key(id) {
            let f = open_adu_file(dir, name, total)?;
            self.files.insert(id.clone(), f);
        }
        let Some(f) = self.files.get_mut(id) else {
            return Ok(None);
        };
        if f.total != total {
            anyhow::bail!(
                "fragment says its ADU has {total} bytes, earlier ones said {}",
                f.total
            );
        }
        f.file
            .write_all_at(data, offset)
            .with_context(|| format!("writing {}", f.part.display()))?;
        let end = offset + data.len() as u64;
        writeln!(f.ranges_log, "{offset} {end}")
            .and_then(|()| f.ranges_log.flush())
            .with_context(|| format!("writing {}", f.ranges_path.display()))?;
        f.have.insert(offset, end);
        if !f.have.complete(total) {
            return Ok(None);
        }
        let Some(f) = self.files.remove(id) else {
            return Ok(None);
        };
        f.file
            .sync_all()
            .with_context(|| format!("writing {}", f.part.display()))?;
        std::fs::rename(&f.part, &f.done)
            .with_context(|| format!("renaming {} to {}", f.part.display(), f.done.display()))?;
        let _ = std::fs::remove_file(&f.ranges_path);
        let sha256 = if self.hash {
            Some(hash_file(&f.done)?)
        } else {
            None
        };
        Ok(Some(Completed { len: total, sha256 }))
    }

    fn add_to_hash(
        &mut self,
        id: &AduId,
        offset: u64,
        total: u64,
        data: &[u8],
    ) -> anyhow::Result<Option<Completed>> {
        let h = self.hashes.entry(id.clone()).or_insert_with(|| AduHash {
            total,
            next: 0,
            held: BTreeMap::new(),
            held_bytes: 0,
            hasher: Sha256::new(),
        });
        if h.total != total {
            anyhow::bail!(
                "fragment says its ADU has {total} bytes, earlier ones said {}",
                h.total
            );
        }
        if offset > h.next {
            if h.held_bytes + data.len() as u64 > MAX_HELD_BYTES {
                anyhow::bail!(
                    "fragments arrive too far out of order to hash in memory ({} bytes held); \
                     use --out-dir",
                    h.held_bytes
                );
            }
            if h.held
                .insert(offset, Bytes::copy_from_slice(data))
                .is_none()
            {
                h.held_bytes += data.len() as u64;
            }
        } else {
            feed(h, offset, data);
        }
        while let Some((&o, _)) = h.held.first_key_value() {
            if o > h.next {
                break;
            }
            let Some((o, d)) = h.held.pop_first() else {
                break;
            };
            h.held_bytes -= d.len() as u64;
            feed(h, o, &d);
        }
        if h.next < total {
            return Ok(None);
        }
        let Some(h) = self.hashes.remove(id) else {
            return Ok(None);
        };
        Ok(Some(Completed {
            len: total,
            sha256: self.hash.then(|| hex(&h.hasher.finalize())),
        }))
    }
}

/// Hashes the part of `data` (at `offset`) beyond what was hashed already.
fn feed(h: &mut AduHash, offset: u64, data: &[u8]) {
    let end = offset + data.len() as u64;
    if end <= h.next {
        return;
    }
    let skip = (h.next - offset) as usize;
    h.hasher.update(&data[skip..]);
    h.next = end;
}

fn open_adu_file(dir: &Path, name: &str, total: u64) -> anyhow::Result<AduFile> {
    let done = dir.join(name);
    let part = dir.join(format!("{name}.part"));
    let ranges_path = dir.join(format!("{name}.ranges"));
    let file = OpenOptions::new()
        .write(true)
        .read(true)
        .create(true)
        .truncate(false)
        .open(&part)
        .with_context(|| format!("creating {}", part.display()))?;
    let mut have = Ranges::default();
    // A previous run's progress on this ADU (the node does not offer again what it acked).
    if let Ok(f) = File::open(&ranges_path) {
        for line in std::io::BufReader::new(f).lines() {
            let line = line.with_context(|| format!("reading {}", ranges_path.display()))?;
            let mut it = line.split_whitespace().map(str::parse::<u64>);
            if let (Some(Ok(s)), Some(Ok(e))) = (it.next(), it.next()) {
                have.insert(s, e.min(total));
            }
        }
    } else {
        file.set_len(total)
            .with_context(|| format!("creating {}", part.display()))?;
    }
    let ranges_log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&ranges_path)
        .with_context(|| format!("creating {}", ranges_path.display()))?;
    Ok(AduFile {
        part,
        done,
        ranges_path,
        file,
        ranges_log,
        total,
        have,
    })
}

/// SHA-256 of a file, read in 1 MiB pieces.
pub fn hash_file(p: &Path) -> anyhow::Result<String> {
    let mut f = File::open(p).with_context(|| format!("reading {}", p.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", p.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_complete() {
        let mut r = Ranges::default();
        r.insert(10, 20);
        r.insert(30, 40);
        assert!(!r.complete(40));
        r.insert(15, 31);
        assert_eq!(r.0.len(), 1);
        r.insert(0, 10);
        assert_eq!(r.covered(), 40);
        assert!(r.complete(40));
        r.insert(5, 5);
        assert_eq!(r.covered(), 40);
    }

    #[test]
    fn overlapping_and_repeated_fragments_make_the_adu_once() {
        let adu: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        let want = hex(&Sha256::digest(&adu));
        let id: AduId = ("ipn:1.1".into(), 5, 0);
        // Out of order, overlapping, repeated.
        let pieces = [
            (6000, 4000),
            (0, 3000),
            (2000, 3000),
            (0, 3000),
            (4000, 2500),
        ];
        let dir = tempfile::tempdir().unwrap();
        for out in [None, Some(dir.path().to_path_buf())] {
            let mut a = Assembler::new(out.clone(), true);
            let mut done = None;
            for (o, l) in pieces {
                let r = a
                    .add(
                        &id,
                        "adu.bin",
                        o,
                        adu.len() as u64,
                        &adu[o as usize..(o + l) as usize],
                    )
                    .unwrap();
                if r.is_some() {
                    assert!(done.is_none(), "completed twice");
                    done = r;
                }
            }
            let done = done.expect("complete");
            assert_eq!(done.len, 10_000);
            assert_eq!(done.sha256.as_deref(), Some(want.as_str()));
            if out.is_some() {
                assert_eq!(std::fs::read(dir.path().join("adu.bin")).unwrap(), adu);
                assert!(!dir.path().join("adu.bin.ranges").exists());
            }
        }
    }

    #[test]
    fn a_restarted_receiver_resumes_from_the_logged_ranges() {
        let adu: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
        let id: AduId = ("ipn:1.1".into(), 6, 1);
        let dir = tempfile::tempdir().unwrap();
        {
            let mut a = Assembler::new(Some(dir.path().to_path_buf()), false);
            assert!(a
                .add(&id, "x.bin", 0, 5000, &adu[..2000])
                .unwrap()
                .is_none());
        }
        let mut a = Assembler::new(Some(dir.path().to_path_buf()), true);
        a.add(&id, "x.bin", 2000, 5000, &adu[2000..])
            .unwrap()
            .expect("complete after the restart");
        assert_eq!(std::fs::read(dir.path().join("x.bin")).unwrap(), adu);
    }

    #[test]
    fn a_fragment_beyond_its_adu_is_an_error() {
        let mut a = Assembler::new(None, true);
        let e = a
            .add(&("ipn:1.1".into(), 1, 1), "n", 90, 100, &[0u8; 20])
            .unwrap_err();
        assert!(e.to_string().contains("beyond"), "{e}");
    }

    #[test]
    fn counting_only_holds_no_data_however_far_out_of_order() {
        // Without an output directory or a hash, fragments far ahead of the first byte are
        // only ranges: 1 GiB in 4 MiB pieces, last to first, completes once.
        let mut a = Assembler::new(None, false);
        let id: AduId = ("ipn:1.1".into(), 1, 1);
        let (piece, total) = (4u64 << 20, 1u64 << 30);
        let data = vec![0u8; piece as usize];
        for k in (1..total / piece).rev() {
            assert!(a.add(&id, "n", k * piece, total, &data).unwrap().is_none());
        }
        let done = a.add(&id, "n", 0, total, &data).unwrap().expect("complete");
        assert_eq!((done.len, done.sha256), (total, None));
        assert!(a.counts.is_empty() && a.hashes.is_empty());
        // A later ADU of the same id starts over; its fragments must agree on its length.
        assert!(a.add(&id, "n", 0, 10, &data[..5]).unwrap().is_none());
        let e = a.add(&id, "n", 5, 7, &data[..2]).unwrap_err();
        assert!(e.to_string().contains("earlier ones said 10"), "{e}");
    }
}
