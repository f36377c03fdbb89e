//! Two Mosquitto brokers for the MQTT rows: one plain, one with TLS that
//! requires client certificates, its certificate issued by the keystore
//! (`create_broker_certificate`). Killed on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferry_security::create::{create_broker_certificate, Validity};
use ferry_security::Keystore;

/// The two brokers and their ports.
pub struct Brokers {
    children: Vec<Child>,
    /// The plain broker's port.
    pub plain: u16,
    /// The TLS broker's port.
    pub tls: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Brokers {
    /// Starts both, or says why not (no Mosquitto here).
    pub fn start(ks: &Keystore, dir: &Path) -> Result<Brokers, String> {
        let certs = create_broker_certificate(
            ks,
            &["localhost".to_string(), "127.0.0.1".to_string()],
            Validity::days(1),
        )
        .map_err(|e| e.to_string())?;
        let (plain, tls) = (free_port(), free_port());
        let common =
            "allow_anonymous true\nuser root\nmax_packet_size 16777216\nset_tcp_nodelay true\n";
        let confs = [
            format!("listener {plain} 127.0.0.1\n{common}"),
            format!(
                "listener {tls} 127.0.0.1\ncafile {ca}\ncertfile {b}/cert.pem\nkeyfile {b}/key.pem\n\
                 require_certificate true\nuse_identity_as_username true\ntls_version tlsv1.3\n{common}",
                ca = ks.ca_cert_path().display(),
                b = certs.display()
            ),
        ];
        let mut children = Vec::new();
        for (i, conf) in confs.iter().enumerate() {
            let path = dir.join(format!("mosquitto-{i}.conf"));
            std::fs::write(&path, conf).map_err(|e| e.to_string())?;
            let child = Command::new("mosquitto")
                .arg("-c")
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("mosquitto: {e}"))?;
            children.push(child);
        }
        let b = Brokers {
            children,
            plain,
            tls,
        };
        for port in [plain, tls] {
            if !ferry_testkit::wait_listening(port, Duration::from_secs(5)) {
                return Err(format!("mosquitto did not come up on {port}"));
            }
        }
        Ok(b)
    }
}

impl Drop for Brokers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
