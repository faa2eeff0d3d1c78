//! Helpers shared by the tests that damage a store's segment file on purpose
//! (`agent_forward_ref`, `agent_delivery_ref`).

use std::path::{Path, PathBuf};

/// The one segment file of the redb store at `db` (fails if there is not exactly one).
pub fn seg_file(db: &Path) -> PathBuf {
    let dir = db.with_extension("segments");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("segments dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 1, "one segment file: {files:?}");
    files.remove(0)
}

/// Inverts the byte at `at` of `file` (a bit rot the store's CRC must catch; again to repair it).
pub fn flip(file: &Path, at: usize) {
    let mut bytes = std::fs::read(file).expect("read segment");
    bytes[at] ^= 0xFF;
    std::fs::write(file, &bytes).expect("write segment");
}
