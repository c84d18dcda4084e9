//! Sessions and `messages` traces: loading, linking, slicing and bad input (file:line).

use request_sim::trace::{parse_reader, LoadOptions, Trace, TraceError, TraceFormat};

fn parse(text: &str, opts: &LoadOptions) -> Result<Trace, TraceError> {
    parse_reader("t.jsonl", text.as_bytes(), opts)
}

fn err(text: &str) -> String {
    parse(text, &LoadOptions::default())
        .unwrap_err()
        .to_string()
}

fn bailian(chat: i64, parent: i64, t_s: f64) -> String {
    format!(
        "{{\"chat_id\": {chat}, \"parent_chat_id\": {parent}, \"timestamp\": {t_s}, \"input_length\": 32, \"output_length\": 4, \"hash_ids\": [{chat}, {}]}}\n",
        chat + 1000
    )
}

#[test]
fn bailian_chains_are_sessions_with_orphans_counted() {
    let text = [
        bailian(1, -1, 0.0),
        bailian(2, 1, 1.0),
        bailian(5, 99, 1.5), // orphan: parent 99 not in the file
        bailian(3, 2, 3.0),
        bailian(6, 5, 4.0),
    ]
    .concat();
    let t = parse(&text, &LoadOptions::default()).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("bailian").unwrap());
    let s = &t.sessions;
    assert_eq!(
        (
            s.stats.sessions,
            s.stats.turns,
            s.stats.max_turns,
            s.stats.orphans
        ),
        (2, 5, 3, 1)
    );
    let third = s.get(3).unwrap();
    assert_eq!(&*third.id, "1");
    assert_eq!(third.parent_index, Some(1));
    assert_eq!(third.trace_gap_ms, Some(2000.0));
    assert_eq!(s.key(4), Some("5"));
    assert_eq!(s.get(2).unwrap().parent_index, None);
    assert_eq!(s.get(0).unwrap().turn, 1);
    assert_eq!(s.get(3).unwrap().turn, 3);
}

#[test]
fn slicing_counts_cut_turns_and_drops_sliced_parents() {
    let text = [
        bailian(1, -1, 0.0),
        bailian(2, 1, 1.0),
        bailian(3, 2, 2.0),
        bailian(7, -1, 2.5),
    ]
    .concat();
    let opts = LoadOptions {
        start_ms: Some(500.0),
        ..Default::default()
    };
    let t = parse(&text, &opts).unwrap();
    assert_eq!(t.requests.len(), 3);
    let s = &t.sessions;
    assert_eq!(s.get(0).unwrap().parent_index, None);
    assert_eq!(s.get(0).unwrap().trace_gap_ms, None);
    assert_eq!(s.get(1).unwrap().parent_index, Some(0));
    assert_eq!((s.stats.cut_turns, s.stats.cut_sessions), (1, 1));
    // Per session, so a shard can count its own.
    assert_eq!(s.cut, vec![(std::sync::Arc::from("1"), 1)]);
    assert_eq!(s.cut_in(|_| true), (1, 1));
    assert_eq!(s.cut_in(|id| id != "1"), (0, 0));
    let opts = LoadOptions {
        max_requests: Some(2),
        ..Default::default()
    };
    let t = parse(&text, &opts).unwrap();
    assert_eq!(
        (t.sessions.stats.cut_turns, t.sessions.stats.sessions),
        (1, 1)
    );
}

#[test]
fn parent_cycle_is_a_line_error() {
    let text = [bailian(1, -1, 0.0), bailian(2, 3, 1.0), bailian(3, 2, 2.0)].concat();
    let e = err(&text);
    assert!(
        e.starts_with("t.jsonl:2: field `parent_chat_id`: the parent chain loops back"),
        "{e}"
    );
    assert!(e.contains("2 -> 3 -> 2"), "{e}");
    let own = bailian(4, 4, 0.0);
    let e = err(&own);
    assert!(e.starts_with("t.jsonl:1: field `parent_chat_id`"), "{e}");
}

#[test]
fn generic_rows_with_session_ids() {
    let text = "\
{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"a\"}
{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}
{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 2, \"session_id\": \"a\"}
{\"timestamp\": 12, \"input_length\": 10, \"output_length\": 2, \"session_id\": 42}
";
    let t = parse(text, &LoadOptions::default()).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("generic").unwrap());
    let s = &t.sessions;
    assert_eq!((s.stats.sessions, s.stats.turns), (2, 3));
    assert!(s.get(1).is_none());
    let a2 = s.get(2).unwrap();
    assert_eq!(
        (&*a2.id, a2.turn, a2.parent_index, a2.trace_gap_ms),
        ("a", 2, Some(0), Some(9.0))
    );
    assert_eq!(s.key(3), Some("42"));
    let a = request_sim::analyze::analyze(&t, &Default::default());
    let st = a.sessions.expect("analyze reports session_id sessions");
    assert_eq!(
        (
            st.sessions,
            st.multi_turn_sessions,
            st.max_turns_per_session
        ),
        (2, 1, 2)
    );
    let e =
        err("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"session_id\": [1]}\n");
    assert_eq!(
        e,
        "t.jsonl:1: field `session_id`: expected a non-empty string or an integer, found an array"
    );
}

#[test]
fn messages_rows_keep_their_payload_and_resolve_delays() {
    let text = r#"{"session_id": "s1", "timestamp": 100, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "weather?"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}], "output_length": 20, "extra": {"temperature": 0.5}}
{"session_id": "s2", "timestamp": 150, "messages": [{"role": "user", "content": "hi"}]}
{"session_id": "s1", "delay": 250, "messages": [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}
"#;
    let t = parse(text, &LoadOptions::default()).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("messages").unwrap());
    let ts: Vec<f64> = t.requests.iter().map(|r| r.timestamp_ms).collect();
    assert_eq!(ts, vec![0.0, 50.0, 250.0]);
    let turn2 = t.sessions.get(2).unwrap();
    assert_eq!(
        (turn2.turn, turn2.parent_index, turn2.trace_gap_ms),
        (2, Some(0), Some(250.0))
    );
    let c = t.chat(0).unwrap();
    assert_eq!(c.max_tokens, Some(20));
    assert_eq!(
        c.tools.as_ref().unwrap()[0]["function"]["name"],
        "get_weather"
    );
    assert_eq!(c.messages[1]["content"][1]["image_url"]["url"], "data:x");
    assert_eq!(c.extra.as_ref().unwrap()["temperature"], 0.5);
    assert_eq!(t.chat(1).unwrap().max_tokens, None);
    assert_eq!(t.chat(2).unwrap().messages[2]["tool_call_id"], "c1");
}

#[test]
fn bad_messages_rows_name_file_and_line() {
    let ok =
        r#"{"session_id": "s", "timestamp": 0, "messages": [{"role": "user", "content": "x"}]}"#;
    let cases = [
        (
            r#"{"timestamp": 0, "messages": [{"role": "user", "content": 7}]}"#,
            "t.jsonl:2: field `messages[0].content`: expected a string or an array of content parts, found the number 7",
        ),
        (
            r#"{"timestamp": 0, "tools": [{"type": "function"}]}"#,
            "t.jsonl:2: field `tools`: is only valid with `messages` (this row has none)",
        ),
        (
            r#"{"timestamp": 0, "input_length": 5, "messages": [{"role": "user", "content": "x"}]}"#,
            "t.jsonl:2: field `input_length`: cannot be combined with `messages` (a messages row is sent as given)",
        ),
        (
            r#"{"delay": 5, "messages": [{"role": "user", "content": "x"}]}"#,
            "t.jsonl:2: field `delay`: needs a `session_id` (it counts from the previous turn of the session)",
        ),
        (
            r#"{"session_id": "new", "delay": 5, "messages": [{"role": "user", "content": "x"}]}"#,
            "t.jsonl:2: field `delay`: this is the first turn of session \"new\": nothing to delay from (give it a `timestamp`)",
        ),
        (
            r#"{"timestamp": 0, "messages": [{"role": "user", "content": "x"}], "extra": [1]}"#,
            "t.jsonl:2: field `extra`: expected an object, found an array",
        ),
    ];
    for (row, want) in cases {
        let text = format!("{ok}\n{row}\n");
        assert_eq!(err(&text), want);
    }
    // Forced format: a generic row read as messages names the missing field.
    let opts = LoadOptions {
        format: Some(TraceFormat::from_name("messages").unwrap()),
        ..Default::default()
    };
    let e = parse(
        "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n",
        &opts,
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("t.jsonl:1: missing field `messages`"), "{e}");
}
