//! The type model: what `.msg`, `.srv` and `.action` files declare.

use std::fmt;
use std::str::FromStr;

/// Name of the member ROS 2 adds to a message with no fields (IDL structs
/// need one): a `uint8`, one byte on the wire, part of the type hash.
pub const EMPTY_MEMBER: &str = "structure_needs_at_least_one_member";

/// Whether `s` is a valid package or field name: lower case letters,
/// digits and single underscores, starting with a letter, not ending with
/// an underscore.
pub fn is_package_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.contains("__")
        && !s.ends_with('_')
}

/// Whether `s` is a valid field name (the same rule as packages).
pub fn is_field_name(s: &str) -> bool {
    is_package_name(s)
}

/// Whether `s` is a valid message, service or action name: CamelCase
/// letters and digits.
pub fn is_type_name(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Whether `s` is a valid constant name: upper case letters, digits and
/// single underscores, starting with a letter, not ending with `_`.
pub fn is_constant_name(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !s.contains("__")
        && !s.ends_with('_')
}

/// A primitive type of the interface language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Primitive {
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// `byte`: an opaque octet.
    Byte,
    /// `char`: an unsigned 8-bit character (IDL `uint8` in ROS 2).
    Char,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `int8`.
    Int8,
    /// `uint8`.
    Uint8,
    /// `int16`.
    Int16,
    /// `uint16`.
    Uint16,
    /// `int32`.
    Int32,
    /// `uint32`.
    Uint32,
    /// `int64`.
    Int64,
    /// `uint64`.
    Uint64,
}

impl Primitive {
    /// Every primitive, in the order of the interface documentation.
    pub const ALL: [Primitive; 13] = [
        Primitive::Bool,
        Primitive::Byte,
        Primitive::Char,
        Primitive::Float32,
        Primitive::Float64,
        Primitive::Int8,
        Primitive::Uint8,
        Primitive::Int16,
        Primitive::Uint16,
        Primitive::Int32,
        Primitive::Uint32,
        Primitive::Int64,
        Primitive::Uint64,
    ];

    /// The primitive spelled `name` in a `.msg` file.
    pub fn from_name(name: &str) -> Option<Self> {
        Primitive::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Spelling in a `.msg` file.
    pub fn name(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Byte => "byte",
            Primitive::Char => "char",
            Primitive::Float32 => "float32",
            Primitive::Float64 => "float64",
            Primitive::Int8 => "int8",
            Primitive::Uint8 => "uint8",
            Primitive::Int16 => "int16",
            Primitive::Uint16 => "uint16",
            Primitive::Int32 => "int32",
            Primitive::Uint32 => "uint32",
            Primitive::Int64 => "int64",
            Primitive::Uint64 => "uint64",
        }
    }

    /// Size and CDR alignment in bytes.
    pub fn size(self) -> usize {
        match self {
            Primitive::Bool
            | Primitive::Byte
            | Primitive::Char
            | Primitive::Int8
            | Primitive::Uint8 => 1,
            Primitive::Int16 | Primitive::Uint16 => 2,
            Primitive::Float32 | Primitive::Int32 | Primitive::Uint32 => 4,
            Primitive::Float64 | Primitive::Int64 | Primitive::Uint64 => 8,
        }
    }

    /// Range of an integer primitive (`bool`, `byte` and `char` count as
    /// integers 0..=1 and 0..=255); `None` for floats.
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            Primitive::Bool => (0, 1),
            Primitive::Byte | Primitive::Char | Primitive::Uint8 => (0, u8::MAX.into()),
            Primitive::Int8 => (i8::MIN.into(), i8::MAX.into()),
            Primitive::Int16 => (i16::MIN.into(), i16::MAX.into()),
            Primitive::Uint16 => (0, u16::MAX.into()),
            Primitive::Int32 => (i32::MIN.into(), i32::MAX.into()),
            Primitive::Uint32 => (0, u32::MAX.into()),
            Primitive::Int64 => (i64::MIN.into(), i64::MAX.into()),
            Primitive::Uint64 => (0, u64::MAX.into()),
            Primitive::Float32 | Primitive::Float64 => return None,
        })
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The folder a type lives in: messages, or the parts generated for a
/// service or an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `pkg/msg/Type`.
    Msg,
    /// `pkg/srv/Type` (and its `_Request`, `_Response`, `_Event`).
    Srv,
    /// `pkg/action/Type` (and its goal, result, feedback and services).
    Action,
}

impl Kind {
    /// The folder name: `msg`, `srv` or `action` (also the file extension).
    pub fn folder(self) -> &'static str {
        match self {
            Kind::Msg => "msg",
            Kind::Srv => "srv",
            Kind::Action => "action",
        }
    }

    /// The kind of the folder `name`.
    pub fn from_folder(name: &str) -> Option<Self> {
        match name {
            "msg" => Some(Kind::Msg),
            "srv" => Some(Kind::Srv),
            "action" => Some(Kind::Action),
            _ => None,
        }
    }
}

/// A full type name: `package/kind/Name`, e.g. `geometry_msgs/msg/Twist`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeName {
    /// The package, e.g. `geometry_msgs`.
    pub package: String,
    /// The folder.
    pub kind: Kind,
    /// The type, e.g. `Twist` or `AddTwoInts_Request`.
    pub name: String,
}

impl TypeName {
    /// `package/msg/name`.
    pub fn msg(package: &str, name: &str) -> Self {
        TypeName {
            package: package.to_string(),
            kind: Kind::Msg,
            name: name.to_string(),
        }
    }

    /// The same package and folder, another name (a generated part).
    pub fn sibling(&self, name: String) -> Self {
        TypeName {
            package: self.package.clone(),
            kind: self.kind,
            name,
        }
    }
}

impl fmt::Display for TypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.package, self.kind.folder(), self.name)
    }
}

/// Error for a type name that is not `pkg/kind/Name` or `pkg/Name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a type name: write `package/msg/Type` (or `package/Type`), e.g. `std_msgs/msg/String`")]
pub struct BadTypeName(pub String);

impl FromStr for TypeName {
    type Err = BadTypeName;
    /// `pkg/msg/Type`, `pkg/srv/Type`, `pkg/action/Type`, or `pkg/Type`
    /// (a message).
    fn from_str(s: &str) -> Result<Self, BadTypeName> {
        let bad = || BadTypeName(s.to_string());
        let parts: Vec<&str> = s.split('/').collect();
        let (package, kind, name) = match parts.as_slice() {
            [p, n] => (*p, Kind::Msg, *n),
            [p, k, n] => (*p, Kind::from_folder(k).ok_or_else(bad)?, *n),
            _ => return Err(bad()),
        };
        if !is_package_name(package) || name.is_empty() {
            return Err(bad());
        }
        Ok(TypeName {
            package: package.to_string(),
            kind,
            name: name.to_string(),
        })
    }
}

/// The element type of a field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// A primitive.
    Primitive(Primitive),
    /// `string` or `string<=N` (UTF-8).
    String {
        /// Most characters allowed, if bounded.
        bound: Option<u64>,
    },
    /// `wstring` or `wstring<=N` (UTF-16).
    WString {
        /// Most characters allowed, if bounded.
        bound: Option<u64>,
    },
    /// Another message.
    Message(TypeName),
}

/// How many elements a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collection {
    /// One element: `T`.
    Single,
    /// Exactly `N`: `T[N]` (no length on the wire).
    Array(u64),
    /// Up to `N`: `T[<=N]`.
    Bounded(u64),
    /// Any number: `T[]`.
    Unbounded,
}

/// The type of a field: an element type and how many.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldType {
    /// The element type.
    pub base: BaseType,
    /// One, a fixed array or a sequence.
    pub collection: Collection,
}

impl FieldType {
    /// One element of `base`.
    pub fn single(base: BaseType) -> Self {
        FieldType {
            base,
            collection: Collection::Single,
        }
    }

    /// The message type this field refers to, if any.
    pub fn nested(&self) -> Option<&TypeName> {
        match &self.base {
            BaseType::Message(t) => Some(t),
            _ => None,
        }
    }
}

impl fmt::Display for BaseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaseType::Primitive(p) => f.write_str(p.name()),
            BaseType::String { bound: None } => f.write_str("string"),
            BaseType::String { bound: Some(n) } => write!(f, "string<={n}"),
            BaseType::WString { bound: None } => f.write_str("wstring"),
            BaseType::WString { bound: Some(n) } => write!(f, "wstring<={n}"),
            BaseType::Message(t) if t.kind == Kind::Msg => write!(f, "{}/{}", t.package, t.name),
            BaseType::Message(t) => t.fmt(f),
        }
    }
}

impl fmt::Display for FieldType {
    /// The `.msg` spelling, e.g. `string<=10[<=3]` or `geometry_msgs/Vector3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.base.fmt(f)?;
        match self.collection {
            Collection::Single => Ok(()),
            Collection::Array(n) => write!(f, "[{n}]"),
            Collection::Bounded(n) => write!(f, "[<={n}]"),
            Collection::Unbounded => f.write_str("[]"),
        }
    }
}

/// A default or constant value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// Any integer type (`byte` and `char` included).
    Int(i128),
    /// `float32` or `float64`.
    Float(f64),
    /// `string` or `wstring`.
    String(String),
    /// An array or sequence of the above.
    Array(Vec<Value>),
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Field name (lower case, e.g. `linear`).
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// The default value written in the file, parsed; `None` means the
    /// type's zero (0, false, empty string, zeroed array, empty sequence).
    pub default: Option<Value>,
    /// The default as written (kept for the type description's
    /// `default_value`; not part of the hash).
    pub default_text: Option<String>,
}

/// A constant (`uint8 DEBUG=10`).
#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    /// Constant name (upper case).
    pub name: String,
    /// A primitive, `string` or `wstring`.
    pub ty: BaseType,
    /// The value.
    pub value: Value,
    /// The value as written.
    pub text: String,
}

/// A message: a `.msg` file, or one section or generated part of a `.srv`
/// or `.action` file.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDef {
    /// Its full name.
    pub name: TypeName,
    /// Fields in order (a message with none has [`EMPTY_MEMBER`]).
    pub fields: Vec<Field>,
    /// Constants in order.
    pub constants: Vec<Constant>,
}

impl MessageDef {
    /// A message with the given fields and no constants.
    pub fn new(name: TypeName, fields: Vec<Field>) -> Self {
        let mut m = MessageDef {
            name,
            fields,
            constants: Vec::new(),
        };
        m.ensure_member();
        m
    }

    /// Adds [`EMPTY_MEMBER`] when there is no field, as ROS 2 does.
    pub(crate) fn ensure_member(&mut self) {
        if self.fields.is_empty() {
            self.fields.push(Field {
                name: EMPTY_MEMBER.to_string(),
                ty: FieldType::single(BaseType::Primitive(Primitive::Uint8)),
                default: None,
                default_text: None,
            });
        }
    }

    /// Whether the only field is the one ROS 2 adds to empty messages.
    pub fn is_empty(&self) -> bool {
        self.fields.len() == 1 && self.fields[0].name == EMPTY_MEMBER
    }

    /// The definition as `.msg` text (constants, then fields with their
    /// defaults; comments are not kept), full type names for nested types.
    /// Parsing it gives this definition back.
    pub fn to_msg(&self) -> String {
        let mut out = String::new();
        for c in &self.constants {
            out.push_str(&format!("{} {}={}\n", c.ty, c.name, c.text));
        }
        if !self.is_empty() {
            for f in &self.fields {
                out.push_str(&format!("{} {}", f.ty, f.name));
                if let Some(d) = &f.default_text {
                    out.push(' ');
                    out.push_str(d);
                }
                out.push('\n');
            }
        }
        out
    }
}

/// A service: request and response (`pkg/srv/Name`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceDef {
    /// `pkg/srv/Name`.
    pub name: TypeName,
    /// `Name_Request`.
    pub request: MessageDef,
    /// `Name_Response`.
    pub response: MessageDef,
}

/// An action: goal, result and feedback (`pkg/action/Name`).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionDef {
    /// `pkg/action/Name`.
    pub name: TypeName,
    /// `Name_Goal`.
    pub goal: MessageDef,
    /// `Name_Result`.
    pub result: MessageDef,
    /// `Name_Feedback`.
    pub feedback: MessageDef,
}
