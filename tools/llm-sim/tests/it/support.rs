//! Helpers shared by the integration tests: starting the simulator (in-process or the built
//! binary), a loopback HTTP client, SSE parsing, timing, Prometheus pages, request bodies.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use llm_sim::{SimConfig, SimServer};
use serde_json::Value;

/// The `llm-sim` binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_llm-sim");

/// A simulator with `cfg` on 127.0.0.1 (an ephemeral port unless `cfg` names one).
pub async fn start_server(cfg: SimConfig) -> SimServer {
    llm_sim::start(cfg).await.expect("start llm-sim")
}

/// A simulator with the default settings.
pub async fn default_server() -> SimServer {
    start_server(SimConfig::default()).await
}

/// Start the binary with `args`, its stderr piped (where it says where it listens).
pub fn spawn_binary(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("llm-sim binary")
}

/// Run the binary with `args` to the end (for command lines it refuses).
pub fn run_binary_to_end(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("llm-sim binary")
}

/// Runs the binary on an ephemeral port; returns the child and its base URL.
pub fn run_binary(args: &[&str]) -> (Child, String) {
    let mut child = spawn_binary(&[&["--port", "0"], args].concat());
    let stderr = child.stderr.take().expect("stderr piped");
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, url)
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

pub async fn post(base: &str, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .expect("request sent")
}

/// One SSE event: its `data` payload, and when it arrived (since the request was sent).
#[derive(Debug, Clone)]
pub struct Event {
    /// The event's `event:` line (Responses, Messages), if it had one.
    pub name: Option<String>,
    pub data: String,
    pub at: Duration,
}

impl Event {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// The outcome of reading a whole SSE stream.
#[derive(Debug)]
pub struct Stream {
    pub status: u16,
    pub content_type: String,
    pub events: Vec<Event>,
    /// The body failed before its end (connection reset, truncated chunking).
    pub body_error: Option<String>,
    pub elapsed: Duration,
}

impl Stream {
    /// Parsed JSON payloads, skipping `[DONE]` and anything that does not parse.
    pub fn json_events(&self) -> Vec<Value> {
        self.events.iter().filter_map(|e| e.json()).collect()
    }

    pub fn done(&self) -> bool {
        self.events
            .last()
            .map(|e| e.data == "[DONE]")
            .unwrap_or(false)
    }

    /// Events carrying generated text (OpenAI delta content / completion text, TGI token).
    pub fn token_events(&self) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| match e.json() {
                Some(v) => token_text(&v).is_some_and(|t| !t.is_empty()),
                None => false,
            })
            .collect()
    }

    pub fn usage(&self) -> Option<Value> {
        self.json_events()
            .into_iter()
            .rev()
            .find_map(|v| v.get("usage").filter(|u| !u.is_null()).cloned())
    }

    /// Time of the first event with a non-empty `choices` (vLLM bench's TTFT).
    pub fn ttft(&self) -> Duration {
        self.events
            .iter()
            .find(|e| {
                e.json().is_some_and(|v| {
                    v.get("choices")
                        .and_then(|c| c.as_array())
                        .is_some_and(|c| !c.is_empty())
                        || v.get("token").is_some()
                })
            })
            .map(|e| e.at)
            .expect("a token event")
    }
}

pub fn token_text(v: &Value) -> Option<String> {
    if let Some(c) = v.get("choices").and_then(|c| c.get(0)) {
        if let Some(t) = c.get("delta").and_then(|d| d.get("content")) {
            return t.as_str().map(str::to_string);
        }
        if let Some(t) = c.get("text") {
            return t.as_str().map(str::to_string);
        }
        return None;
    }
    v.get("token")
        .and_then(|t| t.get("text"))
        .and_then(|t| t.as_str())
        .map(str::to_string)
}

/// Sends a streaming request and reads every SSE event with its arrival time.
pub async fn stream(base: &str, path: &str, body: &Value) -> Stream {
    let start = Instant::now();
    let mut resp = post(base, path, body).await;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut buf = String::new();
    let mut events = Vec::new();
    let mut body_error = None;
    loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => {
                let at = start.elapsed();
                buf.push_str(&String::from_utf8_lossy(&bytes));
                while let Some(pos) = buf.find("\n\n") {
                    let raw: String = buf.drain(..pos + 2).collect();
                    let mut name = None;
                    for line in raw.lines() {
                        if let Some(n) = line.strip_prefix("event: ") {
                            name = Some(n.to_string());
                        }
                        let data = line
                            .strip_prefix("data: ")
                            .or_else(|| line.strip_prefix("data:"));
                        if let Some(d) = data {
                            events.push(Event {
                                name: name.take(),
                                data: d.to_string(),
                                at,
                            });
                        }
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                body_error = Some(format!("{e:?}"));
                break;
            }
        }
    }
    Stream {
        status,
        content_type,
        events,
        body_error,
        elapsed: start.elapsed(),
    }
}

pub async fn metrics(base: &str) -> String {
    client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body")
}

/// Value of the first sample of `name` (any labels) on a Prometheus text page.
pub fn metric(page: &str, name: &str) -> f64 {
    metric_with(page, name, "")
}

/// Value of the sample of `name` whose labels contain `label`.
pub fn metric_with(page: &str, name: &str, label: &str) -> f64 {
    for line in page.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix(name) {
            if rest.starts_with('{') && rest.contains(label) {
                if let Some(v) = rest.rsplit(' ').next() {
                    return v.parse().expect("metric value");
                }
            }
        }
    }
    panic!("metric {name} {label} not found in:\n{page}");
}

/// `n` space-separated built-in words, starting at word `offset`.
pub fn words(n: usize, offset: usize) -> String {
    let w = llm_sim::vocab::builtin_words();
    let mut s = String::with_capacity(n * 5);
    for i in 0..n {
        s.push(' ');
        s.push_str(&w[(offset + i * 7) % w.len()]);
    }
    s
}

pub fn chat_body(content: &str, max_tokens: u32, stream: bool) -> Value {
    let mut v = serde_json::json!({
        "model": "llm-sim",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": true,
        "stream": stream,
    });
    if stream {
        v["stream_options"] = serde_json::json!({"include_usage": true});
    }
    v
}

/// A Responses request of one user message, exactly `max` output tokens.
pub fn responses_body(content: &str, max: u32, stream: bool) -> Value {
    serde_json::json!({
        "model": "llm-sim",
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": content}]}],
        "max_output_tokens": max,
        "ignore_eos": true,
        "stream": stream,
    })
}

/// A Messages request of one user message, exactly `max` output tokens.
pub fn messages_body(content: &str, max: u32, stream: bool) -> Value {
    serde_json::json!({
        "model": "llm-sim",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max,
        "ignore_eos": true,
        "stream": stream,
    })
}

pub fn completion_body(prompt: Value, max_tokens: u32, stream: bool) -> Value {
    let mut v = serde_json::json!({
        "model": "llm-sim",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": stream,
    });
    if stream {
        v["stream_options"] = serde_json::json!({"include_usage": true});
    }
    v
}
