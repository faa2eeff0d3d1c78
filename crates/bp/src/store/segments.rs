//! The payload segment log of [`super::RedbStore`]: large bundle payloads appended to segment
//! files instead of being copied into the B-tree.
//!
//! redb keeps a value inside its leaf page: a 1 MB bundle is copied into a fresh page, checksummed,
//! written, read back through the page cache and, when deleted, its page is read again just to be
//! freed. Large payloads are instead appended to the active segment file (`NNNNNNNN.seg`, rotated
//! at a configured size) with one positioned write each, and only a 28-byte [`SegRef`] (segment,
//! offset, length, CRC-32C) goes into the database. Deleting the bundle deletes the reference; a
//! sealed segment whose last referenced payload is gone is unlinked.
//!
//! Consistency: the database is the only source of truth. Payloads are written (and, when durable,
//! `fdatasync`ed, and a new segment's directory entry fsynced) *before* the metadata transaction
//! that references them commits; a segment is unlinked only *after* the commit that removed its
//! last reference. A crash therefore leaves at worst unreferenced bytes (a tail after the last
//! referenced payload, or a whole unreferenced segment), which [`SegmentLog::open`] removes.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

/// Where a payload lives in the segment log: what the database stores instead of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegRef {
    /// Segment id (file `NNNNNNNN.seg`).
    pub seg: u64,
    /// Byte offset in the segment.
    pub offset: u64,
    /// Payload length.
    pub len: u64,
    /// CRC-32C of the payload, checked on every read.
    pub crc: u32,
}

/// Encoded size of a [`SegRef`].
pub(crate) const SEG_REF_LEN: usize = 28;

impl SegRef {
    /// Fixed big-endian encoding: seg, offset, len (u64 each), crc (u32).
    pub(crate) fn encode(&self) -> [u8; SEG_REF_LEN] {
        let mut out = [0u8; SEG_REF_LEN];
        out[0..8].copy_from_slice(&self.seg.to_be_bytes());
        out[8..16].copy_from_slice(&self.offset.to_be_bytes());
        out[16..24].copy_from_slice(&self.len.to_be_bytes());
        out[24..28].copy_from_slice(&self.crc.to_be_bytes());
        out
    }

    /// Decodes [`SegRef::encode`]'s output; `None` if the length is wrong.
    pub(crate) fn decode(b: &[u8]) -> Option<SegRef> {
        let b: &[u8; SEG_REF_LEN] = b.try_into().ok()?;
        let u = |r: std::ops::Range<usize>| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[r]);
            u64::from_be_bytes(a)
        };
        let mut c = [0u8; 4];
        c.copy_from_slice(&b[24..28]);
        Some(SegRef {
            seg: u(0..8),
            offset: u(8..16),
            len: u(16..24),
            crc: u32::from_be_bytes(c),
        })
    }

    fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// Why a referenced payload could not be returned.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The reference points outside what the segment holds (or at a missing segment).
    OutOfBounds(String),
    /// The bytes read do not match the recorded CRC-32C.
    Checksum {
        /// Recorded.
        expected: u32,
        /// Computed.
        actual: u32,
    },
    /// The file could not be read.
    Io(std::io::Error),
}

#[derive(Debug, Default)]
struct SegInfo {
    /// Committed references into the segment.
    live: u64,
    /// Bytes written (the readable extent).
    len: u64,
}

#[derive(Debug)]
struct Active {
    id: u64,
    file: Arc<File>,
}

/// What a failed metadata commit must undo: the length each touched segment had before.
#[derive(Debug, Default)]
pub(crate) struct Undo {
    truncate: Vec<(u64, u64)>,
}

/// Readers kept open at most (segments are reopened on demand beyond that).
const MAX_READERS: usize = 32;

/// Dead segment files kept for reuse instead of being unlinked (disk held beyond the live
/// payloads: at most this many segments).
const MAX_SPARES: usize = 2;

/// Payloads at least this long are read by mapping their range of the segment file instead of
/// copying them into a new allocation. Measured on loopback (TCPCL, 50 MB bundles, volatile
/// store; docs/throughput.md): a fresh 50 MB buffer is above glibc's largest mmap threshold
/// (32 MiB), so every read paid for a new anonymous mapping — page faults and zeroing, half of
/// the agent thread's cycles — plus the copy out of the page cache. A mapping of the page cache's
/// own pages costs neither. Below this size the allocator reuses freed buffers and the copy is
/// cheaper than setting up and tearing down a mapping.
pub(crate) const MAP_MIN_BYTES: usize = 16 << 20;

/// A payload read by mapping its range of a segment file: the mapping and the pin that keeps the
/// segment from being reused or unlinked while any `Bytes` of it lives.
struct Mapped {
    map: memmap2::Mmap,
    _pin: Arc<()>,
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

/// The segment files of one store.
#[derive(Debug)]
pub(crate) struct SegmentLog {
    dir: PathBuf,
    max_segment: u64,
    segs: BTreeMap<u64, SegInfo>,
    active: Option<Active>,
    next_id: u64,
    readers: HashMap<u64, Arc<File>>,
    /// Dead segments kept on disk for reuse (see [`SegmentLog::reap`]).
    spares: Vec<u64>,
    /// One pin per segment with mapped payloads ([`MAP_MIN_BYTES`]); a clone lives in each
    /// mapped `Bytes`. A dead segment whose pin is still shared is neither reused nor unlinked
    /// (its bytes are still being sent or delivered); the next reap after they are dropped
    /// retires it.
    pins: HashMap<u64, Arc<()>>,
    /// The store's stager, offered dead segments before they are kept as spares or unlinked
    /// ([`super::staging::Stager::offer_spare`]).
    stage_pool: Option<super::staging::Stager>,
}

/// The file name of segment `id` (also the name of the staging file that becomes it).
pub(super) fn seg_name(id: u64) -> String {
    format!("{id:08}.seg")
}

fn parse_seg_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl SegmentLog {
    /// Opens the segment directory (created if missing) given every committed reference.
    ///
    /// Checks that each reference lies inside its segment file (an error names the bundle key
    /// otherwise), unlinks segment files nothing references and truncates the unreferenced tail
    /// of the others (both left by a crash between a payload write and its metadata commit, or
    /// between a commit and an unlink). Appending always starts in a new segment.
    pub(crate) fn open(
        dir: &Path,
        max_segment: u64,
        refs: &[(u64, SegRef)],
    ) -> Result<SegmentLog, (Option<u64>, String)> {
        std::fs::create_dir_all(dir).map_err(|e| (None, format!("{}: {e}", dir.display())))?;
        let mut on_disk: BTreeMap<u64, u64> = BTreeMap::new();
        let rd = std::fs::read_dir(dir).map_err(|e| (None, format!("{}: {e}", dir.display())))?;
        for entry in rd {
            let entry = entry.map_err(|e| (None, format!("{}: {e}", dir.display())))?;
            let name = entry.file_name();
            let name = name.to_str().unwrap_or_default();
            if super::staging::is_stage_name(name) {
                // Bundles staged for a commit that never happened (a crash mid-stream).
                std::fs::remove_file(entry.path())
                    .map_err(|e| (None, format!("{}: {e}", entry.path().display())))?;
                continue;
            }
            let Some(id) = parse_seg_name(name) else {
                continue;
            };
            let len = entry
                .metadata()
                .map_err(|e| (None, format!("{}: {e}", entry.path().display())))?
                .len();
            on_disk.insert(id, len);
        }
        let mut segs: BTreeMap<u64, SegInfo> = BTreeMap::new();
        let mut max_end: BTreeMap<u64, u64> = BTreeMap::new();
        for (key, r) in refs {
            let file_len = on_disk.get(&r.seg).copied();
            let end = r.end();
            match (file_len, end) {
                (Some(fl), Some(end)) if end <= fl => {
                    let e = max_end.entry(r.seg).or_insert(0);
                    *e = (*e).max(end);
                    segs.entry(r.seg).or_default().live += 1;
                }
                _ => {
                    return Err((
                        Some(*key),
                        format!(
                            "payload reference (segment {}, offset {}, length {}) lies outside \
                             segment file {} ({})",
                            r.seg,
                            r.offset,
                            r.len,
                            dir.join(seg_name(r.seg)).display(),
                            file_len.map_or("missing".to_string(), |l| format!("{l} bytes")),
                        ),
                    ));
                }
            }
        }
        for (&id, &file_len) in &on_disk {
            let path = dir.join(seg_name(id));
            match max_end.get(&id) {
                None => {
                    std::fs::remove_file(&path)
                        .map_err(|e| (None, format!("{}: {e}", path.display())))?;
                }
                Some(&end) => {
                    if file_len > end {
                        OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .and_then(|f| f.set_len(end))
                            .map_err(|e| (None, format!("{}: {e}", path.display())))?;
                    }
                    if let Some(s) = segs.get_mut(&id) {
                        s.len = end;
                    }
                }
            }
        }
        let next_id = on_disk.keys().next_back().map_or(0, |m| m + 1);
        Ok(SegmentLog {
            dir: dir.to_path_buf(),
            max_segment: max_segment.max(1),
            segs,
            active: None,
            next_id,
            readers: HashMap::new(),
            spares: Vec::new(),
            pins: HashMap::new(),
            stage_pool: None,
        })
    }

    /// Shares one id space with `stager` (its files are named as the segments they become, see
    /// [`SegmentLog::adopt`]) and offers it dead segments for reuse as staging files (see
    /// [`SegmentLog::reap`]).
    pub(crate) fn set_stage_pool(&mut self, stager: super::staging::Stager) {
        stager.reserve_ids_below(self.next_id);
        self.stage_pool = Some(stager);
    }

    /// A new segment id (from the stager's counter once there is one, so the two never meet).
    fn take_id(&mut self) -> u64 {
        match &self.stage_pool {
            Some(st) => st.take_id(),
            None => {
                let id = self.next_id;
                self.next_id += 1;
                id
            }
        }
    }

    /// Number of segment files (sealed and active).
    pub(crate) fn segment_count(&self) -> usize {
        self.segs.len()
    }

    fn create_segment(&mut self) -> std::io::Result<Active> {
        // Reuse a dead segment's file, under its own id, when there is one: overwriting blocks
        // the file already has lets `fdatasync` skip the file-system journal commit that growing
        // a file costs (the durable commit of a large payload is dominated by it otherwise).
        let mut recycled = None;
        while let Some(old) = self.spares.pop() {
            if let Ok(f) = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.dir.join(seg_name(old)))
            {
                recycled = Some((old, f));
                break;
            }
        }
        let (id, file) = match recycled {
            Some(r) => r,
            None => {
                let id = self.take_id();
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(self.dir.join(seg_name(id)))?;
                (id, file)
            }
        };
        self.segs.insert(id, SegInfo::default());
        Ok(Active {
            id,
            file: Arc::new(file),
        })
    }

    /// Takes a finished staging file into the log as a sealed segment and returns its id: as it
    /// is when the stager of this log named it (segment id = file id), renamed otherwise;
    /// never copied. It holds no committed reference yet: the caller commits references into
    /// it, or [`SegmentLog::reap`] retires it. The directory entry is made stable by
    /// [`SegmentLog::sync`].
    pub(crate) fn adopt(&mut self, run: &super::staging::StagedRun) -> std::io::Result<u64> {
        let path = run
            .path()
            .ok_or_else(|| std::io::Error::other("staged in memory, not in a file"))?;
        if run.is_adopted() {
            // Its file is a segment already (an earlier commit that failed took it): taking it
            // again would give one file two owners.
            return Err(std::io::Error::other(
                "staged file already taken into the segment log",
            ));
        }
        let in_place = self.dir.join(seg_name(run.id()));
        let id = if path == in_place && !self.segs.contains_key(&run.id()) {
            run.id()
        } else {
            let id = self.take_id();
            std::fs::rename(path, self.dir.join(seg_name(id)))?;
            id
        };
        run.mark_adopted();
        self.segs.insert(
            id,
            SegInfo {
                live: 0,
                len: run.len(),
            },
        );
        Ok(id)
    }

    /// Makes the segment directory's entries stable (after [`SegmentLog::adopt`]).
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        sync_dir(&self.dir)
    }

    /// Appends `payloads` (one positioned write each) and, when `durable`, makes them stable
    /// (`fdatasync` of each touched segment, plus the directory when a segment was created).
    /// Returns their references and what to undo if the metadata commit then fails; on its own
    /// failure nothing written stays referenced (the caller never commits the references).
    pub(crate) fn append(
        &mut self,
        payloads: &[&Bytes],
        durable: bool,
    ) -> std::io::Result<(Vec<SegRef>, Undo)> {
        let mut refs = Vec::with_capacity(payloads.len());
        let mut undo = Undo::default();
        let mut created = false;
        let r = self.append_inner(payloads, &mut refs, &mut undo, &mut created);
        let r = r.and_then(|()| {
            if durable {
                for &(id, _) in &undo.truncate {
                    if let Some(a) = self.active.as_ref().filter(|a| a.id == id) {
                        a.file.sync_data()?;
                    } else {
                        File::open(self.dir.join(seg_name(id)))?.sync_data()?;
                    }
                }
                if created {
                    sync_dir(&self.dir)?;
                }
            }
            Ok(())
        });
        match r {
            Ok(()) => Ok((refs, undo)),
            Err(e) => {
                self.undo(undo);
                Err(e)
            }
        }
    }

    fn append_inner(
        &mut self,
        payloads: &[&Bytes],
        refs: &mut Vec<SegRef>,
        undo: &mut Undo,
        created: &mut bool,
    ) -> std::io::Result<()> {
        for p in payloads {
            let len = p.len() as u64;
            let cur_len = self
                .active
                .as_ref()
                .and_then(|a| self.segs.get(&a.id))
                .map(|s| s.len);
            let need_new = match cur_len {
                None => true,
                Some(l) => l > 0 && l.saturating_add(len) > self.max_segment,
            };
            if need_new {
                // Seal the current segment (it stays readable) and start a new one.
                self.active = None;
                let a = self.create_segment()?;
                *created = true;
                self.active = Some(a);
            }
            let Some(a) = self.active.as_ref() else {
                return Err(std::io::Error::other("no active segment"));
            };
            let id = a.id;
            let offset = self.segs.get(&id).map_or(0, |s| s.len);
            if !undo.truncate.iter().any(|(s, _)| *s == id) {
                undo.truncate.push((id, offset));
            }
            a.file.write_all_at(p, offset)?;
            if let Some(s) = self.segs.get_mut(&id) {
                s.len = offset + len;
            }
            refs.push(SegRef {
                seg: id,
                offset,
                len,
                // Derived from the bundle's own CRC-32C fields (computed or verified just
                // before the commit) instead of a second pass over the bytes.
                crc: bpv7::crc::bundle_bytes_crc32c(p),
            });
        }
        Ok(())
    }

    /// Undoes an [`SegmentLog::append`] whose metadata commit failed: truncates what it wrote,
    /// starts the next append in a new segment and unlinks segments left without references.
    pub(crate) fn undo(&mut self, undo: Undo) {
        for (id, len) in undo.truncate {
            if let Some(s) = self.segs.get_mut(&id) {
                s.len = len;
            }
            // Best effort: an untruncated tail is unreferenced and removed at the next open.
            let _ = OpenOptions::new()
                .write(true)
                .open(self.dir.join(seg_name(id)))
                .and_then(|f| f.set_len(len));
        }
        self.active = None;
        self.reap();
    }

    /// Counts a committed reference.
    pub(crate) fn add_ref(&mut self, r: &SegRef) {
        self.segs.entry(r.seg).or_default().live += 1;
    }

    /// Forgets a reference removed by a committed transaction.
    pub(crate) fn drop_ref(&mut self, r: &SegRef) {
        if let Some(s) = self.segs.get_mut(&r.seg) {
            s.live = s.live.saturating_sub(1);
        }
    }

    /// Retires every sealed segment without committed references: handed to the stager for
    /// reuse as a staging file (when it stages, [`SegmentLog::set_stage_pool`]), kept as a
    /// spare for reuse (up to [`MAX_SPARES`]) or unlinked. Call only after the commit
    /// that removed the references (and after [`SegmentLog::add_ref`] for the ones it added).
    pub(crate) fn reap(&mut self) {
        let active = self.active.as_ref().map(|a| a.id);
        let dead: Vec<u64> = self
            .segs
            .iter()
            .filter(|(id, s)| s.live == 0 && Some(**id) != active)
            .map(|(id, _)| *id)
            .filter(|id| self.pins.get(id).is_none_or(|p| Arc::strong_count(p) == 1))
            .collect();
        for id in dead {
            self.readers.remove(&id);
            self.pins.remove(&id);
            let len = self.segs.get(&id).map_or(u64::MAX, |s| s.len);
            if self
                .stage_pool
                .as_ref()
                .is_some_and(|st| st.offer_spare(id, &self.dir.join(seg_name(id)), len))
            {
                // The stager overwrites it next, under its name (if the process stops first, the
                // next open removes it like any file nothing references).
                self.segs.remove(&id);
                continue;
            }
            if self.spares.len() < MAX_SPARES {
                // Kept for reuse by the next new segment (an unreferenced file: if the process
                // stops first, the next open removes it like any other).
                self.segs.remove(&id);
                self.spares.push(id);
                continue;
            }
            // If the unlink fails the file is unreferenced and removed at the next open.
            if std::fs::remove_file(self.dir.join(seg_name(id))).is_ok() {
                self.segs.remove(&id);
            }
        }
    }

    /// Reads a referenced payload into a buffer of exactly its length (one positioned read) and
    /// checks its CRC-32C. The length is checked against the segment's extent before allocating.
    pub(crate) fn read(&mut self, r: &SegRef) -> Result<Bytes, ReadError> {
        self.reader(r)?.read()
    }

    /// A handle that reads a referenced payload later, on any thread ([`SegRead::read`]): the
    /// reference checked against the segment's extent, the open segment file, and the pin that
    /// keeps the segment from being reused or unlinked until the handle is dropped.
    pub(crate) fn reader(&mut self, r: &SegRef) -> Result<SegRead, ReadError> {
        let extent = self.segs.get(&r.seg).map(|s| s.len);
        let ok = matches!((extent, r.end()), (Some(x), Some(end)) if end <= x);
        if !ok {
            return Err(ReadError::OutOfBounds(format!(
                "segment {} offset {} length {} beyond the segment ({})",
                r.seg,
                r.offset,
                r.len,
                extent.map_or("missing".to_string(), |x| format!("{x} bytes")),
            )));
        }
        usize::try_from(r.len)
            .map_err(|_| ReadError::OutOfBounds(format!("length {} too large", r.len)))?;
        let file = match self.active.as_ref().filter(|a| a.id == r.seg) {
            Some(a) => Arc::clone(&a.file),
            None => {
                if !self.readers.contains_key(&r.seg) {
                    if self.readers.len() >= MAX_READERS {
                        self.readers.clear();
                    }
                    let f = File::open(self.dir.join(seg_name(r.seg))).map_err(ReadError::Io)?;
                    self.readers.insert(r.seg, Arc::new(f));
                }
                self.readers.get(&r.seg).cloned().ok_or_else(|| {
                    ReadError::Io(std::io::Error::other("segment reader vanished"))
                })?
            }
        };
        let pin = Arc::clone(self.pins.entry(r.seg).or_default());
        Ok(SegRead { file, r: *r, pin })
    }
}

/// A payload of the segment log to be read later, possibly by another thread (see
/// [`SegmentLog::reader`]). While it lives, its segment is neither reused nor unlinked, so the
/// range it names keeps the bytes that were committed there.
#[derive(Debug, Clone)]
pub(crate) struct SegRead {
    file: Arc<File>,
    r: SegRef,
    pin: Arc<()>,
}

impl SegRead {
    /// The payload's length.
    pub(crate) fn len(&self) -> u64 {
        self.r.len
    }

    /// Reads the payload and checks its CRC-32C: mapped from [`MAP_MIN_BYTES`] on, else into a
    /// buffer of exactly its length (one positioned read).
    pub(crate) fn read(&self) -> Result<Bytes, ReadError> {
        let r = &self.r;
        let len = usize::try_from(r.len)
            .map_err(|_| ReadError::OutOfBounds(format!("length {} too large", r.len)))?;
        if len >= MAP_MIN_BYTES {
            // SAFETY: the range lies inside the segment's written extent (checked when the
            // handle was made), and nothing truncates or rewrites a committed payload's range
            // while the store runs: a segment is appended to only past its extent, and reused or
            // unlinked only once no reference and no pin (held by this handle and the mapping)
            // remains. The mapping is read-only.
            let map = unsafe {
                memmap2::MmapOptions::new()
                    .offset(r.offset)
                    .len(len)
                    .populate()
                    .map(&*self.file)
            }
            .map_err(ReadError::Io)?;
            check_crc(&map, r)?;
            return Ok(Bytes::from_owner(Mapped {
                map,
                _pin: Arc::clone(&self.pin),
            }));
        }
        let buf = read_new_buffer_at(&self.file, len, r.offset).map_err(ReadError::Io)?;
        check_crc(&buf, r)?;
        Ok(buf.freeze())
    }

    /// The first `n` bytes of the payload (fewer if it is shorter), without the CRC check
    /// (which covers the whole payload: [`SegRead::read`] makes it before any byte is used
    /// beyond a decision that the full read confirms).
    pub(crate) fn read_prefix(&self, n: usize) -> Result<Bytes, ReadError> {
        let len = usize::try_from(self.r.len).unwrap_or(usize::MAX).min(n);
        read_new_buffer_at(&self.file, len, self.r.offset)
            .map(BytesMut::freeze)
            .map_err(ReadError::Io)
    }
}

fn check_crc(data: &[u8], r: &SegRef) -> Result<(), ReadError> {
    let actual = crc32c::crc32c(data);
    if actual != r.crc {
        return Err(ReadError::Checksum {
            expected: r.crc,
            actual,
        });
    }
    Ok(())
}

/// Reads `len` bytes at `offset` into a new buffer, without zero-filling it first: the buffer is
/// about to be overwritten by the kernel, and the zeroing was 3 % of a node's CPU forwarding 1 MB
/// bundles. Short reads continue; end of file before `len` bytes is an error.
fn read_new_buffer_at(file: &File, len: usize, offset: u64) -> std::io::Result<BytesMut> {
    use std::os::fd::AsRawFd;
    let mut buf = BytesMut::with_capacity(len);
    while buf.len() < len {
        let at = offset
            .checked_add(buf.len() as u64)
            .and_then(|o| libc::off_t::try_from(o).ok())
            .ok_or_else(|| std::io::Error::other("segment offset out of range"))?;
        let left = len - buf.len();
        let spare = buf.spare_capacity_mut();
        let want = left.min(spare.len());
        // SAFETY: `spare` is writable memory owned by `buf` of at least `want` bytes; pread writes
        // at most `want` bytes there and reports how many, and only those are exposed below.
        let n = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        // SAFETY: pread initialised the next `n` (≤ `want`) bytes after the current length.
        unsafe { buf.set_len(buf.len() + n) };
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_staged_segments_are_overwritten_as_the_next_staging_files() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = SegmentLog::open(dir.path(), 1 << 20, &[]).expect("open");
        let stager = super::super::staging::Stager::directory(dir.path(), true);
        // Not staging yet: a dead segment is kept as a spare, not pooled.
        log.set_stage_pool(stager.clone());
        let a = Bytes::from(vec![1u8; 600]);
        let (refs, _) = log.append(&[&a], false).expect("append");
        log.add_ref(&refs[0]);
        log.active = None;
        log.drop_ref(&refs[0]);
        log.reap();
        assert_eq!((stager.pooled(), log.spares.len()), (0, 1));

        // A staged file, adopted in place (its name is its segment's, one id space with the
        // log's own segments), then dead: pooled under that name.
        let mut f = stager.create().expect("create");
        f.begin_piece();
        f.write(&[7u8; 5000]).expect("write");
        let run = f.finish().expect("finish");
        let staged_path = run.path().expect("path").to_path_buf();
        let ino = std::fs::metadata(&staged_path).expect("meta").ino();
        let seg = log.adopt(&run).expect("adopt");
        assert_eq!(seg, run.id());
        assert_ne!(seg, refs[0].seg, "the log's own segment has another id");
        assert_eq!(staged_path, dir.path().join(seg_name(seg)), "not renamed");
        // The run dropped after its adoption leaves the segment alone.
        drop(run);
        assert_eq!(std::fs::metadata(&staged_path).expect("meta").ino(), ino);
        let r = SegRef {
            seg,
            offset: 0,
            len: 5000,
            crc: crc32c::crc32c(&[7u8; 5000]),
        };
        log.add_ref(&r);
        assert_eq!(log.read(&r).expect("read").len(), 5000);
        log.drop_ref(&r);
        log.reap();
        assert_eq!(stager.pooled(), 1);
        assert!(staged_path.exists(), "pooled under its own name");

        // The next staging file is that file, same name and id, overwritten and cut to what was
        // written.
        let mut g = stager.create().expect("create");
        assert_eq!(stager.pooled(), 0);
        g.begin_piece();
        g.write(b"shorter").expect("write");
        let run = g.finish().expect("finish");
        assert_eq!(run.id(), seg);
        let path = run.path().expect("path").to_path_buf();
        assert_eq!(path, staged_path);
        assert_eq!(
            std::fs::metadata(&path).expect("meta").ino(),
            ino,
            "same file"
        );
        assert_eq!(std::fs::read(&path).expect("read"), b"shorter");
        let p = run.piece(0).expect("piece");
        assert_eq!((p.len(), p.crc()), (7, crc32c::crc32c(b"shorter")));

        // Dropped unused (never adopted), a staging file is deleted; a pooled file goes with
        // the store's next open like any file nothing references.
        drop(p);
        drop(run);
        assert!(!path.exists(), "an unadopted run is deleted when dropped");
        let seg2 = {
            let mut h = stager.create().expect("create");
            h.begin_piece();
            h.write(&[3u8; 100]).expect("write");
            let run = h.finish().expect("finish");
            log.adopt(&run).expect("adopt")
        };
        log.reap();
        assert_eq!(stager.pooled(), 1);
        assert!(dir.path().join(seg_name(seg2)).exists());
        // A run is taken once: its file is a segment from then on.
        let mut k = stager.create().expect("create");
        k.begin_piece();
        k.write(&[4u8; 10]).expect("write");
        let run = k.finish().expect("finish");
        let seg3 = log.adopt(&run).expect("adopt");
        assert!(log.adopt(&run).is_err(), "adopted twice");
        assert!(dir.path().join(seg_name(seg3)).exists());
        log.reap();
        drop(log);
        let log = SegmentLog::open(dir.path(), 1 << 20, &[]).expect("reopen");
        assert_eq!(log.segment_count(), 0);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn seg_ref_roundtrip_and_bad_length() {
        let r = SegRef {
            seg: 7,
            offset: 1 << 40,
            len: 5_000_000,
            crc: 0xDEAD_BEEF,
        };
        assert_eq!(SegRef::decode(&r.encode()), Some(r));
        assert_eq!(SegRef::decode(&r.encode()[..27]), None);
        assert_eq!(SegRef::decode(&[0u8; 29]), None);
    }

    #[test]
    fn undo_truncates_and_next_append_starts_a_new_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = SegmentLog::open(dir.path(), 10_000, &[]).expect("open");
        let a = Bytes::from(vec![1u8; 100]);
        let (ra, _) = log.append(&[&a], false).expect("append");
        log.add_ref(&ra[0]);
        // A second append whose metadata commit "fails": its bytes are cut off again.
        let b = Bytes::from(vec![2u8; 300]);
        let (rb, undo) = log.append(&[&b], false).expect("append");
        assert_eq!(rb[0].seg, ra[0].seg);
        log.undo(undo);
        let path = dir.path().join(seg_name(ra[0].seg));
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 100);
        assert!(matches!(log.read(&rb[0]), Err(ReadError::OutOfBounds(_))));
        assert_eq!(log.read(&ra[0]).expect("read"), a);
        let (rc, _) = log.append(&[&b], false).expect("append");
        assert_ne!(rc[0].seg, ra[0].seg, "appending resumes in a new segment");
        assert_eq!(log.segment_count(), 2);
    }

    #[test]
    fn names() {
        assert_eq!(seg_name(3), "00000003.seg");
        assert_eq!(parse_seg_name("00000003.seg"), Some(3));
        assert_eq!(parse_seg_name("x.seg"), None);
        assert_eq!(parse_seg_name(".seg"), None);
        assert_eq!(parse_seg_name("00000003.seg.tmp"), None);
    }

    #[test]
    fn rotation_read_back_and_reap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = SegmentLog::open(dir.path(), 1000, &[]).expect("open");
        let a = Bytes::from(vec![1u8; 600]);
        let b = Bytes::from(vec![2u8; 600]);
        let (refs, _) = log.append(&[&a, &b], true).expect("append");
        assert_ne!(refs[0].seg, refs[1].seg, "second payload rotates");
        for r in &refs {
            log.add_ref(r);
        }
        assert_eq!(log.read(&refs[0]).expect("read"), a);
        assert_eq!(log.read(&refs[1]).expect("read"), b);
        log.drop_ref(&refs[0]);
        log.reap();
        assert_eq!(log.segment_count(), 1, "sealed empty segment unlinked");
        let mut bad = refs[1];
        bad.crc ^= 1;
        assert!(matches!(log.read(&bad), Err(ReadError::Checksum { .. })));
        bad = refs[1];
        bad.len = u64::MAX;
        assert!(matches!(log.read(&bad), Err(ReadError::OutOfBounds(_))));
        // Reopen: the tail beyond the last reference is cut, unreferenced segments removed.
        let c = Bytes::from(vec![3u8; 10]);
        let (extra, _) = log.append(&[&c], false).expect("append");
        drop(log);
        let log = SegmentLog::open(dir.path(), 1000, &[(1, refs[1])]).expect("reopen");
        assert_eq!(log.segment_count(), 1);
        let f = dir.path().join(seg_name(extra[0].seg));
        assert_eq!(std::fs::metadata(f).expect("meta").len(), 600);
        // A reference past the end of its segment is an error naming the key.
        let mut past = refs[1];
        past.offset = 1;
        let e = SegmentLog::open(dir.path(), 1000, &[(42, past)]).expect_err("past end");
        assert_eq!(e.0, Some(42));
    }

    #[test]
    fn large_payloads_are_mapped_and_pin_their_segment_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Segments of one payload each: the first one's segment becomes dead once its reference
        // is dropped, and would be kept as a spare and overwritten by the next appends.
        let mut log = SegmentLog::open(dir.path(), 1, &[]).expect("open");
        let pattern = |seed: u8| -> Bytes {
            Bytes::from(
                (0..MAP_MIN_BYTES + 5)
                    .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                    .collect::<Vec<u8>>(),
            )
        };
        let a = pattern(1);
        let small = Bytes::from(vec![9u8; 1000]);
        let (refs, _) = log.append(&[&small, &a], false).expect("append");
        for r in &refs {
            log.add_ref(r);
        }
        assert_eq!(log.read(&refs[0]).expect("small read"), small);
        let mapped = log.read(&refs[1]).expect("mapped read");
        assert_eq!(mapped, a);
        assert!(
            log.pins.contains_key(&refs[1].seg),
            "a mapped read pins its segment"
        );
        let mut bad = refs[1];
        bad.crc ^= 1;
        assert!(matches!(log.read(&bad), Err(ReadError::Checksum { .. })));
        // The bundle is deleted while its bytes are still being sent: the segment stays.
        log.drop_ref(&refs[1]);
        log.reap();
        assert!(
            dir.path().join(seg_name(refs[1].seg)).exists(),
            "a pinned dead segment is not retired"
        );
        for seed in 2..5 {
            let (more, _) = log.append(&[&pattern(seed)], false).expect("append");
            log.add_ref(&more[0]);
            assert_ne!(more[0].seg, refs[1].seg, "a pinned segment is not reused");
        }
        assert_eq!(mapped, a, "the mapped bytes are unchanged");
        drop(mapped);
        log.reap();
        assert!(
            !log.pins.contains_key(&refs[1].seg),
            "dropped: the pin goes"
        );
        let live: Vec<u64> = log.segs.keys().copied().collect();
        assert!(
            !live.contains(&refs[1].seg),
            "dropped: the segment is retired"
        );
    }
}
