//! `[zenoh.auth]`: a router with a user list admits a robot that presents
//! one of its users and refuses a session without credentials or with a
//! wrong password; the admitted robot is not disturbed by the refused ones.

use ferry::config::zenoh::{Mode, ZenohAuth};
use ferry::{Config, Node};

use super::{exchange, free_port, matched_pair, node, zenoh_only};

#[test]
fn a_router_with_a_user_list_admits_only_sessions_that_present_a_listed_user() {
    let d = ferry_testkit::TempDir::new("zenoh-auth");
    std::fs::create_dir_all(d.path()).unwrap();
    let users = d.path().join("users.txt");
    std::fs::write(&users, "robot1:s3cret\nrobot2:other\n").unwrap();
    // `user` presenting `password` (from a file of its own).
    let login = |user: &str, password: &str| {
        let f = d.path().join(format!("{user}-{password}.pass"));
        std::fs::write(&f, format!("{password}\n")).unwrap();
        Some(ZenohAuth {
            user: Some(user.into()),
            password_file: Some(f),
            dictionary_file: None,
        })
    };
    let port = free_port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let with_auth = |mut c: Config, a: Option<ZenohAuth>| {
        c.zenoh.as_mut().unwrap().auth = a;
        c
    };
    let client = |name: &str, a: Option<ZenohAuth>| {
        Node::builder()
            .name(name)
            .config(with_auth(
                zenoh_only(59, Mode::Client, std::slice::from_ref(&endpoint), &[]),
                a,
            ))
            .build()
    };
    let router = node(
        "auth_router",
        with_auth(
            zenoh_only(59, Mode::Router, &[], std::slice::from_ref(&endpoint)),
            Some(ZenohAuth {
                dictionary_file: Some(users.clone()),
                ..ZenohAuth::default()
            }),
        ),
    );
    let robot = client("robot1", login("robot1", "s3cret")).unwrap();
    let (publisher, sub) = matched_pair(&robot, &router, "/fleet/status");
    exchange(&publisher, &sub, "s", 10);

    // No credentials, a wrong password, a user the list does not have: the
    // router refuses the handshake, and a client (which needs its router)
    // does not start.
    for (who, auth) in [
        ("anonymous", None),
        ("robot1", login("robot1", "wrong")),
        ("robot9", login("robot9", "s3cret")),
    ] {
        let Err(e) = client(who, auth) else {
            panic!("{who} must not get in");
        };
        let e = e.to_string();
        assert!(
            e.contains("Zenoh path") && e.contains(&endpoint),
            "{who}: {e}"
        );
    }
    // An unreadable password file is a configuration error naming the key.
    let Err(e) = client(
        "robot1",
        Some(ZenohAuth {
            user: Some("robot1".into()),
            password_file: Some(d.path().join("no-such-file")),
            dictionary_file: None,
        }),
    ) else {
        panic!("a missing password file must be refused");
    };
    let e = e.to_string();
    assert!(e.contains("zenoh.auth.password_file"), "{e}");
    assert_eq!(
        e.matches("zenoh.auth.password_file").count(),
        1,
        "the key once: {e}"
    );
    assert!(e.contains("no-such-file"), "{e}");
    // The robot was not disturbed by them.
    exchange(&publisher, &sub, "still here", 1);
}
