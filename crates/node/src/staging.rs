//! Which bundles the thread that holds their bytes writes into the store's staging files
//! (`bp::Stager`) instead of leaving the write to the agent thread: received TCPCL and LTP
//! bundles and, with a volatile store, large sends (see docs/store.md, "Staged bundles").

/// Bundles from this size on are staged by the thread that holds their bytes (a TCPCL session,
/// the LTP thread, an application connection's reader for its sends) when the store is
/// volatile (smaller ones are appended to the segment log by the agent, from
/// [`VOLATILE_SEGMENT_THRESHOLD`], or kept inline in the store's database below it: a staging
/// file of their own would cost more than the copy it saves). The bytes go along to the agent,
/// which hands them to the store's hot cache, so a staged bundle is not read back to be
/// forwarded or delivered.
pub(crate) const STAGE_FROM_VOLATILE: usize = 256 << 10;

/// A volatile store keeps bundles from this size on in its segment log, smaller ones inline
/// in its database (`bp::store::StoreOptions::segment_threshold`; a durable store keeps the
/// default 256 KiB, where one flush per commit made inline 100 kB commits faster, docs/store.md).
/// Without fsync the segment log is the cheaper place from far below 256 KiB: an inline payload
/// is copied into the database's pages, checksummed with them and written out with them by the
/// agent thread, kept out of the hot cache (a small bundle may slice a large buffer) and so
/// read back out of the database to be forwarded; in the segment log it is one write and stays
/// in the hot cache. Measured with volatile stores (binaries alternated, 500 MB per run, 2
/// pairs): 64 KiB bundles over TCPCL 2516–2772 → 4233–4551 Mb/s and 5.2–5.6 → 2.8–3.2 CPU-s/GB
/// (both nodes), 128 KiB 2696–2799 → 4041–5536 and 4.9 → 2.4–3.3, LTP with 1400-byte segments
/// and 64 KiB bundles 2171–2180 → 3520–3885 and 6.6 → 3.4–3.7 (docs/throughput.md, twelfth
/// part). Below 64 KiB an agent turn commits many bundles at once and each is a few pages.
pub(crate) const VOLATILE_SEGMENT_THRESHOLD: u64 = 64 << 10;

// A staged bundle is committed into the segment log: staging must start at or above the
// threshold from which a volatile store keeps bundles there.
const _: () = assert!(STAGE_FROM_VOLATILE as u64 >= VOLATILE_SEGMENT_THRESHOLD);

/// The same for a durable store, where each staging file costs its own `fdatasync` (the
/// agent's appends share one per commit): measured with 1 MB bundles received over TCPCL,
/// staging each cost the session thread 0.8 CPU-s/GB more and 20 % of the goodput, so only
/// large bundles are staged.
pub(crate) const STAGE_FROM_DURABLE: usize = 16 << 20;

/// The staging size for `stager`'s store ([`STAGE_FROM_VOLATILE`] or, durable,
/// [`STAGE_FROM_DURABLE`]).
pub(crate) fn stage_from(stager: &bp::Stager) -> usize {
    if stager.is_durable() {
        STAGE_FROM_DURABLE
    } else {
        STAGE_FROM_VOLATILE
    }
}

/// The stager an application connection's reader writes large `Send`s to: the store's when it
/// is volatile and on disk, else none. The reader writes a send's encoded payload block from
/// [`stage_from`] bytes on right after encoding it, while it is in its cache
/// (`bp::Stager::stage_tail`); the agent thread then writes only the bundle's head into that
/// staging file and commits it. Profiled with 1 MB bundles over TCPCL, the agent's append of
/// each whole bundle to the segment log was 72 % of the sending agent thread. With a durable
/// store each staging file would cost its own `fdatasync` where the agent's appends share one
/// per commit, so sends are not staged there.
pub(crate) fn for_sends(stager: Option<bp::Stager>) -> Option<bp::Stager> {
    stager.filter(|s| s.on_disk() && !s.is_durable())
}
