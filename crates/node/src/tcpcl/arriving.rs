//! Staging a received bundle as its data arrives.
//!
//! Policy: a session thread writes a large incoming transfer into a staging file of the store
//! piece by piece, right after each read put the octets in the reassembly buffer, while they
//! are still in the CPU's cache, instead of writing the whole bundle once it is complete.
//!
//! Reason: written after reassembly, each 1 MB bundle was read back cold from memory for the
//! write; the profile of a receiving node (1 MB bundles, volatile store) had the staging write
//! at nearly half of the session thread, most of it the copy into the page cache.
//!
//! Rules (what does not change):
//! - a transfer is followed once its data reaches `from` octets, or from its first octet when
//!   its announced length does (smaller bundles are not staged at all);
//! - the file is a staging file: nothing references it until the agent commits it, after
//!   which the session releases the transfer's final acknowledgment (as before);
//! - the completed bundle is checked first (structure and block CRCs, by the caller): a bundle
//!   that fails is never staged, and its file is deleted;
//! - a transfer that is refused, cancelled or cut (its data no longer reported, another
//!   transfer reported instead, or the session ending) drops its file, which deletes it;
//! - a failed write gives up staging that transfer: the agent then stores the bytes itself.

use bp::{StageFile, Stager};
use bytes::Bytes;

/// The incoming transfer being written to a staging file, if any.
#[derive(Debug)]
pub(crate) struct Arriving {
    from: usize,
    /// The transfer whose announced length reaches `from` (followed from its first octet).
    announced: Option<u64>,
    /// A transfer not to follow (a write failed).
    given_up: Option<u64>,
    open: Option<Open>,
}

#[derive(Debug)]
struct Open {
    id: u64,
    file: StageFile,
    written: usize,
}

impl Arriving {
    /// Follows transfers of `from` octets and more.
    pub(crate) fn new(from: usize) -> Self {
        Arriving {
            from,
            announced: None,
            given_up: None,
            open: None,
        }
    }

    /// A transfer started, announcing `total_len` octets.
    pub(crate) fn announced(&mut self, transfer_id: u64, total_len: Option<u64>) {
        if total_len.is_some_and(|l| l >= self.from as u64) {
            self.announced = Some(transfer_id);
        }
    }

    /// After session input: writes what the transfer in progress (`incoming`: its id and
    /// data so far) added since the last call, opening its file when it qualifies; drops the
    /// file of a transfer no longer in progress.
    pub(crate) fn follow(&mut self, stager: &Stager, incoming: Option<(u64, &[u8])>) {
        let Some((id, data)) = incoming else {
            self.open = None;
            return;
        };
        if self.open.as_ref().is_some_and(|o| o.id != id) {
            self.open = None;
        }
        if self.given_up == Some(id) {
            return;
        }
        if self.open.is_none() {
            if data.len() < self.from && self.announced != Some(id) {
                return;
            }
            match stager.create() {
                Ok(mut file) => {
                    file.begin_piece();
                    self.open = Some(Open {
                        id,
                        file,
                        written: 0,
                    });
                }
                Err(_) => {
                    self.given_up = Some(id);
                    return;
                }
            }
        }
        let Some(o) = self.open.as_mut() else {
            return;
        };
        let new = data.get(o.written..).unwrap_or_default();
        if new.is_empty() {
            return;
        }
        if o.file.write_unsummed(new).is_ok() {
            o.written += new.len();
        } else {
            self.open = None;
            self.given_up = Some(id);
        }
    }

    /// Whether transfer `transfer_id` was given up (its bundle is not to be staged).
    pub(crate) fn gave_up(&self, transfer_id: u64) -> bool {
        self.given_up == Some(transfer_id)
    }

    /// Transfer `transfer_id` completed as `bundle`, whose CRC-32C is `crc32c` and which the
    /// caller checked: its staging file with the rest of the bundle written and the checksum
    /// set, still to be finished; `None` when it was not followed (or a write failed).
    pub(crate) fn complete(
        &mut self,
        transfer_id: u64,
        bundle: &Bytes,
        crc32c: u32,
    ) -> Option<StageFile> {
        let o = self.open.take_if(|o| o.id == transfer_id)?;
        let mut file = o.file;
        let rest = bundle.get(o.written..)?;
        file.write_unsummed(rest).ok()?;
        file.set_piece_crc32c(crc32c);
        Some(file)
    }

    /// Transfer `transfer_id` completed but is not staged (a bundle that fails its checks):
    /// its file, if any, is deleted.
    pub(crate) fn discard(&mut self, transfer_id: u64) {
        if self.open.as_ref().is_some_and(|o| o.id == transfer_id) {
            self.open = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).expect("dir").count()
    }

    /// An empty directory of its own, removed when dropped.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tempdir() -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("dtnkit-arriving-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }

    #[test]
    fn a_transfer_is_written_as_it_grows_and_finished_with_its_tail_and_checksum() {
        let dir = tempdir();
        let stager = Stager::directory(dir.path(), false);
        let bundle = Bytes::from((0..10_000u32).map(|i| i as u8).collect::<Vec<_>>());
        let mut a = Arriving::new(4_000);
        a.follow(&stager, Some((7, &bundle[..3_000])));
        assert_eq!(
            files(dir.path()),
            0,
            "below the threshold nothing is written"
        );
        a.follow(&stager, Some((7, &bundle[..5_000])));
        a.follow(&stager, Some((7, &bundle[..8_000])));
        assert_eq!(files(dir.path()), 1);
        let crc = bpv7::crc::bundle_bytes_crc32c(&bundle);
        assert!(a.complete(6, &bundle, crc).is_none(), "another transfer");
        let f = a.complete(7, &bundle, crc).expect("followed");
        let run = f.finish().expect("finish");
        let p = run.piece(0).expect("piece");
        assert_eq!(p.len(), 10_000);
        let path = std::fs::read_dir(dir.path())
            .expect("dir")
            .next()
            .expect("file")
            .expect("entry")
            .path();
        assert_eq!(std::fs::read(&path).expect("read"), bundle.to_vec());
        drop(p);
        drop(run);
        assert_eq!(files(dir.path()), 0, "unadopted, it is deleted");
    }

    #[test]
    fn an_announced_transfer_is_followed_from_its_first_octet() {
        let dir = tempdir();
        let stager = Stager::directory(dir.path(), false);
        let mut a = Arriving::new(4_000);
        a.announced(1, Some(3_999));
        a.follow(&stager, Some((1, &[1u8; 10])));
        assert_eq!(files(dir.path()), 0);
        a.announced(2, Some(4_000));
        a.follow(&stager, Some((2, &[1u8; 10])));
        assert_eq!(files(dir.path()), 1);
    }

    #[test]
    fn cut_replaced_or_rejected_transfers_leave_nothing() {
        let dir = tempdir();
        let stager = Stager::directory(dir.path(), false);
        let data = vec![9u8; 5_000];
        let mut a = Arriving::new(4_000);
        // Cut: no longer in progress.
        a.follow(&stager, Some((1, &data)));
        assert_eq!(files(dir.path()), 1);
        a.follow(&stager, None);
        assert_eq!(files(dir.path()), 0);
        // Replaced by another transfer (the first was refused or cancelled).
        a.follow(&stager, Some((2, &data)));
        a.follow(&stager, Some((3, &data[..10])));
        assert_eq!(files(dir.path()), 0);
        // Completed but failing its checks.
        a.follow(&stager, Some((4, &data)));
        a.discard(4);
        assert_eq!(files(dir.path()), 0);
        // The session ends mid-transfer.
        a.follow(&stager, Some((5, &data)));
        drop(a);
        assert_eq!(files(dir.path()), 0);
    }
}
