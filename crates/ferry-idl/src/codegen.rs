//! Rust code generation: Rust types for ROS 2 interfaces, one struct per
//! message (services' and actions' parts included) with ROS 2's defaults,
//! constants, checks of bounded strings and sequences, and ROS 2's type
//! hash computed here, at build time.
//!
//! The generated code needs ferry at run time (its `Message` and
//! `ServiceType` traits and `idl_support`); [`RustCodegen::runtime`] names
//! the path it is reached by (`::ferry` unless told). Use it from a build
//! script with [`build`], or build the text with [`RustCodegen`].
//!
//! Layout: `pub mod <package> { pub mod msg; pub mod srv; pub mod action;
//! pub use msg::*; }`, ROS 2's names unchanged (`AddTwoInts_Request`), a
//! unit struct per service (`AddTwoInts`) implementing `ServiceType`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::IdlError;
use crate::model::{
    BaseType, Collection, Field, FieldType, Kind, MessageDef, Primitive, TypeName, Value,
};
use crate::registry::Interfaces;

/// Why Rust code could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// Interface files failed to parse (each names file, line and column).
    #[error("{} interface file(s) failed to parse:\n{}", .0.len(), list(.0))]
    Parse(Vec<IdlError>),
    /// A field refers to a type that is neither generated nor external.
    #[error("`{user}` refers to `{missing}`, which is not loaded: add its package to the interface folders")]
    Unknown {
        /// The message with the field.
        user: TypeName,
        /// The type it names.
        missing: TypeName,
    },
    /// A message contains itself: Rust (like ROS 2's C++) cannot lay it out.
    #[error("`{0}` contains itself, directly or through other messages")]
    Recursive(TypeName),
    /// A name Rust reserves (`Self`) is used as a type name.
    #[error("`{0}` cannot be a Rust type name: rename the interface")]
    ReservedName(TypeName),
    /// A value does not fit its type (the parser checks this; a
    /// hand-built model may not).
    #[error("`{user}`: the value of `{what}` does not fit its type")]
    BadValue {
        /// The message.
        user: TypeName,
        /// The field or constant.
        what: String,
    },
    /// The type hash could not be computed.
    #[error("type hash of `{0}`: {1}")]
    Hash(TypeName, String),
    /// Reading the folders or writing the output failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A build script ran without `OUT_DIR` (not run by cargo).
    #[error("OUT_DIR is not set: call `ferry_idl::codegen::build` from a build script")]
    NoOutDir,
}

fn list(errors: &[IdlError]) -> String {
    errors
        .iter()
        .map(|e| format!("  {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Generates Rust types for the interfaces in the folders `dirs` (ROS 2
/// packages: `<pkg>/msg/*.msg`, `srv/`, `action/`) into
/// `$OUT_DIR/ferry_interfaces.rs`, for `ferry::include_interfaces!()`.
/// Types of ferry's shipped packages that they use are ferry's own
/// (`ferry::msgs::…`). Tells cargo to run again when the folders change.
///
/// In `build.rs`'s `main`:
///
/// ```no_run
/// ferry_idl::codegen::build(&["interfaces"]).unwrap();
/// ```
pub fn build(dirs: &[impl AsRef<Path>]) -> Result<PathBuf, CodegenError> {
    let out = std::env::var_os("OUT_DIR").ok_or(CodegenError::NoOutDir)?;
    let mut own = Interfaces::new();
    let mut all = Interfaces::common();
    let mut problems = Vec::new();
    for d in dirs {
        let d = d.as_ref();
        if !d.is_dir() {
            return Err(CodegenError::Io {
                path: d.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder"),
            });
        }
        println!("cargo:rerun-if-changed={}", d.display());
        problems.extend(own.add_dir(d));
        all.add_dir(d);
    }
    if !problems.is_empty() {
        return Err(CodegenError::Parse(problems));
    }
    let mine: BTreeSet<String> = own.packages().into_iter().map(str::to_string).collect();
    let mut gen = RustCodegen::new(&all);
    for p in &mine {
        gen = gen.package(p);
    }
    for p in Interfaces::common().packages() {
        if !mine.contains(p) {
            gen = gen.external(p, "::ferry::msgs");
        }
    }
    let text = gen.generate()?;
    let path = Path::new(&out).join("ferry_interfaces.rs");
    std::fs::write(&path, text).map_err(|source| CodegenError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Builds the Rust source of a set of packages.
#[derive(Debug, Clone)]
pub struct RustCodegen<'a> {
    ifaces: &'a Interfaces,
    packages: BTreeSet<String>,
    external: BTreeMap<String, String>,
    runtime: String,
    catalog: bool,
}

/// What a type's fields allow in Rust, found once per type.
#[derive(Debug, Clone, Copy)]
struct Traits {
    /// Only numbers and fixed arrays of them: `Copy`.
    copy: bool,
    /// No float anywhere: `Eq`.
    eq: bool,
    /// A bounded string or sequence somewhere: needs a check.
    bounded: bool,
}

impl<'a> RustCodegen<'a> {
    /// Generation over `ifaces` (which must hold every type referred to).
    pub fn new(ifaces: &'a Interfaces) -> Self {
        RustCodegen {
            ifaces,
            packages: BTreeSet::new(),
            external: BTreeMap::new(),
            runtime: "::ferry".to_string(),
            catalog: false,
        }
    }

    /// Generates `package` (none named: every loaded package).
    pub fn package(mut self, package: &str) -> Self {
        self.packages.insert(package.to_string());
        self
    }

    /// Refers to `package` at `path::package` instead of generating it.
    pub fn external(mut self, package: &str, path: &str) -> Self {
        self.external.insert(package.to_string(), path.to_string());
        self
    }

    /// The path of the ferry crate in the generated code (`::ferry`;
    /// `crate` inside ferry).
    pub fn runtime(mut self, path: &str) -> Self {
        self.runtime = path.to_string();
        self
    }

    /// Also emits `TYPES` in every module (and `TYPES` at the root, one
    /// slice per module): each message's name, hash, default encoding and
    /// a decode-and-encode function, for tests and tools that go over
    /// every type.
    pub fn catalog(mut self, on: bool) -> Self {
        self.catalog = on;
        self
    }

    fn generated(&self) -> BTreeSet<String> {
        if self.packages.is_empty() {
            self.ifaces
                .packages()
                .into_iter()
                .filter(|p| !self.external.contains_key(*p))
                .map(str::to_string)
                .collect()
        } else {
            self.packages.clone()
        }
    }

    /// The Rust source: one module per package.
    pub fn generate(&self) -> Result<String, CodegenError> {
        let packages = self.generated();
        let mut by_package: BTreeMap<&str, BTreeMap<Kind, Vec<&MessageDef>>> = BTreeMap::new();
        for m in self.ifaces.messages() {
            if packages.contains(&m.name.package) && is_struct(&m.name) {
                by_package
                    .entry(&m.name.package)
                    .or_default()
                    .entry(m.name.kind)
                    .or_default()
                    .push(m);
            }
        }
        let mut traits = HashMap::new();
        let mut catalog = Vec::new();
        let mut out = String::from(
            "// @generated by ferry-idl from ROS 2 interface definitions: do not edit.\n",
        );
        for (package, kinds) in &by_package {
            let _ = writeln!(
                out,
                "\n/// The `{package}` interfaces.\n#[allow(non_camel_case_types, clippy::all)]\npub mod {package} {{"
            );
            for (kind, messages) in kinds {
                let folder = kind.folder();
                let what = match kind {
                    Kind::Msg => "Messages",
                    Kind::Srv => "Services: requests, responses and their events",
                    Kind::Action => "Actions: goals, results, feedback and their services",
                };
                let _ = writeln!(
                    out,
                    "    /// {what} of `{package}`.\n    pub mod {folder} {{"
                );
                for m in messages {
                    self.message(&mut out, m, &mut traits)?;
                }
                for m in messages {
                    self.service_marker(&mut out, m)?;
                }
                if self.catalog {
                    let rt = &self.runtime;
                    let _ = writeln!(
                        out,
                        "        /// Every message of this module.\n        pub const TYPES: &[{rt}::idl_support::TypeEntry] = &["
                    );
                    for m in messages {
                        let _ = writeln!(
                            out,
                            "            {rt}::idl_support::TypeEntry::of::<{}>(),",
                            m.name.name
                        );
                    }
                    out.push_str("        ];\n");
                    catalog.push(format!("{package}::{folder}::TYPES"));
                }
                out.push_str("    }\n");
            }
            if kinds.contains_key(&Kind::Msg) {
                out.push_str("    pub use self::msg::*;\n");
            }
            out.push_str("}\n");
        }
        if self.catalog {
            let _ = writeln!(
                out,
                "\n/// Every generated message, one slice per module.\npub const TYPES: &[&[{}::idl_support::TypeEntry]] = &[{}];",
                self.runtime,
                catalog.join(", ")
            );
        }
        Ok(out)
    }

    /// The Rust path of `t` from inside a generated `pkg::kind` module.
    fn path(&self, t: &TypeName) -> String {
        match self.external.get(&t.package) {
            Some(root) => format!("{root}::{}::{}::{}", t.package, t.kind.folder(), t.name),
            None => format!(
                "super::super::{}::{}::{}",
                t.package,
                t.kind.folder(),
                t.name
            ),
        }
    }

    fn lookup(&self, user: &TypeName, t: &TypeName) -> Result<&'a MessageDef, CodegenError> {
        self.ifaces
            .get(t)
            .map(|m| &**m)
            .ok_or_else(|| CodegenError::Unknown {
                user: user.clone(),
                missing: t.clone(),
            })
    }

    /// The traits of `t`, found through its fields (memoised; a cycle is
    /// an error).
    fn traits(
        &self,
        t: &TypeName,
        memo: &mut HashMap<TypeName, Option<Traits>>,
    ) -> Result<Traits, CodegenError> {
        match memo.get(t) {
            Some(Some(tr)) => return Ok(*tr),
            Some(None) => return Err(CodegenError::Recursive(t.clone())),
            None => {}
        }
        memo.insert(t.clone(), None);
        let m = self.lookup(t, t)?;
        let mut tr = Traits {
            copy: true,
            eq: true,
            bounded: false,
        };
        for f in &m.fields {
            if matches!(
                f.ty.collection,
                Collection::Bounded(_) | Collection::Unbounded
            ) {
                tr.copy = false;
            }
            if matches!(f.ty.collection, Collection::Bounded(_)) {
                tr.bounded = true;
            }
            match &f.ty.base {
                BaseType::Primitive(Primitive::Float32 | Primitive::Float64) => tr.eq = false,
                BaseType::Primitive(_) => {}
                BaseType::String { bound } | BaseType::WString { bound } => {
                    tr.copy = false;
                    tr.bounded |= bound.is_some();
                }
                BaseType::Message(n) => {
                    self.lookup(t, n)?;
                    let inner = self.traits(n, memo)?;
                    tr.copy &= inner.copy;
                    tr.eq &= inner.eq;
                    tr.bounded |= inner.bounded;
                }
            }
        }
        memo.insert(t.clone(), Some(tr));
        Ok(tr)
    }

    fn message(
        &self,
        out: &mut String,
        m: &MessageDef,
        memo: &mut HashMap<TypeName, Option<Traits>>,
    ) -> Result<(), CodegenError> {
        let t = &m.name;
        if t.name == "Self" {
            return Err(CodegenError::ReservedName(t.clone()));
        }
        let tr = self.traits(t, memo)?;
        let rt = &self.runtime;
        let name = &t.name;
        let hash = self
            .ifaces
            .type_hash(t)
            .map_err(|e| CodegenError::Hash(t.clone(), e.to_string()))?;
        let mut derives = vec!["Debug", "Clone", "PartialEq"];
        if tr.copy {
            derives.push("Copy");
        }
        if tr.eq {
            derives.push("Eq");
        }
        let _ = writeln!(
            out,
            "        /// `{t}`.\n        #[derive({}, {rt}::idl_support::serde::Serialize, {rt}::idl_support::serde::Deserialize)]\n        #[serde(crate = \"{rt}::idl_support::serde\")]\n        pub struct {name} {{",
            derives.join(", ")
        );
        for f in &m.fields {
            let (ident, rename) = field_ident(&f.name);
            let _ = writeln!(out, "            /// `{} {}`.", f.ty, f.name);
            if let Some(wire) = rename {
                let _ = writeln!(out, "            #[serde(rename = \"{wire}\")]");
            }
            match (&f.ty.base, f.ty.collection) {
                (_, Collection::Array(_)) => {
                    let _ = writeln!(
                        out,
                        "            #[serde(with = \"{rt}::idl_support::fixed_array\")]"
                    );
                }
                (
                    BaseType::Primitive(Primitive::Byte | Primitive::Char | Primitive::Uint8),
                    Collection::Bounded(_) | Collection::Unbounded,
                ) => {
                    let _ = writeln!(
                        out,
                        "            #[serde(with = \"{rt}::idl_support::bytes\")]"
                    );
                }
                _ => {}
            }
            let _ = writeln!(out, "            pub {ident}: {},", self.rust_type(&f.ty));
        }
        out.push_str("        }\n");
        // Constants.
        if !m.constants.is_empty() {
            let _ = writeln!(out, "        impl {name} {{");
            for c in &m.constants {
                let ty = match &c.ty {
                    BaseType::Primitive(p) => primitive(*p).to_string(),
                    _ => "&'static str".to_string(),
                };
                let value =
                    constant_literal(&c.ty, &c.value).ok_or_else(|| CodegenError::BadValue {
                        user: t.clone(),
                        what: c.name.clone(),
                    })?;
                let _ = writeln!(
                    out,
                    "            /// `{} {}={}`.\n            pub const {}: {ty} = {value};",
                    c.ty, c.name, c.text, c.name
                );
            }
            out.push_str("        }\n");
        }
        // ROS 2 defaults.
        let _ = writeln!(
            out,
            "        impl ::core::default::Default for {name} {{\n            /// ROS 2's defaults: the values the definition gives, zero elsewhere.\n            fn default() -> Self {{\n                {name} {{"
        );
        for f in &m.fields {
            let (ident, _) = field_ident(&f.name);
            let value = self
                .default_value(f)
                .ok_or_else(|| CodegenError::BadValue {
                    user: t.clone(),
                    what: f.name.clone(),
                })?;
            let _ = writeln!(out, "                    {ident}: {value},");
        }
        out.push_str("                }\n            }\n        }\n");
        // The message, with its definition for peers that lack the files.
        let bundle = self
            .ifaces
            .bundle(t)
            .map_err(|missing| CodegenError::Unknown {
                user: t.clone(),
                missing,
            })?;
        let _ = writeln!(
            out,
            "        impl {rt}::Message for {name} {{\n            const TYPE_NAME: &'static str = \"{t}\";\n            const DEFINITION: &'static str = {bundle:?};\n            fn type_hash() -> {rt}::TypeHash {{\n                {rt}::TypeHash({:?})\n            }}",
            hash.0
        );
        if tr.bounded {
            self.check_bounds(out, m, memo)?;
        }
        if let Some(service) = service_of_request(t) {
            if self.ifaces.get(&service).is_some() {
                let _ = writeln!(
                    out,
                    "            fn service_hash() -> ::core::option::Option<{rt}::TypeHash> {{\n                ::core::option::Option::Some(<{} as {rt}::ServiceType>::type_hash())\n            }}",
                    service.name
                );
            }
        }
        out.push_str("        }\n");
        Ok(())
    }

    /// `fn check_bounds`: every bounded string and sequence, and every
    /// nested message that has one, with the field's path in the error.
    fn check_bounds(
        &self,
        out: &mut String,
        m: &MessageDef,
        memo: &mut HashMap<TypeName, Option<Traits>>,
    ) -> Result<(), CodegenError> {
        let rt = &self.runtime;
        let s = format!("{rt}::idl_support");
        let _ = writeln!(
            out,
            "            fn check_bounds(&self) -> ::core::result::Result<(), {s}::BoundsError> {{"
        );
        for f in &m.fields {
            let (ident, _) = field_ident(&f.name);
            let wire = &f.name;
            // The element check, on `x` (one element) with index `i`.
            let elem: Option<String> = match &f.ty.base {
                BaseType::String { bound: Some(b) } => Some(format!(
                    "{s}::check_len(\"{wire}\", i, x.len(), {b}, \"bytes\")?;"
                )),
                BaseType::WString { bound: Some(b) } => Some(format!(
                    "{s}::check_len(\"{wire}\", i, x.units(), {b}, \"UTF-16 units\")?;"
                )),
                BaseType::Message(n) if self.traits(n, memo)?.bounded => Some(format!(
                    "{rt}::Message::check_bounds(x).map_err(|e| e.within(\"{wire}\", i))?;"
                )),
                _ => None,
            };
            match f.ty.collection {
                Collection::Single => {
                    if let Some(e) = elem {
                        let _ = writeln!(
                            out,
                            "                {{ let (x, i) = (&self.{ident}, ::core::option::Option::None); {e} }}"
                        );
                    }
                }
                c => {
                    if let Collection::Bounded(n) = c {
                        let _ = writeln!(
                            out,
                            "                {s}::check_len(\"{wire}\", ::core::option::Option::None, self.{ident}.len(), {n}, \"elements\")?;"
                        );
                    }
                    if let Some(e) = elem {
                        let _ = writeln!(
                            out,
                            "                for (i, x) in self.{ident}.iter().enumerate() {{ let i = ::core::option::Option::Some(i); {e} }}"
                        );
                    }
                }
            }
        }
        out.push_str("                ::core::result::Result::Ok(())\n            }\n");
        Ok(())
    }

    /// The unit struct and `ServiceType` of a service whose request is `m`.
    fn service_marker(&self, out: &mut String, m: &MessageDef) -> Result<(), CodegenError> {
        let Some(service) = service_of_request(&m.name) else {
            return Ok(());
        };
        let Some(hash) = self
            .ifaces
            .get(&service)
            .map(|_| self.ifaces.type_hash(&service))
        else {
            return Ok(());
        };
        let hash = hash.map_err(|e| CodegenError::Hash(service.clone(), e.to_string()))?;
        let rt = &self.runtime;
        let n = &service.name;
        let _ = writeln!(
            out,
            "        /// The service `{service}`: [`{n}_Request`] answered by [`{n}_Response`].\n        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]\n        pub struct {n};\n        impl {rt}::ServiceType for {n} {{\n            type Request = {n}_Request;\n            type Response = {n}_Response;\n            const TYPE_NAME: &'static str = \"{service}\";\n            fn type_hash() -> {rt}::TypeHash {{\n                {rt}::TypeHash({:?})\n            }}\n        }}",
            hash.0
        );
        let camel = n.replace('_', "");
        let _ = writeln!(
            out,
            "        /// [`{n}_Request`] by its Rust-style name.\n        pub type {camel}Request = {n}_Request;\n        /// [`{n}_Response`] by its Rust-style name.\n        pub type {camel}Response = {n}_Response;"
        );
        Ok(())
    }

    fn rust_type(&self, ty: &FieldType) -> String {
        let elem = match &ty.base {
            BaseType::Primitive(p) => primitive(*p).to_string(),
            BaseType::String { .. } => "::std::string::String".to_string(),
            BaseType::WString { .. } => format!("{}::idl_support::WString", self.runtime),
            BaseType::Message(t) => self.path(t),
        };
        match ty.collection {
            Collection::Single => elem,
            Collection::Array(n) => format!("[{elem}; {n}]"),
            Collection::Bounded(_) | Collection::Unbounded => format!("::std::vec::Vec<{elem}>"),
        }
    }

    /// The expression of a field's ROS 2 default.
    fn default_value(&self, f: &Field) -> Option<String> {
        let zero = "::core::default::Default::default()".to_string();
        let Some(v) = &f.default else {
            return Some(match f.ty.collection {
                Collection::Array(_) => {
                    "::core::array::from_fn(|_| ::core::default::Default::default())".to_string()
                }
                _ => zero,
            });
        };
        let one = |v: &Value| self.literal(&f.ty.base, v);
        match (f.ty.collection, v) {
            (Collection::Single, v) => one(v),
            (Collection::Array(_), Value::Array(vs)) => {
                let items: Option<Vec<String>> = vs.iter().map(one).collect();
                Some(format!("[{}]", items?.join(", ")))
            }
            (Collection::Bounded(_) | Collection::Unbounded, Value::Array(vs)) => {
                let items: Option<Vec<String>> = vs.iter().map(one).collect();
                Some(format!("::std::vec![{}]", items?.join(", ")))
            }
            _ => None,
        }
    }

    /// A value of `base` as a Rust expression (owned strings).
    fn literal(&self, base: &BaseType, v: &Value) -> Option<String> {
        match (base, v) {
            (BaseType::String { .. }, Value::String(s)) => {
                Some(format!("::std::string::String::from({s:?})"))
            }
            (BaseType::WString { .. }, Value::String(s)) => Some(format!(
                "{}::idl_support::WString::from({s:?})",
                self.runtime
            )),
            (BaseType::Primitive(p), v) => primitive_literal(*p, v),
            _ => None,
        }
    }
}

/// Whether `t` becomes a struct: every message, and the parts of services
/// and actions, but not the service and action types themselves (their
/// descriptions exist only for hashing).
fn is_struct(t: &TypeName) -> bool {
    const PARTS: [&str; 7] = [
        "_Request",
        "_Response",
        "_Event",
        "_Goal",
        "_Result",
        "_Feedback",
        "_FeedbackMessage",
    ];
    t.kind == Kind::Msg || PARTS.iter().any(|p| t.name.ends_with(p))
}

/// The service whose request `t` is (`pkg/srv/X` for `pkg/srv/X_Request`).
fn service_of_request(t: &TypeName) -> Option<TypeName> {
    if t.kind == Kind::Msg {
        return None;
    }
    let base = t.name.strip_suffix("_Request")?;
    Some(t.sibling(base.to_string()))
}

/// A field's Rust name and, when it differs, the name on the wire.
fn field_ident(name: &str) -> (String, Option<&str>) {
    const RAW: [&str; 49] = [
        "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do",
        "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in",
        "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
        "return", "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe",
        "unsized", "use", "virtual", "where", "while", "yield", "union",
    ];
    match name {
        "self" | "super" | "crate" => (format!("{name}_"), Some(name)),
        n if RAW.contains(&n) => (format!("r#{n}"), None),
        n => (n.to_string(), None),
    }
}

fn primitive(p: Primitive) -> &'static str {
    match p {
        Primitive::Bool => "bool",
        Primitive::Byte | Primitive::Char | Primitive::Uint8 => "u8",
        Primitive::Float32 => "f32",
        Primitive::Float64 => "f64",
        Primitive::Int8 => "i8",
        Primitive::Int16 => "i16",
        Primitive::Uint16 => "u16",
        Primitive::Int32 => "i32",
        Primitive::Uint32 => "u32",
        Primitive::Int64 => "i64",
        Primitive::Uint64 => "u64",
    }
}

/// A primitive value as a Rust literal of its type (usable in `const`).
fn primitive_literal(p: Primitive, v: &Value) -> Option<String> {
    let float = |f: f64| {
        let ty = primitive(p);
        if f.is_nan() {
            format!("{ty}::NAN")
        } else if f.is_infinite() {
            format!(
                "{ty}::{}",
                if f > 0.0 { "INFINITY" } else { "NEG_INFINITY" }
            )
        } else if p == Primitive::Float32 {
            // Rounded from the double, as C++ does with a `float` default.
            format!("({f:?}_f64 as f32)")
        } else {
            format!("{f:?}_f64")
        }
    };
    match (p, v) {
        (Primitive::Bool, Value::Bool(b)) => Some(b.to_string()),
        (Primitive::Float32 | Primitive::Float64, Value::Float(f)) => Some(float(*f)),
        (Primitive::Float32 | Primitive::Float64, Value::Int(i)) => Some(float(*i as f64)),
        (p, Value::Int(i)) => {
            let (lo, hi) = p.int_range()?;
            (lo..=hi)
                .contains(i)
                .then(|| format!("{i}_{}", primitive(p)))
                .filter(|_| p != Primitive::Bool)
        }
        _ => None,
    }
}

/// A constant's value as a Rust constant expression.
fn constant_literal(ty: &BaseType, v: &Value) -> Option<String> {
    match (ty, v) {
        (BaseType::String { .. } | BaseType::WString { .. }, Value::String(s)) => {
            Some(format!("{s:?}"))
        }
        (BaseType::Primitive(p), v) => primitive_literal(*p, v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_become_raw_or_renamed() {
        assert_eq!(field_ident("type"), ("r#type".to_string(), None));
        assert_eq!(field_ident("self"), ("self_".to_string(), Some("self")));
        assert_eq!(field_ident("x"), ("x".to_string(), None));
    }

    #[test]
    fn literals_keep_their_type() {
        assert_eq!(
            primitive_literal(Primitive::Int8, &Value::Int(-3)).as_deref(),
            Some("-3_i8")
        );
        assert_eq!(primitive_literal(Primitive::Uint8, &Value::Int(256)), None);
        assert_eq!(
            primitive_literal(Primitive::Float32, &Value::Float(0.1)).as_deref(),
            Some("(0.1_f64 as f32)")
        );
        assert_eq!(
            primitive_literal(Primitive::Float64, &Value::Int(2)).as_deref(),
            Some("2.0_f64")
        );
        assert_eq!(
            primitive_literal(Primitive::Bool, &Value::Bool(true)).as_deref(),
            Some("true")
        );
    }

    #[test]
    fn every_shipped_package_generates() {
        let ifaces = Interfaces::common();
        let text = RustCodegen::new(&ifaces)
            .runtime("crate")
            .generate()
            .unwrap();
        assert!(text.contains("pub struct Twist {"));
        assert!(text.contains("pub struct AddTwoInts;"));
        assert!(text.contains("pub const INT8: u8 = 1_u8;"));
    }
}
