//! A streamed send as its connection's reader thread sees it: the chunks of the application
//! data unit become the stream's bundles (fragments, see `bpv7::FragmentPlan`), encoded around
//! the bytes as they arrive and written straight into the store's staging files. The reader
//! holds one chunk at a time; the agent thread never sees a payload byte — it drew the stream's
//! identity and reserved its quota at `SendBegin`, commits the bundles of each finished staging
//! file while the rest streams in when the grant says so (cut-through, `bp::Agent::
//! commit_stream_part`), and the remaining ones at the end.

use std::sync::Arc;

use bp::{StageFile, StagedPiece, Stager};
use bpv7::{FragmentEncoder, FragmentPlan};

use crate::messages::StreamGrant;

/// A staging file is closed (and synced) and the next one started once it holds this much; each
/// becomes a segment of the store when committed. It is also the step of cut-through: a
/// fragmented ADU's bundles are committed, and forwarded, a staging file at a time, so the
/// first of them leaves after 16 MiB (one fragment of the default `[bp] max_fragment_bytes`)
/// instead of after the whole ADU.
const STAGE_FILE_BYTES: u64 = 16 << 20;

/// An open stream being staged.
pub(crate) struct Incoming {
    pub(crate) stream: u64,
    plan: Arc<FragmentPlan>,
    stager: Stager,
    /// ADU bytes received so far.
    received: u64,
    /// The piece being written and the payload bytes it still takes.
    piece: usize,
    piece_left: u64,
    encoder: Option<FragmentEncoder>,
    file: Option<StageFile>,
    /// Pieces of the staging files already finished (and not yet taken by
    /// [`Incoming::take_ready`]).
    staged: Vec<StagedPiece>,
    /// Whether the finished files' pieces go to the agent as the stream goes
    /// ([`Incoming::take_ready`]) or all at the end.
    in_parts: bool,
}

impl Incoming {
    /// Starts staging the stream `grant` describes (creates the first staging file and writes
    /// the first bundle's head).
    pub(crate) fn new(grant: StreamGrant) -> std::io::Result<Incoming> {
        let mut s = Incoming {
            stream: grant.stream,
            plan: grant.plan,
            stager: grant.stager,
            received: 0,
            piece: 0,
            piece_left: 0,
            encoder: None,
            file: None,
            staged: Vec::new(),
            in_parts: grant.in_parts,
        };
        s.start_piece()?;
        Ok(s)
    }

    /// Length of the ADU.
    pub(crate) fn total(&self) -> u64 {
        self.plan.total_len()
    }

    /// ADU bytes received so far.
    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// True once every byte arrived.
    pub(crate) fn is_complete(&self) -> bool {
        self.received >= self.total()
    }

    /// Starts piece `self.piece` (a new staging file first when the current one is full),
    /// and closes pieces without payload bytes at once.
    fn start_piece(&mut self) -> std::io::Result<()> {
        while self.piece < self.plan.pieces().len() {
            if self
                .file
                .as_ref()
                .is_none_or(|f| f.len() >= STAGE_FILE_BYTES)
            {
                if let Some(full) = self.file.take() {
                    self.staged.extend(full.finish()?.pieces());
                }
                self.file = Some(self.stager.create()?);
            }
            let Some(e) = self.plan.encoder(self.piece) else {
                break;
            };
            let Some(f) = self.file.as_mut() else {
                break;
            };
            f.begin_piece();
            f.write(e.head())?;
            self.piece_left = e.piece().len;
            self.encoder = Some(e);
            if self.piece_left > 0 {
                return Ok(());
            }
            self.end_piece()?;
        }
        Ok(())
    }

    /// Writes the current piece's tail and moves to the next piece.
    fn end_piece(&mut self) -> std::io::Result<()> {
        if let (Some(e), Some(f)) = (self.encoder.take(), self.file.as_mut()) {
            f.write(&e.tail())?;
            f.end_piece();
        }
        self.piece += 1;
        Ok(())
    }

    /// Stages the next bytes of the ADU (the caller checked they do not exceed its length).
    pub(crate) fn push(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let n = usize::try_from(self.piece_left)
                .unwrap_or(usize::MAX)
                .min(data.len());
            if n == 0 {
                return Err(std::io::Error::other(
                    "more bytes than the stream's bundles",
                ));
            }
            let (now, rest) = data.split_at(n);
            if let Some(e) = self.encoder.as_mut() {
                e.update(now);
            }
            if let Some(f) = self.file.as_mut() {
                f.write(now)?;
            }
            self.piece_left -= n as u64;
            self.received += n as u64;
            data = rest;
            if self.piece_left == 0 {
                self.end_piece()?;
                self.start_piece()?;
            }
        }
        Ok(())
    }

    /// The bundles of the staging files finished so far, to commit now (cut-through): empty
    /// unless the grant asked for parts. Never the stream's last bundle, which
    /// [`Incoming::finish`] returns.
    pub(crate) fn take_ready(&mut self) -> Vec<StagedPiece> {
        if self.in_parts {
            std::mem::take(&mut self.staged)
        } else {
            Vec::new()
        }
    }

    /// The complete stream's bundles not taken by [`Incoming::take_ready`], their staging files finished (synced when the store is
    /// durable), in plan order.
    pub(crate) fn finish(mut self) -> std::io::Result<Vec<StagedPiece>> {
        if let Some(f) = self.file.take() {
            self.staged.extend(f.finish()?.pieces());
        }
        Ok(std::mem::take(&mut self.staged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bp::{Agent, AgentConfig, ClaOutcome, MemoryStore, StreamRequest};

    #[test]
    fn chunks_of_any_size_stage_the_planned_bundles() {
        let now = 800_000_000_000;
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        for (chunk, fragment) in [(1usize, 70_000u64), (999, 9_000), (70_000, 4_000)] {
            let mut a = Agent::open(
                AgentConfig {
                    max_fragment_bytes: fragment,
                    max_bundle_size: fragment,
                    ..AgentConfig::new(1)
                },
                MemoryStore::new(),
                now,
            )
            .expect("agent");
            let req = StreamRequest::new(
                "ipn:1.1".parse().expect("eid"),
                "ipn:2.1".parse().expect("eid"),
                data.len() as u64,
            );
            let p = a.begin_stream(now, req).expect("begin");
            let mut s = Incoming::new(StreamGrant {
                stream: p.stream,
                plan: p.plan.clone(),
                stager: p.stager.clone(),
                in_parts: false,
            })
            .expect("incoming");
            for c in data.chunks(chunk) {
                s.push(c).expect("push");
            }
            assert!(s.is_complete());
            let pieces = s.finish().expect("finish");
            a.commit_stream(now, p.stream, pieces).expect("commit");
            a.link_up(now, 2, 0);
            let mut r = bpv7::Reassembler::new(bpv7::ReassemblyLimits::default());
            let mut whole = None;
            while let Some(f) = a.poll_transmit(now) {
                assert!(f.bundle.len() as u64 <= fragment.max(1));
                let b = bpv7::Bundle::decode(f.bundle).expect("valid bundle");
                if b.is_fragment() {
                    whole = r.insert(b).expect("fragment").or(whole);
                } else {
                    whole = Some(b);
                }
                a.cla_result(now, f.key, ClaOutcome::Sent).expect("sent");
            }
            assert_eq!(&whole.expect("whole ADU").payload()[..], &data[..]);
        }
    }
}
