//! Per-packet loss processes behind one enum.
//!
//! A [`LossModel`] is the validated description; [`LossProcess`] is its running state with its own random streams.
//! The process is asked once per packet that reaches the channel, at the packet's transmission start time.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::rng::{stream, Component};
use crate::sojourn::SojournChain;
use crate::trace::ErasureTrace;

/// Gilbert–Elliott two-state loss: a good and a bad state with their own loss probabilities.
///
/// `p` is the probability of moving good → bad and `r` of moving bad → good. With `step = None` the chain makes one
/// transition per packet (the classic packet-level model, stationary loss `(r·loss_good + p·loss_bad)/(p + r)`).
/// With `step = Some(d)` the chain runs in time, one transition opportunity every `d`, independently of the traffic,
/// so the loss seen by a packet depends on when it is sent (a fading channel).
#[derive(Clone, Debug, PartialEq)]
pub struct GilbertElliott {
    /// Probability good → bad per transition opportunity.
    pub p: f64,
    /// Probability bad → good per transition opportunity.
    pub r: f64,
    /// Loss probability in the good state.
    pub loss_good: f64,
    /// Loss probability in the bad state.
    pub loss_bad: f64,
    /// `None`: one transition per packet; `Some(step)`: one per time step.
    pub step: Option<Duration>,
}

impl GilbertElliott {
    /// The long-run fraction of lost packets (per-packet chain) or of lossy time (time-stepped chain).
    pub fn stationary_loss(&self) -> f64 {
        let (p, r) = (self.p, self.r);
        if p + r == 0.0 {
            return self.loss_good;
        }
        (r * self.loss_good + p * self.loss_bad) / (p + r)
    }
}

/// A loss process description.
#[derive(Clone, Debug, Default)]
pub enum LossModel {
    /// No channel loss.
    #[default]
    None,
    /// Independent packet erasures with probability `per`.
    Iid {
        /// Packet erasure rate in [0, 1].
        per: f64,
    },
    /// Independent bit errors: a packet of `len` bytes is lost with probability `1 - (1 - ber)^(8 len)`.
    Ber {
        /// Bit error rate in [0, 1].
        ber: f64,
    },
    /// Gilbert–Elliott.
    GilbertElliott(GilbertElliott),
    /// Erasure-trace replay: a packet is lost when the trace sample at its transmission time (plus `offset`,
    /// looping at the end of the trace) is 1.
    Trace {
        /// The trace (shared between directions and runs).
        trace: Arc<ErasureTrace>,
        /// Where in the trace time zero falls.
        offset: Duration,
    },
}

/// Packet loss probability for a bit error rate and a packet length: `1 - (1 - ber)^(8 len)`, computed with
/// `ln_1p`/`exp_m1` so tiny BERs do not round to zero.
pub fn ber_packet_loss(ber: f64, len: usize) -> f64 {
    if ber <= 0.0 {
        return 0.0;
    }
    if ber >= 1.0 {
        return if len == 0 { 0.0 } else { 1.0 };
    }
    let bits = 8.0 * len as f64;
    -(bits * (-ber).ln_1p()).exp_m1()
}

/// The running state of a [`LossModel`].
#[derive(Clone, Debug)]
pub struct LossProcess {
    model: LossModel,
    rng: ChaCha8Rng,
    /// Gilbert–Elliott state (per-packet variant): `true` = bad.
    ge_bad: bool,
    state_rng: ChaCha8Rng,
    /// Gilbert–Elliott time-stepped chain.
    ge_chain: Option<SojournChain>,
}

impl LossProcess {
    /// Starts the process for direction number `direction` of a link seeded with `seed`.
    pub fn new(model: LossModel, seed: u64, direction: u64) -> Self {
        let rng = stream(seed, direction, Component::Loss);
        let mut state_rng = stream(seed, direction, Component::LossState);
        let (mut ge_bad, mut ge_chain) = (false, None);
        if let LossModel::GilbertElliott(ge) = &model {
            // Start from the stationary distribution so statistics hold from the first packet.
            let pi_bad = if ge.p + ge.r > 0.0 {
                ge.p / (ge.p + ge.r)
            } else {
                0.0
            };
            ge_bad = state_rng.random::<f64>() < pi_bad;
            if let Some(step) = ge.step {
                ge_chain = Some(SojournChain::new(
                    ge.p,
                    ge.r,
                    step,
                    ge_bad,
                    state_rng.clone(),
                ));
            }
        }
        LossProcess {
            model,
            rng,
            ge_bad,
            state_rng,
            ge_chain,
        }
    }

    /// The model this process runs.
    pub fn model(&self) -> &LossModel {
        &self.model
    }

    /// Decides whether a packet of `len` bytes whose transmission starts at `t` is erased by the channel.
    pub fn is_lost(&mut self, t: Duration, len: usize) -> bool {
        match &self.model {
            LossModel::None => false,
            LossModel::Iid { per } => self.rng.random::<f64>() < *per,
            LossModel::Ber { ber } => {
                let p = ber_packet_loss(*ber, len);
                self.rng.random::<f64>() < p
            }
            LossModel::GilbertElliott(ge) => {
                let bad = match &mut self.ge_chain {
                    Some(chain) => chain.state_at(t),
                    None => {
                        let bad = self.ge_bad;
                        let flip = if bad { ge.r } else { ge.p };
                        if self.state_rng.random::<f64>() < flip {
                            self.ge_bad = !bad;
                        }
                        bad
                    }
                };
                let p = if bad { ge.loss_bad } else { ge.loss_good };
                self.rng.random::<f64>() < p
            }
            LossModel::Trace { trace, offset } => trace.erased_at(t.saturating_add(*offset)),
        }
    }
}
