//! The trace pipeline: the whole-trace load is its collected form, a streamed replay its
//! windowed form. Expected requests, sessions and counts for reorders, slices, sessions and
//! delays, in both forms.

use std::sync::Arc;

use request_sim::trace::{
    parse_reader, LoadOptions, Planned, ReorderWindow, SessionTurn, Trace, TraceError, TraceFormat,
    TraceStats, TraceStream,
};

/// Generic rows (the first row has no `session_id`, which would detect as mooncake).
fn generic() -> LoadOptions {
    LoadOptions {
        format: Some(TraceFormat::from_name("generic").unwrap()),
        ..Default::default()
    }
}

fn whole(text: &str, opts: &LoadOptions) -> Result<Trace, TraceError> {
    parse_reader("t.jsonl", text.as_bytes(), opts)
}

/// The requests of a streamed replay and its counts once it has ended.
fn streamed(
    text: &str,
    opts: &LoadOptions,
    window: ReorderWindow,
) -> Result<(Vec<Planned>, TraceStats), TraceError> {
    let s = TraceStream::from_reader(
        "t.jsonl",
        std::io::Cursor::new(text.to_owned()),
        opts,
        window,
    )?;
    let handle = s.stats_handle();
    let got = s.collect::<Result<Vec<_>, _>>()?;
    let stats = handle.lock().unwrap().clone();
    Ok((got, stats))
}

fn row(t: f64, session: Option<&str>) -> String {
    let s = session.map_or(String::new(), |s| format!(", \"session_id\": \"{s}\""));
    format!(
        "{{\"timestamp\": {t}, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1, 2]{s}}}\n"
    )
}

/// 12 rows out of time order by up to 30 ms, a repeated time, two sessions `a` and `b`.
///
/// In time order (line: ms, session): 2: 0 b, 1: 5, 5: 10 a, 3: 20 a, 4: 20, 7: 35, 6: 40 b,
/// 9: 50 a, 8: 60 b, 12: 65 b, 10: 70, 11: 90 a.
fn sessions_text() -> String {
    let ts = [
        5.0, 0.0, 20.0, 20.0, 10.0, 40.0, 35.0, 60.0, 50.0, 70.0, 90.0, 65.0,
    ];
    ts.iter()
        .enumerate()
        .map(|(i, &t)| row(t, (i % 3 != 0).then(|| ["a", "b"][i % 2])))
        .collect()
}

fn turn(id: &str, turn: u32, parent: Option<usize>, gap: Option<f64>) -> Option<SessionTurn> {
    Some(SessionTurn {
        id: Arc::from(id),
        turn,
        parent_index: parent,
        trace_gap_ms: gap,
        agent: None,
    })
}

fn lines(reqs: &[Planned]) -> Vec<usize> {
    reqs.iter().map(|p| p.req.line).collect()
}

fn times(reqs: &[Planned]) -> Vec<f64> {
    reqs.iter().map(|p| p.req.timestamp_ms).collect()
}

fn planned(t: &Trace) -> Vec<Planned> {
    request_sim::trace::pipeline::stream::planned(Arc::new(t.clone())).collect()
}

#[test]
fn reorder_rebase_and_session_turns() {
    let text = sessions_text();
    let t = whole(&text, &generic()).unwrap();
    let got = planned(&t);
    assert_eq!(lines(&got), vec![2, 1, 5, 3, 4, 7, 6, 9, 8, 12, 10, 11]);
    assert_eq!(
        times(&got),
        vec![0.0, 5.0, 10.0, 20.0, 20.0, 35.0, 40.0, 50.0, 60.0, 65.0, 70.0, 90.0]
    );
    let turns: Vec<_> = got.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(
        turns,
        vec![
            turn("b", 1, None, None),
            None,
            turn("a", 1, None, None),
            turn("a", 2, Some(2), Some(10.0)),
            None,
            None,
            turn("b", 2, Some(0), Some(40.0)),
            turn("a", 3, Some(3), Some(30.0)),
            turn("b", 3, Some(6), Some(20.0)),
            turn("b", 4, Some(8), Some(5.0)),
            None,
            turn("a", 4, Some(7), Some(40.0)),
        ]
    );
    let want_stats = TraceStats {
        rows: 12,
        repeated_timestamps: 1,
        decreasing_timestamps: 5,
        reordered: 5,
        ..Default::default()
    };
    assert_eq!(t.stats, want_stats);
    let s = &t.sessions.stats;
    assert_eq!(
        (s.sessions, s.turns, s.max_turns, s.cut_turns),
        (2, 8, 4, 0)
    );
    // Streamed through a window of 30 ms: the same requests and counts.
    let window = ReorderWindow { ms: 30.0, rows: 4 };
    let (streamed, stats) = streamed(&text, &generic(), window).unwrap();
    assert_eq!(lines(&streamed), lines(&got));
    assert_eq!(times(&streamed), times(&got));
    let turns_s: Vec<_> = streamed.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(turns_s, turns);
    assert_eq!(stats, want_stats);
}

#[test]
fn time_window_rebases_and_cuts_sessions() {
    let text = sessions_text();
    let opts = LoadOptions {
        start_ms: Some(10.0),
        end_ms: Some(70.0),
        ..generic()
    };
    let t = whole(&text, &opts).unwrap();
    let got = planned(&t);
    assert_eq!(lines(&got), vec![5, 3, 4, 7, 6, 9, 8, 12]);
    assert_eq!(
        times(&got),
        vec![0.0, 10.0, 10.0, 25.0, 30.0, 40.0, 50.0, 55.0]
    );
    let turns: Vec<_> = got.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(
        turns,
        vec![
            turn("a", 1, None, None),
            turn("a", 2, Some(0), Some(10.0)),
            None,
            None,
            // Its parent (line 2, at 0 ms) is before the window.
            turn("b", 2, None, None),
            turn("a", 3, Some(1), Some(30.0)),
            turn("b", 3, Some(4), Some(20.0)),
            turn("b", 4, Some(6), Some(5.0)),
        ]
    );
    let want_stats = TraceStats {
        rows: 12,
        outside_time_window: 4,
        repeated_timestamps: 1,
        decreasing_timestamps: 4,
        reordered: 4,
        ..Default::default()
    };
    assert_eq!(t.stats, want_stats);
    let s = &t.sessions;
    assert_eq!(
        (s.stats.sessions, s.stats.turns, s.stats.max_turns),
        (2, 6, 3)
    );
    assert_eq!((s.stats.cut_turns, s.stats.cut_sessions), (2, 2));
    assert_eq!(s.cut, vec![(Arc::from("a"), 1), (Arc::from("b"), 1)]);
    let window = ReorderWindow { ms: 30.0, rows: 4 };
    let (streamed, stats) = streamed(&text, &opts, window).unwrap();
    assert_eq!(lines(&streamed), lines(&got));
    assert_eq!(times(&streamed), times(&got));
    let turns_s: Vec<_> = streamed.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(turns_s, turns);
    assert_eq!(stats.outside_time_window, 4);
}

#[test]
fn max_requests_counts_the_whole_file_but_a_stream_stops_reading() {
    let text = sessions_text();
    let opts = LoadOptions {
        start_ms: Some(5.0),
        max_requests: Some(4),
        ..generic()
    };
    let t = whole(&text, &opts).unwrap();
    let got = planned(&t);
    assert_eq!(lines(&got), vec![1, 5, 3, 4]);
    assert_eq!(times(&got), vec![0.0, 5.0, 15.0, 15.0]);
    let turns: Vec<_> = got.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(
        turns,
        vec![
            None,
            turn("a", 1, None, None),
            turn("a", 2, Some(1), Some(10.0)),
            None
        ]
    );
    let flags = TraceStats {
        repeated_timestamps: 1,
        decreasing_timestamps: 1,
        reordered: 1,
        outside_time_window: 1,
        ..Default::default()
    };
    assert_eq!(
        t.stats,
        TraceStats {
            rows: 12,
            over_max_requests: 7,
            ..flags.clone()
        }
    );
    // Session `b` keeps no turn, so only `a`'s two later turns are cut.
    let s = &t.sessions.stats;
    assert_eq!(
        (s.sessions, s.turns, s.cut_turns, s.cut_sessions),
        (1, 2, 2, 1)
    );
    // The stream stops reading when the 4th request leaves the window (line 8 read last): the
    // 3 rows still held are counted, the rest of the file is not read.
    let window = ReorderWindow { ms: 30.0, rows: 4 };
    let (streamed, stats) = streamed(&text, &opts, window).unwrap();
    assert_eq!(lines(&streamed), lines(&got));
    assert_eq!(times(&streamed), times(&got));
    let turns_s: Vec<_> = streamed.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(turns_s, turns);
    assert_eq!(
        stats,
        TraceStats {
            rows: 8,
            over_max_requests: 3,
            partial: true,
            ..flags
        }
    );
}

#[test]
fn delays_resolve_in_file_order_before_the_reorder() {
    let m = r#""messages": [{"role": "user", "content": "x"}]"#;
    let text = [
        format!(r#"{{"session_id": "s1", "timestamp": 100, {m}}}"#),
        format!(r#"{{"session_id": "s2", "timestamp": 50, {m}}}"#),
        format!(r#"{{"session_id": "s1", "delay": 30, {m}}}"#),
        format!(r#"{{"session_id": "s2", "delay": 200, {m}}}"#),
        format!(r#"{{"session_id": "s1", "timestamp": 120, {m}}}"#),
        format!(r#"{{"session_id": "s1", "delay": 10, {m}}}"#),
    ]
    .join("\n");
    let t = whole(&text, &LoadOptions::default()).unwrap();
    let got = planned(&t);
    assert_eq!(lines(&got), vec![2, 1, 5, 3, 6, 4]);
    assert_eq!(times(&got), vec![0.0, 50.0, 70.0, 80.0, 80.0, 200.0]);
    let turns: Vec<_> = got.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(
        turns,
        vec![
            turn("s2", 1, None, None),
            turn("s1", 1, None, None),
            turn("s1", 2, Some(1), Some(20.0)),
            turn("s1", 3, Some(2), Some(30.0)),
            turn("s1", 4, Some(3), Some(10.0)),
            turn("s2", 2, Some(0), Some(200.0)),
        ]
    );
    assert!(t.chat(5).is_some());
    let (streamed, _) = streamed(&text, &LoadOptions::default(), ReorderWindow::default()).unwrap();
    assert_eq!(lines(&streamed), lines(&got));
    let turns_s: Vec<_> = streamed.iter().map(|p| p.turn.clone()).collect();
    assert_eq!(turns_s, turns);
}

#[test]
fn a_whole_load_reads_every_line_before_a_delay_error() {
    let text = r#"{"session_id": "s", "timestamp": 0, "messages": [{"role": "user", "content": "x"}]}
{"session_id": "new", "delay": 5, "messages": [{"role": "user", "content": "x"}]}
not json
"#;
    let e = whole(text, &LoadOptions::default()).unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    let e = streamed(text, &LoadOptions::default(), ReorderWindow::default()).unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
    assert!(e.to_string().contains("nothing to delay from"), "{e}");
}

#[test]
fn bailian_parents_may_come_later_and_turns_are_filled_in() {
    let text = "{\"chat_id\": 1, \"parent_chat_id\": 2, \"timestamp\": 0, \"input_length\": 16, \"output_length\": 1, \"hash_ids\": [1]}\n\
                {\"chat_id\": 2, \"timestamp\": 1, \"input_length\": 16, \"output_length\": 1, \"hash_ids\": [2]}\n\
                {\"chat_id\": 3, \"parent_chat_id\": 1, \"timestamp\": 2, \"input_length\": 16, \"output_length\": 1, \"hash_ids\": [3]}\n";
    let t = whole(text, &LoadOptions::default()).unwrap();
    let turns: Vec<_> = (0..3).map(|i| t.sessions.get(i).cloned()).collect();
    assert_eq!(
        turns,
        vec![
            turn("2", 1, Some(1), Some(-1000.0)),
            turn("2", 1, None, None),
            turn("2", 2, Some(0), Some(2000.0)),
        ]
    );
    let s = &t.sessions.stats;
    assert_eq!((s.sessions, s.turns, s.orphans), (1, 3, 0));
    // Loaded whole from a stream too.
    let stream = TraceStream::from_reader(
        "t.jsonl",
        std::io::Cursor::new(text.to_owned()),
        &LoadOptions::default(),
        ReorderWindow::default(),
    )
    .unwrap();
    assert!(stream.needs_whole());
    let w = stream.into_whole().unwrap();
    assert_eq!(w.sessions, t.sessions);
    assert_eq!(w.requests, t.requests);
}
