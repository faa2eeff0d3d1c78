//! Bundles written outside the agent's thread and adopted by a later commit.
//!
//! A large application data unit streams into a node over minutes; holding it in memory until
//! the agent can commit it is what bounded bundles to 64 MiB. Instead, the thread that receives
//! it writes its bundles (fragments, see [`bpv7::FragmentPlan`]) straight into staging files of
//! the store ([`Stager::create`], [`StageFile`]), which make them stable ([`StageFile::finish`])
//! but reference them nowhere. The agent then commits them all in ONE transaction
//! ([`super::Op::PutStaged`]): the [`super::RedbStore`] takes each staging file into its
//! segment log as it is and records the references in the same redb commit as the bundles'
//! metadata. Staging files and segments share one id space and one name (`NNNNNNNN.seg`), so
//! adopting a file renames nothing, and a dead segment becomes the next staging file under its
//! own name (measured before: the two renames were a fifth of the sending agent thread, 1 MB
//! sends over TCPCL). Before that commit nothing of them is visible or routable: the database
//! is the only record of what is stored, and a crash leaves only files nothing references,
//! which opening the store deletes (and the `NNNNNNNN.stage` files of older versions).
//!
//! [`super::MemoryStore`] stages in memory ([`Stager::memory`]) with the same semantics.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Suffix of the staging files of earlier versions (removed whenever the store is opened).
pub(crate) const STAGE_SUFFIX: &str = ".stage";

/// Dead segment files a stager keeps for its next staging files ([`Stager::offer_spare`]):
/// overwriting a file whose pages and blocks exist skips creating an inode, reserving blocks
/// and allocating page-cache pages, and the agent skips unlinking the file (dropping its
/// cached pages). Measured on a receiving node (1 MB bundles, volatile store), creating the
/// staging files and reserving their blocks cost a third of the staging write and unlinking
/// them a third of the agent thread. Bundles are deleted in batches (64 deferred deletes per
/// commit), so the pool must take a batch's files: with 4 files, a node staging every 500 kB
/// send created a new file for most of them (measured, LTP sender: file creation 2.5 % of all
/// samples, the unlinks another 2 %).
pub(crate) const STAGE_POOL: usize = 128;

/// Largest file kept for reuse.
pub(crate) const STAGE_POOL_MAX_BYTES: u64 = 64 << 20;

/// Bytes of all the files kept for reuse together: the disk held beyond the live bundles.
pub(crate) const STAGE_POOL_BYTES: u64 = 256 << 20;

/// Creates staging files for one store. Cheap to clone and safe to share between threads.
#[derive(Debug, Clone)]
pub struct Stager {
    inner: Arc<StagerInner>,
}

#[derive(Debug)]
struct StagerInner {
    kind: Kind,
    /// The next file id: shared with the store's segment log, which takes its ids here too
    /// ([`Stager::take_id`]), so a staging file is named as the segment it becomes.
    next: AtomicU64,
    durable: AtomicBool,
    /// Files were staged (only then are dead segments kept for reuse).
    used: AtomicBool,
    /// Staged tails whose files are open ([`OPEN_TAILS`]).
    open_tails: AtomicUsize,
    /// Files ready to be overwritten by the next staging files: id, path (dead segments that
    /// nothing references, so opening the store removes them), length.
    pool: Mutex<Vec<(u64, PathBuf, u64)>>,
}

#[derive(Debug)]
enum Kind {
    Dir(PathBuf),
    Memory,
}

impl Stager {
    /// Staging files in `dir` (the segment directory of a store), synced to stable storage by
    /// [`StageFile::finish`] when `durable`.
    pub fn directory(dir: &Path, durable: bool) -> Stager {
        Stager {
            inner: Arc::new(StagerInner {
                kind: Kind::Dir(dir.to_path_buf()),
                next: AtomicU64::new(0),
                durable: AtomicBool::new(durable),
                used: AtomicBool::new(false),
                open_tails: AtomicUsize::new(0),
                pool: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Staging in memory (for [`super::MemoryStore`]: the simulator and tests).
    pub fn memory() -> Stager {
        Stager {
            inner: Arc::new(StagerInner {
                kind: Kind::Memory,
                next: AtomicU64::new(0),
                durable: AtomicBool::new(false),
                used: AtomicBool::new(false),
                open_tails: AtomicUsize::new(0),
                pool: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Whether staging files are files of the store's directory (else memory: staging then
    /// saves no copy).
    pub fn on_disk(&self) -> bool {
        matches!(self.inner.kind, Kind::Dir(_))
    }

    /// Whether [`StageFile::finish`] makes the bytes stable.
    pub fn is_durable(&self) -> bool {
        matches!(self.inner.kind, Kind::Dir(_)) && self.inner.durable.load(Ordering::Relaxed)
    }

    /// Turns syncing on or off for files finished from now on (the store's durability).
    pub(crate) fn set_durable(&self, durable: bool) {
        self.inner.durable.store(durable, Ordering::Relaxed);
    }

    /// A new, empty staging file (a file kept for reuse when there is one, see
    /// [`Stager::offer_spare`]).
    pub fn create(&self) -> std::io::Result<StageFile> {
        self.inner.used.store(true, Ordering::Relaxed);
        let (id, sink) = match &self.inner.kind {
            Kind::Dir(dir) => match self.reuse() {
                Some(r) => r,
                None => {
                    let id = self.take_id();
                    let path = dir.join(super::segments::seg_name(id));
                    let file = OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&path)?;
                    (
                        id,
                        Sink::File {
                            path,
                            file,
                            prior_len: 0,
                        },
                    )
                }
            },
            Kind::Memory => (
                self.inner.next.fetch_add(1, Ordering::Relaxed),
                Sink::Memory(Vec::new()),
            ),
        };
        Ok(StageFile {
            id,
            sink: Some(sink),
            len: 0,
            open_piece: None,
            pieces: Vec::new(),
            durable: self.is_durable(),
        })
    }

    /// A pooled file opened for overwriting (one that fails to open is removed).
    fn reuse(&self) -> Option<(u64, Sink)> {
        loop {
            let (id, path, prior_len) = self.inner.pool.lock().ok()?.pop()?;
            match OpenOptions::new().write(true).open(&path) {
                Ok(file) => {
                    return Some((
                        id,
                        Sink::File {
                            path,
                            file,
                            prior_len,
                        },
                    ))
                }
                Err(_) => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }

    /// A new file id, unique among this stager's files and its segment log's segments.
    pub(crate) fn take_id(&self) -> u64 {
        self.inner.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes [`Stager::take_id`] return `first` or more from now on (the segment log's next id
    /// when it opens).
    pub(crate) fn reserve_ids_below(&self, first: u64) {
        self.inner.next.fetch_max(first, Ordering::Relaxed);
    }

    /// Offers the dead segment `id`, file `path` (`len` bytes, in this stager's directory and
    /// named as segment `id`), for reuse by the next staging files: kept, under its name, when
    /// files are being staged, the pool has room and the file is small enough; `false` leaves
    /// it to the caller (which keeps or unlinks it).
    pub(crate) fn offer_spare(&self, id: u64, path: &Path, len: u64) -> bool {
        let Kind::Dir(dir) = &self.inner.kind else {
            return false;
        };
        if !self.inner.used.load(Ordering::Relaxed) || len > STAGE_POOL_MAX_BYTES {
            return false;
        }
        let Ok(mut pool) = self.inner.pool.lock() else {
            return false;
        };
        let held: u64 = pool.iter().map(|f| f.2).sum();
        if pool.len() >= STAGE_POOL || held.saturating_add(len) > STAGE_POOL_BYTES {
            return false;
        }
        if path.parent() != Some(dir.as_path()) {
            return false;
        }
        pool.push((id, path.to_path_buf(), len));
        true
    }

    /// Files kept for reuse.
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> usize {
        self.inner.pool.lock().map_or(0, |p| p.len())
    }
}

#[derive(Debug)]
enum Sink {
    /// `prior_len`: the length of a reused file, cut to what was written at the finish.
    File {
        path: PathBuf,
        file: File,
        prior_len: u64,
    },
    Memory(Vec<u8>),
}

/// A staging file being written: bundles appended one after the other, each between
/// [`StageFile::begin_piece`] and [`StageFile::end_piece`]. Dropped unfinished, it is deleted.
#[derive(Debug)]
pub struct StageFile {
    id: u64,
    sink: Option<Sink>,
    len: u64,
    /// The bundle being written: its offset and the CRC-32C of its bytes so far.
    open_piece: Option<(u64, u32)>,
    /// Finished bundles: offset, length, CRC-32C of their bytes.
    pieces: Vec<(u64, u64, u32)>,
    durable: bool,
}

impl StageFile {
    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts the next bundle at the current end (ending the previous one if still open).
    pub fn begin_piece(&mut self) {
        self.end_piece();
        self.open_piece = Some((self.len, 0));
    }

    /// Writes one whole bundle as a piece of its own (begins it, writes it, ends it) and
    /// returns the piece's index in the finished run ([`StagedRun::piece`]). `crc`: the
    /// CRC-32C of `bundle` when the caller has it (computed as the bytes arrived, or derived
    /// from the bundle's checked CRC fields, see [`StageFile::write_with_crc32c`]); `None`
    /// computes it here, in one pass over the bytes as they are written.
    pub fn write_bundle(&mut self, bundle: &[u8], crc: Option<u32>) -> std::io::Result<usize> {
        self.begin_piece();
        match crc {
            Some(crc) => self.write_with_crc32c(bundle, crc)?,
            None => self.write(bundle)?,
        }
        self.end_piece()
            .ok_or_else(|| std::io::Error::other("staged bundle piece was not open"))
    }

    /// Appends bytes of the current bundle.
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_raw(data)?;
        if let Some((_, crc)) = self.open_piece.as_mut() {
            *crc = crc32c::crc32c_append(*crc, data);
        }
        Ok(())
    }

    /// [`StageFile::write`] of bytes whose CRC-32C the caller already has (`crc =
    /// crc32c(data)`, e.g. computed as they arrived from the network): the piece's checksum is
    /// extended without another pass over them. A wrong `crc` makes the store report the
    /// bundle damaged at its next checked read, never the reverse.
    pub fn write_with_crc32c(&mut self, data: &[u8], crc: u32) -> std::io::Result<()> {
        let start = self.len;
        self.write_raw(data)?;
        if let Some((piece_start, c)) = self.open_piece.as_mut() {
            *c = if *piece_start == start {
                crc
            } else {
                crc32c::crc32c_combine(*c, crc, data.len())
            };
        }
        Ok(())
    }

    /// Appends bytes of the current bundle without extending its checksum: the caller sets
    /// the whole bundle's CRC-32C with [`StageFile::set_piece_crc32c`] before it ends (a
    /// receiver writing the bundle as it arrives, whose network layer keeps that checksum).
    /// A bundle ended without it carries a wrong checksum, which the store reports as damage
    /// at its next checked read.
    pub fn write_unsummed(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_raw(data)
    }

    /// Sets the current bundle's checksum to `crc`, the CRC-32C of all its bytes (see
    /// [`StageFile::write_unsummed`]); nothing when no bundle is open.
    pub fn set_piece_crc32c(&mut self, crc: u32) {
        if let Some((_, c)) = self.open_piece.as_mut() {
            *c = crc;
        }
    }

    fn write_raw(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self.sink.as_mut() {
            Some(Sink::File { file, .. }) => file.write_all(data)?,
            Some(Sink::Memory(v)) => v.extend_from_slice(data),
            None => return Err(std::io::Error::other("staging file already finished")),
        }
        self.len += data.len() as u64;
        Ok(())
    }

    /// Writes `data` at `offset` (a positioned write: the room of a [`StagedTail`] is left
    /// unwritten until its head comes); the file's length grows to cover it.
    fn write_raw_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let end = offset + data.len() as u64;
        match self.sink.as_mut() {
            Some(Sink::File { file, .. }) => {
                std::os::unix::fs::FileExt::write_all_at(file, data, offset)?
            }
            Some(Sink::Memory(v)) => {
                let (start, stop) = (
                    usize::try_from(offset).map_err(std::io::Error::other)?,
                    usize::try_from(end).map_err(std::io::Error::other)?,
                );
                if v.len() < stop {
                    v.resize(stop, 0);
                }
                v[start..stop].copy_from_slice(data);
            }
            None => return Err(std::io::Error::other("staging file already finished")),
        }
        self.len = self.len.max(end);
        Ok(())
    }

    /// Ends the current bundle; its index among this file's bundles, if one was open.
    pub fn end_piece(&mut self) -> Option<usize> {
        let (start, crc) = self.open_piece.take()?;
        self.pieces.push((start, self.len - start, crc));
        Some(self.pieces.len() - 1)
    }

    /// Ends the last bundle, makes the file stable (`fdatasync` when the stager is durable)
    /// and closes it: the bundles can now be committed ([`super::Op::PutStaged`]).
    pub fn finish(self) -> std::io::Result<StagedRun> {
        self.finish_keeping(false).map(|(run, _)| run)
    }

    /// [`StageFile::finish`], handing back the open file when `keep` (a file staged on disk).
    fn finish_keeping(mut self, keep: bool) -> std::io::Result<(StagedRun, Option<File>)> {
        self.end_piece();
        let mut kept = None;
        let (path, bytes) = match self.sink.take() {
            Some(Sink::File {
                path,
                file,
                prior_len,
            }) => {
                if prior_len > self.len {
                    if let Err(e) = file.set_len(self.len) {
                        let _ = std::fs::remove_file(&path);
                        return Err(e);
                    }
                }
                if self.durable {
                    if let Err(e) = file.sync_data() {
                        let _ = std::fs::remove_file(&path);
                        return Err(e);
                    }
                }
                if keep {
                    kept = Some(file);
                }
                (Some(path), None)
            }
            Some(Sink::Memory(v)) => (None, Some(Bytes::from(v))),
            None => (None, Some(Bytes::new())),
        };
        let run = StagedRun {
            inner: Arc::new(RunInner {
                id: self.id,
                path,
                bytes,
                len: self.len,
                pieces: std::mem::take(&mut self.pieces),
                adopted: AtomicBool::new(false),
            }),
        };
        Ok((run, kept))
    }
}

impl Drop for StageFile {
    fn drop(&mut self) {
        if let Some(Sink::File { path, .. }) = &self.sink {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A finished staging file. Dropped before a commit adopted it, it is deleted.
#[derive(Debug, Clone)]
pub struct StagedRun {
    inner: Arc<RunInner>,
}

#[derive(Debug)]
struct RunInner {
    id: u64,
    /// The file (none for in-memory staging).
    path: Option<PathBuf>,
    /// The bytes (in-memory staging only).
    bytes: Option<Bytes>,
    len: u64,
    pieces: Vec<(u64, u64, u32)>,
    /// The segment log took the file ([`StagedRun::mark_adopted`]): it is a segment now, and
    /// no longer this run's to delete.
    adopted: AtomicBool,
}

impl Drop for RunInner {
    fn drop(&mut self) {
        if self.adopted.load(Ordering::Relaxed) {
            return;
        }
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl StagedRun {
    /// The bundles in the file, in the order they were written.
    pub fn pieces(&self) -> impl Iterator<Item = StagedPiece> + '_ {
        (0..self.inner.pieces.len()).filter_map(|i| self.piece(i))
    }

    /// Bundle `i` of the file.
    pub fn piece(&self, i: usize) -> Option<StagedPiece> {
        let &(offset, len, crc) = self.inner.pieces.get(i)?;
        Some(StagedPiece {
            run: self.clone(),
            offset,
            len,
            crc,
        })
    }

    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// True when the file holds nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Identifies the file among those of its stager.
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    /// The file's path (file-backed staging).
    pub(crate) fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The segment log took the file: dropping the run no longer deletes it.
    pub(crate) fn mark_adopted(&self) {
        self.inner.adopted.store(true, Ordering::Relaxed);
    }

    /// Whether the segment log took the file ([`StagedRun::mark_adopted`]).
    pub(crate) fn is_adopted(&self) -> bool {
        self.inner.adopted.load(Ordering::Relaxed)
    }

    /// The bytes (in-memory staging).
    pub(crate) fn bytes(&self) -> Option<&Bytes> {
        self.inner.bytes.as_ref()
    }
}

/// One staged bundle: where it is in its staging file.
#[derive(Debug, Clone)]
pub struct StagedPiece {
    run: StagedRun,
    offset: u64,
    len: u64,
    crc: u32,
}

impl StagedPiece {
    /// Encoded length of the bundle.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty piece (never a valid bundle).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The staging file.
    pub(crate) fn run(&self) -> &StagedRun {
        &self.run
    }

    /// Offset in the staging file.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// CRC-32C of the bundle's bytes.
    pub(crate) fn crc(&self) -> u32 {
        self.crc
    }

    /// The bundle's bytes, for in-memory staging.
    pub(crate) fn memory_bytes(&self) -> Option<Bytes> {
        let b = self.run.bytes()?;
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.len).ok()?)?;
        (end <= b.len()).then(|| b.slice(start..end))
    }
}

/// A payload block encoded by the thread that received the payload
/// ([`bpv7::PreparedPayload`]) and written by that thread to a staging file, behind room for
/// the bundle's head ([`Stager::stage_tail`]). The agent, which alone decides the head, writes
/// only the head in front ([`StagedTail::complete`]) and commits the file
/// ([`super::Op::PutStaged`]) instead of appending the whole bundle to the segment log: the
/// payload's bytes are written to the store once, by the thread that had them in its cache,
/// and never by the agent. Dropped unused (the bundle was refused, or encoded another way), the
/// file is deleted.
///
/// The file stays open for the head while at most [`OPEN_TAILS`] staged tails of the stager
/// are: measured with 1 MB sends over TCPCL, reopening it by its path for every head was an
/// eighth of the sending agent thread. Beyond that (sends queued faster than the agent takes
/// them) the file is closed once the tail is written and reopened for the head, so a long queue
/// of sends holds no more descriptors.
#[derive(Debug)]
pub struct StagedTail {
    run: StagedRun,
    /// Offset of the tail in the file: the most head it can take.
    room: u64,
    tail_len: u64,
    /// The head's write is synced too (the stager was durable).
    durable: bool,
    /// The open file, when it was kept.
    file: Option<OpenTail>,
}

/// Staged tails of one stager whose files stay open until their head is written.
pub(crate) const OPEN_TAILS: usize = 64;

/// An open staged tail's file, counted against [`OPEN_TAILS`] until dropped.
#[derive(Debug)]
struct OpenTail {
    file: File,
    stager: Arc<StagerInner>,
}

impl Drop for OpenTail {
    fn drop(&mut self) {
        self.stager.open_tails.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Stager {
    /// Writes `prepared`'s tail (payload block and break) to a new staging file at the offset
    /// of its room, leaving the room in front for the head.
    pub fn stage_tail(&self, prepared: &bpv7::PreparedPayload) -> std::io::Result<StagedTail> {
        let mut file = self.create()?;
        let room = prepared.room() as u64;
        let tail = prepared.tail();
        file.write_raw_at(room, tail)?;
        let durable = file.durable;
        // A slot of OPEN_TAILS, released by the OpenTail's drop (or here, when no file is kept).
        let keep = self.inner.open_tails.fetch_add(1, Ordering::Relaxed) < OPEN_TAILS;
        let finished = file.finish_keeping(keep);
        if !matches!(&finished, Ok((_, Some(_)))) {
            self.inner.open_tails.fetch_sub(1, Ordering::Relaxed);
        }
        let (run, kept) = finished?;
        let file = kept.map(|file| OpenTail {
            file,
            stager: Arc::clone(&self.inner),
        });
        Ok(StagedTail {
            run,
            room,
            tail_len: tail.len() as u64,
            durable,
            file,
        })
    }
}

impl StagedTail {
    /// Completes the staged bundle: `bundle` is the whole encoded bundle whose last
    /// `tail_len` bytes are the staged tail (what `encode_around` made of the same
    /// prepared payload). Writes its head in front of the tail, records the bundle (CRC-32C
    /// derived from its CRC fields). `Ok(None)` when `bundle` cannot end with this tail
    /// (shorter than it, or a head longer than the room) or the tail was staged in memory; the
    /// file is then deleted and the caller stores the bundle as usual.
    pub(crate) fn complete(self, bundle: &Bytes) -> std::io::Result<Option<StagedPiece>> {
        let len = bundle.len() as u64;
        let Some(head_len) = len.checked_sub(self.tail_len) else {
            return Ok(None);
        };
        let Some(offset) = self.room.checked_sub(head_len) else {
            return Ok(None);
        };
        let Some(path) = self.run.path() else {
            return Ok(None);
        };
        let head_end = usize::try_from(head_len).map_err(std::io::Error::other)?;
        let reopened;
        let file = match &self.file {
            Some(open) => &open.file,
            None => {
                reopened = OpenOptions::new().write(true).open(path)?;
                &reopened
            }
        };
        std::os::unix::fs::FileExt::write_all_at(file, &bundle[..head_end], offset)?;
        if self.durable {
            file.sync_data()?;
        }
        Ok(Some(StagedPiece {
            run: self.run,
            offset,
            len,
            crc: bpv7::crc::bundle_bytes_crc32c(bundle),
        }))
    }
}

/// True for the name of an earlier version's staging file.
pub(crate) fn is_stage_name(name: &str) -> bool {
    name.strip_suffix(STAGE_SUFFIX)
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_record_offsets_lengths_and_crcs_and_unfinished_files_vanish() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Stager::directory(dir.path(), true);
        let mut f = s.create().expect("create");
        f.begin_piece();
        f.write(b"hello ").expect("write");
        f.write(b"world").expect("write");
        f.begin_piece();
        f.write(b"!").expect("write");
        let run = f.finish().expect("finish");
        let pieces: Vec<_> = run.pieces().collect();
        assert_eq!(pieces.len(), 2);
        assert_eq!((pieces[0].offset(), pieces[0].len()), (0, 11));
        assert_eq!(pieces[0].crc(), crc32c::crc32c(b"hello world"));
        assert_eq!((pieces[1].offset(), pieces[1].len()), (11, 1));
        let path = run.path().expect("path").to_path_buf();
        assert_eq!(std::fs::read(&path).expect("read"), b"hello world!");
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            super::super::segments::seg_name(run.id()),
            "named as the segment it would become"
        );
        drop(pieces);
        drop(run);
        assert!(!path.exists(), "an unadopted run is deleted when dropped");
        let mut g = s.create().expect("create");
        g.begin_piece();
        g.write(b"x").expect("write");
        drop(g);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }

    #[test]
    fn staged_tails_keep_their_files_open_up_to_the_limit_and_all_complete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Stager::directory(dir.path(), false);
        let staged: Vec<_> = (0..OPEN_TAILS + 6)
            .map(|i| {
                let p = bpv7::PreparedPayload::encode(
                    bpv7::BlockFlags::empty(),
                    bpv7::CrcType::Crc32c,
                    Bytes::from(vec![i as u8; 3000]),
                    64,
                );
                let t = s.stage_tail(&p).expect("staged");
                (p, t)
            })
            .collect();
        // The first OPEN_TAILS keep their files open, the others were closed.
        assert_eq!(s.inner.open_tails.load(Ordering::Relaxed), OPEN_TAILS);
        let open = staged.iter().filter(|(_, t)| t.file.is_some()).count();
        assert_eq!(open, OPEN_TAILS);
        // Each completes, through its open file or by reopening it, with the head in front.
        for (i, (p, t)) in staged.into_iter().enumerate() {
            let mut bundle = vec![0x9f, i as u8, 1, 2, 3];
            bundle.extend_from_slice(p.tail());
            let bundle = Bytes::from(bundle);
            let piece = t.complete(&bundle).expect("written").expect("completed");
            let path = piece.run().path().expect("on disk").to_path_buf();
            let on_disk = std::fs::read(&path).expect("read");
            let at = usize::try_from(piece.offset()).expect("offset");
            assert_eq!(&on_disk[at..], &bundle[..], "bundle {i}");
        }
        assert_eq!(s.inner.open_tails.load(Ordering::Relaxed), 0);
        // A tail dropped unused gives its slot back too.
        let p = bpv7::PreparedPayload::encode(
            bpv7::BlockFlags::empty(),
            bpv7::CrcType::Crc32c,
            Bytes::from(vec![1u8; 10]),
            64,
        );
        drop(s.stage_tail(&p).expect("staged"));
        assert_eq!(s.inner.open_tails.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_crc_given_with_the_bytes_is_the_pieces_checksum_as_if_computed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Stager::directory(dir.path(), false);
        let mut f = s.create().expect("create");
        f.begin_piece();
        f.write_with_crc32c(b"hello ", crc32c::crc32c(b"hello "))
            .expect("write");
        f.write(b"wor").expect("write");
        f.write_with_crc32c(b"ld", crc32c::crc32c(b"ld"))
            .expect("write");
        f.begin_piece();
        f.write_with_crc32c(b"!", crc32c::crc32c(b"!"))
            .expect("write");
        let run = f.finish().expect("finish");
        let pieces: Vec<_> = run.pieces().collect();
        assert_eq!(pieces[0].crc(), crc32c::crc32c(b"hello world"));
        assert_eq!((pieces[1].offset(), pieces[1].len()), (11, 1));
        assert_eq!(pieces[1].crc(), crc32c::crc32c(b"!"));
        let path = run.path().expect("path").to_path_buf();
        assert_eq!(std::fs::read(&path).expect("read"), b"hello world!");
    }

    #[test]
    fn unsummed_bytes_take_the_checksum_set_for_the_piece() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Stager::directory(dir.path(), false);
        let mut f = s.create().expect("create");
        f.begin_piece();
        f.write_unsummed(b"hello ").expect("write");
        f.write_unsummed(b"world").expect("write");
        f.set_piece_crc32c(crc32c::crc32c(b"hello world"));
        let run = f.finish().expect("finish");
        let p = run.piece(0).expect("piece");
        assert_eq!((p.offset(), p.len()), (0, 11));
        assert_eq!(p.crc(), crc32c::crc32c(b"hello world"));
        let path = run.path().expect("path").to_path_buf();
        assert_eq!(std::fs::read(&path).expect("read"), b"hello world");
    }

    #[test]
    fn memory_staging_keeps_the_bytes() {
        let s = Stager::memory();
        let mut f = s.create().expect("create");
        f.begin_piece();
        f.write(b"abc").expect("write");
        f.begin_piece();
        f.write(b"de").expect("write");
        let run = f.finish().expect("finish");
        let p: Vec<_> = run.pieces().map(|p| p.memory_bytes().unwrap()).collect();
        assert_eq!(
            p,
            vec![Bytes::from_static(b"abc"), Bytes::from_static(b"de")]
        );
    }

    #[test]
    fn the_pool_keeps_a_batch_of_files_within_its_byte_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stager = Stager::directory(dir.path(), false);
        drop(stager.create().expect("create")); // staging in use: spares are kept
        let spare = |i: usize, len: u64| {
            let id = 1000 + i as u64;
            let p = dir.path().join(super::super::segments::seg_name(id));
            std::fs::write(&p, b"x").expect("write");
            stager.offer_spare(id, &p, len)
        };
        // A batch of deletes (64 files of 1 MB) is kept whole, up to the count bound.
        let kept = (0..200).filter(|&i| spare(i, 1 << 20)).count();
        assert_eq!(kept, STAGE_POOL);
        assert_eq!(stager.pooled(), STAGE_POOL);
        // Reused files leave the pool; large ones fill it to the byte budget only.
        while stager.reuse().is_some() {}
        let big = (200..210)
            .filter(|&i| spare(i, STAGE_POOL_MAX_BYTES))
            .count();
        assert_eq!(big as u64, STAGE_POOL_BYTES / STAGE_POOL_MAX_BYTES);
        assert!(
            !spare(300, STAGE_POOL_MAX_BYTES + 1),
            "larger than a kept file may be"
        );
        // A file outside the stager's directory is never taken.
        while stager.reuse().is_some() {}
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let p = elsewhere.path().join(super::super::segments::seg_name(7));
        std::fs::write(&p, b"x").expect("write");
        assert!(!stager.offer_spare(7, &p, 1));
    }
}
