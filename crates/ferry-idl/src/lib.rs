//! ROS 2 interface definitions for ferry: the `.msg`, `.srv` and `.action`
//! language parsed as ROS 2 parses it ([`parse`]), a type model
//! ([`model`]), the set of loaded interfaces with the parts ROS 2 generates
//! for services and actions ([`Interfaces`]), ROS 2 type hashes
//! ([`Rihs01`], REP-2011), the common interfaces shipped with ferry
//! ([`Interfaces::common`]), and messages as data for types known only at
//! run time ([`Data`]: ROS 2 defaults, partial values completed, CDR
//! byte-identical to ROS 2's).
//!
//! Sans-IO apart from [`Interfaces::add_dir`] and [`Interfaces::from_env`]:
//! text in, model or an error naming file, line and column out; no input
//! makes it panic (`fuzz/` has a target).
//!
//! ```
//! use ferry_idl::{Interfaces, TypeName};
//! let ifaces = Interfaces::common();
//! let t: TypeName = "std_msgs/msg/String".parse().unwrap();
//! assert_eq!(
//!     ifaces.type_hash(&t).unwrap().to_string(),
//!     "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
//! );
//! ```

pub mod cdr;
pub mod codegen;
pub mod dynamic;
pub mod error;
pub mod hash;
pub mod model;
pub mod parse;
pub mod registry;
pub mod value;

pub use dynamic::{Data, DataError, DecodeError};
pub use error::{ErrorKind, IdlError};
pub use hash::{digest, BadHash, HashError, Rihs01};
pub use model::{
    ActionDef, BaseType, Collection, Constant, Field, FieldType, Kind, MessageDef, Primitive,
    ServiceDef, TypeName, Value, EMPTY_MEMBER,
};
pub use registry::{Interfaces, INTERFACE_PATH_VAR};
