//! Definition bundles (what a node sends a peer that lacks the `.msg`
//! files): for every shipped type, the bundle read into an empty set of
//! interfaces gives the same ROS 2 type hash and the same CDR codec.

use ferry_idl::{Interfaces, TypeName};

#[test]
fn every_shipped_type_survives_its_bundle() {
    let common = Interfaces::common();
    let names: Vec<TypeName> = common.messages().map(|m| m.name.clone()).collect();
    assert!(names.len() > 280, "{}", names.len());
    for t in &names {
        let bundle = common.bundle(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        let mut alone = Interfaces::new();
        alone
            .add_bundle(t, &bundle)
            .unwrap_or_else(|e| panic!("{t}: {e}\n{bundle}"));
        assert_eq!(
            alone.type_hash(t).unwrap(),
            common.type_hash(t).unwrap(),
            "{t}:\n{bundle}"
        );
        let defaults = common.default_data(t).unwrap();
        assert_eq!(
            alone.encode(t, &defaults).unwrap(),
            common.encode(t, &defaults).unwrap(),
            "{t}"
        );
    }
}

#[test]
fn a_bad_bundle_adds_nothing_and_names_the_part() {
    let t: TypeName = "my_msgs/msg/Thing".parse().unwrap();
    let mut i = Interfaces::new();
    let bad = "my_msgs/Part part\n================================================================================\nMSG: my_msgs/msg/Part\nint32 x\nfloat99 y\n";
    let e = i.add_bundle(&t, bad).unwrap_err();
    assert!(e.to_string().contains("my_msgs/msg/Part"), "{e}");
    assert!(i.get(&t).is_none());
    let e = i
        .add_bundle(&t, "int32 x\n================================================================================\nNOT A HEADER\n")
        .unwrap_err();
    assert!(e.to_string().contains("NOT A HEADER"), "{e}");
}
