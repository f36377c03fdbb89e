//! Across the lab's emulated Wi-Fi link (TUN emulator, 2 ± 1 ms, loss both
//! ways) between two hosts (separate network, IPC and /dev/shm namespaces):
//! discovery picks the UDP path by itself and reliable delivery is complete.

use std::process::Stdio;
use std::time::{Duration, Instant};

use ferry_lab::{wifi, Lab, LabConfig, LinkConfig, Side};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn wait(mut c: std::process::Child, limit: Duration) -> String {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(Some(_)) = c.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let o = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
}

#[test]
fn reliable_udp_over_lossy_wifi_between_two_hosts() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the lab needs root");
        return;
    }
    let lab = Lab::up(LabConfig::symmetric(
        "flcli",
        10,
        LinkConfig {
            loss: 0.05,
            ..wifi()
        },
    ))
    .expect("lab up");
    let env = "FERRY_DOMAIN_ID=31 FERRY_DISCOVERY=subnet";
    let echo = lab
        .command(
            Side::B,
            &format!("{env} exec {FERRY} topic echo /wifi --json --count 300 --timeout 30"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let publ = lab
        .command(Side::A, &format!("{env} exec {FERRY} --node-name wifi_pub topic pub /wifi std_msgs/msg/String 'data: over the air' -r 100 --times 1000"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While it runs, the publisher's admin service reports the path.
    std::thread::sleep(Duration::from_millis(1500));
    let info = lab
        .command(Side::B, &format!("{env} exec {FERRY} topic info /wifi -v"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let info = wait(info, Duration::from_secs(15));
    // The publisher's admin plane is `local` (the default): another host may
    // read it but not change it.
    let denied = lab
        .command(
            Side::B,
            &format!("{env} exec {FERRY} admin /wifi_pub --timeout 10 set /wifi --priority high"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let denied = wait(denied, Duration::from_secs(25));
    let out = wait(echo, Duration::from_secs(40));
    let _ = wait(publ, Duration::from_secs(5));
    let got = out
        .lines()
        .filter(|l| l.contains(r#""data":"over the air""#))
        .count();
    let [ab, ba] = lab.stats();
    assert!(
        ab.lost > 0 && ba.lost > 0,
        "the link lost nothing: {ab:?} {ba:?}"
    );
    assert_eq!(
        got, 300,
        "reliable over 5 % loss delivered {got} of 300\n{out}"
    );
    assert!(
        info.contains("path udp  udp/10.99.10.2:"),
        "path not udp:\n{info}"
    );
    assert!(
        denied.contains("permission denied") && denied.contains("admin = \"open\""),
        "a remote host changed the priority:\n{denied}"
    );
}
