//! The load generator behind `server-binder bench apiserver`, with tiny numbers: it runs
//! to completion and its watchers see every write. Correctness only, no timing.

use std::time::Duration;

use server_binder::runtime::bench::apiserver::{BenchConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_runs_and_every_watcher_sees_every_write() {
    let report = run(BenchConfig {
        objects: 50,
        writers: 2,
        watchers: 2,
        duration: Duration::from_millis(400),
        checkpoint: 10,
        drain_timeout: Duration::from_secs(30),
    })
    .await
    .expect("the bench runs");
    eprintln!("{report}");
    assert!(report.all_seen(), "{report}");
    assert_eq!(report.store_size, 50);
    assert_eq!(report.create.writes, 50);
    assert!(report.update.writes > 0, "{report}");
    assert_eq!(report.watchers.len(), 2);
    let per_watcher = report.create.writes + report.update.writes;
    assert_eq!(report.events_expected_per_watcher(), per_watcher);
    for w in &report.watchers {
        assert!(report.watcher_complete(w), "{w:?}");
        assert_eq!(w.added, 50);
        assert_eq!(w.added + w.modified, per_watcher);
    }
    assert_eq!(report.events_delivered(), 2 * per_watcher);
    // Two store sizes: at the checkpoint and at the end.
    let sizes: Vec<usize> = report.by_size.iter().map(|s| s.store_size).collect();
    assert_eq!(sizes, [10, 50]);
}

#[tokio::test]
async fn the_bench_refuses_nonsense() {
    let err = run(BenchConfig {
        objects: 0,
        ..BenchConfig::default()
    })
    .await
    .expect_err("zero objects is refused");
    assert!(err.to_string().contains("at least 1"), "{err}");
}
