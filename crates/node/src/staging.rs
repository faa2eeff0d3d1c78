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
