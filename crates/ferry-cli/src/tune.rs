//! `ferry tune`: the seed paper's wireless large-payload profile
//! (001_10b8b18b6f5db8a8, "DDS Optimization for Wireless Large Payload
//! Transfer") for one stream, as a ferry configuration and, for ROS 2
//! users, as Fast DDS and Cyclone DDS XML.

/// Inputs of `ferry tune`.
#[derive(clap::Args, Debug)]
pub struct TuneArgs {
    /// Publish rate r, Hz.
    #[arg(long)]
    rate: f64,
    /// Payload u, e.g. `256KiB`, `1.5MB`, `4096`.
    #[arg(long)]
    payload: String,
    /// Link-layer throughput T, e.g. `433Mbit`, `300Mbps`, `1Gbit`.
    #[arg(long)]
    link: String,
    /// Share ω of the link this traffic may use (0.6–0.7 if it has the link to itself).
    #[arg(long, default_value_t = 0.6)]
    utilization: f64,
}

/// Splits `256KiB` into 256 and `kib` (lower case).
fn number_and_unit(s: &str) -> Option<(f64, String)> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    Some((num.parse().ok()?, unit.trim().to_ascii_lowercase()))
}

/// Bytes from `256KiB`, `1.5MB`, `4096`, `512K`.
pub fn parse_bytes(s: &str) -> Result<f64, String> {
    let (v, unit) =
        number_and_unit(s).ok_or_else(|| format!("`{s}` is not a size (try 256KiB)"))?;
    let mult = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        u => return Err(format!("unknown size unit `{u}` in `{s}`")),
    };
    Ok(v * mult)
}

/// Bits per second from `433Mbit`, `300Mbps`, `1Gbit`, `54M`.
pub fn parse_bits(s: &str) -> Result<f64, String> {
    let (v, unit) =
        number_and_unit(s).ok_or_else(|| format!("`{s}` is not a rate (try 433Mbit)"))?;
    let mult = match unit
        .trim_end_matches("/s")
        .trim_end_matches("ps")
        .trim_end_matches("bit")
        .trim_end_matches('b')
    {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        u => return Err(format!("unknown rate unit `{u}` in `{s}`")),
    };
    Ok(v * mult)
}

/// The computed profile.
#[derive(Debug, PartialEq)]
pub struct Profile {
    /// Largest UDP payload: one datagram per IP packet (no IP fragmentation).
    pub max_message: usize,
    /// Heartbeat period n = 2r, seconds.
    pub heartbeat_s: f64,
    /// History depth N_HC = ⌈T·ω/u⌉ (T in bytes/s).
    pub history: u64,
    /// The same bound in bytes (what ferry enforces).
    pub history_bytes: u64,
}

/// Applies the paper's three steps.
pub fn profile(rate: f64, payload: f64, link_bits: f64, utilization: f64) -> Profile {
    let t_bytes = link_bits / 8.0 * utilization;
    Profile {
        max_message: 1472,
        heartbeat_s: 1.0 / (2.0 * rate),
        history: (t_bytes / payload).ceil().max(1.0) as u64,
        history_bytes: t_bytes as u64,
    }
}

pub fn run(a: TuneArgs) -> Result<(), String> {
    if a.rate.is_nan() || a.rate <= 0.0 {
        return Err("--rate must be positive".into());
    }
    if !(0.0 < a.utilization && a.utilization <= 1.0) {
        return Err("--utilization must be in (0, 1]".into());
    }
    let u = parse_bytes(&a.payload)?;
    let t = parse_bits(&a.link)?;
    if u <= 0.0 || t <= 0.0 {
        return Err("--payload and --link must be positive".into());
    }
    let p = profile(a.rate, u, t, a.utilization);
    let hb_ns = (p.heartbeat_s * 1e9).round() as u64;
    let hb_ms = p.heartbeat_s * 1e3;
    let need = a.rate * u * 8.0 / 1e6;
    out!(
        "# Stream: {} Hz × {} B = {need:.1} Mbit/s on a {:.0} Mbit/s link (ω = {})",
        a.rate,
        u,
        t / 1e6,
        a.utilization
    );
    if need > t * a.utilization / 1e6 {
        out!("# WARNING: the stream needs more than ω of the link; expect backlog and drops (lower the rate or payload, or raise ω).");
    }
    out!();
    out!("## ferry (FERRY_CONFIG file + QoS)");
    out!("udp_mtu = {}             # step 1: one datagram per IP packet, never IP fragmentation (1500 B MTU − 28 B IP/UDP)", p.max_message);
    out!(
        "udp_link_mbps = {:.0}         # pace to the link instead of bursting",
        t / 1e6
    );
    out!("udp_utilization_pct = {:.0}     # history holds one second of this share: {} bytes (step 3, in bytes)", a.utilization * 100.0, p.history_bytes);
    out!("# QoS: Qos::default().reliable().keep_last({})  — step 3: N_HC = ⌈T·ω/u⌉ = ⌈{:.0} B/s / {u:.0} B⌉", p.history, t / 8.0 * a.utilization);
    out!("# step 2 needs no setting: ferry heartbeats at twice the measured publish rate ({hb_ms:.1} ms here).");
    out!();
    out!("## Fast DDS XML (ROS 2: export FASTRTPS_DEFAULT_PROFILES_FILE=this.xml)");
    out!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<profiles xmlns="http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles">
  <transport_descriptors>
    <transport_descriptor>
      <transport_id>udp_no_ip_fragments</transport_id>
      <type>UDPv4</type>
      <!-- step 1: RTPS messages of at most {mm} B, so no IP fragmentation -->
      <maxMessageSize>{mm}</maxMessageSize>
    </transport_descriptor>
  </transport_descriptors>
  <participant profile_name="wireless_large_payload" is_default_profile="true">
    <rtps>
      <userTransports><transport_id>udp_no_ip_fragments</transport_id></userTransports>
      <useBuiltinTransports>false</useBuiltinTransports>
    </rtps>
  </participant>
  <data_writer profile_name="wireless_large_payload_writer" is_default_profile="true">
    <qos><reliability><kind>RELIABLE_RELIABILITY_QOS</kind></reliability></qos>
    <!-- step 2: heartbeat at n = 2r = {n:.0} Hz -->
    <times><heartbeatPeriod><sec>0</sec><nanosec>{hb_ns}</nanosec></heartbeatPeriod></times>
    <!-- step 3: history N_HC = ceil(T*w/u) = {h} samples -->
    <topic><historyQos><kind>KEEP_LAST</kind><depth>{h}</depth></historyQos></topic>
  </data_writer>
</profiles>"#,
        mm = p.max_message,
        n = 2.0 * a.rate,
        h = p.history
    );
    out!();
    out!("## Cyclone DDS XML (ROS 2: export CYCLONEDDS_URI=file://this.xml)");
    out!(
        r#"<CycloneDDS xmlns="https://cdds.io/config">
  <Domain>
    <General>
      <!-- step 1: no RTPS message above {mm} B, fragments that fit it -->
      <MaxMessageSize>{mm}B</MaxMessageSize>
      <FragmentSize>{frag}B</FragmentSize>
    </General>
    <Internal>
      <!-- step 2: heartbeat at n = 2r -->
      <HeartbeatInterval>{hb_ms:.1}ms</HeartbeatInterval>
      <!-- step 3 in bytes: the writer history cache stops at one second of T*w -->
      <Watermarks><WhcHigh>{whc}B</WhcHigh></Watermarks>
    </Internal>
  </Domain>
</CycloneDDS>
<!-- and in the application's QoS: history KEEP_LAST depth {h} (rclcpp::QoS(rclcpp::KeepLast({h})).reliable()) -->"#,
        mm = p.max_message,
        frag = p.max_message - 72,
        whc = p.history_bytes,
        h = p.history
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example() {
        let p = profile(
            30.0,
            parse_bytes("256KiB").unwrap(),
            parse_bits("433Mbit").unwrap(),
            0.6,
        );
        // 433e6/8*0.6 = 32.475 MB/s; / 262144 B = 123.9 -> 124.
        assert_eq!(p.history, 124);
        assert_eq!(p.max_message, 1472);
        assert!((p.heartbeat_s - 1.0 / 60.0).abs() < 1e-12);
        assert_eq!(p.history_bytes, 32_475_000);
    }

    #[test]
    fn the_papers_fig8_threshold() {
        // Fig. 8 assumes T*w = 240 Mb/s: for 512 KB at 30 Hz, N_HC = ceil(30e6 / 512e3) = 59.
        let p = profile(30.0, parse_bytes("512KB").unwrap(), 240e6, 1.0);
        assert_eq!(p.history, 59);
    }

    #[test]
    fn units() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096.0);
        assert_eq!(parse_bytes("1.5MB").unwrap(), 1.5e6);
        assert_eq!(parse_bits("300Mbps").unwrap(), 300e6);
        assert_eq!(parse_bits("1Gbit").unwrap(), 1e9);
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bits("fast").is_err());
    }
}
