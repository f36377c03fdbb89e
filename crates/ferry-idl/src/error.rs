//! Errors of reading interface files: each names file, line and column.

/// An error in an interface file, at `file:line:column` (1-based; the
/// column counts characters).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: {kind}")]
pub struct IdlError {
    /// The file (as given to the parser).
    pub file: String,
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// What is wrong in an interface file, and how to write it instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ErrorKind {
    /// A type without a name.
    #[error("`{0}` has no field name: write `TYPE NAME`, e.g. `float64 x`")]
    MissingName(String),
    /// A line that starts with white space.
    #[error("a field or constant starts in the first column (no indentation)")]
    Indented,
    /// A field name that breaks the naming rule.
    #[error("`{0}` is not a valid field name: lower case letters, digits and single underscores, starting with a letter and not ending with `_` (e.g. `linear_velocity`)")]
    BadFieldName(String),
    /// A constant name that breaks the naming rule.
    #[error("`{0}` is not a valid constant name: upper case letters, digits and single underscores, starting with a letter (e.g. `MAX_SPEED`)")]
    BadConstantName(String),
    /// A package name that breaks the naming rule.
    #[error("`{0}` is not a valid package name: lower case letters, digits and single underscores, starting with a letter (e.g. `geometry_msgs`)")]
    BadPackageName(String),
    /// A type name that breaks the naming rule.
    #[error("`{0}` is not a valid type name: a CamelCase name of letters and digits (e.g. `JointState`), optionally after `package/`")]
    BadTypeName(String),
    /// An array suffix that is not `[N]`, `[<=N]` or `[]` with N > 0.
    #[error("`{0}`: an array is `T[N]`, a bounded sequence `T[<=N]`, a sequence `T[]`, with N a whole number > 0")]
    BadArray(String),
    /// A string bound that is not a whole number > 0.
    #[error("`{0}`: a bounded string is `string<=N` (or `wstring<=N`) with N a whole number > 0")]
    BadBound(String),
    /// `time` or `duration` (ROS 1 primitives).
    #[error("`{0}` is a ROS 1 type: ROS 2 has `builtin_interfaces/Time` and `builtin_interfaces/Duration`")]
    Ros1Type(String),
    /// A constant of an array, bounded string or message type.
    #[error("constant `{name}` has type `{ty}`: constants are primitives or unbounded strings")]
    ConstantType {
        /// The constant.
        name: String,
        /// Its type as written.
        ty: String,
    },
    /// A value that is not a valid value of its type.
    #[error("`{text}` is not a valid `{ty}`: {reason}")]
    BadValue {
        /// The value as written.
        text: String,
        /// The type as written.
        ty: String,
        /// Why.
        reason: String,
    },
    /// A default value on a message-typed field.
    #[error("field `{0}` is a message: default values exist only for primitives, strings and their arrays")]
    MessageDefault(String),
    /// A field or constant declared twice.
    #[error("`{0}` is declared twice")]
    Duplicate(String),
    /// The wrong number of `---` lines.
    #[error(
        "a .{kind} file has {expected} `---` separator line(s) between its sections, found {found}"
    )]
    Separators {
        /// `msg`, `srv` or `action`.
        kind: &'static str,
        /// How many there must be.
        expected: usize,
        /// How many there are.
        found: usize,
    },
    /// A field refers to a type no loaded file declares.
    #[error("unknown type `{0}`: no loaded interface declares it (add its package to FERRY_INTERFACE_PATH)")]
    UnknownType(String),
    /// A file that could not be read.
    #[error("cannot read: {0}")]
    Io(String),
}
