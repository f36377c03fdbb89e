//! Messages as data, for types known only at run time (the CLI, Python,
//! a definition learned from discovery): [`Data`] trees built from a
//! [`MessageDef`], filled with ROS 2 defaults, checked against bounds and
//! ranges, and encoded to / decoded from CDR byte-identically to ROS 2.

use crate::cdr::{CdrError, Reader, Writer};
use crate::model::{BaseType, Collection, FieldType, MessageDef, Primitive, TypeName, Value};
use crate::registry::Interfaces;

/// Deepest nesting the codec follows (a type may refer to itself through
/// a sequence; crafted data must not recurse without end).
pub const MAX_DEPTH: usize = 64;

/// A value of any interface type.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// `bool`.
    Bool(bool),
    /// Signed integers.
    Int(i64),
    /// Unsigned integers (`byte`, `char` and `uint*`).
    UInt(u64),
    /// `float32` and `float64`.
    Float(f64),
    /// `string` and `wstring`.
    String(String),
    /// Arrays and sequences (of anything but bytes).
    List(Vec<Data>),
    /// Arrays and sequences of `uint8`, `byte` or `char` (images, point
    /// clouds): kept as bytes.
    Bytes(Vec<u8>),
    /// A message: its fields in declaration order.
    Struct(Vec<(String, Data)>),
}

impl Data {
    /// The field `name` of a message value.
    pub fn field(&self, name: &str) -> Option<&Data> {
        match self {
            Data::Struct(f) => f.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Error of building or encoding a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// A type no loaded interface declares.
    #[error("unknown type `{0}` (add its package to FERRY_INTERFACE_PATH)")]
    UnknownType(String),
    /// A field the type does not have.
    #[error("{}`{ty}` has no field `{field}` (its fields: {fields})", at(.path))]
    UnknownField {
        /// Where.
        path: String,
        /// The message type.
        ty: String,
        /// The field given.
        field: String,
        /// The fields it has.
        fields: String,
    },
    /// A value of the wrong kind or out of range.
    #[error("{}expected {expected}, got {got}", at(.path))]
    Mismatch {
        /// Where.
        path: String,
        /// What the type wants.
        expected: String,
        /// What was given.
        got: String,
    },
    /// Too many elements or characters for a bound.
    #[error("{}{len} {what}, the type allows at most {bound} (a bounded field is checked, never cut)", at(.path))]
    Bound {
        /// Where.
        path: String,
        /// What was counted.
        what: &'static str,
        /// How many given.
        len: usize,
        /// The bound.
        bound: u64,
    },
    /// The wrong number of elements for a fixed array.
    #[error("{}{len} elements, the array holds exactly {size}", at(.path))]
    ArrayLength {
        /// Where.
        path: String,
        /// How many given.
        len: usize,
        /// How many it holds.
        size: u64,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("messages nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// "`path`: " before an error's text, nothing at the top level.
fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("`{path}`: ")
    }
}

/// Error of decoding CDR as a type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not valid CDR of the type.
    #[error("decoding `{ty}`: {source}")]
    Cdr {
        /// The type.
        ty: String,
        /// What is wrong.
        source: CdrError,
    },
    /// The type (or one it refers to) is not loaded.
    #[error("unknown type `{0}` (add its package to FERRY_INTERFACE_PATH)")]
    UnknownType(String),
}

fn is_byte_like(ty: &FieldType) -> bool {
    matches!(
        ty.base,
        BaseType::Primitive(Primitive::Uint8 | Primitive::Byte | Primitive::Char)
    ) && ty.collection != Collection::Single
}

fn describe(d: &Data) -> String {
    match d {
        Data::Bool(b) => format!("bool {b}"),
        Data::Int(i) => format!("integer {i}"),
        Data::UInt(u) => format!("integer {u}"),
        Data::Float(f) => format!("number {f}"),
        Data::String(s) => format!("string {s:?}"),
        Data::List(l) => format!("a list of {}", l.len()),
        Data::Bytes(b) => format!("{} bytes", b.len()),
        Data::Struct(_) => "a mapping".into(),
    }
}

impl Interfaces {
    fn need(&self, name: &TypeName) -> Result<&MessageDef, DataError> {
        self.get(name)
            .map(|m| &**m)
            .ok_or_else(|| DataError::UnknownType(name.to_string()))
    }

    /// The value of `name` with every field at its ROS 2 default (the
    /// file's default, else 0, false, "", zeroed arrays, empty sequences).
    pub fn default_data(&self, name: &TypeName) -> Result<Data, DataError> {
        self.default_struct(self.need(name)?, 0)
    }

    fn default_struct(&self, m: &MessageDef, depth: usize) -> Result<Data, DataError> {
        if depth > MAX_DEPTH {
            return Err(DataError::TooDeep);
        }
        let mut out = Vec::with_capacity(m.fields.len());
        for f in &m.fields {
            let v = match &f.default {
                Some(v) => value_data(v, &f.ty),
                None => self.default_field(&f.ty, depth)?,
            };
            out.push((f.name.clone(), v));
        }
        Ok(Data::Struct(out))
    }

    fn default_field(&self, ty: &FieldType, depth: usize) -> Result<Data, DataError> {
        let one = || -> Result<Data, DataError> {
            Ok(match &ty.base {
                BaseType::Primitive(Primitive::Bool) => Data::Bool(false),
                BaseType::Primitive(Primitive::Float32 | Primitive::Float64) => Data::Float(0.0),
                BaseType::Primitive(p) if p.int_range().is_some_and(|r| r.0 < 0) => Data::Int(0),
                BaseType::Primitive(_) => Data::UInt(0),
                BaseType::String { .. } | BaseType::WString { .. } => Data::String(String::new()),
                BaseType::Message(t) => self.default_struct(self.need(t)?, depth + 1)?,
            })
        };
        Ok(match ty.collection {
            Collection::Single => one()?,
            Collection::Array(n) if is_byte_like(ty) => Data::Bytes(vec![0; n as usize]),
            Collection::Array(n) => {
                let e = one()?;
                Data::List(vec![e; n as usize])
            }
            _ if is_byte_like(ty) => Data::Bytes(Vec::new()),
            _ => Data::List(Vec::new()),
        })
    }

    /// `partial` (a mapping of some fields, nested as the type nests) with
    /// every missing field at its default — what `ros2 topic pub` does
    /// with `'{linear: {x: 1.0}}'`. Values are converted to the field's
    /// type (an integer where a float is wanted) and checked: unknown
    /// fields, wrong kinds, ranges and bounds are errors naming the field.
    pub fn complete(&self, name: &TypeName, partial: &Data) -> Result<Data, DataError> {
        self.complete_struct(self.need(name)?, partial, "", 0)
    }

    fn complete_struct(
        &self,
        m: &MessageDef,
        partial: &Data,
        path: &str,
        depth: usize,
    ) -> Result<Data, DataError> {
        if depth > MAX_DEPTH {
            return Err(DataError::TooDeep);
        }
        let Data::Struct(given) = partial else {
            return Err(DataError::Mismatch {
                path: path.to_string(),
                expected: format!("a mapping of `{}` fields", m.name),
                got: describe(partial),
            });
        };
        for (k, _) in given {
            if !m.fields.iter().any(|f| &f.name == k) {
                return Err(DataError::UnknownField {
                    path: path.to_string(),
                    ty: m.name.to_string(),
                    field: k.clone(),
                    fields: m
                        .fields
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        let mut out = Vec::with_capacity(m.fields.len());
        for f in &m.fields {
            let here = if path.is_empty() {
                f.name.clone()
            } else {
                format!("{path}.{}", f.name)
            };
            let v = match partial.field(&f.name) {
                Some(v) => self.complete_field(&f.ty, v, &here, depth)?,
                None => match &f.default {
                    Some(v) => value_data(v, &f.ty),
                    None => self.default_field(&f.ty, depth)?,
                },
            };
            out.push((f.name.clone(), v));
        }
        Ok(Data::Struct(out))
    }

    fn complete_field(
        &self,
        ty: &FieldType,
        v: &Data,
        path: &str,
        depth: usize,
    ) -> Result<Data, DataError> {
        if ty.collection == Collection::Single {
            return self.complete_one(&ty.base, v, path, depth);
        }
        if let (Data::Bytes(b), true) = (v, is_byte_like(ty)) {
            // Bytes for bytes (an image's data): checked for length only.
            check_len(ty, b.len(), path)?;
            return Ok(Data::Bytes(b.clone()));
        }
        let items: Vec<Data> = match v {
            Data::List(l) => l.clone(),
            Data::Bytes(b) => b.iter().map(|&x| Data::UInt(x.into())).collect(),
            other => {
                return Err(DataError::Mismatch {
                    path: path.to_string(),
                    expected: format!("a list for `{ty}`"),
                    got: describe(other),
                })
            }
        };
        check_len(ty, items.len(), path)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(self.complete_one(&ty.base, item, &format!("{path}[{i}]"), depth)?);
        }
        if is_byte_like(ty) {
            return Ok(Data::Bytes(
                out.iter()
                    .map(|d| match d {
                        Data::UInt(u) => *u as u8,
                        _ => 0,
                    })
                    .collect(),
            ));
        }
        Ok(Data::List(out))
    }

    fn complete_one(
        &self,
        base: &BaseType,
        v: &Data,
        path: &str,
        depth: usize,
    ) -> Result<Data, DataError> {
        let mismatch = |expected: String| DataError::Mismatch {
            path: path.to_string(),
            expected,
            got: describe(v),
        };
        match base {
            BaseType::Message(t) => self.complete_struct(self.need(t)?, v, path, depth + 1),
            BaseType::String { bound } | BaseType::WString { bound } => {
                let Data::String(s) = v else {
                    return Err(mismatch("a string".into()));
                };
                if let Some(n) = bound {
                    let len = s.chars().count();
                    if len as u64 > *n {
                        return Err(DataError::Bound {
                            path: path.to_string(),
                            what: "characters",
                            len,
                            bound: *n,
                        });
                    }
                }
                Ok(v.clone())
            }
            BaseType::Primitive(Primitive::Bool) => match v {
                Data::Bool(_) => Ok(v.clone()),
                _ => Err(mismatch("true or false".into())),
            },
            BaseType::Primitive(p @ (Primitive::Float32 | Primitive::Float64)) => match v {
                Data::Float(f) => Ok(Data::Float(*f)),
                Data::Int(i) => Ok(Data::Float(*i as f64)),
                Data::UInt(u) => Ok(Data::Float(*u as f64)),
                _ => Err(mismatch(format!("a number ({p})"))),
            },
            BaseType::Primitive(p) => {
                let (lo, hi) = p.int_range().unwrap_or((0, 0));
                let i: i128 = match v {
                    Data::Int(i) => (*i).into(),
                    Data::UInt(u) => (*u).into(),
                    Data::Float(f) if f.fract() == 0.0 && f.is_finite() => *f as i128,
                    _ => return Err(mismatch(format!("an integer ({p})"))),
                };
                if i < lo || i > hi {
                    return Err(mismatch(format!("an integer in {lo}..={hi} ({p})")));
                }
                Ok(if lo < 0 {
                    Data::Int(i as i64)
                } else {
                    Data::UInt(i as u64)
                })
            }
        }
    }

    /// Encodes `data` (complete: see [`Interfaces::complete`]) as CDR of
    /// `name`, header included, checking bounds and fixed array lengths.
    pub fn encode(&self, name: &TypeName, data: &Data) -> Result<Vec<u8>, DataError> {
        let mut w = Writer::new();
        self.write_struct(&mut w, self.need(name)?, data, "", 0)?;
        Ok(w.finish())
    }

    fn write_struct(
        &self,
        w: &mut Writer,
        m: &MessageDef,
        data: &Data,
        path: &str,
        depth: usize,
    ) -> Result<(), DataError> {
        if depth > MAX_DEPTH {
            return Err(DataError::TooDeep);
        }
        let Data::Struct(_) = data else {
            return Err(DataError::Mismatch {
                path: path.to_string(),
                expected: format!("a `{}`", m.name),
                got: describe(data),
            });
        };
        for f in &m.fields {
            let here = if path.is_empty() {
                f.name.clone()
            } else {
                format!("{path}.{}", f.name)
            };
            let v = match data.field(&f.name) {
                Some(v) => v.clone(),
                None => self.default_field(&f.ty, depth)?,
            };
            self.write_field(w, &f.ty, &v, &here, depth)?;
        }
        Ok(())
    }

    fn write_field(
        &self,
        w: &mut Writer,
        ty: &FieldType,
        v: &Data,
        path: &str,
        depth: usize,
    ) -> Result<(), DataError> {
        if ty.collection == Collection::Single {
            return self.write_one(w, &ty.base, v, path, depth);
        }
        let len = match v {
            Data::List(l) => l.len(),
            Data::Bytes(b) => b.len(),
            other => {
                return Err(DataError::Mismatch {
                    path: path.to_string(),
                    expected: format!("a list for `{ty}`"),
                    got: describe(other),
                })
            }
        };
        check_len(ty, len, path)?;
        if !matches!(ty.collection, Collection::Array(_)) {
            w.u32(len as u32);
        }
        match v {
            Data::Bytes(b) if is_byte_like(ty) => w.bytes(b),
            Data::Bytes(b) => {
                for (i, x) in b.iter().enumerate() {
                    let e = Data::UInt((*x).into());
                    self.write_one(w, &ty.base, &e, &format!("{path}[{i}]"), depth)?;
                }
            }
            Data::List(l) => {
                for (i, e) in l.iter().enumerate() {
                    self.write_one(w, &ty.base, e, &format!("{path}[{i}]"), depth)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn write_one(
        &self,
        w: &mut Writer,
        base: &BaseType,
        v: &Data,
        path: &str,
        depth: usize,
    ) -> Result<(), DataError> {
        if let BaseType::Message(t) = base {
            return self.write_struct(w, self.need(t)?, v, path, depth + 1);
        }
        // One checked conversion for every scalar.
        let v = self.complete_one(base, v, path, depth)?;
        match (base, &v) {
            (BaseType::String { .. }, Data::String(s)) => w.string(s),
            (BaseType::WString { .. }, Data::String(s)) => w.wstring(s),
            (BaseType::Primitive(p), v) => match (p, v) {
                (Primitive::Bool, Data::Bool(b)) => w.u8(u8::from(*b)),
                (Primitive::Float32, Data::Float(f)) => {
                    w.align(4);
                    w.bytes(&(*f as f32).to_le_bytes());
                }
                (Primitive::Float64, Data::Float(f)) => {
                    w.align(8);
                    w.bytes(&f.to_le_bytes());
                }
                (p, Data::Int(i)) => write_int(w, p.size(), *i as u64),
                (p, Data::UInt(u)) => write_int(w, p.size(), *u),
                _ => {}
            },
            _ => {}
        }
        Ok(())
    }

    /// Decodes CDR (header included, either byte order) as `name`.
    pub fn decode(&self, name: &TypeName, bytes: &[u8]) -> Result<Data, DecodeError> {
        let cdr = |source| DecodeError::Cdr {
            ty: name.to_string(),
            source,
        };
        let mut r = Reader::new(bytes).map_err(cdr)?;
        let m = self
            .get(name)
            .ok_or_else(|| DecodeError::UnknownType(name.to_string()))?;
        self.read_struct(&mut r, m, 0).map_err(|e| match e {
            ReadError::Cdr(c) => cdr(c),
            ReadError::Unknown(t) => DecodeError::UnknownType(t),
        })
    }

    fn read_struct(
        &self,
        r: &mut Reader<'_>,
        m: &MessageDef,
        depth: usize,
    ) -> Result<Data, ReadError> {
        if depth > MAX_DEPTH {
            return Err(ReadError::Cdr(CdrError::TooDeep(MAX_DEPTH)));
        }
        let mut out = Vec::with_capacity(m.fields.len());
        for f in &m.fields {
            let v = self.read_field(r, &f.ty, &f.name, depth)?;
            out.push((f.name.clone(), v));
        }
        Ok(Data::Struct(out))
    }

    fn read_field(
        &self,
        r: &mut Reader<'_>,
        ty: &FieldType,
        what: &str,
        depth: usize,
    ) -> Result<Data, ReadError> {
        let n = match ty.collection {
            Collection::Single => return self.read_one(r, &ty.base, what, depth),
            Collection::Array(n) => n as usize,
            Collection::Bounded(_) | Collection::Unbounded => {
                r.count(min_wire_size(&ty.base), what)?
            }
        };
        if is_byte_like(ty) {
            let mut b = Vec::with_capacity(n.min(r.remaining()));
            for _ in 0..n {
                b.push(r.u8(what)?);
            }
            return Ok(Data::Bytes(b));
        }
        let mut out = Vec::with_capacity(n.min(r.remaining()));
        for _ in 0..n {
            out.push(self.read_one(r, &ty.base, what, depth)?);
        }
        Ok(Data::List(out))
    }

    fn read_one(
        &self,
        r: &mut Reader<'_>,
        base: &BaseType,
        what: &str,
        depth: usize,
    ) -> Result<Data, ReadError> {
        Ok(match base {
            BaseType::Message(t) => {
                let m = self
                    .get(t)
                    .ok_or_else(|| ReadError::Unknown(t.to_string()))?;
                return self.read_struct(r, m, depth + 1);
            }
            BaseType::String { .. } => Data::String(r.string(what)?),
            BaseType::WString { .. } => Data::String(r.wstring(what)?),
            BaseType::Primitive(p) => match p {
                Primitive::Bool => Data::Bool(r.bool(what)?),
                Primitive::Byte | Primitive::Char | Primitive::Uint8 => {
                    Data::UInt(r.u8(what)?.into())
                }
                Primitive::Int8 => Data::Int((r.u8(what)? as i8).into()),
                Primitive::Uint16 => Data::UInt(r.u16(what)?.into()),
                Primitive::Int16 => Data::Int((r.u16(what)? as i16).into()),
                Primitive::Uint32 => Data::UInt(r.u32(what)?.into()),
                Primitive::Int32 => Data::Int((r.u32(what)? as i32).into()),
                Primitive::Uint64 => Data::UInt(r.u64(what)?),
                Primitive::Int64 => Data::Int(r.u64(what)? as i64),
                Primitive::Float32 => Data::Float(f32::from_bits(r.u32(what)?).into()),
                Primitive::Float64 => Data::Float(f64::from_bits(r.u64(what)?)),
            },
        })
    }
}

enum ReadError {
    Cdr(CdrError),
    Unknown(String),
}

impl From<CdrError> for ReadError {
    fn from(e: CdrError) -> Self {
        ReadError::Cdr(e)
    }
}

/// Smallest number of bytes one element of `base` takes on the wire (a
/// bound on counts: a count that the rest could not hold is malformed).
fn min_wire_size(base: &BaseType) -> usize {
    match base {
        BaseType::Primitive(p) => p.size(),
        BaseType::String { .. } => 4,
        BaseType::WString { .. } => 4,
        // A message takes at least one byte (empty ones have a member).
        BaseType::Message(_) => 1,
    }
}

fn write_int(w: &mut Writer, size: usize, v: u64) {
    match size {
        1 => w.u8(v as u8),
        2 => w.u16(v as u16),
        4 => w.u32(v as u32),
        _ => w.u64(v),
    }
}

fn check_len(ty: &FieldType, len: usize, path: &str) -> Result<(), DataError> {
    match ty.collection {
        Collection::Array(n) if len as u64 != n => Err(DataError::ArrayLength {
            path: path.to_string(),
            len,
            size: n,
        }),
        Collection::Bounded(n) if len as u64 > n => Err(DataError::Bound {
            path: path.to_string(),
            what: "elements",
            len,
            bound: n,
        }),
        _ => Ok(()),
    }
}

/// A parsed default value as data of `ty`.
fn value_data(v: &Value, ty: &FieldType) -> Data {
    let signed = |b: &BaseType| match b {
        BaseType::Primitive(p) => p.int_range().is_some_and(|r| r.0 < 0),
        _ => false,
    };
    let one = |v: &Value| match v {
        Value::Bool(b) => Data::Bool(*b),
        Value::Int(i) if signed(&ty.base) => Data::Int(*i as i64),
        Value::Int(i) => Data::UInt(*i as u64),
        Value::Float(f) => Data::Float(*f),
        Value::String(s) => Data::String(s.clone()),
        Value::Array(_) => Data::List(Vec::new()),
    };
    match v {
        Value::Array(items) if is_byte_like(ty) => Data::Bytes(
            items
                .iter()
                .map(|i| match i {
                    Value::Int(x) => *x as u8,
                    _ => 0,
                })
                .collect(),
        ),
        Value::Array(items) => Data::List(items.iter().map(one).collect()),
        v => one(v),
    }
}
