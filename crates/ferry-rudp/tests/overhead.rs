//! What loss protection costs on the wire (issue 20, item 6): recovery
//! shards sized to the loss plus repairs of what they could not rebuild stay
//! within `1.15 / (1 − p)` of the payload (1.05 without loss), and a
//! fragment the shards can rebuild is not repeated as well.

mod common;

use std::time::Duration;

use common::{assert_in_order, run, Scenario};

/// 128 KB at 29.3 Hz (60 % of 50 Mbit/s), 10 ms ± 40 % one way, in order,
/// reliable keep_all: the base cell of `bench/grid.py`.
fn cell(loss: f64, seed: u64) -> Scenario {
    let mut s = Scenario::new(loss, 128_000, 300, seed);
    s.hz = 29.3;
    s.link.rate = 50_000_000 / 8;
    s.link.delay = Duration::from_millis(6);
    s.link.jitter = Duration::from_millis(8);
    s.link.reorder = false;
    s.link.mtu = 1500;
    s.link.queue = 208; // 50 ms
    s.sender.keep_all = true;
    s
}

#[test]
fn wire_bytes_track_the_loss_and_shards_are_not_doubled_by_repairs() {
    for (loss, seed) in [(0.0, 1), (0.01, 2), (0.05, 3), (0.1, 4), (0.2, 5)] {
        let s = cell(loss, seed);
        let o = run(&s);
        assert_in_order(&o);
        assert_eq!(o.delivered, (1..=300).collect::<Vec<_>>(), "loss {loss}");
        let ratio = o.link_sent_bytes as f64 / (300.0 * 128_000.0);
        eprintln!(
            "loss {loss}: {ratio:.3} × the payload, {} repeated, {} rebuilt, mean {:?}",
            o.retransmitted,
            o.fec_recovered,
            common::mean(&o.latencies)
        );
        let bound = if loss == 0.0 {
            1.05
        } else {
            1.15 / (1.0 - loss)
        };
        assert!(
            ratio <= bound,
            "loss {loss}: {ratio:.3} × the payload on the wire > {bound:.3}"
        );
        // Repairs only for what the shards could not rebuild: a fraction of
        // the fragments lost (they were 90 % of them while NACKs of
        // fragments the shards were about to rebuild were answered too).
        let lost = 300.0 * 88.0 * loss;
        assert!(
            o.retransmitted as f64 <= 0.25 * lost + 10.0,
            "loss {loss}: {} fragments repeated, ~{lost:.0} lost, {} rebuilt",
            o.retransmitted,
            o.fec_recovered
        );
    }
}
