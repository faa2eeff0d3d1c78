//! Seeded random streams: every model of every direction draws from its own ChaCha8 stream derived from the link
//! seed, so adding or reconfiguring one model never shifts the decisions of another.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Which component of a direction a stream belongs to. The numeric values are part of the reproducibility
/// contract: changing them changes every seeded result.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Component {
    /// Per-packet loss draws (IID, BER, Gilbert–Elliott within a state).
    Loss = 1,
    /// Gilbert–Elliott state transitions.
    LossState = 2,
    /// Markov availability sojourns.
    Availability = 3,
    /// Delay jitter.
    Jitter = 4,
}

/// The ChaCha8 stream for `component` of direction number `direction` under `seed`.
pub(crate) fn stream(seed: u64, direction: u64, component: Component) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream((direction << 8) | component as u64);
    rng
}
