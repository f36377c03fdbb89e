//! A reader's handler runs on a Cyclone thread, where deleting any entity
//! waits for that very thread: a handler that drops its own reader and
//! another writer (what an application's inline callback may do by
//! dropping a subscriber or a publisher) must neither hang nor leak them.

mod common;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{string_cdr, Lab};
use ferry_dds::{DdsQos, Participant, Reader, Writer};
use parking_lot::Mutex;

#[test]
fn a_handler_may_drop_its_reader_and_other_entities() {
    let Some(lab) = Lab::new(14) else { return };
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let domain = 91;
            let (pp1, pp2) = (
                Participant::new(domain, b"enclave=/;").unwrap(),
                Participant::new(domain, b"enclave=/;").unwrap(),
            );
            let ty = "std_msgs::msg::dds_::String_";
            let (t1, t2) = (
                pp1.topic("rt/drops", ty).unwrap(),
                pp2.topic("rt/drops", ty).unwrap(),
            );
            let other_topic = pp2.topic("rt/other", ty).unwrap();
            let other: Arc<Mutex<Option<Writer>>> = Arc::new(Mutex::new(Some(
                pp2.writer(&other_topic, &DdsQos::default()).unwrap(),
            )));
            let slot: Arc<Mutex<Option<Reader>>> = Arc::default();
            let (tx, rx) = mpsc::channel();
            let (other2, slot2) = (other.clone(), slot.clone());
            let reader = pp2
                .reader(&t2, &DdsQos::default(), move |_| {
                    let w = other2.lock().take();
                    drop(w);
                    let r = slot2.lock().take();
                    drop(r);
                    let _ = tx.send(());
                })
                .unwrap();
            *slot.lock() = Some(reader);
            let writer = pp1.writer(&t1, &DdsQos::default()).unwrap();
            let end = Instant::now() + Duration::from_secs(10);
            while writer.matched().unwrap() == 0 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(writer.matched().unwrap(), 1);
            writer.write(&string_cdr("bye")).unwrap();
            rx.recv_timeout(Duration::from_secs(10))
                .expect("the handler ran and returned");
            assert!(slot.lock().is_none() && other.lock().is_none());
            // The reader is really gone: the writer loses its match.
            let end = Instant::now() + Duration::from_secs(10);
            while writer.matched().unwrap() > 0 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(writer.matched().unwrap(), 0, "the reader was not deleted");
        })
        .join()
        .unwrap();
    });
}
