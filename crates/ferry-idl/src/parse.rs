//! The `.msg` / `.srv` / `.action` language, as ROS 2's `rosidl_adapter`
//! reads it: one field (`TYPE NAME [DEFAULT]`) or constant
//! (`TYPE NAME=VALUE`) per line, `#` starts a comment, `---` separates the
//! sections of services (2) and actions (3). Sans-IO: text in, model or a
//! positioned error out; never panics on any input.

use crate::error::{ErrorKind, IdlError};
pub use crate::model::{is_constant_name, is_field_name, is_package_name, is_type_name};
use crate::model::{
    ActionDef, BaseType, Collection, Constant, Field, FieldType, Kind, MessageDef, Primitive,
    ServiceDef, TypeName,
};
use crate::value::parse_value;

/// One line of a file: its number (1-based) and text without the comment.
struct Line<'a> {
    number: usize,
    text: &'a str,
}

/// Where an error points: file, line, column (1-based, in characters).
struct At<'a> {
    file: &'a str,
    line: usize,
}

impl At<'_> {
    fn err(&self, column: usize, kind: ErrorKind) -> IdlError {
        IdlError {
            file: self.file.to_string(),
            line: self.line,
            column,
            kind,
        }
    }
}

/// Splits `text` into sections at lines that are exactly `---`.
fn sections(text: &str) -> Vec<Vec<Line<'_>>> {
    let mut out = vec![Vec::new()];
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim_end() == "---" {
            out.push(Vec::new());
            continue;
        }
        let code = raw.find('#').map_or(raw, |c| &raw[..c]);
        if let Some(last) = out.last_mut() {
            last.push(Line {
                number: i + 1,
                text: code,
            });
        }
    }
    out
}

/// Column (1-based, in characters) of byte offset `at` in `line`.
fn column(line: &str, at: usize) -> usize {
    line.get(..at).map_or(1, |s| s.chars().count() + 1)
}

/// Parses a field type as written in `package`: `T`, `T[N]`, `T[<=N]`,
/// `T[]`, with `T` a primitive, `string`, `wstring`, `string<=N`,
/// `wstring<=N`, `Type` (same package) or `pkg/Type`.
pub fn parse_type(text: &str, package: &str) -> Result<FieldType, ErrorKind> {
    let (base, collection) = match text.strip_suffix(']') {
        Some(head) => {
            let open = head
                .rfind('[')
                .ok_or_else(|| ErrorKind::BadArray(text.to_string()))?;
            let inner = &head[open + 1..];
            let collection = if inner.is_empty() {
                Collection::Unbounded
            } else if let Some(n) = inner.strip_prefix("<=") {
                Collection::Bounded(positive(n).ok_or_else(|| ErrorKind::BadArray(text.into()))?)
            } else {
                Collection::Array(positive(inner).ok_or_else(|| ErrorKind::BadArray(text.into()))?)
            };
            (&head[..open], collection)
        }
        None => (text, Collection::Single),
    };
    Ok(FieldType {
        base: parse_base(base, package)?,
        collection,
    })
}

/// A decimal integer > 0 (no sign, no spaces).
fn positive(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n > 0)
}

fn parse_base(text: &str, package: &str) -> Result<BaseType, ErrorKind> {
    if text.contains('[') || text.contains(']') {
        return Err(ErrorKind::BadArray(text.to_string()));
    }
    if let Some(p) = Primitive::from_name(text) {
        return Ok(BaseType::Primitive(p));
    }
    match text {
        "string" => return Ok(BaseType::String { bound: None }),
        "wstring" => return Ok(BaseType::WString { bound: None }),
        "time" | "duration" => return Err(ErrorKind::Ros1Type(text.to_string())),
        _ => {}
    }
    if let Some(n) = text.strip_prefix("string<=") {
        let bound = positive(n).ok_or_else(|| ErrorKind::BadBound(text.to_string()))?;
        return Ok(BaseType::String { bound: Some(bound) });
    }
    if let Some(n) = text.strip_prefix("wstring<=") {
        let bound = positive(n).ok_or_else(|| ErrorKind::BadBound(text.to_string()))?;
        return Ok(BaseType::WString { bound: Some(bound) });
    }
    let (pkg, name) = match text.split_once('/') {
        Some((p, n)) => (p, n),
        None => (package, text),
    };
    if !is_package_name(pkg) {
        return Err(ErrorKind::BadPackageName(pkg.to_string()));
    }
    // A service's or action's part (`pkg/action/Name_Goal`): not written in
    // `.msg` files, but in definition bundles (`Interfaces::bundle`).
    let (kind, name) = match name.split_once('/') {
        Some((k @ ("srv" | "action"), n)) => (Kind::from_folder(k), n),
        _ => (Some(Kind::Msg), name),
    };
    let kind = kind.ok_or_else(|| ErrorKind::BadTypeName(text.to_string()))?;
    let base = name.split('_').next().unwrap_or_default();
    let valid = if kind == Kind::Msg {
        is_type_name(name)
    } else {
        is_type_name(base) && name.len() > base.len()
    };
    if !valid {
        return Err(ErrorKind::BadTypeName(text.to_string()));
    }
    Ok(BaseType::Message(TypeName {
        package: pkg.to_string(),
        kind,
        name: name.to_string(),
    }))
}

/// Parses one section (a `.msg` file or a part of a `.srv`/`.action`).
fn parse_section(lines: &[Line<'_>], file: &str, name: TypeName) -> Result<MessageDef, IdlError> {
    let mut fields: Vec<Field> = Vec::new();
    let mut constants: Vec<Constant> = Vec::new();
    for line in lines {
        let at = At {
            file,
            line: line.number,
        };
        let text = line.text.replace('\t', " ");
        let text = text.trim_end();
        if text.is_empty() {
            continue;
        }
        if text.starts_with(' ') {
            return Err(at.err(1, ErrorKind::Indented));
        }
        let (ty_text, rest) = text.split_once(' ').unwrap_or((text, ""));
        let rest_at = text.len() - rest.trim_start().len();
        let rest = rest.trim_start();
        if rest.is_empty() {
            return Err(at.err(1, ErrorKind::MissingName(ty_text.to_string())));
        }
        let ty = parse_type(ty_text, &name.package).map_err(|k| at.err(1, k))?;
        if let Some((cname, value)) = rest.split_once('=') {
            let cname = cname.trim_end();
            if !is_constant_name(cname) {
                return Err(at.err(
                    column(text, rest_at),
                    ErrorKind::BadConstantName(cname.to_string()),
                ));
            }
            let base = match (&ty.base, ty.collection) {
                (
                    BaseType::Primitive(_)
                    | BaseType::String { bound: None }
                    | BaseType::WString { bound: None },
                    Collection::Single,
                ) => ty.base.clone(),
                _ => {
                    return Err(at.err(
                        1,
                        ErrorKind::ConstantType {
                            name: cname.to_string(),
                            ty: ty.to_string(),
                        },
                    ))
                }
            };
            let value_at = text.len() - value.trim_start().len();
            let value = value.trim_start();
            let parsed = parse_value(value, &ty).map_err(|reason| {
                at.err(
                    column(text, value_at),
                    ErrorKind::BadValue {
                        text: value.to_string(),
                        ty: ty.to_string(),
                        reason,
                    },
                )
            })?;
            if constants.iter().any(|c| c.name == cname) {
                return Err(at.err(
                    column(text, rest_at),
                    ErrorKind::Duplicate(cname.to_string()),
                ));
            }
            constants.push(Constant {
                name: cname.to_string(),
                ty: base,
                value: parsed,
                text: value.to_string(),
            });
            continue;
        }
        let (fname, default) = rest.split_once(' ').unwrap_or((rest, ""));
        if !is_field_name(fname) {
            return Err(at.err(
                column(text, rest_at),
                ErrorKind::BadFieldName(fname.to_string()),
            ));
        }
        if fields.iter().any(|f| f.name == fname) {
            return Err(at.err(
                column(text, rest_at),
                ErrorKind::Duplicate(fname.to_string()),
            ));
        }
        let default_at = text.len() - default.trim_start().len();
        let default = default.trim_start();
        let (value, default_text) = if default.is_empty() {
            (None, None)
        } else if ty.nested().is_some() {
            return Err(at.err(
                column(text, default_at),
                ErrorKind::MessageDefault(fname.to_string()),
            ));
        } else {
            let v = parse_value(default, &ty).map_err(|reason| {
                at.err(
                    column(text, default_at),
                    ErrorKind::BadValue {
                        text: default.to_string(),
                        ty: ty.to_string(),
                        reason,
                    },
                )
            })?;
            (Some(v), Some(default.to_string()))
        };
        fields.push(Field {
            name: fname.to_string(),
            ty,
            default: value,
            default_text,
        });
    }
    let mut m = MessageDef {
        name,
        fields,
        constants,
    };
    m.ensure_member();
    Ok(m)
}

/// Checks the number of sections and the type name of a file.
fn split<'a>(
    text: &'a str,
    file: &str,
    name: &TypeName,
    expected: usize,
) -> Result<Vec<Vec<Line<'a>>>, IdlError> {
    if !is_type_name(&name.name) {
        return Err(IdlError {
            file: file.to_string(),
            line: 1,
            column: 1,
            kind: ErrorKind::BadTypeName(name.name.clone()),
        });
    }
    let s = sections(text);
    if s.len() != expected {
        let line = s
            .get(expected)
            .and_then(|sec| sec.first())
            .map_or(text.lines().count().max(1), |l| l.number.saturating_sub(1));
        return Err(IdlError {
            file: file.to_string(),
            line,
            column: 1,
            kind: ErrorKind::Separators {
                kind: name.kind.folder(),
                expected: expected - 1,
                found: s.len() - 1,
            },
        });
    }
    Ok(s)
}

/// Parses a `.msg` file declaring `package/msg/name`; `file` names it in
/// errors.
pub fn parse_message(
    text: &str,
    file: &str,
    package: &str,
    name: &str,
) -> Result<MessageDef, IdlError> {
    let tn = TypeName::msg(package, name);
    let s = split(text, file, &tn, 1)?;
    parse_section(&s[0], file, tn)
}

/// Parses a `.srv` file declaring `package/srv/name`.
pub fn parse_service(
    text: &str,
    file: &str,
    package: &str,
    name: &str,
) -> Result<ServiceDef, IdlError> {
    let tn = TypeName {
        package: package.to_string(),
        kind: Kind::Srv,
        name: name.to_string(),
    };
    let s = split(text, file, &tn, 2)?;
    Ok(ServiceDef {
        request: parse_section(&s[0], file, tn.sibling(format!("{name}_Request")))?,
        response: parse_section(&s[1], file, tn.sibling(format!("{name}_Response")))?,
        name: tn,
    })
}

/// Parses a `.action` file declaring `package/action/name`.
pub fn parse_action(
    text: &str,
    file: &str,
    package: &str,
    name: &str,
) -> Result<ActionDef, IdlError> {
    let tn = TypeName {
        package: package.to_string(),
        kind: Kind::Action,
        name: name.to_string(),
    };
    let s = split(text, file, &tn, 3)?;
    Ok(ActionDef {
        goal: parse_section(&s[0], file, tn.sibling(format!("{name}_Goal")))?,
        result: parse_section(&s[1], file, tn.sibling(format!("{name}_Result")))?,
        feedback: parse_section(&s[2], file, tn.sibling(format!("{name}_Feedback")))?,
        name: tn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn msg(text: &str) -> Result<MessageDef, IdlError> {
        parse_message(text, "pkg/msg/T.msg", "pkg", "T")
    }

    #[test]
    fn every_construct() {
        let m = msg("# header comment\n\
             bool b true\n\
             byte y 0x1F\n\
             char c 65\n\
             float32 f -1.5e3\n\
             float64 d nan\n\
             int8 i8 -128\n\
             uint64 u 18446744073709551615\n\
             string s \"it's\"\n\
             string<=5 bs 'ab'\n\
             wstring w\n\
             wstring<=3 bw\n\
             int32[3] fixed [1, 2, 3]\n\
             float64[<=2] bounded [0.5]\n\
             uint8[] unbounded []\n\
             string<=4[<=2] names [\"ab\", 'c,d']\n\
             geometry_msgs/Vector3 v   # trailing comment\n\
             Local l\n\
             geometry_msgs/Point[] points\n\
             int32 X=-5\n\
             string NAME = \"ferry\"\n")
        .unwrap();
        assert_eq!(m.fields.len(), 18);
        assert_eq!(m.constants.len(), 2);
        assert_eq!(m.fields[0].default, Some(Value::Bool(true)));
        assert_eq!(m.fields[1].default, Some(Value::Int(31)));
        assert_eq!(m.fields[7].default, Some(Value::String("it's".into())));
        assert_eq!(m.fields[8].ty.to_string(), "string<=5");
        assert_eq!(m.fields[11].ty.collection, Collection::Array(3));
        assert_eq!(m.fields[12].ty.collection, Collection::Bounded(2));
        assert_eq!(
            m.fields[14].default,
            Some(Value::Array(vec![
                Value::String("ab".into()),
                Value::String("c,d".into())
            ]))
        );
        assert_eq!(m.fields[15].ty.to_string(), "geometry_msgs/Vector3");
        assert_eq!(
            m.fields[16].ty.nested(),
            Some(&TypeName::msg("pkg", "Local"))
        );
        assert_eq!(m.constants[0].value, Value::Int(-5));
        assert_eq!(m.constants[1].value, Value::String("ferry".into()));
    }

    #[test]
    fn empty_message_gets_the_ros_member() {
        let m = msg("# nothing\nuint8 A=1\n").unwrap();
        assert!(m.is_empty());
        assert_eq!(m.constants.len(), 1);
    }

    #[test]
    fn errors_name_line_and_column() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("int32\n", 1, 1, "no field name"),
            ("int32 x\nfloat64 BadName\n", 2, 9, "not a valid field name"),
            ("int32[0] x\n", 1, 1, "array"),
            ("int32[x] x\n", 1, 1, "array"),
            ("string<=0 s\n", 1, 1, "bound"),
            ("time t\n", 1, 1, "ROS 1"),
            ("int8 x 200\n", 1, 8, "int8"),
            ("int32 x\nint32 x\n", 2, 7, "twice"),
            ("int32 lower=1\n", 1, 7, "constant name"),
            ("int32[] A=[1]\n", 1, 1, "constants are"),
            ("geometry_msgs/Vector3 v 1\n", 1, 25, "default"),
            ("int32[2] a [1]\n", 1, 12, "exactly 2"),
            ("  int32 x\n", 1, 1, "first column"),
            ("Bad_Type x\n", 1, 1, "type name"),
            ("a/b/C x\n", 1, 1, "type name"),
            ("int32 x\n---\nint32 y\n", 2, 1, "separator"),
            ("bool b maybe\n", 1, 8, "bool"),
            ("string<=2 s \"abc\"\n", 1, 13, "2 characters"),
        ];
        for (text, line, col, needle) in cases {
            let e = msg(text).expect_err(text);
            assert_eq!((e.line, e.column), (*line, *col), "{text:?}: {e}");
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
            assert!(e.to_string().starts_with("pkg/msg/T.msg:"), "{e}");
        }
    }

    #[test]
    fn services_and_actions_have_their_sections() {
        let s = parse_service("int64 a\nint64 b\n---\nint64 sum\n", "f", "example", "Add").unwrap();
        assert_eq!(s.request.name.to_string(), "example/srv/Add_Request");
        assert_eq!(s.response.fields[0].name, "sum");
        let e = parse_service("int64 a\n", "f", "example", "Add").unwrap_err();
        assert!(e.to_string().contains("1 `---`"), "{e}");
        let a = parse_action("int32 order\n---\n---\nint32[] seq\n", "f", "ex", "Fib").unwrap();
        assert!(a.result.is_empty());
        assert_eq!(a.feedback.name.to_string(), "ex/action/Fib_Feedback");
        assert!(parse_action("int32 a\n---\nint32 b\n", "f", "ex", "Fib").is_err());
    }

    #[test]
    fn comments_cut_like_ros() {
        // `#` starts a comment anywhere, quotes included (as rosidl does).
        let m = msg("string s \"a#b\"\n").unwrap();
        assert_eq!(m.fields[0].default, Some(Value::String("\"a".into())));
    }
}
