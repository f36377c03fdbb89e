//! `ferry._ferry`: the native half of ferry's Python package.
//!
//! Python sees nodes, publishers, subscriptions, services, clients and
//! timers shaped like rclpy's (the pure-Python `ferry` package wraps these
//! classes). Every port here is a raw-bytes port of the Rust library that
//! announces the Python message type's name and hash, so Python and Rust
//! ports of the same type match and exchange byte-identical CDR.
//!
//! Threads: ferry's delivery threads never take the GIL; they push into
//! bounded queues (`exec::Queue`) and bump the node's wake-up. Callbacks
//! run on the thread that calls `spin_once`, which waits with the GIL
//! released.

mod convert;
mod exec;
mod interfaces;
mod node;
mod ports;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _ferry,
    FerryError,
    PyException,
    "Base of every error ferry raises."
);
create_exception!(
    _ferry,
    BuildError,
    FerryError,
    "A node or port could not be created (bad name, config, incompatible type, no resources)."
);
create_exception!(
    _ferry,
    PublishError,
    FerryError,
    "A sample could not be published (encoding failed, a reliable keep_all subscriber is stalled)."
);
create_exception!(_ferry, CallError, FerryError, "A service call failed.");
create_exception!(
    _ferry,
    CallTimeout,
    CallError,
    "A service call got no answer in time."
);
create_exception!(
    _ferry,
    ServiceUnavailable,
    CallError,
    "No service answers under that name (not running, other domain, other types), or it went away."
);
create_exception!(
    _ferry,
    RemoteError,
    CallError,
    "The service's handler failed; the message is the handler's error."
);
create_exception!(
    _ferry,
    DestroyedError,
    FerryError,
    "The node or port was destroyed."
);

/// The module.
#[pymodule]
fn _ferry(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rumqttd=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .try_init();
    m.add("FerryError", py.get_type::<FerryError>())?;
    m.add("BuildError", py.get_type::<BuildError>())?;
    m.add("PublishError", py.get_type::<PublishError>())?;
    m.add("CallError", py.get_type::<CallError>())?;
    m.add("CallTimeout", py.get_type::<CallTimeout>())?;
    m.add("ServiceUnavailable", py.get_type::<ServiceUnavailable>())?;
    m.add("RemoteError", py.get_type::<RemoteError>())?;
    m.add("DestroyedError", py.get_type::<DestroyedError>())?;
    m.add_class::<node::Node>()?;
    m.add_class::<node::Executor>()?;
    m.add_class::<ports::Publisher>()?;
    m.add_class::<ports::Subscription>()?;
    m.add_class::<ports::Service>()?;
    m.add_class::<ports::Client>()?;
    m.add_class::<ports::PendingCall>()?;
    m.add_class::<ports::Timer>()?;
    m.add_class::<convert::Buffer>()?;
    m.add_function(wrap_pyfunction!(type_hash, m)?)?;
    m.add_function(wrap_pyfunction!(interfaces::interface, m)?)?;
    m.add_function(wrap_pyfunction!(interfaces::interface_list, m)?)?;
    m.add_function(wrap_pyfunction!(interfaces::interface_known, m)?)?;
    m.add_function(wrap_pyfunction!(interfaces::cdr_encode, m)?)?;
    m.add_function(wrap_pyfunction!(interfaces::cdr_decode, m)?)?;
    m.add_function(wrap_pyfunction!(convert::buffer_from, m)?)?;
    Ok(())
}

/// The 32-byte type hash ferry announces for a message type (ROS 2's
/// RIHS01 when its definition is known), from its name and definition text
/// (what Rust's `Message::type_hash` computes).
#[pyfunction]
fn type_hash(name: &str, definition: &str) -> [u8; 32] {
    ferry::interfaces::type_hash_of(name, definition).0
}
