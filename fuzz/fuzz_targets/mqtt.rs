//! What an MQTT broker sends to ferry's own connection
//! (crates/ferry/src/transport/mqtt/wire.rs): arbitrary bytes, cut into
//! reads of arbitrary sizes, through the packet reader (fixed header, the
//! max-packet bound, rumqttc's MQTT 5 decoder) and ferry's metadata parsers
//! (`ferry` property, control-topic paths).
//!
//! Properties: nothing panics; a packet announcing more than the 64 KiB
//! limit is refused from its header (memory follows the bytes that came,
//! never an announced length).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ferry::transport::mqtt::fuzz_stream(data);
});
