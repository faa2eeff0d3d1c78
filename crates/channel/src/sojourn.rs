//! A two-state discrete-time Markov chain evaluated lazily by sojourns.
//!
//! Instead of flipping a coin at every step, the chain draws how many steps it stays in a state (geometric with the
//! state's leave probability). The state at any step is therefore a function of the seed alone, independent of how
//! often or at which times it is queried — which is what keeps the simulator and the real-time emulator in agreement.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Lazily evaluated two-state chain; state `true` and `false` have their own per-step leave probabilities.
#[derive(Clone, Debug)]
pub(crate) struct SojournChain {
    /// Probability of leaving state `false` at each step.
    leave_false: f64,
    /// Probability of leaving state `true` at each step.
    leave_true: f64,
    step: Duration,
    state: bool,
    /// First step index after the current sojourn (exclusive end).
    end_step: u64,
    rng: ChaCha8Rng,
}

impl SojournChain {
    /// A chain starting in `initial` at step 0. `step` must be non-zero (validated by callers).
    pub(crate) fn new(
        leave_false: f64,
        leave_true: f64,
        step: Duration,
        initial: bool,
        rng: ChaCha8Rng,
    ) -> Self {
        let mut chain = SojournChain {
            leave_false,
            leave_true,
            step,
            state: initial,
            end_step: 0,
            rng,
        };
        chain.end_step = chain.draw_sojourn();
        chain
    }

    /// Number of steps spent in the current state: geometric on {1, 2, ...} with the state's leave probability.
    fn draw_sojourn(&mut self) -> u64 {
        let p = if self.state {
            self.leave_true
        } else {
            self.leave_false
        };
        if p >= 1.0 {
            return 1;
        }
        if p <= 0.0 {
            return u64::MAX;
        }
        // Inverse transform: k = ceil(ln U / ln(1 - p)) with U in (0, 1].
        let u: f64 = 1.0 - self.rng.random::<f64>();
        let k = (u.ln() / (-p).ln_1p()).ceil();
        if k.is_finite() && k >= 1.0 {
            if k >= u64::MAX as f64 {
                u64::MAX
            } else {
                k as u64
            }
        } else {
            1
        }
    }

    /// The state at time `t` (step index `t / step`). Times should be non-decreasing; an earlier time than the
    /// current sojourn answers with the current state.
    pub(crate) fn state_at(&mut self, t: Duration) -> bool {
        let step_ns = self.step.as_nanos().max(1);
        let idx = u64::try_from(t.as_nanos() / step_ns).unwrap_or(u64::MAX);
        while idx >= self.end_step && self.end_step != u64::MAX {
            self.state = !self.state;
            let len = self.draw_sojourn();
            self.end_step = self.end_step.saturating_add(len);
        }
        self.state
    }
}
