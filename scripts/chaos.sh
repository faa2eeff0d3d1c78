#!/usr/bin/env bash
# The chaos run of issue 19 (needs root for its tmpfs; about 2 minutes): a 3-node chain 1 —LTP— 2 —TCPCL— 3 under a
# mixed load while node 2's store disk fills and drains, nodes 2 and 3 are SIGKILLed and restarted, and hostile
# datagrams and connections hit node 2. Passes when every bundle the nodes acknowledged to their applications arrived
# exactly once and every node is healthy and drained without a restart by hand. Prints its measurements on stderr.
#   scripts/chaos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test -p dtnkit --test node_hardening -- --ignored chaos_three_node_chain --exact --nocapture
