//! Progress line: counting is cheap; the display runs only on a terminal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use request_sim::record::Status;
use request_sim::report::Progress;

#[test]
fn counting_is_cheap_and_thread_safe() {
    let p = Arc::new(Progress::new(400_000, true));
    let start = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let p = Arc::clone(&p);
            std::thread::spawn(move || {
                for i in 0..100_000u32 {
                    p.on_sent();
                    p.on_done(if i % 100 == 0 {
                        Status::Timeout
                    } else {
                        Status::Ok
                    });
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(p.counts(), (400_000, 400_000, 4_000));
    // 800k updates from 4 threads: far below a second even unoptimised.
    assert!(start.elapsed() < Duration::from_secs(5));
    p.finish();
}

/// Run in a terminal to see the line:
/// `cargo test --test it report::progress::demo -- --ignored --nocapture`
#[test]
#[ignore]
fn demo() {
    let p = Progress::new(300, true);
    for i in 0..300 {
        p.on_sent();
        std::thread::sleep(Duration::from_millis(10));
        if i >= 20 {
            p.on_done(if i % 37 == 0 {
                Status::HttpError
            } else {
                Status::Ok
            });
        }
    }
    p.finish();
}
