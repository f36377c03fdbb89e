//! A set of loaded interfaces: the shipped common ones, folders of ROS 2
//! packages (`<pkg>/msg/*.msg`, `srv/`, `action/`, also an install prefix's
//! `share/<pkg>/…`), and the parts ROS 2 generates for services and
//! actions, looked up by full name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use crate::error::{ErrorKind, IdlError};
use crate::model::{
    ActionDef, BaseType, Collection, Field, FieldType, Kind, MessageDef, Primitive, ServiceDef,
    TypeName,
};
use crate::parse::{is_package_name, parse_action, parse_message, parse_service};

mod common {
    include!(concat!(env!("OUT_DIR"), "/common.rs"));
}

/// Environment variable listing folders of interface packages (`:`
/// separated), read by [`Interfaces::from_env`].
pub const INTERFACE_PATH_VAR: &str = "FERRY_INTERFACE_PATH";

/// Between the parts of a definition bundle ([`Interfaces::bundle`]).
pub const BUNDLE_SEPARATOR: &str =
    "\n================================================================================\n";

/// Loaded interface definitions.
#[derive(Debug, Clone, Default)]
pub struct Interfaces {
    messages: BTreeMap<TypeName, Arc<MessageDef>>,
    services: BTreeMap<TypeName, Arc<ServiceDef>>,
    actions: BTreeMap<TypeName, Arc<ActionDef>>,
    /// The file text each message, service or action came from.
    sources: BTreeMap<TypeName, Arc<str>>,
}

fn field(name: &str, base: BaseType, collection: Collection) -> Field {
    Field {
        name: name.to_string(),
        ty: FieldType { base, collection },
        default: None,
        default_text: None,
    }
}

fn nested(t: &TypeName) -> BaseType {
    BaseType::Message(t.clone())
}

impl Interfaces {
    /// No interfaces at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// The interfaces ferry ships (ROS 2 Jazzy's builtin_interfaces,
    /// std_msgs, std_srvs, geometry_msgs, sensor_msgs, nav_msgs, tf2_msgs,
    /// diagnostic_msgs, visualization_msgs, action_msgs,
    /// unique_identifier_msgs, rcl_interfaces, example_interfaces,
    /// service_msgs, type_description_interfaces).
    pub fn common() -> Self {
        // Shipped files are checked by this crate's tests.
        Self::load_common().0
    }

    /// The common interfaces and any file among them that failed.
    pub(crate) fn load_common() -> (Self, Vec<IdlError>) {
        let mut me = Self::new();
        let problems = common::COMMON
            .iter()
            .filter_map(|(path, text)| me.add_file_text(path, text).err())
            .collect();
        (me, problems)
    }

    /// The common interfaces, then every folder in `FERRY_INTERFACE_PATH`,
    /// then `share/` of every prefix in `AMENT_PREFIX_PATH` (a ROS 2
    /// install). Later definitions of the same type replace earlier ones.
    /// Returns the problems found on the way (bad files are skipped).
    pub fn from_env() -> (Self, Vec<IdlError>) {
        let mut me = Self::common();
        let mut problems = Vec::new();
        if let Some(p) = std::env::var_os(INTERFACE_PATH_VAR) {
            for dir in std::env::split_paths(&p).filter(|d| !d.as_os_str().is_empty()) {
                problems.extend(me.add_dir(&dir));
            }
        }
        if let Some(p) = std::env::var_os("AMENT_PREFIX_PATH") {
            for prefix in std::env::split_paths(&p).filter(|d| !d.as_os_str().is_empty()) {
                let share = prefix.join("share");
                if share.is_dir() {
                    problems.extend(me.add_dir(&share));
                }
            }
        }
        (me, problems)
    }

    /// Adds every interface file under `dir`: `dir` is a package (it has
    /// `msg/`, `srv/` or `action/`), or holds packages, or is an install
    /// prefix (`share/<pkg>/…`). Returns the files that could not be read
    /// or parsed; the others are added.
    pub fn add_dir(&mut self, dir: &Path) -> Vec<IdlError> {
        let mut problems = Vec::new();
        let is_package = ["msg", "srv", "action"]
            .iter()
            .any(|k| dir.join(k).is_dir());
        if is_package {
            self.add_package_dir(dir, &mut problems);
            return problems;
        }
        let share = dir.join("share");
        let root = if share.is_dir() {
            share
        } else {
            dir.to_path_buf()
        };
        let Ok(entries) = std::fs::read_dir(&root) else {
            problems.push(IdlError {
                file: root.display().to_string(),
                line: 0,
                column: 0,
                kind: ErrorKind::Io("not a readable folder".into()),
            });
            return problems;
        };
        let mut pkgs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        pkgs.sort();
        for p in pkgs.into_iter().filter(|p| p.is_dir()) {
            self.add_package_dir(&p, &mut problems);
        }
        problems
    }

    fn add_package_dir(&mut self, dir: &Path, problems: &mut Vec<IdlError>) {
        let Some(package) = dir.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        if !is_package_name(package) {
            return;
        }
        for kind in [Kind::Msg, Kind::Srv, Kind::Action] {
            let Ok(entries) = std::fs::read_dir(dir.join(kind.folder())) else {
                continue;
            };
            let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                if f.extension().and_then(|x| x.to_str()) != Some(kind.folder()) {
                    continue;
                }
                let Some(name) = f.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                let shown = f.display().to_string();
                let text = match std::fs::read_to_string(&f) {
                    Ok(t) => t,
                    Err(e) => {
                        problems.push(IdlError {
                            file: shown,
                            line: 0,
                            column: 0,
                            kind: ErrorKind::Io(e.to_string()),
                        });
                        continue;
                    }
                };
                if let Err(e) = self.add_text(&shown, package, kind, name, &text) {
                    problems.push(e);
                }
            }
        }
    }

    /// Adds the file at `path` = `<pkg>/<msg|srv|action>/<Name>.<ext>`.
    fn add_file_text(&mut self, path: &str, text: &str) -> Result<(), IdlError> {
        let parts: Vec<&str> = path.rsplitn(3, '/').collect();
        let bad = || IdlError {
            file: path.to_string(),
            line: 0,
            column: 0,
            kind: ErrorKind::Io("not <package>/<msg|srv|action>/<Name>.<ext>".into()),
        };
        let [file, folder, package] = parts.as_slice() else {
            return Err(bad());
        };
        let package = package.rsplit('/').next().unwrap_or(package);
        let kind = Kind::from_folder(folder).ok_or_else(bad)?;
        let name = file
            .strip_suffix(&format!(".{}", kind.folder()))
            .ok_or_else(bad)?;
        self.add_text(path, package, kind, name, text)
    }

    /// Parses and adds one interface: `kind` says whether `text` is a
    /// `.msg`, `.srv` or `.action` file declaring `package/kind/name`;
    /// `file` names it in errors. A service or an action also adds the
    /// parts ROS 2 generates for it.
    pub fn add_text(
        &mut self,
        file: &str,
        package: &str,
        kind: Kind,
        name: &str,
        text: &str,
    ) -> Result<(), IdlError> {
        let source: Arc<str> = Arc::from(text);
        match kind {
            Kind::Msg => {
                let m = parse_message(text, file, package, name)?;
                self.sources.insert(m.name.clone(), source);
                self.insert(m);
            }
            Kind::Srv => {
                let s = parse_service(text, file, package, name)?;
                self.sources.insert(s.name.clone(), source);
                self.add_service(s);
            }
            Kind::Action => {
                let a = parse_action(text, file, package, name)?;
                self.sources.insert(a.name.clone(), source);
                self.add_action(a);
            }
        }
        Ok(())
    }

    fn insert(&mut self, m: MessageDef) {
        self.messages.insert(m.name.clone(), Arc::new(m));
    }

    /// The service's request and response, its `_Event` (introspection)
    /// and the service type itself (`request_message`, `response_message`,
    /// `event_message`), as ROS 2 (Iron and later) generates them.
    fn add_service(&mut self, s: ServiceDef) {
        self.add_service_parts(&s.name, s.request.clone(), s.response.clone());
        self.services.insert(s.name.clone(), Arc::new(s));
    }

    fn add_service_parts(&mut self, name: &TypeName, request: MessageDef, response: MessageDef) {
        let info = TypeName::msg("service_msgs", "ServiceEventInfo");
        let event = name.sibling(format!("{}_Event", name.name));
        self.insert(MessageDef::new(
            event.clone(),
            vec![
                field("info", nested(&info), Collection::Single),
                field("request", nested(&request.name), Collection::Bounded(1)),
                field("response", nested(&response.name), Collection::Bounded(1)),
            ],
        ));
        self.insert(MessageDef::new(
            name.clone(),
            vec![
                field("request_message", nested(&request.name), Collection::Single),
                field(
                    "response_message",
                    nested(&response.name),
                    Collection::Single,
                ),
                field("event_message", nested(&event), Collection::Single),
            ],
        ));
        self.insert(request);
        self.insert(response);
    }

    /// The action's goal, result and feedback, its `_SendGoal` and
    /// `_GetResult` services and `_FeedbackMessage`, and the action type
    /// itself, as ROS 2 generates them.
    fn add_action(&mut self, a: ActionDef) {
        let n = &a.name;
        let uuid = TypeName::msg("unique_identifier_msgs", "UUID");
        let time = TypeName::msg("builtin_interfaces", "Time");
        let one = Collection::Single;
        let part = |suffix: &str| n.sibling(format!("{}_{suffix}", n.name));
        let send_goal = part("SendGoal");
        self.add_service_parts(
            &send_goal,
            MessageDef::new(
                part("SendGoal_Request"),
                vec![
                    field("goal_id", nested(&uuid), one),
                    field("goal", nested(&a.goal.name), one),
                ],
            ),
            MessageDef::new(
                part("SendGoal_Response"),
                vec![
                    field("accepted", BaseType::Primitive(Primitive::Bool), one),
                    field("stamp", nested(&time), one),
                ],
            ),
        );
        let get_result = part("GetResult");
        self.add_service_parts(
            &get_result,
            MessageDef::new(
                part("GetResult_Request"),
                vec![field("goal_id", nested(&uuid), one)],
            ),
            MessageDef::new(
                part("GetResult_Response"),
                vec![
                    field("status", BaseType::Primitive(Primitive::Int8), one),
                    field("result", nested(&a.result.name), one),
                ],
            ),
        );
        let feedback_message = part("FeedbackMessage");
        self.insert(MessageDef::new(
            feedback_message.clone(),
            vec![
                field("goal_id", nested(&uuid), one),
                field("feedback", nested(&a.feedback.name), one),
            ],
        ));
        self.insert(MessageDef::new(
            n.clone(),
            vec![
                field("goal", nested(&a.goal.name), one),
                field("result", nested(&a.result.name), one),
                field("feedback", nested(&a.feedback.name), one),
                field("send_goal_service", nested(&send_goal), one),
                field("get_result_service", nested(&get_result), one),
                field("feedback_message", nested(&feedback_message), one),
            ],
        ));
        self.insert(a.goal.clone());
        self.insert(a.result.clone());
        self.insert(a.feedback.clone());
        self.actions.insert(n.clone(), Arc::new(a));
    }

    /// Resolves `name` as written by a user: `pkg/msg/Type`, `pkg/Type`,
    /// `pkg/srv/Type_Request`, …
    pub fn resolve(&self, name: &str) -> Option<TypeName> {
        let t: TypeName = name.parse().ok()?;
        self.messages.contains_key(&t).then_some(t)
    }

    /// The message (or generated part) `name`, e.g. `std_msgs/msg/String`
    /// or `std_msgs/String`.
    pub fn message(&self, name: &str) -> Option<&Arc<MessageDef>> {
        self.messages.get(&name.parse().ok()?)
    }

    /// The message with full name `name`.
    pub fn get(&self, name: &TypeName) -> Option<&Arc<MessageDef>> {
        self.messages.get(name)
    }

    /// The service `pkg/srv/Name` (or `pkg/Name`).
    pub fn service(&self, name: &str) -> Option<&Arc<ServiceDef>> {
        let mut t: TypeName = name.parse().ok()?;
        t.kind = Kind::Srv;
        self.services.get(&t)
    }

    /// The action `pkg/action/Name` (or `pkg/Name`).
    pub fn action(&self, name: &str) -> Option<&Arc<ActionDef>> {
        let mut t: TypeName = name.parse().ok()?;
        t.kind = Kind::Action;
        self.actions.get(&t)
    }

    /// The text of the file that declared `name` (a message, service or
    /// action; not a generated part).
    pub fn source(&self, name: &TypeName) -> Option<&str> {
        self.sources.get(name).map(|s| &**s)
    }

    /// Every message, service and action declared by a file (generated
    /// parts left out), sorted.
    pub fn declared(&self) -> impl Iterator<Item = &TypeName> {
        self.sources.keys()
    }

    /// Every message and generated part, sorted.
    pub fn messages(&self) -> impl Iterator<Item = &Arc<MessageDef>> {
        self.messages.values()
    }

    /// The packages that declare at least one interface.
    pub fn packages(&self) -> BTreeSet<&str> {
        self.sources.keys().map(|t| t.package.as_str()).collect()
    }

    /// Every message `root` refers to, directly or not (itself left out),
    /// or the first unknown one.
    pub fn closure(&self, root: &MessageDef) -> Result<BTreeSet<TypeName>, TypeName> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&MessageDef> = vec![root];
        while let Some(m) = todo.pop() {
            for f in &m.fields {
                if let Some(n) = f.ty.nested() {
                    if *n != root.name && seen.insert(n.clone()) {
                        todo.push(self.messages.get(n).ok_or_else(|| n.clone())?);
                    }
                }
            }
        }
        Ok(seen)
    }

    /// The definition of `name` with every type it uses, as one text: the
    /// format rosbag2 and MCAP use for `ros2msg` schemas — the type's
    /// `.msg` text, then for each type it refers to (directly or not) a
    /// line of 80 `=`, `MSG: pkg/msg/Type` and its text. What a node sends
    /// a peer that lacks the files ([`Interfaces::add_bundle`] reads it).
    pub fn bundle(&self, name: &TypeName) -> Result<String, TypeName> {
        let m = self.messages.get(name).ok_or_else(|| name.clone())?;
        let mut out = m.to_msg();
        for dep in self.closure(m)? {
            let d = self.messages.get(&dep).ok_or_else(|| dep.clone())?;
            out.push_str(BUNDLE_SEPARATOR);
            out.push_str(&format!("MSG: {dep}\n"));
            out.push_str(&d.to_msg());
        }
        Ok(out)
    }

    /// Adds the types of a definition bundle ([`Interfaces::bundle`]) whose
    /// first part is `name`; a type already loaded is replaced. Nothing is
    /// added when any part fails to parse (the error names the part).
    pub fn add_bundle(&mut self, name: &TypeName, bundle: &str) -> Result<(), IdlError> {
        let mut parts = Vec::new();
        let mut chunks = bundle.split(BUNDLE_SEPARATOR);
        let main = chunks.next().unwrap_or_default();
        parts.push((name.clone(), main));
        for chunk in chunks {
            let (head, text) = chunk.split_once('\n').unwrap_or((chunk, ""));
            let dep = head
                .strip_prefix("MSG: ")
                .and_then(|n| n.trim().parse::<TypeName>().ok())
                .ok_or_else(|| IdlError {
                    file: format!("definition of {name}"),
                    line: 0,
                    column: 0,
                    kind: ErrorKind::BadTypeName(head.to_string()),
                })?;
            parts.push((dep, text));
        }
        let mut parsed = Vec::with_capacity(parts.len());
        for (t, text) in parts {
            let file = format!("definition of {t} (sent by a peer)");
            // (A part's name, `X_Goal`, is not a file's: parse as one.)
            let mut m = parse_message(text, &file, &t.package, "Part")?;
            m.name = t;
            parsed.push(m);
        }
        for m in parsed {
            self.insert(m);
        }
        Ok(())
    }

    /// Checks that every field's type is known: one error per unknown
    /// reference.
    pub fn check(&self) -> Vec<IdlError> {
        let mut out = Vec::new();
        for m in self.messages.values() {
            for f in &m.fields {
                if let Some(n) = f.ty.nested() {
                    if !self.messages.contains_key(n) {
                        out.push(IdlError {
                            file: m.name.to_string(),
                            line: 0,
                            column: 0,
                            kind: ErrorKind::UnknownType(n.to_string()),
                        });
                    }
                }
            }
        }
        out
    }
}
