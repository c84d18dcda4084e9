//! Parity with real vLLM 0.32 (issue #38): llm-sim is sent the requests that
//! `scripts/vllm-record.sh` sent a real vLLM, and must answer in the same SHAPES as the recorded
//! answers in `request-sim/tests/data/vllm-0.32/`: the key names and nesting of every body,
//! chunk and usage block with each value's JSON type (ids, timestamps and text are not
//! compared), the order of the kinds of SSE events, the HTTP status and shape of errors, the
//! `/metrics` families our code reads (type, label names, histogram buckets,
//! `vllm:cache_config_info` labels) and the msgpack structure of KV events in both ZeroMQ forms.
//! Where llm-sim differs on purpose, the difference is listed in [`KEPT`] and in
//! docs/llm-sim.md ("Differences from vLLM 0.32").

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::*;
use llm_sim::SimConfig;
use serde_json::{json, Value};
use zeromq::{Socket, SocketRecv};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../request-sim/tests/data/vllm-0.32")
}

fn fixture(name: &str) -> String {
    let p = data_dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Paths (file, then the shape path) where llm-sim's shape differs from vLLM's on purpose;
/// each is explained in docs/llm-sim.md.
const KEPT: &[(&str, &str)] = &[
    // The tool call's first chunk carries its first arguments fragment with the name (one
    // output token per chunk); vLLM's named call streamed its name alone, then one chunk of
    // arguments (the last).
    (
        "chat_stream_tool_named.sse",
        ".choices[].delta.tool_calls[].function.arguments",
    ),
];

/// The shape of a JSON value: every path (`.key`, `[]` for any array element) with the set of
/// JSON types seen there.
type Shape = BTreeMap<String, BTreeSet<&'static str>>;

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shape_into(v: &Value, path: &str, out: &mut Shape) {
    out.entry(path.to_string())
        .or_default()
        .insert(json_type(v));
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| shape_into(x, &format!("{path}.{k}"), out)),
        Value::Array(a) => a
            .iter()
            .for_each(|x| shape_into(x, &format!("{path}[]"), out)),
        _ => {}
    }
}

fn shape(v: &Value) -> Shape {
    let mut s = Shape::new();
    shape_into(v, "", &mut s);
    s
}

/// The differences between two shapes, as lines `path: vllm=.. llm-sim=..`, minus the kept ones.
fn shape_diff(file: &str, what: &str, vllm: &Shape, sim: &Shape) -> Vec<String> {
    let keys: BTreeSet<&String> = vllm.keys().chain(sim.keys()).collect();
    keys.into_iter()
        .filter(|k| vllm.get(*k) != sim.get(*k))
        .filter(|k| !KEPT.contains(&(file, k.as_str())))
        .map(|k| {
            format!(
                "{file} {what}{k}: vLLM {:?}, llm-sim {:?}",
                vllm.get(k),
                sim.get(k)
            )
        })
        .collect()
}

/// One SSE event: its `event:` name and its data.
fn parse_sse(text: &str) -> Vec<(Option<String>, String)> {
    let text = text.replace("\r\n", "\n");
    text.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .filter_map(|b| {
            let mut name = None;
            let mut data = None;
            for l in b.lines() {
                if let Some(n) = l.strip_prefix("event:") {
                    name = Some(n.trim().to_string());
                }
                if let Some(d) = l.strip_prefix("data:") {
                    data = Some(d.trim().to_string());
                }
            }
            data.map(|d| (name, d))
        })
        .collect()
}

/// The kind of an SSE event: its `event:` name (Responses, Messages), else for OpenAI chunks
/// `role`, `token`, `last token` (a finish reason) or `usage` (no choices), and `[DONE]`.
fn kind(name: &Option<String>, data: &str) -> String {
    if data == "[DONE]" {
        return "[DONE]".into();
    }
    if let Some(n) = name {
        return n.clone();
    }
    let v: Value = serde_json::from_str(data).expect("chunk is JSON");
    let choice = &v["choices"][0];
    if choice.is_null() {
        "usage".into()
    } else if choice["delta"].get("role").is_some() {
        "role".into()
    } else if !choice["finish_reason"].is_null() {
        "last token".into()
    } else {
        "token".into()
    }
}

/// Kinds in order with repeats merged (vLLM may put several tokens in one event), and the
/// shape of each kind over all its events.
fn stream_shape(text: &str) -> (Vec<String>, BTreeMap<String, Shape>) {
    let mut order: Vec<String> = Vec::new();
    let mut shapes: BTreeMap<String, Shape> = BTreeMap::new();
    for (name, data) in parse_sse(text) {
        let k = kind(&name, &data);
        if order.last() != Some(&k) {
            order.push(k.clone());
        }
        if data != "[DONE]" {
            let v: Value = serde_json::from_str(&data).expect("event is JSON");
            let s = shapes.entry(k).or_default();
            for (p, t) in shape(&v) {
                s.entry(p).or_default().extend(t);
            }
        }
    }
    (order, shapes)
}

/// The body a manifest entry was sent with (the over-long prompt is rebuilt: the manifest
/// stores `hello * N`).
fn request_body(entry: &Value) -> Value {
    let mut body = entry["body"].clone();
    let long = |v: &Value| {
        let n: usize = v.as_str()?.strip_prefix("hello * ")?.parse().ok()?;
        Some(json!(vec!["hello"; n].join(" ")))
    };
    if let Some(v) = long(&body["messages"][0]["content"]) {
        body["messages"][0]["content"] = v;
    }
    if let Some(v) = long(&body["input"]) {
        body["input"] = v;
    }
    body
}

async fn send_raw(base: &str, entry: &Value) -> (u16, String) {
    let r = post(base, entry["path"].as_str().unwrap(), &request_body(entry)).await;
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

/// llm-sim as the recorded vLLM was started: model `qwen3`, 4096 tokens, blocks of 32.
fn vllm_like() -> SimConfig {
    SimConfig {
        model_name: "qwen3".into(),
        max_model_len: 4096,
        block_size: 32,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn parity_http_answers_and_metrics() {
    let server = start_server(vllm_like()).await;
    let base = server.base_url();
    let mut diffs = Vec::new();
    for line in fixture("requests.jsonl").lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let file = entry["file"].as_str().unwrap();
        let want_status = entry["status"].as_u64().unwrap() as u16;
        if want_status == 200 {
            // As recorded: after a warm-up with the same prompt (a prefix-cache hit).
            send_raw(&base, &entry).await;
        }
        let (status, body) = send_raw(&base, &entry).await;
        if status != want_status {
            diffs.push(format!("{file}: HTTP {status}, vLLM {want_status}: {body}"));
            continue;
        }
        let recorded = fixture(file);
        if entry["stream"].as_bool().unwrap() {
            let (v_order, v_shapes) = stream_shape(&recorded);
            let (s_order, s_shapes) = stream_shape(&body);
            if v_order != s_order {
                diffs.push(format!("{file}: event kinds {s_order:?}, vLLM {v_order:?}"));
            }
            for (k, vs) in &v_shapes {
                let empty = Shape::new();
                let ss = s_shapes.get(k).unwrap_or(&empty);
                diffs.extend(shape_diff(file, &format!("[{k}]"), vs, ss));
            }
        } else {
            let v: Value = serde_json::from_str(&recorded).unwrap();
            let s: Value = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{file}: llm-sim answered no JSON ({e}): {body}"));
            diffs.extend(shape_diff(file, "", &shape(&v), &shape(&s)));
        }
    }

    let page = metrics(&base).await;
    diffs.extend(metric_diffs(&fixture("metrics.txt"), &page));
    server.shutdown().await;
    assert!(
        diffs.is_empty(),
        "llm-sim differs from vLLM 0.32:\n{}",
        diffs.join("\n")
    );
}

/// The recorded streams of a reasoning parser and of forced tool calls (no request manifest:
/// llm-sim is sent equivalent requests): the same kinds of chunks in the same order, each
/// kind's shape the union of its chunks' (llm-sim's first tool-call chunk also carries the
/// first arguments fragment; vLLM's argument chunks have that key, so the union is the same),
/// the same finish reason.
#[tokio::test]
async fn parity_reasoning_and_tool_call_streams() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    let cases = [
        ("chat_stream_reasoning.sse", 1.0, None),
        (
            "chat_stream_tool_required.sse",
            0.0,
            Some(json!("required")),
        ),
        ("chat_stream_tool_named.sse", 0.0, Some(named)),
    ];
    let mut diffs = Vec::new();
    for (file, share, choice) in cases {
        let server = start_server(SimConfig {
            reasoning_share: share,
            ..vllm_like()
        })
        .await;
        let mut body = chat_body(&words(30, 0), 6, true);
        body["model"] = json!("qwen3");
        if let Some(c) = choice {
            body["tools"] = tools.clone();
            body["tool_choice"] = c;
        }
        let sim = stream(&server.base_url(), "/v1/chat/completions", &body).await;
        let text: String = sim
            .events
            .iter()
            .map(|e| format!("data: {}\n\n", e.data))
            .collect();
        server.shutdown().await;
        let recorded = fixture(file);
        let (v_order, v_shapes) = stream_shape(&recorded);
        let (s_order, s_shapes) = stream_shape(&text);
        if v_order != s_order {
            diffs.push(format!("{file}: event kinds {s_order:?}, vLLM {v_order:?}"));
        }
        for (k, vs) in &v_shapes {
            let empty = Shape::new();
            diffs.extend(shape_diff(
                file,
                &format!("[{k}]"),
                vs,
                s_shapes.get(k).unwrap_or(&empty),
            ));
        }
        let finish = |t: &str| {
            parse_sse(t)
                .iter()
                .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
                .find_map(|v| v["choices"][0]["finish_reason"].as_str().map(str::to_owned))
        };
        if finish(&recorded) != finish(&text) {
            diffs.push(format!(
                "{file}: finish {:?}, vLLM {:?}",
                finish(&text),
                finish(&recorded)
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "llm-sim differs from vLLM 0.32:\n{}",
        diffs.join("\n")
    );
}

/// The metric families request-sim reads (request-sim/src/observe/names.rs) or that llm-sim's
/// docs promise, as vLLM 0.32 names them.
const FAMILIES: &[&str] = &[
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_time_per_output_token_seconds",
    "vllm:iteration_tokens_total",
    "vllm:cache_config_info",
];

/// A Prometheus page: each family's type, and each sample name's label-name sets and `le`
/// bounds (in page order).
#[derive(Default)]
struct Page {
    types: BTreeMap<String, String>,
    labels: BTreeMap<String, BTreeSet<Vec<String>>>,
    buckets: BTreeMap<String, Vec<String>>,
    cache_config: BTreeMap<String, String>,
}

fn parse_page(text: &str) -> Page {
    let mut p = Page::default();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(n), Some(t)) = (it.next(), it.next()) {
                p.types.insert(n.into(), t.into());
            }
            continue;
        }
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        let (name, labels) = match l.find('{') {
            Some(i) => (&l[..i], &l[i + 1..l.rfind('}').unwrap()]),
            None => (l.split_whitespace().next().unwrap(), ""),
        };
        let mut pairs = Vec::new();
        // Label values here hold no `",` sequence, so this split is enough.
        for kv in labels.split("\",").filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap();
            pairs.push((k.trim().to_string(), v.trim_matches('"').to_string()));
        }
        let mut keys: Vec<String> = pairs.iter().map(|(k, _)| k.clone()).collect();
        keys.sort();
        p.labels.entry(name.into()).or_default().insert(keys);
        if name.ends_with("_bucket") {
            let le = pairs.iter().find(|(k, _)| k == "le").unwrap().1.clone();
            let b = p.buckets.entry(name.into()).or_default();
            if !b.contains(&le) {
                b.push(le);
            }
        }
        if name == "vllm:cache_config_info" {
            p.cache_config = pairs.into_iter().collect();
        }
    }
    p
}

fn metric_diffs(vllm_page: &str, sim_page: &str) -> Vec<String> {
    let v = parse_page(vllm_page);
    let s = parse_page(sim_page);
    let mut diffs = Vec::new();
    for f in FAMILIES {
        let vt = v
            .types
            .get(*f)
            .unwrap_or_else(|| panic!("{f} not in vLLM's page"));
        if s.types.get(*f) != Some(vt) {
            diffs.push(format!("{f}: type {:?}, vLLM {vt}", s.types.get(*f)));
            continue;
        }
        if *f == "vllm:cache_config_info" {
            // llm-sim sets the labels a client reads; every one must be vLLM's.
            let vk: BTreeSet<&String> = v.cache_config.keys().collect();
            for k in s.cache_config.keys() {
                if !vk.contains(k) {
                    diffs.push(format!("{f}: label {k} is not vLLM's"));
                }
            }
            for k in [
                "block_size",
                "enable_prefix_caching",
                "num_gpu_blocks",
                "engine",
            ] {
                if !s.cache_config.contains_key(k) {
                    diffs.push(format!("{f}: no label {k}"));
                }
            }
            if s.cache_config.get("block_size").map(String::as_str) != Some("32") {
                diffs.push(format!(
                    "{f}: block_size {:?}",
                    s.cache_config.get("block_size")
                ));
            }
            continue;
        }
        let samples: Vec<String> = if vt == "histogram" {
            ["_bucket", "_sum", "_count"]
                .iter()
                .map(|x| format!("{f}{x}"))
                .collect()
        } else {
            vec![f.to_string()]
        };
        for n in samples {
            if v.labels.get(&n) != s.labels.get(&n) {
                diffs.push(format!(
                    "{n}: label names {:?}, vLLM {:?}",
                    s.labels.get(&n),
                    v.labels.get(&n)
                ));
            }
            if v.buckets.get(&n) != s.buckets.get(&n) {
                diffs.push(format!(
                    "{n}: buckets {:?}, vLLM {:?}",
                    s.buckets.get(&n),
                    v.buckets.get(&n)
                ));
            }
        }
    }
    diffs
}

/// The msgpack type of a value.
fn mp_type(v: &rmpv::Value) -> &'static str {
    use rmpv::Value as M;
    match v {
        M::Nil => "nil",
        M::Boolean(_) => "bool",
        M::Integer(_) => "int",
        M::F32(_) | M::F64(_) => "float",
        M::String(_) => "str",
        M::Binary(_) => "bin",
        M::Array(_) => "array",
        M::Map(_) => "map",
        M::Ext(..) => "ext",
    }
}

/// Shape of a msgpack value: maps by key, arrays positionally when `positional` (a
/// msgspec `array_like` struct), else by `[]`.
fn mp_shape(v: &rmpv::Value, path: &str, positional: bool, out: &mut Shape) {
    out.entry(path.to_string()).or_default().insert(mp_type(v));
    match v {
        rmpv::Value::Map(m) => {
            for (k, x) in m {
                let k = k.as_str().unwrap_or("?");
                mp_shape(x, &format!("{path}.{k}"), false, out);
            }
        }
        rmpv::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = if positional {
                    format!("{path}[{i}]")
                } else {
                    format!("{path}[]")
                };
                mp_shape(x, &p, false, out);
            }
        }
        _ => {}
    }
}

/// What a run of KV event messages looks like: the topic, the sequence frame's length, the
/// batch shape (`[ts, events, data_parallel_rank]`) and each event tag's shape.
#[derive(Default, Debug)]
struct KvShape {
    topics: BTreeSet<Vec<u8>>,
    seq_lens: BTreeSet<usize>,
    batch: Shape,
    events: BTreeMap<String, Shape>,
}

impl KvShape {
    fn add(&mut self, frames: &[Vec<u8>]) {
        assert_eq!(frames.len(), 3, "topic, sequence, payload");
        self.topics.insert(frames[0].clone());
        self.seq_lens.insert(frames[1].len());
        let v = rmpv::decode::read_value(&mut &frames[2][..]).expect("msgpack");
        let a = v.as_array().expect("a batch is an array");
        let top = rmpv::Value::Array(vec![
            a[0].clone(),
            rmpv::Value::Array(vec![]),
            a.get(2).cloned().unwrap_or(rmpv::Value::Nil),
        ]);
        mp_shape(&top, "", true, &mut self.batch);
        self.batch
            .insert(format!("arity {}", a.len()), BTreeSet::new());
        for e in a[1].as_array().expect("events") {
            let tag = match e {
                rmpv::Value::Map(m) => m
                    .iter()
                    .find(|(k, _)| k.as_str() == Some("type"))
                    .and_then(|(_, v)| v.as_str())
                    .unwrap_or("?")
                    .to_string(),
                rmpv::Value::Array(a) => a
                    .first()
                    .and_then(|t| t.as_str())
                    .unwrap_or("?")
                    .to_string(),
                _ => "?".into(),
            };
            mp_shape(e, "", false, self.events.entry(tag).or_default());
        }
    }

    fn recorded(file: &str) -> KvShape {
        let mut k = KvShape::default();
        for line in fixture(file).lines().filter(|l| !l.trim().is_empty()) {
            let frames: Vec<Vec<u8>> = line.split_whitespace().map(unhex).collect();
            k.add(&frames);
        }
        k
    }

    /// The differences from vLLM's recorded shape. Nil is no type of its own: a field nil in
    /// one run and an integer in another (a chain's first block has no parent, a later one has)
    /// matches a field that is only ever nil or only ever an integer.
    fn diffs(&self, vllm: &KvShape) -> Vec<String> {
        let mut d = Vec::new();
        if self.topics != vllm.topics {
            d.push(format!("topics {:?}, vLLM {:?}", self.topics, vllm.topics));
        }
        if self.seq_lens != vllm.seq_lens {
            d.push(format!(
                "sequence frame {:?}, vLLM {:?}",
                self.seq_lens, vllm.seq_lens
            ));
        }
        d.extend(shape_diff("kv", "batch", &vllm.batch, &self.batch));
        for (tag, vs) in &vllm.events {
            let Some(ss) = self.events.get(tag) else {
                d.push(format!("no {tag} event from llm-sim"));
                continue;
            };
            let keys: BTreeSet<&String> = vs.keys().chain(ss.keys()).collect();
            for k in keys {
                let (a, b) = (vs.get(k), ss.get(k));
                let typed = |s: Option<&BTreeSet<&'static str>>| {
                    s.map(|s| {
                        s.iter()
                            .filter(|t| **t != "nil")
                            .copied()
                            .collect::<BTreeSet<_>>()
                    })
                };
                let (ta, tb) = (typed(a), typed(b));
                let same = match (&ta, &tb) {
                    (Some(x), Some(y)) => x == y || x.is_empty() || y.is_empty(),
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    d.push(format!("{tag}{k}: vLLM {a:?}, llm-sim {b:?}"));
                }
            }
        }
        d
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Sends the recorded requests' prompt until events flow, then resets the prefix cache and
/// sends one more; returns every message received up to the `AllBlocksCleared` batch.
async fn collect_kv(sub: &mut zeromq::SubSocket, base: &str) -> KvShape {
    let prompt: String = (0..12)
        .map(|i| format!("Line {i}: the quick brown fox jumps over the lazy dog."))
        .collect::<Vec<_>>()
        .join(" ");
    let mut got = KvShape::default();
    let t0 = Instant::now();
    let mut n = 0usize;
    // Slow joiner: a PUB socket drops what it sends before the subscription arrives.
    loop {
        assert!(t0.elapsed() < Duration::from_secs(20), "no KV events");
        let mut body = completion_body(json!(format!("{prompt} {n}")), 2, false);
        body["model"] = json!("qwen3");
        post(base, "/v1/completions", &body).await;
        n += 1;
        if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(300), sub.recv()).await {
            let frames: Vec<Vec<u8>> = m.iter().map(|f| f.to_vec()).collect();
            got.add(&frames);
            break;
        }
    }
    let r = client()
        .post(format!("{base}/reset_prefix_cache"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut body = completion_body(json!("after reset"), 1, false);
    body["model"] = json!("qwen3");
    post(base, "/v1/completions", &body).await;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("AllBlocksCleared within 10 s")
            .unwrap();
        let frames: Vec<Vec<u8>> = m.iter().map(|f| f.to_vec()).collect();
        got.add(&frames);
        if got.events.contains_key("AllBlocksCleared") {
            return got;
        }
    }
}

fn assert_kv_parity(got: &KvShape, file: &str) {
    let want = KvShape::recorded(file);
    assert!(want.events.contains_key("BlockStored"), "{file}");
    let d = got.diffs(&want);
    assert!(
        d.is_empty(),
        "KV events differ from vLLM 0.32 ({file}):\n{}",
        d.join("\n")
    );
}

/// The connect form: the subscriber binds, llm-sim connects (vLLM's `tcp://HOST:PORT`).
#[tokio::test]
async fn parity_kv_events_subscriber_binds() {
    let mut sub = zeromq::SubSocket::new();
    let ep = sub.bind("tcp://127.0.0.1:0").await.expect("bind");
    sub.subscribe("").await.unwrap();
    let cfg = SimConfig {
        kv_events_endpoint: Some(ep.to_string()),
        kv_events_topic: "kv".into(),
        ..vllm_like()
    };
    let server = start_server(cfg).await;
    let got = collect_kv(&mut sub, &server.base_url()).await;
    server.shutdown().await;
    assert_kv_parity(&got, "kv_events_vllm_connects.hex");
    assert_kv_parity(&got, "kv_events_vllm_binds.hex");
}

/// The bind form: llm-sim binds (vLLM's `tcp://*:PORT`), the subscriber connects.
#[tokio::test]
async fn parity_kv_events_server_binds() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = SimConfig {
        kv_events_endpoint: Some(format!("tcp://*:{port}")),
        kv_events_topic: "kv".into(),
        ..vllm_like()
    };
    let server = start_server(cfg).await;
    let mut sub = zeromq::SubSocket::new();
    sub.connect(&format!("tcp://127.0.0.1:{port}"))
        .await
        .expect("connect");
    sub.subscribe("").await.unwrap();
    let got = collect_kv(&mut sub, &server.base_url()).await;
    server.shutdown().await;
    assert_kv_parity(&got, "kv_events_vllm_binds.hex");
}
