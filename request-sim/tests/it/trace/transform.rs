//! `transform` and the same options on a replay's trace: each option's effect read back from the
//! output (gaps unchanged, id spaces disjoint, seeds reproduce, rates within tolerance), the
//! synthesizer's fit, `analyze --against`, and the messages of bad values.

use std::collections::{BTreeMap, HashMap, HashSet};

use request_sim::analyze::{analyze, AnalyzeOptions};
use request_sim::trace::pipeline::synth::Fit;
use request_sim::trace::{
    parse_reader, Arrivals, LoadOptions, RateSeries, ReorderWindow, Reshape, Trace, TraceFormat,
    TraceStream,
};

use crate::support::*;

fn load(text: &str, reshape: Reshape) -> Trace {
    try_load(text, reshape).unwrap()
}

fn try_load(text: &str, reshape: Reshape) -> Result<Trace, request_sim::trace::TraceError> {
    let opts = LoadOptions {
        reshape,
        ..LoadOptions::default()
    };
    parse_reader("t.jsonl", text.as_bytes(), &opts)
}

/// The requests of `t` whose session id is in copy `k` (`#k` suffix; copy 0 has none).
fn copy_of(id: &str) -> u64 {
    id.rsplit_once('#').map_or(0, |(_, k)| k.parse().unwrap())
}

/// Session id -> (turn times, ms) of a trace, per copy.
fn session_times(t: &Trace) -> BTreeMap<String, Vec<f64>> {
    let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &t.requests {
        let id = t.sessions.get(r.index).unwrap().id.to_string();
        m.entry(id).or_default().push(r.timestamp_ms);
    }
    m
}

fn gaps(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A sub-trace of `t`: the requests `keep` selects, in order, re-indexed.
fn sub_trace(t: &Trace, keep: impl Fn(usize) -> bool) -> Trace {
    let mut out = t.clone();
    out.requests = t
        .requests
        .iter()
        .filter(|r| keep(r.index))
        .cloned()
        .enumerate()
        .map(|(i, mut r)| {
            r.index = i;
            r
        })
        .collect();
    out.sessions = Default::default();
    out
}

fn ideal(t: &Trace) -> f64 {
    analyze(t, &AnalyzeOptions::default())
        .prefix_cache
        .hit_ratio
}

#[test]
fn amplify_makes_copies_with_their_own_ids_and_the_same_gaps() {
    let text = conversation_trace(60, 600.0, 1, true);
    let orig = load(&text, Reshape::default());
    let amp = load(
        &text,
        Reshape {
            amplify: Some(4.0),
            seed: 9,
            ..Reshape::default()
        },
    );
    assert_eq!(amp.requests.len(), 4 * orig.requests.len());
    assert_eq!(amp.stats.amplified, 3 * orig.requests.len());
    let by_session = session_times(&amp);
    let orig_sessions = session_times(&orig);
    assert_eq!(by_session.len(), 4 * orig_sessions.len());
    // Each copy's sessions: the original's turn gaps exactly, all shifted by one phase.
    let mut phases: HashMap<u64, f64> = HashMap::new();
    for (id, times) in &by_session {
        let k = copy_of(id);
        let base = id.rsplit_once('#').map_or(id.as_str(), |(b, _)| b);
        let o = &orig_sessions[base];
        assert_eq!(gaps(times), gaps(o), "session {id}");
        let shift = times[0] - o[0];
        let p = *phases.entry(k).or_insert(shift);
        assert!((shift - p).abs() < 1e-6, "copy {k}: shift {shift} vs {p}");
    }
    assert_eq!(phases.len(), 4);
    // Copy 0 is the original; the other copies are shifted by distinct phases in [0, 10 s).
    let distinct: HashSet<u64> = phases.values().map(|p| (p * 1e3) as u64).collect();
    assert_eq!(distinct.len(), 4, "{phases:?}");
    assert!(phases.values().all(|&p| (0.0..10_000.0).contains(&p)));
    // Hash-id spaces are disjoint between copies.
    let mut ids_of: HashMap<u64, HashSet<u64>> = HashMap::new();
    for r in &amp.requests {
        let k = copy_of(&amp.sessions.get(r.index).unwrap().id);
        ids_of
            .entry(k)
            .or_default()
            .extend(r.hash_ids.ids().iter().copied());
    }
    for a in 0..4 {
        for b in a + 1..4 {
            assert!(ids_of[&a].is_disjoint(&ids_of[&b]), "copies {a} and {b}");
        }
    }
    // One copy has the original's ideal hit ratio; all four together too (nothing shared).
    let copy = |k: u64| sub_trace(&amp, |i| copy_of(&amp.sessions.get(i).unwrap().id) == k);
    let h = ideal(&orig);
    assert!(h > 0.3, "the test trace reuses prefixes: {h}");
    for k in 0..4 {
        assert!((ideal(&copy(k)) - h).abs() < 1e-12, "copy {k}");
    }
    assert!((ideal(&amp) - h).abs() < 1e-12);
}

#[test]
fn amplify_seeds_reproduce_and_differ() {
    let text = conversation_trace(30, 300.0, 2, false);
    let run = |seed| {
        let t = load(
            &text,
            Reshape {
                amplify: Some(3.0),
                seed,
                ..Reshape::default()
            },
        );
        t.requests
            .iter()
            .map(|r| (r.timestamp_ms, r.hash_ids.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn amplify_streamed_equals_whole() {
    let text = conversation_trace(40, 400.0, 3, true);
    let reshape = Reshape {
        amplify: Some(2.5),
        seed: 4,
        ..Reshape::default()
    };
    let whole = load(&text, reshape.clone());
    let opts = LoadOptions {
        reshape,
        ..LoadOptions::default()
    };
    let stream = TraceStream::from_reader(
        "t.jsonl",
        std::io::Cursor::new(text.clone()),
        &opts,
        ReorderWindow::default(),
    )
    .unwrap();
    let got: Vec<_> = stream.map(Result::unwrap).collect();
    assert_eq!(got.len(), whole.requests.len());
    for (p, r) in got.iter().zip(&whole.requests) {
        assert_eq!(p.req, *r);
        assert_eq!(p.turn.as_ref(), whole.sessions.get(r.index));
    }
}

#[test]
fn a_fractional_amplify_copies_whole_sessions() {
    let text = conversation_trace(200, 600.0, 5, true);
    let orig = load(&text, Reshape::default());
    let amp = load(
        &text,
        Reshape {
            amplify: Some(1.5),
            seed: 3,
            ..Reshape::default()
        },
    );
    let orig_sessions = session_times(&orig);
    let copies: Vec<String> = session_times(&amp)
        .into_iter()
        .filter(|(id, _)| copy_of(id) == 1)
        .map(|(id, times)| {
            let base = id.rsplit_once('#').unwrap().0.to_string();
            assert_eq!(times.len(), orig_sessions[&base].len(), "{id} is whole");
            base
        })
        .collect();
    let share = copies.len() as f64 / orig_sessions.len() as f64;
    assert!((0.35..0.65).contains(&share), "{share}");
    assert_eq!(
        amp.requests.len(),
        orig.requests.len() + amp.stats.amplified
    );
}

#[test]
fn sample_sessions_keeps_whole_sessions() {
    let text = conversation_trace(300, 600.0, 6, true);
    let orig = load(&text, Reshape::default());
    let sampled = load(
        &text,
        Reshape {
            sample_sessions: Some(0.3),
            seed: 11,
            ..Reshape::default()
        },
    );
    let o = session_times(&orig);
    let s = session_times(&sampled);
    for (id, times) in &s {
        assert_eq!(gaps(times), gaps(&o[id]), "{id} kept whole, gaps unchanged");
    }
    let share = s.len() as f64 / o.len() as f64;
    assert!((0.22..0.38).contains(&share), "{share}");
    assert_eq!(
        sampled.requests.len() + sampled.stats.sampled_out,
        orig.requests.len()
    );
}

#[test]
fn poisson_retime_gives_the_rate_and_keeps_turn_gaps() {
    let text = conversation_trace(1500, 600.0, 7, true);
    let orig = load(&text, Reshape::default());
    let re = load(
        &text,
        Reshape {
            retime: Some(Arrivals::Poisson { rate: 20.0 }),
            seed: 1,
            ..Reshape::default()
        },
    );
    assert_eq!(re.requests.len(), orig.requests.len());
    let o = session_times(&orig);
    for (id, times) in session_times(&re) {
        let g = gaps(&times);
        for (a, b) in g.iter().zip(gaps(&o[&id])) {
            assert!((a - b).abs() < 1e-6, "{id}: {a} vs {b}");
        }
    }
    // --rate is the rate of session starts (issue #39 defect 9): 20 session starts per second
    // within 10%.
    let starts: Vec<f64> = session_times(&re).values().map(|t| t[0]).collect();
    assert!(starts.len() >= 200, "{} sessions", starts.len());
    let span = starts.iter().cloned().fold(0.0, f64::max) / 1e3;
    let rate = starts.len() as f64 / span;
    assert!((rate / 20.0 - 1.0).abs() < 0.1, "{rate} session starts/s");
}

/// Issue #39 defect 9: `transform --retime poisson --rate 5` on a session trace wrote 300
/// requests over 96 s and said nothing. `--rate` is the rate of session starts: the sessions
/// start at 5/s, and the note gives the request rate of the new trace.
#[test]
fn retime_rate_on_sessions_is_session_starts_and_the_note_says_so() {
    let (dir, out, code, _, err) = transform_conversations(
        conversation_trace(300, 600.0, 11, true),
        &["--retime", "poisson", "--rate", "5"],
    );
    assert_eq!(code, 0, "{err}");
    let t = request_sim::trace::load(&out, &LoadOptions::default()).unwrap();
    let starts: Vec<f64> = session_times(&t).values().map(|t| t[0]).collect();
    assert!(starts.len() >= 40, "{} sessions", starts.len());
    let span = starts.iter().cloned().fold(0.0, f64::max) / 1e3;
    let rate = starts.len() as f64 / span;
    assert!((rate / 5.0 - 1.0).abs() < 0.35, "{rate} session starts/s");
    let first = t.requests[0].timestamp_ms;
    let last = t.requests[t.requests.len() - 1].timestamp_ms;
    let per_s = t.requests.len() as f64 / ((last - first) / 1e3);
    let note = "--rate 5: 5 session starts per second (the trace has sessions; their later turns keep their gaps); requests arrive at ";
    let said: f64 = err
        .split_once(note)
        .and_then(|(_, rest)| rest.split_once(" req/s on average"))
        .map(|(n, _)| n.parse().unwrap())
        .unwrap_or_else(|| panic!("{note} in\n{err}"));
    assert!((said - per_s).abs() < 0.06, "{said} vs {per_s}");
    // Without sessions every row is a session of one: --rate is the request rate, no note.
    let flat = dir.path().join("flat.jsonl");
    std::fs::write(&flat, conversation_trace(300, 600.0, 11, false)).unwrap();
    let (code, _, err) = transform_cli(&[
        flat.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--retime",
        "poisson",
        "--rate",
        "5",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("session starts per second"), "{err}");
}

/// CV of the gaps between sorted times.
fn cv(times: &[f64]) -> f64 {
    let g = gaps(times);
    let m = g.iter().sum::<f64>() / g.len() as f64;
    (g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64).sqrt() / m
}

#[test]
fn gamma_retime_has_the_burstiness_asked() {
    // No sessions: every request is a session of its own.
    let text = conversation_trace(2000, 600.0, 8, false);
    for c in [0.5, 2.0] {
        let re = load(
            &text,
            Reshape {
                retime: Some(Arrivals::Gamma { rate: 50.0, cv: c }),
                seed: 3,
                ..Reshape::default()
            },
        );
        let times: Vec<f64> = re.requests.iter().map(|r| r.timestamp_ms).collect();
        let got = cv(&times);
        assert!((got / c - 1.0).abs() < 0.15, "cv {got} for {c}");
        let rate = times.len() as f64 / (times[times.len() - 1] / 1e3);
        assert!((rate / 50.0 - 1.0).abs() < 0.12, "{rate}");
    }
}

#[test]
fn a_rate_series_shapes_the_arrivals() {
    let text = conversation_trace(1500, 600.0, 9, false);
    let n = load(&text, Reshape::default()).requests.len();
    // 10/s for the first 60 s, then 40/s.
    let series = RateSeries::parse("r.txt", "0 10\n60 10\n60.001 40\n").unwrap();
    let re = load(
        &text,
        Reshape {
            retime: Some(Arrivals::Series(series)),
            seed: 2,
            ..Reshape::default()
        },
    );
    let first = re
        .requests
        .iter()
        .filter(|r| r.timestamp_ms < 60_000.0)
        .count() as f64;
    assert!(
        (first / 600.0 - 1.0).abs() < 0.15,
        "{first} in the first minute"
    );
    let end = re.requests.last().unwrap().timestamp_ms / 1e3;
    let expect = 60.0 + (n as f64 - 600.0) / 40.0;
    assert!(
        (end / expect - 1.0).abs() < 0.1,
        "{end} s, expected {expect}"
    );
}

#[test]
fn max_idle_gap_caps_think_times_only() {
    let text = conversation_trace(100, 600.0, 10, true);
    let orig = load(&text, Reshape::default());
    let capped = load(
        &text,
        Reshape {
            max_idle_gap_ms: Some(30_000.0),
            ..Reshape::default()
        },
    );
    let o = session_times(&orig);
    let mut n_capped = 0;
    for (id, times) in session_times(&capped) {
        assert_eq!(times[0], o[&id][0], "{id} starts where it did");
        for (a, b) in gaps(&times).iter().zip(gaps(&o[&id])) {
            let want = b.min(30_000.0);
            assert!((a - want).abs() < 1e-6, "{id}: {a} vs {want}");
            n_capped += usize::from(b > 30_000.0);
        }
    }
    assert!(n_capped > 10);
    assert_eq!(capped.stats.capped_gaps, n_capped);
    let think = capped
        .sessions
        .turns
        .iter()
        .flatten()
        .filter_map(|t| t.trace_gap_ms)
        .fold(0.0, f64::max);
    assert!(think <= 30_000.0 + 1e-6, "{think}");
}

#[test]
fn prefix_and_prompt_scales_grow_blocks_and_keep_sharing() {
    let text = "\
{\"timestamp\": 0, \"input_length\": 1200, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}
{\"timestamp\": 10, \"input_length\": 1400, \"output_length\": 5, \"hash_ids\": [1, 2, 4]}
{\"timestamp\": 20, \"input_length\": 300, \"output_length\": 5, \"hash_ids\": [9]}
";
    let t = load(
        text,
        Reshape {
            prefix_scale: Some(2.0),
            prompt_scale: Some(3.0),
            ..Reshape::default()
        },
    );
    let r = &t.requests;
    // Shared blocks 1, 2 doubled (1024 tokens each), the unique partial block 3 tripled: two
    // full blocks and its 176 tokens.
    assert_eq!(r[0].hash_ids.len(), 2 * 2 + 3);
    assert_eq!(r[0].input_length, 4 * 512 + 2 * 512 + 176);
    assert_eq!(r[1].input_length, 4 * 512 + 2 * 512 + 376);
    assert_eq!(
        r[0].hash_ids.ids()[..4],
        r[1].hash_ids.ids()[..4],
        "the prefix stays shared"
    );
    assert_ne!(r[0].hash_ids.ids()[4..], r[1].hash_ids.ids()[4..]);
    assert_eq!(r[2].input_length, 2 * 512 + 300);
    // Half the size: about every other shared block (a seeded coin per block), still shared
    // by both requests.
    let shared: Vec<String> = (1..=40).map(|i| i.to_string()).collect();
    let two = format!(
        "{{\"timestamp\": 0, \"input_length\": 20900, \"output_length\": 5, \"hash_ids\": [{s}, 100]}}\n\
         {{\"timestamp\": 10, \"input_length\": 20900, \"output_length\": 5, \"hash_ids\": [{s}, 101]}}\n",
        s = shared.join(", ")
    );
    let half = load(
        &two,
        Reshape {
            prefix_scale: Some(0.5),
            ..Reshape::default()
        },
    );
    let (a, b) = (
        half.requests[0].hash_ids.to_vec(),
        half.requests[1].hash_ids.to_vec(),
    );
    assert_eq!(a.len(), b.len());
    let kept = a.len() - 1;
    assert!((12..=28).contains(&kept), "{kept} of 40 shared blocks");
    assert_eq!(a[..kept], b[..kept], "still shared");
    assert_eq!(half.requests[0].input_length, kept as u32 * 512 + 420);
}

#[test]
fn max_input_length_cuts_prompts() {
    let text = conversation_trace(50, 100.0, 12, false);
    let t = load(
        &text,
        Reshape {
            max_input_length: Some(1000),
            ..Reshape::default()
        },
    );
    assert!(t.requests.iter().all(|r| r.input_length <= 1000));
    assert!(t.requests.iter().all(|r| r.hash_ids.len() <= 2));
    assert!(t.stats.capped_inputs > 0);
}

/// `request-sim transform` end to end: files written, read back, analyzed side by side.
#[test]
fn transform_command_writes_a_trace_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, conversation_trace(80, 300.0, 13, true)).unwrap();
    let out = dir.path().join("out.jsonl");
    let (code, _, err) = run_cli(
        [
            "transform",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--amplify",
            "2",
            "--time-window",
            "0..200",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("wrote"), "{err}");
    let back = request_sim::trace::load(&out, &LoadOptions::default()).unwrap();
    assert_eq!(back.format, TraceFormat::from_name("generic").unwrap());
    assert!(back.requests.iter().all(|r| r.timestamp_ms < 200_000.0));
    let ids: HashSet<&str> = back
        .sessions
        .turns
        .iter()
        .flatten()
        .map(|t| &*t.id)
        .collect();
    assert!(ids.iter().any(|i| i.ends_with("#1")));
    // Side by side.
    let (code, stdout, err) = run_cli(
        [
            "analyze",
            input.to_str().unwrap(),
            "--against",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    for row in [
        "Mean rate (req/s)",
        "Burstiness",
        "Input P90",
        "Ideal hit ratio",
        "LRU hit ratio at",
        "Think time P50",
    ] {
        assert!(stdout.contains(row), "{row} in\n{stdout}");
    }
}

#[test]
fn bad_values_are_refused_with_the_flag_or_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, conversation_trace(10, 100.0, 14, false)).unwrap();
    let series = dir.path().join("rates.txt");
    std::fs::write(&series, "# s rate\n0 5\n30 -1\n").unwrap();
    let out = dir.path().join("out.jsonl");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--prefix-scale", "-2"],
            "--prefix-scale must be a number > 0, got -2",
        ),
        (
            vec!["--prompt-scale", "0"],
            "--prompt-scale must be a number > 0",
        ),
        (
            vec!["--retime", "poisson", "--rate", "0"],
            "--rate must be a number of session starts (requests, on a trace without sessions) per second > 0, got 0",
        ),
        (vec!["--retime", "poisson"], "--retime needs --rate"),
        (vec!["--rate", "3"], "--rate needs --retime"),
        (
            vec!["--retime", "gamma", "--rate", "2", "--burstiness", "0"],
            "--burstiness must be a number > 0",
        ),
        (
            vec!["--rate-series", series.to_str().unwrap()],
            "rates.txt:3: the rate must be a number >= 0, got \"-1\"",
        ),
        (
            vec!["--sample-sessions", "1.5"],
            "--sample-sessions must be in (0, 1]",
        ),
        (vec!["--amplify", "-1"], "--amplify must be a number > 0"),
        (
            vec!["--max-idle-gap", "-5"],
            "--max-idle-gap must be a number of seconds >= 0",
        ),
        (
            vec!["--time-window", "50..10"],
            "the end must be after the start",
        ),
        (
            vec!["--time-window", "5000..6000"],
            "no request in the time window",
        ),
        (
            vec!["--synthesize", "--duration", "0"],
            "--duration must be a number of seconds > 0",
        ),
        (
            vec!["--synthesize", "--duration", "10", "--amplify", "2"],
            "--synthesize takes --duration",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec![
            "transform",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend(&flags);
        let (code, _, err) = run_cli(&args, &[]);
        assert_ne!(code, 0, "{flags:?} refused");
        assert!(err.contains(want), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
    }
    // The same flags on a replay are refused by its settings.
    let e = config(&["--dataset-path", input.to_str().unwrap(), "--amplify", "0"]).unwrap_err();
    assert!(
        e.to_string().contains("--amplify must be a number > 0"),
        "{e}"
    );
    let e = config(&[
        "--dataset-path",
        input.to_str().unwrap(),
        "--time-window",
        "1..2",
        "--start-ms",
        "5",
    ])
    .unwrap_err();
    assert!(e.to_string().contains("--time-window"), "{e}");
}

/// The same options on `replay`: an amplified, re-timed trace replays against the built-in
/// simulator, every request of it once.
#[test]
fn replay_takes_the_transform_options() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, conversation_trace(20, 20.0, 15, true)).unwrap();
    let n = load(
        &std::fs::read_to_string(&input).unwrap(),
        Reshape::default(),
    )
    .requests
    .len();
    let out = dir.path().join("rec.jsonl");
    let o = replay(&[
        "--dataset-path",
        input.to_str().unwrap(),
        "--amplify",
        "2",
        "--retime",
        "poisson",
        "--rate",
        "200",
        "--max-idle-gap",
        "0.05",
        "--output-path",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.exit_code, 0);
    let records = read_records(&out);
    assert_one_record_per_index(&records, 2 * n);
}

#[test]
fn synthesis_fits_rate_lengths_and_reuse() {
    let text = conversation_trace(1500, 1800.0, 16, false);
    let orig = load(&text, Reshape::default());
    let fit = Fit::of(&orig);
    let gen = |seed: u64, duration: f64, rate: Option<f64>| {
        let mut out = Vec::new();
        fit.generate(duration, rate, seed, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    // The same span as the trace (its sessions run past the last start).
    let span = fit.span_s + 1e-3;
    let a = gen(1, span, None);
    assert_eq!(a, gen(1, span, None), "the seed reproduces it");
    assert_ne!(a, gen(2, span, None));
    let synth = load(&a, Reshape::default());
    let (ao, as_) = (
        analyze(&orig, &AnalyzeOptions::default()),
        analyze(&synth, &AnalyzeOptions::default()),
    );
    let rel = |x: f64, y: f64| (y / x - 1.0).abs();
    assert!(
        rel(ao.mean_rate_per_s.unwrap(), as_.mean_rate_per_s.unwrap()) < 0.05,
        "{:?} vs {:?}",
        ao.mean_rate_per_s,
        as_.mean_rate_per_s
    );
    for p in [50.0, 90.0, 99.0] {
        let (x, y) = (
            ao.input_length.percentiles.get(p).unwrap(),
            as_.input_length.percentiles.get(p).unwrap(),
        );
        assert!(rel(x, y) < 0.05, "input p{p}: {x} vs {y}");
        let (x, y) = (
            ao.output_length.percentiles.get(p).unwrap(),
            as_.output_length.percentiles.get(p).unwrap(),
        );
        assert!(rel(x, y) < 0.05, "output p{p}: {x} vs {y}");
    }
    let (x, y) = (ao.prefix_cache.hit_ratio, as_.prefix_cache.hit_ratio);
    assert!((x - y).abs() < 0.02, "ideal hit ratio {x} vs {y}");
    let sizes: Vec<u64> = ao.lru_sweep.iter().map(|p| p.capacity_tokens).collect();
    let lru = analyze(
        &synth,
        &AnalyzeOptions {
            cache_sizes_tokens: sizes,
            ..AnalyzeOptions::default()
        },
    );
    // 8 pp on this small, strictly chained trace (its mid-size LRU hits come out about 6 pp
    // high, a known gap); the Mooncake conversation trace's curve is within 2 pp
    // (docs/transform.md).
    for (p, q) in ao.lru_sweep.iter().zip(&lru.lru_sweep) {
        assert!(
            (p.hit_ratio - q.hit_ratio).abs() < 0.08,
            "LRU at {} tokens: {} vs {}",
            p.capacity_tokens,
            p.hit_ratio,
            q.hit_ratio
        );
    }
    // Ten times the rate for the same time: ten times the requests, ids still numbered densely.
    let fast = load(
        &gen(3, 600.0, Some(10.0 * fit.mean_rate())),
        Reshape::default(),
    );
    let want = 10.0 * fit.mean_rate() * 600.0;
    assert!(
        rel(want, fast.requests.len() as f64) < 0.1,
        "{} requests, expected {want}",
        fast.requests.len()
    );
}

/// The fixture of interleaved conversations without session ids: A (lines 1, 3, 7, 8, 9, with
/// a fork at 7/8: two turns extend line 3), B (2, 5), C (4: its only full block is the one every
/// request shares), D (6: shares only that block), E (10, and 11: a branch sharing the first
/// three of E's five blocks, which is no turn of E's, and 12: the branch's next turn).
const CONVERSATIONS: &str = include_str!("../../data/traces/conversations_no_sessions.jsonl");

/// The session id of every request of `t`, in line order.
fn sessions_by_line(t: &Trace) -> Vec<(usize, String)> {
    let mut v: Vec<(usize, String)> = t
        .requests
        .iter()
        .map(|r| (r.line, t.sessions.get(r.index).unwrap().id.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn infer_sessions_finds_interleaved_conversations_and_forks() {
    let reshape = Reshape {
        infer_sessions: true,
        ..Reshape::default()
    };
    let t = load(CONVERSATIONS, reshape.clone());
    let got = sessions_by_line(&t);
    let name = |line: usize| got.iter().find(|(l, _)| *l == line).unwrap().1.clone();
    // Same session: A's turns (a later turn fills the partial last block of the one before,
    // so its ids extend only the full blocks), the fork, and the turn after the fork.
    for line in [3, 7, 8, 9] {
        assert_eq!(name(line), name(1), "line {line} continues line 1: {got:?}");
    }
    assert_eq!(name(5), name(2), "{got:?}");
    // The branch and its next turn join E.
    for line in [11, 12] {
        assert_eq!(
            name(line),
            name(10),
            "line {line} branches from line 10: {got:?}"
        );
    }
    // C and D start sessions of their own: sharing only the first block is not a next turn.
    let distinct: HashSet<String> = [1, 2, 4, 6, 10].into_iter().map(name).collect();
    assert_eq!(distinct.len(), 5, "{got:?}");
    assert_eq!(
        (
            t.stats.inferred_sessions,
            t.stats.inferred_multi_turn,
            t.stats.inferred_branches
        ),
        (5, 3, 1)
    );
    // Turns in order within A.
    let turns: Vec<u32> = [1, 3, 7, 8, 9]
        .into_iter()
        .map(|line| {
            let r = t.requests.iter().find(|r| r.line == line).unwrap();
            t.sessions.get(r.index).unwrap().turn
        })
        .collect();
    assert_eq!(turns, vec![1, 2, 3, 4, 5]);
    // The same streamed (a replay reads it so).
    let opts = LoadOptions {
        reshape: reshape.clone(),
        ..LoadOptions::default()
    };
    let stream = TraceStream::from_reader(
        "t.jsonl",
        std::io::Cursor::new(CONVERSATIONS),
        &opts,
        ReorderWindow::default(),
    )
    .unwrap();
    let mut streamed: Vec<(usize, String)> = stream
        .map(Result::unwrap)
        .map(|p| (p.req.line, p.turn.unwrap().id.to_string()))
        .collect();
    streamed.sort();
    assert_eq!(streamed, got);
    // Amplified: each copy has the same sessions, in its own space.
    let amp = load(
        CONVERSATIONS,
        Reshape {
            amplify: Some(2.0),
            ..reshape
        },
    );
    let per_copy = |k: u64| {
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for r in &amp.requests {
            let id = amp.sessions.get(r.index).unwrap().id.to_string();
            if copy_of(&id) == k {
                groups.entry(id).or_default().push(r.line);
            }
        }
        let mut v: Vec<Vec<usize>> = groups.into_values().collect();
        v.sort();
        v
    };
    assert_eq!(per_copy(0), per_copy(1));
    assert_eq!(per_copy(0).len(), 5);
}

#[test]
fn infer_sessions_leaves_a_trace_with_sessions_alone_and_says_so() {
    let text = conversation_trace(6, 30.0, 3, true);
    let plain = load(&text, Reshape::default());
    let inferred = load(
        &text,
        Reshape {
            infer_sessions: true,
            ..Reshape::default()
        },
    );
    assert_eq!(inferred.sessions, plain.sessions);
    assert_eq!(inferred.stats.infer_had_session, plain.requests.len());
    assert_eq!(inferred.stats.inferred_sessions, 0);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, &text).unwrap();
    let out = dir.path().join("out.jsonl");
    let infer = |input: &std::path::Path| {
        run_cli(
            [
                "transform",
                input.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--infer-sessions",
            ],
            &[],
        )
    };
    let (code, _, err) = infer(&input);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "0 sessions inferred from hash ids (0 with more than one turn; branches joined to the conversation they share a prefix with: 0); {} rows already had a session and kept it",
            plain.requests.len()
        )),
        "{err}"
    );
    // The fixture without sessions: the report counts them, the written trace carries them.
    let input = dir.path().join("conv.jsonl");
    std::fs::write(&input, CONVERSATIONS).unwrap();
    let (code, _, err) = infer(&input);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "5 sessions inferred from hash ids (3 with more than one turn; branches joined to the conversation they share a prefix with: 1)"
        ),
        "{err}"
    );
    let back = request_sim::trace::load(&out, &LoadOptions::default()).unwrap();
    assert_eq!(back.sessions.stats.sessions, 5);
}

#[test]
fn replay_infers_sessions_too() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("conv.jsonl");
    std::fs::write(&input, CONVERSATIONS).unwrap();
    let out = dir.path().join("rec.jsonl");
    let o = replay(&[
        "--dataset-path",
        input.to_str().unwrap(),
        "--infer-sessions",
        "--scale-factor",
        "20",
        "--output-path",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.exit_code, 0);
    let records = read_records_by_index(&out);
    assert_one_record_per_index(&records, 12);
    let sessions: HashSet<&str> = records
        .iter()
        .filter_map(|r| r.session_id.as_deref())
        .collect();
    assert_eq!(sessions.len(), 5, "{sessions:?}");
    assert!(records.iter().all(|r| r.session_id.is_some()));
}

/// `request-sim transform ARGS`: exit code, stdout, stderr.
fn transform_cli(args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["transform"];
    argv.extend_from_slice(args);
    run_cli(argv, &[])
}

/// `trace` written to `in.jsonl` of a new temporary directory, then
/// `transform in.jsonl -o out.jsonl ARGS`: the directory (kept while the test reads it), the
/// output's path, the exit code, stdout and stderr.
fn transform_conversations(
    trace: String,
    args: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, trace).unwrap();
    let out = dir.path().join("out.jsonl");
    let mut argv = vec![input.to_str().unwrap(), "-o", out.to_str().unwrap()];
    argv.extend_from_slice(args);
    let (code, stdout, stderr) = transform_cli(&argv);
    (dir, out, code, stdout, stderr)
}

/// Issue #39 defect 8: `--synthesize --compare` prints the fitted and the new trace side by
/// side (it printed nothing); with `-o -` it is refused (the new trace is read back).
#[test]
fn synthesize_compare_prints_both_traces_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, conversation_trace(40, 120.0, 5, true)).unwrap();
    let out = dir.path().join("synth.jsonl");
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let (code, stdout, err) =
        transform_cli(&[i, "-o", o, "--synthesize", "--duration", "60", "--compare"]);
    assert_eq!(code, 0, "{err}");
    for row in [
        "Mean rate (req/s)",
        "Input P90",
        "Ideal hit ratio",
        "synth.jsonl",
    ] {
        assert!(stdout.contains(row), "{row} in\n{stdout}");
    }
    let (code, _, err) = transform_cli(&[
        i,
        "-o",
        "-",
        "--synthesize",
        "--duration",
        "60",
        "--compare",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("give -o a file, not `-`"), "{err}");
}

/// Issue #39 defect 8: `--duration` without `--synthesize` did nothing; it is refused.
#[test]
fn duration_without_synthesize_is_refused() {
    let (_dir, out, code, _, err) =
        transform_conversations(conversation_trace(10, 60.0, 5, true), &["--duration", "10"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--duration 10 is the length of a --synthesize trace")
            && err.contains("--time-window"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Issue #39 defect 8: `--synthesize --infer-sessions` ignored the inference; it is refused.
#[test]
fn synthesize_refuses_infer_sessions() {
    let (_dir, out, code, _, err) = transform_conversations(
        conversation_trace(10, 60.0, 5, true),
        &["--synthesize", "--duration", "10", "--infer-sessions"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--infer-sessions reshapes an existing trace: transform it first"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Issue #39 defect 8: `--max-idle-gap` on a trace without sessions caps nothing, and says so.
#[test]
fn max_idle_gap_without_sessions_says_nothing_was_capped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let note = "--max-idle-gap 5: the trace has no sessions, so nothing was capped";
    let trace = trace_fixture("mooncake.jsonl");
    let run = |input: &str| {
        let (code, _, err) =
            transform_cli(&[input, "-o", out.to_str().unwrap(), "--max-idle-gap", "5"]);
        assert_eq!(code, 0, "{err}");
        err
    };
    let err = run(trace.to_str().unwrap());
    assert!(err.contains(note), "{err}");
    // A trace with sessions: no note.
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, conversation_trace(10, 60.0, 5, true)).unwrap();
    let err = run(input.to_str().unwrap());
    assert!(!err.contains("no sessions"), "{err}");
}
