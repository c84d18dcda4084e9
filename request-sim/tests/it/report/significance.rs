//! Repeats, intervals, comparisons with a verdict, the measurement window
//! (docs/metrics.md, "Repeats, intervals and comparisons", "Steady-state window").

use std::ffi::OsStr;
use std::path::Path;

use request_sim::record::{Record, Status};
use request_sim::stats::compare::{compare, FailIfWorse, Method, Side};
use request_sim::stats::inference::{bootstrap, mean_ci, welch, Statistic};
use request_sim::stats::repeats::{RepeatRun, RepeatSet};
use request_sim::stats::Metric;
use request_sim::stats::{report_from_records, MeasureWindow, ReportConfig};

use crate::support::{
    base_args, default_sim, read_records, run_cli, strs, synthetic, try_replay, write_jsonl,
    write_trace, Lcg,
};

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut Lcg) -> f64 {
    let u1 = rng.unit().max(1e-12);
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[test]
fn the_interval_of_repeats_is_student_t_on_known_data() {
    // mean 14, s = √10, t(0.975, 4) = 2.776445: half-width 2.776445 · √10 / √5 = 3.92646.
    let c = mean_ci(&[10.0, 12.0, 14.0, 16.0, 18.0]).unwrap();
    assert_eq!(c.n, 5);
    assert!((c.mean - 14.0).abs() < 1e-12);
    assert!((c.std - 10f64.sqrt()).abs() < 1e-12);
    assert!((c.ci_low.unwrap() - (14.0 - 3.92646)).abs() < 1e-4, "{c:?}");
    assert!(
        (c.ci_high.unwrap() - (14.0 + 3.92646)).abs() < 1e-4,
        "{c:?}"
    );
    assert_eq!((c.min, c.max), (10.0, 18.0));
    // One repeat: a mean, no interval.
    let one = mean_ci(&[3.0]).unwrap();
    assert_eq!((one.mean, one.ci_low, one.ci_high), (3.0, None, None));
}

#[test]
fn welch_on_known_data() {
    // Equal variances 2.5 and n = 5: se = 1, df = 8, t(0.975, 8) = 2.306004.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let near = welch(&a, &[3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
    assert!((near.diff - 2.0).abs() < 1e-12);
    assert!((near.ci_low - (2.0 - 2.306004)).abs() < 1e-5, "{near:?}");
    assert!((near.ci_high - (2.0 + 2.306004)).abs() < 1e-5, "{near:?}");
    assert!(!near.significant());
    let far = welch(&a, &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
    assert!((far.ci_low - (5.0 - 2.306004)).abs() < 1e-5, "{far:?}");
    assert!(far.significant());
    // Identical values on both sides: no spread, no difference, not significant.
    let same = welch(&[2.0, 2.0], &[2.0, 2.0]).unwrap();
    assert!(!same.significant());
    assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
}

/// "Significant" at 95% over many pairs drawn from one distribution: the false-positive rate,
/// which must be near 5%. Fixed seed: the rate printed is the same on every run.
#[test]
fn pairs_from_one_distribution_are_rarely_called_different() {
    let mut rng = Lcg::new(2026);
    // Welch over 5 repeats a side (repeat-level values: normal around 100 ms).
    let pairs = 4000;
    let mut hits = 0;
    for _ in 0..pairs {
        let a: Vec<f64> = (0..5).map(|_| 100.0 + 5.0 * normal(&mut rng)).collect();
        let b: Vec<f64> = (0..5).map(|_| 100.0 + 5.0 * normal(&mut rng)).collect();
        hits += usize::from(welch(&a, &b).unwrap().significant());
    }
    let welch_rate = hits as f64 / pairs as f64;
    // Bootstrap over 300 per-request values a side (log-normal latencies), mean and p90.
    let pairs = 200;
    let (mut mean_hits, mut p90_hits) = (0, 0);
    for k in 0..pairs {
        let draw = |rng: &mut Lcg| -> Vec<Vec<f64>> {
            (0..300)
                .map(|_| vec![(4.0 + 0.5 * normal(rng)).exp()])
                .collect()
        };
        let a = draw(&mut rng);
        let b = draw(&mut rng);
        let d = bootstrap(
            &a,
            &b,
            &[Statistic::Mean, Statistic::Percentile(90.0)],
            400,
            k,
        );
        mean_hits += usize::from(d[0].unwrap().significant());
        p90_hits += usize::from(d[1].unwrap().significant());
    }
    let (mean_rate, p90_rate) = (
        mean_hits as f64 / pairs as f64,
        p90_hits as f64 / pairs as f64,
    );
    println!(
        "false-positive rate at 95%: Welch {:.2}% (4000 pairs of 5 repeats), bootstrap mean {:.1}%, p90 {:.1}% (200 pairs of 300 requests, 400 resamples)",
        welch_rate * 100.0,
        mean_rate * 100.0,
        p90_rate * 100.0
    );
    assert!((0.035..=0.065).contains(&welch_rate), "{welch_rate}");
    assert!(mean_rate <= 0.09, "{mean_rate}");
    assert!(p90_rate <= 0.09, "{p90_rate}");
}

/// A side of records only.
fn side(name: &str, records: Vec<Record>) -> Side {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    write_jsonl(&path, &records);
    let summary = report_from_records(&path, &ReportConfig::default(), None).unwrap();
    Side {
        name: name.to_string(),
        summary,
        repeats: None,
        records: Some(records),
    }
}

/// `records` with TTFT and E2E (and what follows from them) `factor` times longer.
fn slower(records: &[Record], factor: f64) -> Vec<Record> {
    records
        .iter()
        .cloned()
        .map(|mut r| {
            r.ttft_ms = r.ttft_ms.map(|x| x * factor);
            r.ttfc_ms = r.ttfc_ms.map(|x| x * factor);
            r.e2e_ms = r.e2e_ms.map(|x| x * factor);
            r.done_ms = r.done_ms.map(|x| x * factor);
            r.tpot_ms = r.tpot_ms.map(|x| x * factor);
            r.itl_ms = r
                .itl_ms
                .map(|v| v.into_iter().map(|x| x * factor).collect());
            r
        })
        .collect()
}

#[test]
fn clearly_different_records_are_significant_and_identical_ones_are_not() {
    let a = synthetic(300, 11);
    let worse = compare(&side("A", a.clone()), &side("B", slower(&a, 1.3))).unwrap();
    assert_eq!(worse.method, Method::Bootstrap);
    for key in [
        "mean_ttft_ms",
        "median_ttft_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
        "mean_itl_ms",
    ] {
        let v = worse.verdicts.iter().find(|v| v.key == key).unwrap();
        assert_eq!(v.word(), "significantly worse", "{key}: {v:?}");
        let (lo, hi) = v.ci_pct().unwrap();
        assert!(lo < 30.0 + 1e-6 && 30.0 - 1e-6 < hi, "{key}: [{lo}, {hi}]");
        assert!((v.change_pct().unwrap() - 30.0).abs() < 1e-6, "{key}");
    }
    let thr = worse
        .verdicts
        .iter()
        .find(|v| v.key == "request_throughput")
        .unwrap();
    assert_eq!(thr.method, Method::None);
    assert!(thr.note.as_deref().unwrap().contains("--repeat"), "{thr:?}");

    let same = compare(&side("A", a.clone()), &side("B", a.clone())).unwrap();
    for v in same
        .verdicts
        .iter()
        .filter(|v| v.method == Method::Bootstrap)
    {
        assert_eq!(v.word(), "no significant difference", "{v:?}");
    }
    assert!(same.differences.is_empty(), "{:?}", same.differences);
}

/// Issue #39: a measure window on one side only was named as
/// `measure_window (unknown) (A) vs {"mode":"fixed",...} (B)`, and SLOs as raw JSON; both are
/// said in words.
#[test]
fn differing_windows_and_slos_are_named_in_words() {
    let a = synthetic(200, 3);
    let mut sa = side("A", a.clone());
    let mut sb = side("B", a);
    sb.summary.measure_window = Some(request_sim::stats::window::WindowReport {
        mode: "fixed".into(),
        start_s: 10.0,
        end_s: Some(20.0),
        inside: 100,
        outside: 100,
        band: None,
        median_in_flight: None,
    });
    sa.summary.goodput_slo = request_sim::stats::Slo::parse(&["ttft:2000".to_string()]).unwrap();
    let c = compare(&sa, &sb).unwrap();
    let text = request_sim::report::render_verdicts(&c);
    assert!(
        text.contains("goodput_slo ttft:2000 (A) vs none (B); measure_window none (every request) (A) vs 10..20 s (B)"),
        "{text}"
    );
    assert!(!text.contains("(unknown)") && !text.contains('{'), "{text}");
}

#[test]
fn different_traces_are_refused_and_different_settings_named() {
    let a = synthetic(200, 3);
    let mut other = a.clone();
    other[17].input_length += 1;
    let err = compare(&side("a.jsonl", a.clone()), &side("b.jsonl", other)).unwrap_err();
    assert!(err.contains("different traces"), "{err}");
    assert!(err.contains("request 17"), "{err}");

    let mut sa = side("A", a.clone());
    let mut sb = side("B", a);
    sa.summary.run.scale_factor = Some(1.0);
    sb.summary.run.scale_factor = Some(2.0);
    sb.summary.run.server.model = Some("other-model".into());
    sa.summary.run.server.model = Some("llm-sim".into());
    let c = compare(&sa, &sb).unwrap();
    let names: Vec<&str> = c.differences.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(names, ["scale_factor", "model"], "{:?}", c.differences);
    let text = request_sim::report::render_verdicts(&c);
    assert!(
        text.contains("configurations differ: scale_factor 1.0 (A) vs 2.0 (B); model llm-sim (A) vs other-model (B)"),
        "{text}"
    );
}

#[test]
fn fail_if_worse_gates_parse_and_decide() {
    assert_eq!(
        FailIfWorse::parse("p99_ttft_ms:5").unwrap(),
        FailIfWorse {
            key: "p99_ttft_ms".into(),
            pct: 5.0
        }
    );
    assert!(FailIfWorse::parse("p99_ttft_ms")
        .unwrap_err()
        .contains("METRIC:PCT"));
    assert!(FailIfWorse::parse("x:-1").unwrap_err().contains(">= 0"));
    assert!(FailIfWorse::parse("x:abc")
        .unwrap_err()
        .contains("not a percentage"));
}

/// Two records files in `dir`, `a.jsonl` (`n` synthetic records without ITL values) and
/// `b.jsonl` (the same 1.2 times slower): their paths and A's records.
fn runs_without_itl(
    dir: &std::path::Path,
    n: usize,
) -> (std::path::PathBuf, std::path::PathBuf, Vec<Record>) {
    let a: Vec<Record> = synthetic(n, 5)
        .into_iter()
        .map(|mut r| {
            r.itl_ms = None;
            r
        })
        .collect();
    let (pa, pb) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    write_jsonl(&pa, &a);
    write_jsonl(&pb, &slower(&a, 1.2));
    (pa, pb, a)
}

/// `request-sim compare ARGS...`.
fn compare_cli(args: &[&OsStr]) -> (i32, String, String) {
    run_cli([&[OsStr::new("compare")], args].concat(), &[])
}

#[test]
fn compare_exit_status_follows_fail_if_worse() {
    let tmp = tempfile::tempdir().unwrap();
    // Without ITL values (the bootstrap of every gap is the slow part in a debug build).
    let (pa, pb, a) = runs_without_itl(tmp.path(), 300);
    let run = |extra: &[&str]| {
        let mut args: Vec<&OsStr> = vec![pa.as_os_str(), pb.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        compare_cli(&args)
    };
    // 20% worse: trips a 5% gate (7), not a 50% one (0).
    let (code, out, err) = run(&["--fail-if-worse", "mean_ttft_ms:5"]);
    assert_eq!(code, 7, "{out}\n{err}");
    assert!(
        err.contains("Mean TTFT (ms) is significantly worse by 20.0%"),
        "{err}"
    );
    assert!(out.contains("significantly worse"), "{out}");
    assert!(out.contains("bootstrap over per-request records"), "{out}");
    let (code, _, err) = run(&["--fail-if-worse", "mean_ttft_ms:50"]);
    assert_eq!(code, 0, "{err}");
    // B better than A is never a failure.
    let (code, _, err) = compare_cli(&[
        pb.as_os_str(),
        pa.as_os_str(),
        "--fail-if-worse".as_ref(),
        "p99_e2el_ms:0".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    // A gate that cannot be decided is an error, not a pass.
    let (code, _, err) = run(&["--fail-if-worse", "request_throughput:5"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot decide"), "{err}");
    let (code, _, err) = run(&["--fail-if-worse", "p99_ttft:5"]);
    assert_eq!(code, 1);
    assert!(err.contains("no metric \"p99_ttft\""), "{err}");
    let (code, _, err) = run(&["--fail-if-worse", "p99_ttft_ms"]);
    assert_eq!(code, 2);
    assert!(err.contains("METRIC:PCT"), "{err}");
    // Different traces: a refusal.
    let mut other = a.clone();
    other[3].line += 1000;
    let pc = tmp.path().join("c.jsonl");
    write_jsonl(&pc, &other);
    let (code, _, err) = compare_cli(&[pa.as_os_str(), pc.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("replayed different traces"), "{err}");
}

/// Records sent every 100 ms from 0 to 59.9 s, each taking 1 s: ten in flight in the steady
/// state, fewer in the first second.
fn steady_records() -> Vec<Record> {
    (0..600)
        .map(|i| {
            let mut r = Record::new(i, i + 1, Status::Ok);
            let t = i as f64 * 100.0;
            r.scheduled_ms = t;
            r.timestamp = t;
            r.sent_ms = Some(t);
            r.drift_ms = Some(0.0);
            r.ttft_ms = Some(100.0 + (i % 7) as f64);
            r.e2e_ms = Some(1000.0);
            r.done_ms = Some(1000.0);
            r.chunks = 10;
            r.output_tokens = Some(10);
            r.input_length = 100;
            r
        })
        .collect()
}

#[test]
fn a_window_counts_the_requests_sent_inside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let recs = steady_records();
    let path = tmp.path().join("r.jsonl");
    write_jsonl(&path, &recs);
    let cfg = |w| ReportConfig {
        window: Some(w),
        ..ReportConfig::default()
    };
    let s =
        report_from_records(&path, &cfg(MeasureWindow::parse("10..20").unwrap()), None).unwrap();
    // Sent at 10.0, 10.1, ..., 19.9 s.
    assert_eq!(s.completed, 100);
    let w = s.measure_window.as_ref().unwrap();
    assert_eq!((w.inside, w.outside, w.mode.as_str()), (100, 500, "fixed"));
    assert!(s.counts_add_up);
    let inside: Vec<f64> = recs[100..200].iter().map(|r| r.ttft_ms.unwrap()).collect();
    let mean = inside.iter().sum::<f64>() / inside.len() as f64;
    assert!((s.latency[Metric::Ttft].mean - mean).abs() < 1e-9);
    // Durations: first send 10 s, last end 20.9 s.
    assert!((s.duration_s - 10.9).abs() < 1e-9, "{}", s.duration_s);

    // auto: the first second (in flight still climbing to 10) is left out.
    let s = report_from_records(&path, &cfg(MeasureWindow::Auto), None).unwrap();
    let w = s.measure_window.as_ref().unwrap();
    assert_eq!(w.mode, "auto");
    assert!((w.start_s - 1.0).abs() < 1e-9, "{w:?}");
    // The last 1-s bin of the sends, [59, 60), ends the window.
    assert!((w.end_s.unwrap() - 60.0).abs() < 1e-6, "{w:?}");
    assert_eq!(w.median_in_flight.map(|m| m.round()), Some(10.0));
    assert_eq!((w.inside, w.outside), (590, 10), "{w:?}");
    // The records file still has every request.
    assert_eq!(read_records(&path).len(), 600);

    // A window outside the run: the message says where the run was.
    let err = report_from_records(&path, &cfg(MeasureWindow::parse("100..200").unwrap()), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("is outside the run: its 600 requests were sent from 0.000 s to 59.900 s"),
        "{err}"
    );
    // The same through the command line.
    let (code, _, err) = run_cli(
        [
            OsStr::new("report"),
            path.as_os_str(),
            "--measure-window".as_ref(),
            "100..200".as_ref(),
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("outside the run"), "{err}");
    let (code, _, err) = run_cli(
        [
            OsStr::new("report"),
            path.as_os_str(),
            "--measure-window".as_ref(),
            "20..10".as_ref(),
        ],
        &[],
    );
    assert_eq!(code, 2);
    assert!(err.contains("END must be after START"), "{err}");
}

/// Records sent outside `--measure-window` are not missing: no "do not account for every
/// scheduled request" warning for them (issue #39 defect 6), whether the run's scheduled count
/// is known or read from the records; a record truly missing still warns.
#[test]
fn records_outside_the_window_are_not_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("r.jsonl");
    write_jsonl(&path, &steady_records());
    let missing = |s: &request_sim::stats::Summary| {
        s.warnings
            .iter()
            .find(|w| w.contains("do not account for every scheduled request"))
            .cloned()
    };
    for window in ["10..20", "auto"] {
        let cfg = ReportConfig {
            window: Some(MeasureWindow::parse(window).unwrap()),
            ..ReportConfig::default()
        };
        let s = report_from_records(&path, &cfg, None).unwrap();
        assert_eq!(missing(&s), None, "{window}: {:?}", s.warnings);
        assert!(s.counts_add_up, "{window}");
        let mut info = request_sim::stats::RunInfo::default();
        info.outcome.scheduled = 600;
        let s = report_from_records(&path, &cfg, Some(info.clone())).unwrap();
        assert_eq!(missing(&s), None, "{window}: {:?}", s.warnings);
        assert!(s.counts_add_up, "{window}");
        // One scheduled request without a record is missing, window or not.
        info.outcome.scheduled = 601;
        let s = report_from_records(&path, &cfg, Some(info)).unwrap();
        assert_eq!(
            missing(&s).as_deref(),
            Some("records (600) do not account for every scheduled request (601): 1 missing"),
            "{window}"
        );
        assert!(!s.counts_add_up, "{window}");
    }
    // The same through the command line: nothing about missing records.
    let (code, out, err) = run_cli(
        [
            OsStr::new("report"),
            path.as_os_str(),
            "--measure-window".as_ref(),
            "auto".as_ref(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("do not account") && !err.contains("do not account"),
        "{out}\n{err}"
    );
    // A replay (built-in simulator) with a window, every --repeat round: no such warning.
    let trace = write_trace(tmp.path(), "t.jsonl", 40, 2000.0, 16, 2);
    let dir = tmp.path().join("run");
    let (code, out, err) = run_cli(
        [
            OsStr::new("replay"),
            "--dataset-path".as_ref(),
            trace.as_os_str(),
            "--result-dir".as_ref(),
            dir.as_os_str(),
            "--measure-window".as_ref(),
            "1..1.5".as_ref(),
            "--repeat".as_ref(),
            "2".as_ref(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("Records = scheduled:").count(), 2, "{out}");
    assert!(
        !out.contains("do not account") && !err.contains("do not account"),
        "{out}\n{err}"
    );
}

#[test]
fn repeat_zero_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write_trace(tmp.path(), "t.jsonl", 5, 100.0, 16, 4);
    let mut args = base_args("http://127.0.0.1:9/v1/chat/completions", &trace, tmp.path());
    args.extend(["--repeat".into(), "0".into()]);
    let err = request_sim::commands::replay(crate::support::replay_args(&strs(&args)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--repeat 0: a repeat set needs at least one run"),
        "{err}"
    );
    // A single replay front end refuses a repeat set it would not run.
    let err = try_replay(&strs(&args)).unwrap_err().to_string();
    assert!(err.contains("--repeat 0"), "{err}");
}

/// `replay --repeat 3` against llm-sim: a directory per repeat with its own seed and records,
/// the prefix cache reset before each, the set's intervals; `compare SET SET` uses Welch and
/// finds no difference; HTML pages for the set and the comparison.
#[test]
fn a_repeat_set_has_its_files_intervals_and_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = default_sim();
    let trace = write_trace(tmp.path(), "t.jsonl", 40, 200.0, 16, 6);
    let set_dir = tmp.path().join("set");
    let mut args = base_args(&sim.base_url(), &trace, tmp.path());
    // The set's paths are its own.
    let at = args.iter().position(|a| a == "--output-path").unwrap();
    args.drain(at..at + 2);
    args.extend([
        "--repeat".into(),
        "3".into(),
        "--result-dir".into(),
        set_dir.display().to_string(),
    ]);
    let code = request_sim::commands::replay(crate::support::replay_args(&strs(&args))).unwrap();
    assert_eq!(code, 0);
    let set = RepeatSet::read(&set_dir).unwrap();
    assert_eq!(set.repeats.len(), 3);
    let seeds: Vec<u64> = set.repeats.iter().map(|r| r.seed).collect();
    assert_eq!(seeds[0], 7);
    assert!(seeds[1] != seeds[0] && seeds[2] != seeds[1], "{seeds:?}");
    for r in &set.repeats {
        assert_eq!(r.cache, "reset", "{r:?}");
        let recs = read_records(Path::new(&r.records));
        assert_eq!(recs.len(), 40);
        assert!(Path::new(&r.dir).join("report.html").is_file());
    }
    let ttft = set.metric("mean_ttft_ms").unwrap();
    let c = ttft.ci.as_ref().unwrap();
    assert_eq!(c.n, 3);
    let vals: Vec<f64> = ttft.values.iter().map(|v| v.unwrap()).collect();
    assert!((c.mean - vals.iter().sum::<f64>() / 3.0).abs() < 1e-9);
    assert!(c.ci_low.unwrap() <= c.mean && c.mean <= c.ci_high.unwrap());
    let html = std::fs::read_to_string(set_dir.join("report.html")).unwrap();
    assert!(
        html.contains("95% CI low") && html.contains("Mean TTFT (ms)"),
        "{html}"
    );

    let page = tmp.path().join("cmp.html");
    let (code, out, err) = run_cli(
        [
            OsStr::new("compare"),
            set_dir.as_os_str(),
            set_dir.as_os_str(),
            "--html".as_ref(),
            page.as_os_str(),
            "--fail-if-worse".as_ref(),
            "p99_e2el_ms:0".as_ref(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Welch's t over the repeats"), "{out}");
    assert!(out.contains("no significant difference"), "{out}");
    assert!(!out.contains("significantly"), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("no significant difference"), "{html}");

    // --output-path cannot be given with --repeat: each repeat has its own.
    args.extend(["--output-path".into(), "x.jsonl".into()]);
    let err = request_sim::commands::replay(crate::support::replay_args(&strs(&args)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("--output-path is set per repeat"), "{err}");
}

#[test]
fn the_comparison_page_marks_worse_rows() {
    let a = synthetic(300, 9);
    let c = compare(&side("A", a.clone()), &side("B", slower(&a, 1.5))).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("c.html");
    request_sim::report::html::write_compare_html(&page, "a", "b", &c).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<tr class=\"bad\"><td>Mean TTFT (ms)</td>"),
        "{html}"
    );
    assert!(html.contains("+50.0%"), "{html}");
}

/// Issue #39 defect 7: a bootstrap interval in percent of A is that of each resample's own
/// change, so a latency's change never goes below -100% (dividing the interval of the
/// difference by A gave P90 TTFT [-513.4%, +2.0%] when a resample's A was far above A).
#[test]
fn a_relative_interval_of_a_latency_stays_above_minus_100_percent() {
    let with_ttft = |seed: u64, tail: f64| -> Vec<Record> {
        synthetic(12, seed)
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                r.ttft_ms = Some(if i == 10 { tail } else { 10.0 + i as f64 });
                r.itl_ms = None;
                r
            })
            .collect()
    };
    let a = with_ttft(21, 5000.0);
    let c = compare(&side("A", a.clone()), &side("B", with_ttft(21, 4000.0))).unwrap();
    let v = c.verdicts.iter().find(|v| v.key == "p90_ttft_ms").unwrap();
    let d = v.diff.unwrap();
    // The interval of the difference reaches far below -A ...
    assert!(d.ci_low < -v.a.unwrap(), "{d:?}");
    // ... but the change in percent does not go below -100%.
    let (lo, hi) = v.ci_pct().unwrap();
    assert!((-100.0..=hi).contains(&lo), "[{lo}, {hi}] {d:?}");
    let text = request_sim::report::render_verdicts(&c);
    assert!(!text.contains("-1000") && !text.contains("−"), "{text}");
}

/// A repeat set of `records` whose repeats' request throughputs are `thr` (all else equal).
fn open_loop_set(records: &[Record], thr: &[f64]) -> Side {
    let mut base = side("set", records.to_vec());
    base.summary.run.trace_path = Some("t.jsonl".into());
    let summaries: Vec<_> = thr
        .iter()
        .map(|t| {
            let mut s = base.summary.clone();
            s.request_throughput = *t;
            s
        })
        .collect();
    let runs = (1..=thr.len())
        .map(|i| RepeatRun {
            repeat: i,
            seed: i as u64,
            dir: String::new(),
            records: String::new(),
            summary: String::new(),
            cache: "reset".into(),
            exit_code: 0,
        })
        .collect();
    base.repeats = Some(RepeatSet::new(runs, &summaries));
    base
}

/// Issue #39 defect 7: the throughput of an open-loop replay is set by its schedule; a -0.1%
/// change between two repeat sets was called "significantly worse". It is shown, not ranked.
#[test]
fn open_loop_throughput_is_set_by_the_schedule_not_ranked() {
    let r: Vec<Record> = synthetic(60, 4)
        .into_iter()
        .map(|mut r| {
            r.itl_ms = None;
            r
        })
        .collect();
    let a = open_loop_set(&r, &[10.00, 10.001, 10.002]);
    let b = open_loop_set(&r, &[9.990, 9.991, 9.992]);
    let c = compare(&a, &b).unwrap();
    assert_eq!(c.method, Method::Welch);
    let v = c
        .verdicts
        .iter()
        .find(|v| v.key == "request_throughput")
        .unwrap();
    assert_eq!(v.method, Method::None, "{v:?}");
    assert_eq!(v.significant(), None, "{v:?}");
    let text = request_sim::report::render_verdicts(&c);
    assert!(!text.contains("significantly worse"), "{text}");
    assert!(
        text.contains("set by the schedule (open loop): not ranked"),
        "{text}"
    );
    assert!(text.contains("note: both runs are open loop"), "{text}");
    let mut sb = b.summary.clone();
    sb.request_throughput = 5.0;
    let table = request_sim::report::render_compare(&a.summary, &sb);
    let row = table
        .lines()
        .find(|l| l.starts_with("Request throughput"))
        .unwrap();
    assert!(row.trim_end().ends_with('%'), "{table}");
    assert!(table.contains("set by the schedule, not marked"), "{table}");
    let gate = FailIfWorse::parse("request_throughput:0").unwrap();
    assert!(gate.check(&c).unwrap_err().contains("set by the schedule"));
}

/// Issue #39 defect 7: records without ITL values (no `--record-itl`): a `--fail-if-worse`
/// gate on an ITL metric names that reason, and both tables show the ITL rows as `n/a`.
#[test]
fn records_without_itl_say_why_and_show_n_a_in_both_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let (pa, pb, _) = runs_without_itl(tmp.path(), 100);
    let (code, out, err) = compare_cli(&[
        pa.as_os_str(),
        pb.as_os_str(),
        "--fail-if-worse".as_ref(),
        "p99_itl_ms:5".as_ref(),
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("no ITL values in A and B: the records keep none (replay with --record-itl)"),
        "{err}"
    );
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("P99 ITL")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    for row in rows {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[3..5], ["n/a", "n/a"], "{row}");
    }
}

/// Issue #39 defect 7: two repeat sets get no side-by-side table of run values; `compare` says
/// why instead of leaving it out silently.
#[test]
fn two_repeat_sets_say_why_there_is_no_side_by_side_table() {
    let tmp = tempfile::tempdir().unwrap();
    let r: Vec<Record> = synthetic(60, 8)
        .into_iter()
        .map(|mut r| {
            r.itl_ms = None;
            r
        })
        .collect();
    let mut runs = Vec::new();
    let mut summaries = Vec::new();
    for i in 1..=2 {
        let dir = tmp.path().join(format!("repeat-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (records, summary) = (dir.join("records.jsonl"), dir.join("summary.json"));
        write_jsonl(&records, &r);
        let s = report_from_records(&records, &ReportConfig::default(), None).unwrap();
        std::fs::write(&summary, serde_json::to_string(&s).unwrap()).unwrap();
        summaries.push(s);
        runs.push(RepeatRun {
            repeat: i,
            seed: i as u64,
            dir: dir.display().to_string(),
            records: records.display().to_string(),
            summary: summary.display().to_string(),
            cache: "reset".into(),
            exit_code: 0,
        });
    }
    let set = RepeatSet::new(runs, &summaries);
    std::fs::write(
        tmp.path().join("repeats.json"),
        serde_json::to_string(&set).unwrap(),
    )
    .unwrap();
    let (code, out, err) = compare_cli(&[tmp.path().as_os_str(), tmp.path().as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("No side-by-side table of run values: A and B are each a repeat set"),
        "{out}"
    );
    assert!(out.contains("Welch's t over the repeats"), "{out}");
}
