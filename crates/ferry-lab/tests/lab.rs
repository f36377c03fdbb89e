//! The lab itself: delay and loss are really applied (needs root).

use ferry_lab::{wifi, Lab, LabConfig, LinkConfig, Side};

fn ping(lab: &Lab, count: u32) -> (f64, f64) {
    let o = lab
        .command(
            Side::A,
            &format!("ping -q -c {count} -i 0.005 -W 1 {}", lab.addr(Side::B)),
        )
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let loss: f64 = out
        .split(" packet loss")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("no loss in {out}"));
    let avg: f64 = out
        .split(" = ")
        .nth(1)
        .and_then(|s| s.split('/').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    (avg, loss)
}

#[test]
fn delay_and_loss_are_applied_in_both_directions() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the lab needs root");
        return;
    }
    let lab = Lab::up(LabConfig::symmetric("fltst", 9, wifi())).expect("lab up");
    let (rtt, loss) = ping(&lab, 100);
    assert!(
        (3.5..15.0).contains(&rtt),
        "wifi preset RTT {rtt} ms, expected ≈ 4.5"
    );
    assert_eq!(loss, 0.0);
    drop(lab);
    let lab = Lab::up(LabConfig::symmetric(
        "fltst",
        9,
        LinkConfig {
            loss: 0.2,
            ..wifi()
        },
    ))
    .expect("lab up");
    let (_, loss) = ping(&lab, 300);
    // 1 - 0.8² = 36 % for request + reply.
    assert!(
        (25.0..48.0).contains(&loss),
        "ping loss {loss} % with 20 % each way"
    );
    let [ab, ba] = lab.stats();
    assert!(
        ab.lost > 0 && ba.lost > 0,
        "loss must hit both directions: {ab:?} {ba:?}"
    );
    drop(lab);
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("fltst"),
        "namespaces left behind"
    );
}
