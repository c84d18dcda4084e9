//! Shared helpers of the `reliability_*` tests: small generated traces, running a replay through
//! the library or the built binary, reading records back strictly, and a tiny raw HTTP server
//! for responses llm-sim cannot produce. Everything listens on 127.0.0.1 only.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use request_sim::cli::{Cli, Command as CliCommand};
use request_sim::config::{Flavor, ReplayConfig};
use request_sim::record::Record;
use request_sim::report::Summary;
use request_sim::run::RunOutcome;

pub const BIN: &str = env!("CARGO_BIN_EXE_request-sim");

/// A mooncake-format trace of `n` requests evenly spread over `span_ms`, each with `input`
/// prompt tokens (one hash block, 50 distinct prefixes) and `output` output tokens.
pub fn write_trace(
    dir: &Path,
    name: &str,
    n: usize,
    span_ms: f64,
    input: u32,
    output: u32,
) -> PathBuf {
    let path = dir.join(name);
    let mut s = String::with_capacity(n * 80);
    for i in 0..n {
        let t = if n > 1 {
            span_ms * i as f64 / (n - 1) as f64
        } else {
            0.0
        };
        s.push_str(&format!(
            "{{\"timestamp\": {t:.3}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": [{}]}}\n",
            i % 50
        ));
    }
    std::fs::write(&path, s).unwrap();
    path
}

/// Parse `request-sim replay ARGS...` with the real command line and validate it.
pub fn config(args: &[&str]) -> Result<ReplayConfig, String> {
    let mut argv = vec!["request-sim", "replay"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    match cli.command {
        CliCommand::Replay(a) => {
            ReplayConfig::from_args(*a, Flavor::Replay).map_err(|e| e.to_string())
        }
        _ => unreachable!("replay parses as replay"),
    }
}

/// Run a replay in-process through the library.
pub fn replay(args: &[&str]) -> Result<RunOutcome, String> {
    request_sim::run::replay(config(args)?).map_err(|e| e.to_string())
}

/// Common flags of a replay against `endpoint` writing into `dir`: no start-up calls to the
/// server (model name and chat overhead given), quiet, fixed seed, no core pinning.
pub fn base_args(endpoint: &str, trace: &Path, dir: &Path) -> Vec<String> {
    vec![
        "--endpoint".into(),
        endpoint.into(),
        "--model-name".into(),
        "llm-sim".into(),
        "--chat-overhead".into(),
        "0".into(),
        // Only generation requests reach the server (the tests count them).
        "--no-server-tokenize".into(),
        // ... and no `GET /version` to learn whether the built-in words are exact.
        "--allow-inexact-prompts".into(),
        "--dataset-path".into(),
        trace.display().to_string(),
        "--output-path".into(),
        dir.join("records.jsonl").display().to_string(),
        "--quiet".into(),
        "--seed".into(),
        "7".into(),
        "--no-pin".into(),
        "--threads".into(),
        "2".into(),
        // These tests count every request the server saw; scraping /metrics would add some.
        "--no-server-metrics".into(),
    ]
}

pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Every line of a records file: each must be complete (newline-terminated) and parse as a
/// record.
pub fn read_records(path: &Path) -> Vec<Record> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "{}: last line is incomplete",
        path.display()
    );
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_slice::<Record>(l).unwrap_or_else(|e| {
                panic!(
                    "{}:{}: not a record ({e}): {}",
                    path.display(),
                    i + 1,
                    String::from_utf8_lossy(l)
                )
            })
        })
        .collect()
}

pub fn read_summary_file(path: &Path) -> Summary {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Indices 0..n each exactly once.
pub fn assert_one_record_per_index(records: &[Record], n: usize) {
    let mut seen = vec![0u32; n];
    for r in records {
        assert!(r.index < n, "record index {} out of range {n}", r.index);
        seen[r.index] += 1;
    }
    let bad: Vec<usize> = (0..n).filter(|&i| seen[i] != 1).collect();
    assert!(
        bad.is_empty(),
        "indices without exactly one record: {bad:?}"
    );
}

/// Mean of some values.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Start the binary with `args`, stdout/stderr captured.
pub fn spawn_bin(args: &[&str], envs: &[(&str, &str)]) -> Child {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.spawn().expect("start request-sim")
}

/// Run the binary to the end.
pub fn run_bin(args: &[&str], envs: &[(&str, &str)]) -> Output {
    spawn_bin(args, envs)
        .wait_with_output()
        .expect("run request-sim")
}

/// Send a signal by name (`INT`, `TERM`, `KILL`) with kill(1).
pub fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .expect("kill(1)");
    assert!(st.success(), "kill -{sig} failed");
}

/// Wait for the child for at most `limit`; `None` if it is still running.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until `path` holds at least `lines` complete lines (or `limit` passes).
pub fn wait_for_lines(path: &Path, lines: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Ok(b) = std::fs::read(path) {
            if b.iter().filter(|&&c| c == b'\n').count() >= lines {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A request as the raw server saw it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub head: String,
    pub body: Vec<u8>,
}

impl SeenRequest {
    /// Value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// What the raw server answers to one request: pieces written with a pause between them, then
/// the connection is closed (or kept silent for `hang`).
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub pieces: Vec<Vec<u8>>,
    pub pause: Duration,
    /// Keep the connection open without writing more after the pieces.
    pub hang: Option<Duration>,
}

impl Script {
    /// A 200 text/event-stream response whose body is `pieces` (connection closed after them).
    pub fn sse(pieces: &[&[u8]]) -> Script {
        let mut all = vec![
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                .to_vec(),
        ];
        all.extend(pieces.iter().map(|p| p.to_vec()));
        Script {
            pieces: all,
            pause: Duration::from_millis(5),
            hang: None,
        }
    }
    /// A complete response with this status line, content type and body.
    pub fn whole(status: &str, ctype: &str, body: &[u8]) -> Script {
        let mut r = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        Script {
            pieces: vec![r],
            pause: Duration::ZERO,
            hang: None,
        }
    }
    /// Raw bytes, whatever they are.
    pub fn raw(bytes: &[u8]) -> Script {
        Script {
            pieces: vec![bytes.to_vec()],
            pause: Duration::ZERO,
            hang: None,
        }
    }
}

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers every request with the same [`Script`] and
/// remembers the requests (one thread per connection; `GET /v1/models` is answered too).
pub struct RawServer {
    pub addr: std::net::SocketAddr,
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
    pub connections: Arc<AtomicUsize>,
}

impl RawServer {
    pub fn start(script: Script) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (seen2, conns2) = (seen.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                conns2.fetch_add(1, Ordering::SeqCst);
                let (seen, script) = (seen2.clone(), script.clone());
                std::thread::spawn(move || serve(stream, &script, &seen));
            }
        });
        RawServer {
            addr,
            seen,
            connections,
        }
    }
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
    /// The POST requests: not the `GET`s of model lookup and of the connections the
    /// replayer opens before its clock starts.
    pub fn generation_requests(&self) -> Vec<SeenRequest> {
        let mut all = self.requests();
        all.retain(|r| r.head.starts_with("POST "));
        all
    }
}

fn serve(stream: TcpStream, script: &Script, seen: &Mutex<Vec<SeenRequest>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut out = stream;
    loop {
        // Request head.
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            head.push_str(&line);
        }
        let req = SeenRequest {
            body: Vec::new(),
            head,
        };
        let len = req
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let req = SeenRequest { body, ..req };
        let is_models = req.head.starts_with("GET /v1/models");
        seen.lock().unwrap().push(req);
        if is_models {
            let b = br#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
            let r = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                b.len()
            );
            if out
                .write_all(r.as_bytes())
                .and_then(|_| out.write_all(b))
                .is_err()
            {
                return;
            }
            continue;
        }
        for p in &script.pieces {
            if out.write_all(p).and_then(|_| out.flush()).is_err() {
                return;
            }
            std::thread::sleep(script.pause);
        }
        if let Some(h) = script.hang {
            std::thread::sleep(h);
        }
        return;
    }
}

/// A chat SSE chunk with this content.
pub fn chat_chunk(content: &str) -> String {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}}}}]}}\n\n",
        serde_json::to_string(content).unwrap()
    )
}

/// The usage chunk and `[DONE]`.
pub fn chat_usage_done(prompt: u32, completion: u32) -> String {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
        prompt + completion
    )
}
