//! Best effort on a lossy link: a large sample is lost whole when any of
//! its fragments is, so the reader reports its loss (an ACKNACK every 16
//! datagrams, asking for nothing again) and the writer adds recovery shards
//! sized to it.

mod common;

use std::time::Duration;

use common::{run, Outcome, Scenario};

/// 64 KiB (45 fragments) at 30 Hz on a 100 Mbit/s, 5 ms link, best effort.
fn camera(loss: f64, fec: bool, seed: u64) -> Outcome {
    let mut s = Scenario::new(loss, 64 * 1024, 300, seed);
    s.link.rate = 100_000_000 / 8;
    s.link.delay = Duration::from_millis(5);
    s.sender.reliable = false;
    s.receiver.reliable = false;
    s.sender.fec = fec;
    s.drain = Duration::from_secs(1);
    run(&s)
}

#[test]
fn large_best_effort_samples_survive_loss_with_recovery_shards() {
    for (loss, at_least) in [(0.01, 0.99), (0.10, 0.90)] {
        for seed in 0..3 {
            let with = camera(loss, true, seed);
            let without = camera(loss, false, seed);
            // After the first 2 s (60 samples): the reader's loss estimate
            // needs about a thousand fragments to settle.
            let steady = |o: &Outcome| o.delivered.iter().filter(|&&s| s > 60).count();
            let (a, b) = (steady(&with), steady(&without));
            let payload = 300.0 * 64.0 * 1024.0;
            eprintln!(
                "loss {loss} seed {seed}: {a}/240 after 2 s with FEC ({}/300 in all; {:.2}x the payload on the wire, {} shards, {} rebuilt), {b}/240 without ({:.2}x)",
                with.delivered.len(),
                with.link_bytes as f64 / (1.0 - loss) / payload,
                with.fec_shards,
                with.fec_recovered,
                without.link_bytes as f64 / (1.0 - loss) / payload,
            );
            assert!(
                a as f64 >= at_least * 240.0,
                "loss {loss} seed {seed}: {a}/240 delivered with FEC after 2 s"
            );
            assert!(a > b, "loss {loss} seed {seed}: {a} with FEC, {b} without");
            // The bound on the wire: 1.15 / (1 − p) × the payload.
            let wire = with.link_bytes as f64 / (1.0 - loss) / payload;
            assert!(
                wire <= 1.15 / (1.0 - loss),
                "loss {loss} seed {seed}: {wire:.2}x"
            );
            assert!(
                with.delivered.windows(2).all(|w| w[0] < w[1]),
                "newest wins, never older"
            );
        }
    }
}
