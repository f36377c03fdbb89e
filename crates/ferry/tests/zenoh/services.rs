//! Services over Zenoh as rmw_zenoh carries them (a complete queryable
//! with an `SS` token, a querier with an `SC` token, the request's
//! attachment echoed by the reply): an rmw_zenoh client calls a ferry
//! service, a ferry client calls an rmw_zenoh service (and fails at once
//! when that service dies holding the call), ferry calls ferry through a
//! router, and a pair that ferry's own discovery joins calls on its direct
//! path, not over Zenoh.

use std::time::{Duration, Instant};

use ferry::config::zenoh::Mode;
use ferry::msgs::example_interfaces::srv::{AddTwoIntsRequest, AddTwoIntsResponse};
use ferry::{CallError, DiscoveryRange, TransportKind};

use super::{free_port, lines_until, node, rmw_zenoh, until, zenoh_only};

const ADD: &str = "example_interfaces::srv::dds_::AddTwoInts_/\
                   RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn an_rmw_zenoh_client_calls_a_ferry_service_and_a_ferry_client_calls_theirs() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let ferry = node(
        "ferry_adder",
        zenoh_only(69, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let zid = ferry.zenoh_session().unwrap().zid;
    let service = ferry
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/add_two_ints", |r| {
            AddTwoIntsResponse { sum: r.a + r.b }
        })
        .build()
        .unwrap();

    // rmw_zenoh's client finds the service by its token and calls it.
    let (_caller, crx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "69",
        "--topic",
        "/add_two_ints",
        "--junk",
        "caller",
        "20",
    ]);
    let lines = lines_until(&crx, "answer 20 ", Duration::from_secs(30));
    let answers: Vec<(i64, i64)> = lines
        .iter()
        .filter_map(|l| {
            let mut p = l.strip_prefix("answer ")?.split(' ');
            Some((p.next()?.parse().ok()?, p.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(
        answers,
        (1..=20).map(|i| (i, i + 100)).collect::<Vec<_>>(),
        "{lines:?}"
    );
    // Junk first (no attachment, a negative sequence, not CDR): each
    // refused with a reply that says why; the good calls still answered.
    let errors: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("error "))
        .collect();
    assert_eq!(errors.len(), 3, "{lines:?}");
    assert!(errors[0].contains("attachment"), "{errors:?}");
    assert!(errors[1].contains("attachment"), "{errors:?}");
    assert!(errors[2].starts_with("bad request"), "{errors:?}");
    assert!(
        lines.iter().any(|l| l == "made-up clients answered 50"),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("bad ")), "{lines:?}");
    let ss = lines
        .iter()
        .filter_map(|l| l.strip_prefix("token "))
        .find(|t| t.contains("/SS/"))
        .unwrap_or_else(|| panic!("no service token of ferry's in {lines:?}"));
    assert!(
        ss.starts_with(&format!("@ros2_lv/69/{zid}/"))
            && ss.contains(&format!("/SS/%/%/ferry_adder/%add_two_ints/{ADD}/")),
        "{ss}"
    );
    let conns: Vec<_> = service
        .connections()
        .into_iter()
        .filter(|c| c.transport == TransportKind::Zenoh)
        .collect();
    // One connection for the client (its token names it), one shared by
    // the 50 made-up GIDs.
    let mut by_count: Vec<(u64, u64)> = conns
        .iter()
        .map(|c| (c.stats.messages, c.stats.errors))
        .collect();
    by_count.sort_unstable();
    // The 20 calls and the request that was not CDR (the others never
    // reached a connection).
    assert_eq!(by_count, vec![(21, 1), (50, 0)], "{conns:?}");

    // A ferry client calls rmw_zenoh's service: seq = the call's id, the
    // GID that of its `SC` token, as rmw_zenoh's server reads them.
    let client = ferry
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/py_adder")
        .build()
        .unwrap();
    assert!(!client.service_is_ready(), "no service yet");
    let (server, srx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "69",
        "--topic",
        "/py_adder",
        "server",
        "10",
    ]);
    let mut said = lines_until(&srx, "ready", Duration::from_secs(20));
    assert!(client.wait_for_service(Duration::from_secs(20)));
    for i in 0..10i64 {
        let r = client
            .call(AddTwoIntsRequest { a: i, b: 1000 }, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(r.sum, 1000 + i);
    }
    said.extend(lines_until(&srx, "asked 10 ", Duration::from_secs(10)));
    let sc = said
        .iter()
        .filter_map(|l| l.strip_prefix("token "))
        .find(|t| t.contains("/SC/"))
        .unwrap_or_else(|| panic!("no client token of ferry's in {said:?}"));
    assert!(
        sc.contains(&format!("/SC/%/%/ferry_adder/%py_adder/{ADD}/")),
        "{sc}"
    );
    let gid = hex(&ferry_zenoh::gid_of(sc));
    let asked: Vec<String> = said
        .iter()
        .filter_map(|l| l.strip_prefix("asked "))
        .map(str::to_string)
        .collect();
    let want: Vec<String> = (0..10i64)
        .map(|i| format!("{} {i} 1000 {gid}", i + 1))
        .collect();
    assert_eq!(asked, want);
    let conns: Vec<_> = client
        .connections()
        .into_iter()
        .filter(|c| c.transport == TransportKind::Zenoh)
        .collect();
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].stats.messages, 10, "{conns:?}");
    drop(server);
    until(Duration::from_secs(20), "the killed service leaves", || {
        !client.service_is_ready()
    });

    // A service that takes the call, never answers, and dies: the call
    // fails as soon as Zenoh ends the query (ServiceGone), not at its
    // 60 s timeout.
    let (mute, mrx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "69",
        "--topic",
        "/py_adder",
        "--mute",
        "server",
        "1",
    ]);
    lines_until(&mrx, "ready", Duration::from_secs(20));
    assert!(client.wait_for_service(Duration::from_secs(20)));
    let killer = std::thread::spawn(move || {
        let said = lines_until(&mrx, "asked ", Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(300));
        drop(mute);
        said
    });
    let t = Instant::now();
    let r = client.call(AddTwoIntsRequest { a: 1, b: 2 }, Duration::from_secs(60));
    assert!(
        matches!(r, Err(CallError::ServiceGone { .. })),
        "{r:?} after {:?}",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    killer.join().unwrap();
}

/// A config in ferry `domain` on `Mode` with Zenoh to `router`, and
/// ferry's own discovery on this host.
fn zenoh_and_discovery(domain: u16, mode: Mode, router: &str) -> ferry::Config {
    let mut c = zenoh_only(domain, mode, &[router.to_string()], &[]);
    c.discovery = DiscoveryRange::Localhost;
    c
}

#[test]
fn ferry_calls_ferry_through_a_zenoh_router_and_errors_arrive_as_the_service_said() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let _router = node(
        "router",
        zenoh_only(71, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let site_a = node(
        "site_a",
        zenoh_only(71, Mode::Peer, std::slice::from_ref(&router), &[]),
    );
    let site_b = node(
        "site_b",
        zenoh_only(71, Mode::Client, std::slice::from_ref(&router), &[]),
    );
    let service = site_a
        .try_service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/fleet/add", |r| {
            if r.a == 13 {
                Err("13 is unlucky".into())
            } else {
                Ok(AddTwoIntsResponse { sum: r.a + r.b })
            }
        })
        .build()
        .unwrap();
    let client = site_b
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/fleet/add")
        .build()
        .unwrap();
    assert!(client.wait_for_service(Duration::from_secs(20)));
    for i in 0..50i64 {
        let r = client.call(AddTwoIntsRequest { a: i, b: 7 }, Duration::from_secs(5));
        match (i, r) {
            (13, Err(CallError::Remote { message, .. })) => {
                assert_eq!(message, "13 is unlucky")
            }
            (13, r) => panic!("call 13: {r:?}"),
            (_, Ok(r)) => assert_eq!(r.sum, i + 7),
            (_, Err(e)) => panic!("call {i}: {e}"),
        }
    }
    // Async calls too, several in flight at once.
    let futures: Vec<_> = (100..110i64)
        .map(|i| client.call_async(AddTwoIntsRequest { a: i, b: 1 }))
        .collect();
    for (i, f) in (100..110i64).zip(futures) {
        let r = block_on(f).unwrap();
        assert_eq!(r.sum, i + 1);
    }
    let conns = service.connections();
    assert_eq!(conns.len(), 1, "{conns:?}");
    assert_eq!(conns[0].transport, TransportKind::Zenoh);
    assert_eq!(conns[0].stats.messages, 60, "{conns:?}");
    // The client's runtime, as its token and `@ferry_lv` claim say.
    assert_eq!(conns[0].remote.participant, client_participant(&site_b));

    drop(service);
    until(Duration::from_secs(10), "the service leaves", || {
        !client.service_is_ready()
    });
    let r = client.call(AddTwoIntsRequest { a: 1, b: 1 }, Duration::from_millis(300));
    assert!(matches!(r, Err(CallError::NoService { .. })), "{r:?}");
}

fn client_participant(n: &ferry::Node) -> ferry::ParticipantId {
    n.graph()
        .nodes
        .iter()
        .find(|x| x.name == n.fully_qualified_name())
        .map(|x| x.participant)
        .expect("the node is in its own graph")
}

/// Runs `f` to completion on this thread.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let std::task::Poll::Ready(r) = f.as_mut().poll(&mut cx) {
            return r;
        }
        assert!(Instant::now() < end, "a call that never completes");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[test]
fn a_pair_that_discovery_joins_calls_on_its_own_path_not_over_zenoh() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let _router = node(
        "router",
        zenoh_only(72, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let a = node("a", zenoh_and_discovery(72, Mode::Peer, &router));
    // (A config of its own: a runtime of its own, its own Zenoh session.)
    let b = node(
        "b",
        ferry::Config {
            lease_ms: 9_000,
            ..zenoh_and_discovery(72, Mode::Peer, &router)
        },
    );
    let service = a
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/local/add", |r| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .build()
        .unwrap();
    let client = b
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/local/add")
        .build()
        .unwrap();
    // Wait for the direct connection (Zenoh may be matched first).
    until(Duration::from_secs(20), "the direct connection", || {
        client
            .connections()
            .iter()
            .any(|c| c.transport != TransportKind::Zenoh)
    });
    for i in 0..20i64 {
        let r = client
            .call(AddTwoIntsRequest { a: i, b: 1 }, Duration::from_secs(5))
            .unwrap();
        assert_eq!(r.sum, i + 1);
    }
    let conns = client.connections();
    let over = |zenoh: bool| -> u64 {
        conns
            .iter()
            .filter(|c| (c.transport == TransportKind::Zenoh) == zenoh)
            .map(|c| c.stats.messages)
            .sum()
    };
    assert_eq!((over(false), over(true)), (20, 0), "{conns:?}");
    // The service took each call once, on the direct path.
    let took: u64 = service.connections().iter().map(|c| c.stats.messages).sum();
    assert_eq!(took, 20, "{:?}", service.connections());
}
