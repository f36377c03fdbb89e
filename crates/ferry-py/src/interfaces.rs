//! The process's ROS 2 interfaces seen from Python: the definitions that
//! `ferry.msgs` turns into message classes at run time, and ferry-idl's
//! run-time CDR codec (the "Rust path through PyO3" that `bench/python`
//! times against the pure-Python codecs, and that the cross-language tests
//! compare byte for byte).

use ferry::interfaces::interfaces;
use ferry_idl::{BaseType, Collection, Data, FieldType, MessageDef, TypeName, Value};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

fn type_name(name: &str) -> PyResult<TypeName> {
    name.parse::<TypeName>()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

fn message(name: &str) -> PyResult<(TypeName, &'static MessageDef)> {
    let t = type_name(name)?;
    let m = interfaces().get(&t).ok_or_else(|| {
        PyKeyError::new_err(format!(
            "unknown interface `{t}` (ferry ships ROS 2's common interfaces; add your packages' folder to FERRY_INTERFACE_PATH)"
        ))
    })?;
    Ok((t, m))
}

/// `(base, bound, collection, size)`: base is a primitive's name,
/// `string`, `wstring` or a message's full name; collection `single`,
/// `array`, `bounded` or `unbounded`.
fn spec<'py>(py: Python<'py>, ty: &FieldType) -> PyResult<Bound<'py, PyTuple>> {
    let (base, bound) = match &ty.base {
        BaseType::Primitive(p) => (p.name().to_string(), None),
        BaseType::String { bound } => ("string".to_string(), *bound),
        BaseType::WString { bound } => ("wstring".to_string(), *bound),
        BaseType::Message(t) => (t.to_string(), None),
    };
    let (coll, n) = match ty.collection {
        Collection::Single => ("single", None),
        Collection::Array(n) => ("array", Some(n)),
        Collection::Bounded(n) => ("bounded", Some(n)),
        Collection::Unbounded => ("unbounded", None),
    };
    PyTuple::new(
        py,
        [
            base.into_pyobject(py)?.into_any(),
            bound.into_pyobject(py)?.into_any(),
            coll.into_pyobject(py)?.into_any(),
            n.into_pyobject(py)?.into_any(),
        ],
    )
}

fn value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(vs) => {
            let items = vs
                .iter()
                .map(|x| value(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
    })
}

/// The definition of message `name` (`pkg/msg/Type`, or a service's or
/// action's part such as `pkg/srv/Name_Request`): a dict with `name`,
/// `fields` (`(name, spec, default or None)`) and `constants`
/// (`(name, spec, value)`).
#[pyfunction]
pub fn interface<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let (t, m) = message(name)?;
    let d = PyDict::new(py);
    d.set_item("name", t.to_string())?;
    let fields = PyList::empty(py);
    for f in &m.fields {
        let default = match &f.default {
            Some(v) => value(py, v)?,
            None => py.None().into_bound(py),
        };
        fields.append((f.name.as_str(), spec(py, &f.ty)?, default))?;
    }
    d.set_item("fields", fields)?;
    let constants = PyList::empty(py);
    for c in &m.constants {
        let ty = FieldType::single(c.ty.clone());
        constants.append((c.name.as_str(), spec(py, &ty)?, value(py, &c.value)?))?;
    }
    d.set_item("constants", constants)?;
    Ok(d)
}

/// Every interface declared by a file: `(full name, kind)` with kind
/// `msg`, `srv` or `action`, sorted.
#[pyfunction]
pub fn interface_list() -> Vec<(String, &'static str)> {
    interfaces()
        .declared()
        .map(|t| (t.to_string(), t.kind.folder()))
        .collect()
}

/// Whether `name` is a loaded message or part.
#[pyfunction]
pub fn interface_known(name: &str) -> bool {
    name.parse::<TypeName>()
        .is_ok_and(|t| interfaces().get(&t).is_some())
}

/// The message ferry-idl encodes: a message object's attributes (or a
/// dict's keys) read through its definition.
fn to_data(py: Python<'_>, t: &TypeName, obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Data> {
    if depth > ferry_idl::dynamic::MAX_DEPTH {
        return Err(PyValueError::new_err("messages nested too deep"));
    }
    let (_, m) = message(&t.to_string())?;
    let mut fields = Vec::with_capacity(m.fields.len());
    for f in &m.fields {
        let v = match obj.downcast::<PyDict>() {
            Ok(d) => d.get_item(&f.name)?,
            Err(_) => obj.getattr(f.name.as_str()).ok(),
        };
        let Some(v) = v else {
            continue; // completed with the default
        };
        let data = match f.ty.collection {
            Collection::Single => elem_data(py, &f.ty.base, &v, depth)?,
            _ => list_data(py, &f.ty.base, &v, depth)?,
        };
        fields.push((f.name.clone(), data));
    }
    Ok(Data::Struct(fields))
}

fn list_data(
    py: Python<'_>,
    base: &BaseType,
    v: &Bound<'_, PyAny>,
    depth: usize,
) -> PyResult<Data> {
    use ferry_idl::Primitive as P;
    if let BaseType::Primitive(P::Uint8 | P::Byte | P::Char) = base {
        // bytes as they are; bytearray, memoryview, numpy uint8 through
        // `bytes(...)` (the abi3 API has no buffer access).
        if let Ok(b) = v.downcast::<PyBytes>() {
            return Ok(Data::Bytes(b.as_bytes().to_vec()));
        }
        if !v.is_instance_of::<PyList>() && !v.is_instance_of::<PyTuple>() {
            if let Ok(b) = py.get_type::<PyBytes>().call1((v,)) {
                if let Ok(b) = b.downcast::<PyBytes>() {
                    return Ok(Data::Bytes(b.as_bytes().to_vec()));
                }
            }
        }
    }
    if let BaseType::Primitive(_) = base {
        // numpy arrays become lists of Python numbers.
        if let Ok(l) = v.call_method0("tolist") {
            return list_data_items(py, base, &l, depth);
        }
    }
    list_data_items(py, base, v, depth)
}

fn list_data_items(
    py: Python<'_>,
    base: &BaseType,
    v: &Bound<'_, PyAny>,
    depth: usize,
) -> PyResult<Data> {
    let mut out = Vec::new();
    for x in v.try_iter()? {
        out.push(elem_data(py, base, &x?, depth)?);
    }
    Ok(Data::List(out))
}

fn elem_data(
    py: Python<'_>,
    base: &BaseType,
    v: &Bound<'_, PyAny>,
    depth: usize,
) -> PyResult<Data> {
    use ferry_idl::Primitive as P;
    Ok(match base {
        BaseType::Primitive(P::Bool) => Data::Bool(v.extract()?),
        BaseType::Primitive(P::Float32 | P::Float64) => Data::Float(v.extract()?),
        BaseType::Primitive(p) if p.int_range().is_some_and(|(lo, _)| lo < 0) => {
            Data::Int(v.extract()?)
        }
        BaseType::Primitive(_) => Data::UInt(v.extract()?),
        BaseType::String { .. } | BaseType::WString { .. } => Data::String(v.extract()?),
        BaseType::Message(t) => to_data(py, t, v, depth + 1)?,
    })
}

fn from_data<'py>(py: Python<'py>, d: &Data) -> PyResult<Bound<'py, PyAny>> {
    Ok(match d {
        Data::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Data::Int(i) => i.into_pyobject(py)?.into_any(),
        Data::UInt(u) => u.into_pyobject(py)?.into_any(),
        Data::Float(f) => f.into_pyobject(py)?.into_any(),
        Data::String(s) => s.into_pyobject(py)?.into_any(),
        Data::Bytes(b) => PyBytes::new(py, b).into_any(),
        Data::List(l) => {
            let items = l
                .iter()
                .map(|x| from_data(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Data::Struct(fields) => {
            let dict = PyDict::new(py);
            for (k, v) in fields {
                dict.set_item(k, from_data(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Encodes `value` (a message object or a dict; missing fields take ROS
/// 2's defaults) as CDR of type `name` with ferry-idl's run-time codec.
#[pyfunction]
pub fn cdr_encode<'py>(
    py: Python<'py>,
    name: &str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let (t, _) = message(name)?;
    let partial = to_data(py, &t, value, 0)?;
    let bytes = py
        .allow_threads(|| {
            let ifaces = interfaces();
            let full = ifaces.complete(&t, &partial)?;
            ifaces.encode(&t, &full)
        })
        .map_err(|e| PyTypeError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &bytes))
}

/// Decodes CDR of type `name` with ferry-idl's run-time codec: nested
/// dicts (byte sequences as `bytes`).
#[pyfunction]
pub fn cdr_decode<'py>(py: Python<'py>, name: &str, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let (t, _) = message(name)?;
    let d = interfaces()
        .decode(&t, data)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    from_data(py, &d)
}
