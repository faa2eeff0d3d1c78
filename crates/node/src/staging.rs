//! Which bundles the thread that holds their bytes writes into the store's staging files
//! (`bp::Stager`) instead of leaving the write to the agent thread: received TCPCL and LTP
//! bundles and, with a volatile store, large sends (see docs/store.md, "Staged bundles").

/// Bundles from this size on are staged by the thread that holds their bytes (a TCPCL session,
/// the LTP thread, an application connection's reader for its sends) when the store is
/// volatile: the store's segment threshold (smaller bundles are kept inline in its database,
/// where a staging file would cost more than the copy it saves). The bytes go along to the
/// agent, which hands them to the store's hot cache, so a staged bundle is not read back to be
/// forwarded or delivered.
pub(crate) const STAGE_FROM_VOLATILE: usize = 256 << 10;

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
