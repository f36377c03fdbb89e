//! `ferry interface list|packages|package|show|proto`: the interfaces ferry
//! knows (shipped common interfaces, `FERRY_INTERFACE_PATH`, a ROS 2
//! install's `AMENT_PREFIX_PATH`), shown as `ros2 interface` shows them.

use std::fmt::Write as _;

use clap::Subcommand;
use ferry_idl::{BaseType, Data, Interfaces, Kind, TypeName};

#[derive(Subcommand)]
pub enum InterfaceCmd {
    /// List every message, service and action type.
    List {
        /// Only messages.
        #[arg(short = 'm', long)]
        only_msgs: bool,
        /// Only services.
        #[arg(short = 's', long)]
        only_srvs: bool,
        /// Only actions.
        #[arg(short = 'a', long)]
        only_actions: bool,
    },
    /// List the packages that declare interfaces.
    Packages,
    /// List the interfaces of one package.
    Package {
        /// Package name, e.g. `geometry_msgs`.
        package: String,
    },
    /// Print an interface's definition, nested types expanded and indented.
    Show {
        /// Type, e.g. `geometry_msgs/msg/Twist`, `std_srvs/srv/SetBool`.
        type_name: String,
        /// Leave out comments and blank lines.
        #[arg(long)]
        no_comments: bool,
        /// Print the type's RIHS01 hash (and those of the parts of a
        /// service or action) first.
        #[arg(long)]
        hash: bool,
    },
    /// Print a YAML prototype of a type: every field at its default.
    Proto {
        /// Type, e.g. `geometry_msgs/msg/Twist`.
        type_name: String,
    },
}

/// Loads the interfaces, printing the files that failed on stderr.
pub fn load() -> Interfaces {
    let (i, problems) = Interfaces::from_env();
    for p in &problems {
        eprintln!("warning: skipped {p}");
    }
    i
}

pub fn run(cmd: InterfaceCmd) -> Result<(), String> {
    let ifaces = load();
    match cmd {
        InterfaceCmd::List {
            only_msgs,
            only_srvs,
            only_actions,
        } => {
            let all = !(only_msgs || only_srvs || only_actions);
            for (kind, title, on) in [
                (Kind::Msg, "Messages:", only_msgs),
                (Kind::Srv, "Services:", only_srvs),
                (Kind::Action, "Actions:", only_actions),
            ] {
                if all || on {
                    out!("{title}");
                    for t in ifaces.declared().filter(|t| t.kind == kind) {
                        out!("    {t}");
                    }
                }
            }
            Ok(())
        }
        InterfaceCmd::Packages => {
            for p in ifaces.packages() {
                out!("{p}");
            }
            Ok(())
        }
        InterfaceCmd::Package { package } => {
            let mut any = false;
            for t in ifaces.declared().filter(|t| t.package == package) {
                out!("{t}");
                any = true;
            }
            if any {
                Ok(())
            } else {
                Err(format!(
                    "unknown package `{package}` (see `ferry interface packages`; add yours to FERRY_INTERFACE_PATH)"
                ))
            }
        }
        InterfaceCmd::Show {
            type_name,
            no_comments,
            hash,
        } => {
            let t = declared(&ifaces, &type_name)?;
            if hash {
                for part in hashed_parts(&t) {
                    let h = ifaces.type_hash(&part).map_err(|e| e.to_string())?;
                    out!("# {part}: {h}");
                }
            }
            let mut text = String::new();
            show(&ifaces, &t, 0, !no_comments, &mut text);
            print!("{text}");
            Ok(())
        }
        InterfaceCmd::Proto { type_name } => {
            let t = ifaces
                .resolve(&type_name)
                .ok_or_else(|| unknown(&type_name))?;
            let d = ifaces.default_data(&t).map_err(|e| e.to_string())?;
            out!("\"{}\"", yaml(&d, 0).trim_end());
            Ok(())
        }
    }
}

fn unknown(name: &str) -> String {
    format!("unknown interface `{name}` (see `ferry interface list`; add your packages to FERRY_INTERFACE_PATH)")
}

/// The declared message, service or action `name` (`pkg/msg/T`, `pkg/T`).
fn declared(ifaces: &Interfaces, name: &str) -> Result<TypeName, String> {
    let t: TypeName = name
        .parse()
        .map_err(|e: ferry_idl::model::BadTypeName| e.to_string())?;
    if ifaces.source(&t).is_some() {
        return Ok(t);
    }
    // `pkg/Name` may be a service or an action.
    for kind in [Kind::Srv, Kind::Action] {
        let alt = TypeName { kind, ..t.clone() };
        if !name.contains("/msg/") && ifaces.source(&alt).is_some() {
            return Ok(alt);
        }
    }
    Err(unknown(name))
}

/// The types whose hash ROS 2 tools show for `t`.
fn hashed_parts(t: &TypeName) -> Vec<TypeName> {
    let part = |s: &str| t.sibling(format!("{}{s}", t.name));
    match t.kind {
        Kind::Msg => vec![t.clone()],
        Kind::Srv => vec![t.clone(), part("_Request"), part("_Response")],
        Kind::Action => vec![
            t.clone(),
            part("_SendGoal"),
            part("_GetResult"),
            part("_FeedbackMessage"),
        ],
    }
}

/// The file of `t` with every nested message expanded below its field,
/// indented by one tab per level (as `ros2 interface show`).
fn show(ifaces: &Interfaces, t: &TypeName, depth: usize, comments: bool, out: &mut String) {
    let Some(src) = ifaces.source(t) else {
        return;
    };
    let pad = "\t".repeat(depth);
    for line in src.lines() {
        let code = line.find('#').map_or(line, |c| &line[..c]).trim_end();
        if !comments && (code.is_empty() || line.trim_start().starts_with('#')) {
            if code == "---" {
                let _ = writeln!(out, "{pad}---");
            }
            continue;
        }
        let _ = writeln!(out, "{pad}{}", if comments { line } else { code });
        // Expand a message-typed field (constants have an `=`).
        let Some(ty) = code.split_whitespace().next() else {
            continue;
        };
        if code.contains('=') || code == "---" {
            continue;
        }
        if let Ok(ft) = ferry_idl::parse::parse_type(ty, &t.package) {
            if let BaseType::Message(n) = ft.base {
                show(ifaces, &n, depth + 1, comments, out);
            }
        }
    }
}

/// `d` as YAML the way `ros2 topic echo` prints messages.
pub fn yaml(d: &Data, indent: usize) -> String {
    let mut out = String::new();
    yaml_into(d, indent, &mut out);
    out
}

fn scalar(d: &Data) -> Option<String> {
    Some(match d {
        Data::Bool(b) => b.to_string(),
        Data::Int(i) => i.to_string(),
        Data::UInt(u) => u.to_string(),
        Data::Float(f) if f.is_nan() => ".nan".into(),
        Data::Float(f) if f.is_infinite() => if *f > 0.0 { ".inf" } else { "-.inf" }.into(),
        Data::Float(f) => format!("{f:?}"),
        Data::String(s) => yaml_string(s),
        _ => return None,
    })
}

/// A string as YAML writes it: plain when that reads back as the same
/// string, else quoted (single quotes; double with escapes when it holds
/// control characters).
fn yaml_string(s: &str) -> String {
    if s.chars().any(char::is_control) {
        return format!("{s:?}");
    }
    let special_start =
        s.starts_with(|c: char| c.is_whitespace() || "-?:,[]{}#&*!|>'\"%@`".contains(c));
    let lower = s.to_ascii_lowercase();
    let keyword = matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
    );
    let numeric = s.parse::<f64>().is_ok()
        || lower.starts_with("0x")
        || lower == ".nan"
        || lower.ends_with(".inf");
    if s.is_empty()
        || special_start
        || keyword
        || numeric
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.ends_with(char::is_whitespace)
    {
        format!("'{}'", s.replace('\'', "''"))
    } else {
        s.to_string()
    }
}

fn yaml_into(d: &Data, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    match d {
        Data::Struct(fields) => {
            for (k, v) in fields {
                match v {
                    Data::Struct(_) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        yaml_into(v, indent + 1, out);
                    }
                    Data::List(l) if l.is_empty() => {
                        let _ = writeln!(out, "{pad}{k}: []");
                    }
                    Data::Bytes(b) if b.is_empty() => {
                        let _ = writeln!(out, "{pad}{k}: []");
                    }
                    Data::List(_) | Data::Bytes(_) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        yaml_into(v, indent, out);
                    }
                    other => {
                        let _ = writeln!(out, "{pad}{k}: {}", scalar(other).unwrap_or_default());
                    }
                }
            }
        }
        Data::List(items) => {
            for item in items {
                match item {
                    Data::Struct(_) => {
                        let inner = yaml(item, indent + 1);
                        let inner = inner.trim_start();
                        let _ = write!(out, "{pad}- {inner}");
                    }
                    other => {
                        let _ = writeln!(out, "{pad}- {}", scalar(other).unwrap_or_default());
                    }
                }
            }
        }
        Data::Bytes(b) => {
            for x in b {
                let _ = writeln!(out, "{pad}- {x}");
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", scalar(other).unwrap_or_default());
        }
    }
}
