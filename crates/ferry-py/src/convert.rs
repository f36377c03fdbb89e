//! Between Rust and Python: received bytes as Python objects (zero-copy
//! where it matters), QoS from Python, Rust errors as Python exceptions,
//! connection reports as dicts.

use std::time::Duration;

use bytes::Bytes;
use ferry::{ConnectionInfo, Durability, History, Qos, Reliability, SampleInfo, TransportKind};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyString};

/// Received bytes, shared with ferry (a shared-memory slot on the
/// shared-memory path, a network buffer otherwise), never copied:
/// `numpy.asarray(buf)` is a read-only view (`__array_interface__`), and
/// the slot returns to the publisher when the last view is gone.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Buffer {
    pub(crate) bytes: Bytes,
}

#[pymethods]
impl Buffer {
    fn __len__(&self) -> usize {
        self.bytes.len()
    }
    /// A copy as `bytes`.
    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }
    /// A copy as `bytes`.
    fn tobytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }
    /// Address of the first byte (to check where a sample lives).
    #[getter]
    fn address(&self) -> usize {
        self.bytes.as_ptr() as usize
    }
    /// numpy's array interface: a read-only 1-D uint8 view of the bytes.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", (self.bytes.len(),))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.bytes.as_ptr() as usize, true))?;
        d.set_item("version", 3)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!(
            "<ferry.Buffer {} bytes at {:#x}>",
            self.bytes.len(),
            self.bytes.as_ptr() as usize
        )
    }
}

/// A [`Buffer`] holding a copy of `data` (for tests and tools).
#[pyfunction]
pub fn buffer_from(data: &[u8]) -> Buffer {
    Buffer {
        bytes: Bytes::copy_from_slice(data),
    }
}

/// What a port hands to Python for each received payload.
pub enum Kind {
    /// `bytes` (a copy).
    Bytes,
    /// `str` (UTF-8).
    Str,
    /// A read-only `numpy.ndarray` of uint8 viewing the sample.
    Array,
    /// A [`Buffer`].
    Buffer,
    /// A message class: its `decode` gets `bytes` for small payloads and a
    /// zero-copy uint8 array view for large ones.
    Msg(PyObject),
}

/// Payloads from this size on are handed to a message decoder as a view.
const VIEW_FROM: usize = 4096;

static ASARRAY: GILOnceCell<PyObject> = GILOnceCell::new();

fn view<'py>(py: Python<'py>, bytes: &Bytes) -> PyResult<Bound<'py, PyAny>> {
    let asarray = ASARRAY.get_or_try_init(py, || -> PyResult<PyObject> {
        Ok(py.import("numpy")?.getattr("asarray")?.unbind())
    })?;
    let buf = Bound::new(
        py,
        Buffer {
            bytes: bytes.clone(),
        },
    )?;
    asarray.bind(py).call1((buf,))
}

impl Kind {
    /// The Python object for one payload.
    pub fn to_py<'py>(&self, py: Python<'py>, bytes: &Bytes) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Kind::Bytes => PyBytes::new(py, bytes).into_any(),
            Kind::Str => match std::str::from_utf8(bytes) {
                Ok(s) => PyString::new(py, s).into_any(),
                Err(e) => {
                    return Err(PyValueError::new_err(format!(
                        "payload of {} bytes is not UTF-8 text: {e}",
                        bytes.len()
                    )))
                }
            },
            Kind::Array => view(py, bytes)?,
            Kind::Buffer => Bound::new(
                py,
                Buffer {
                    bytes: bytes.clone(),
                },
            )?
            .into_any(),
            Kind::Msg(decode) => {
                let arg = if bytes.len() >= VIEW_FROM {
                    view(py, bytes)?
                } else {
                    PyBytes::new(py, bytes).into_any()
                };
                decode.bind(py).call1((arg,))?
            }
        })
    }

    /// From the Python-side spelling: "bytes", "str", "array", "buffer" or
    /// a decode callable.
    pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Kind> {
        if let Ok(s) = obj.extract::<String>() {
            return match s.as_str() {
                "bytes" => Ok(Kind::Bytes),
                "str" => Ok(Kind::Str),
                "array" => Ok(Kind::Array),
                "buffer" => Ok(Kind::Buffer),
                other => Err(PyValueError::new_err(format!(
                    "unknown payload kind `{other}` (bytes, str, array, buffer or a decoder)"
                ))),
            };
        }
        if obj.is_callable() {
            return Ok(Kind::Msg(obj.clone().unbind()));
        }
        Err(PyTypeError::new_err(
            "payload kind must be a string or a decode callable",
        ))
    }
}

/// The bytes of a `bytes`, `bytearray` or `str` argument (copied).
pub fn payload_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(b.as_bytes()));
    }
    if let Ok(b) = obj.downcast::<pyo3::types::PyByteArray>() {
        return Ok(Bytes::from(b.to_vec()));
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(Bytes::copy_from_slice(s.to_str()?.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "cannot send a {}: expected bytes, bytearray or str",
        obj.get_type().name()?
    )))
}

fn seconds(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<Duration>> {
    match d.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => {
            let s: f64 = v.extract()?;
            if !(s.is_finite() && s > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "QoS `{key}` must be a positive number of seconds or None, got {s}"
                )));
            }
            Ok(Some(Duration::from_secs_f64(s)))
        }
    }
}

/// A [`Qos`] from the dict `ferry.qos.QoSProfile.to_dict()` makes; unknown
/// keys are refused by name.
pub fn qos_from(d: &Bound<'_, PyDict>) -> PyResult<Qos> {
    const KEYS: [&str; 8] = [
        "reliability",
        "history",
        "depth",
        "durability",
        "deadline",
        "lifespan",
        "liveliness_lease_duration",
        "transport",
    ];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(PyValueError::new_err(format!(
                "unknown QoS key `{k}` (known: {})",
                KEYS.join(", ")
            )));
        }
    }
    let text = |key: &str, default: &str| -> PyResult<String> {
        match d.get_item(key)? {
            Some(v) if !v.is_none() => v.extract(),
            _ => Ok(default.to_string()),
        }
    };
    let mut q = Qos::default_profile();
    q.reliability = match text("reliability", "reliable")?.as_str() {
        "reliable" => Reliability::Reliable,
        "best_effort" => Reliability::BestEffort,
        o => {
            return Err(PyValueError::new_err(format!(
                "QoS `reliability`: `{o}` is not reliable or best_effort"
            )))
        }
    };
    let depth: u32 = match d.get_item("depth")? {
        Some(v) if !v.is_none() => v.extract()?,
        _ => 10,
    };
    q.history = match text("history", "keep_last")?.as_str() {
        "keep_last" => History::KeepLast(depth.max(1)),
        "keep_all" => History::KeepAll,
        o => {
            return Err(PyValueError::new_err(format!(
                "QoS `history`: `{o}` is not keep_last or keep_all"
            )))
        }
    };
    q.durability = match text("durability", "volatile")?.as_str() {
        "volatile" => Durability::Volatile,
        "transient_local" => Durability::TransientLocal,
        o => {
            return Err(PyValueError::new_err(format!(
                "QoS `durability`: `{o}` is not volatile or transient_local"
            )))
        }
    };
    q.deadline = seconds(d, "deadline")?;
    q.lifespan = seconds(d, "lifespan")?;
    q.liveliness_lease = seconds(d, "liveliness_lease_duration")?;
    q.transport = match d.get_item("transport")? {
        Some(v) if !v.is_none() => {
            let s: String = v.extract()?;
            Some(
                s.parse::<TransportKind>()
                    .map_err(|e| PyValueError::new_err(format!("QoS `transport`: {e}")))?,
            )
        }
        _ => None,
    };
    Ok(q)
}

/// The queue bound of a subscription with `qos`: its depth for keep_last,
/// a generous bound for keep_all (memory stays bounded either way).
pub fn queue_cap(qos: &Qos) -> usize {
    qos.history.depth(4096)
}

/// A sample's metadata as a dict.
pub fn info_dict<'py>(py: Python<'py>, info: &SampleInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("seq", info.seq)?;
    d.set_item("source_time_ns", info.source_time_ns)?;
    d.set_item("publisher", info.publisher.to_string())?;
    d.set_item("transport", info.transport.to_string())?;
    Ok(d)
}

/// Connection reports as a list of dicts.
pub fn connections<'py>(
    py: Python<'py>,
    list: Vec<ConnectionInfo>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    list.into_iter()
        .map(|c| {
            let d = PyDict::new(py);
            d.set_item("topic", c.topic)?;
            d.set_item("local", c.local.to_string())?;
            d.set_item("remote", c.remote.to_string())?;
            d.set_item("remote_node", c.remote_node)?;
            d.set_item("transport", c.transport.as_str())?;
            d.set_item("locator", c.locator)?;
            d.set_item(
                "priority",
                c.priority.map(|p| p.to_string()).unwrap_or_default(),
            )?;
            d.set_item("messages", c.stats.messages)?;
            d.set_item("bytes", c.stats.bytes)?;
            d.set_item("drops", c.stats.drops)?;
            d.set_item("errors", c.stats.errors)?;
            d.set_item("rate_hz", c.stats.rate_hz)?;
            d.set_item("latency_avg_us", c.stats.latency_avg_us)?;
            Ok(d)
        })
        .collect()
}

/// Seconds from Python (`None` = forever) as a duration, refusing
/// negative and non-finite values.
pub fn timeout(sec: Option<f64>) -> PyResult<Option<Duration>> {
    match sec {
        None => Ok(None),
        Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(PyValueError::new_err(format!(
            "timeout_sec must be >= 0 seconds or None, got {s}"
        ))),
    }
}
