//! A tiny raw HTTP/1.1 server on 127.0.0.1 for responses llm-sim cannot produce (garbage,
//! split UTF-8, silence, non-HTTP bytes): it answers every request with one [`Script`] and
//! remembers what it was sent. Also the chat SSE pieces the scripts are made of.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// An extra wait before piece `i` (`waits[i]`; none past its end): a script with a long
    /// silence at one place (see [`Script::wait_before`]).
    pub waits: Vec<Duration>,
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
            waits: Vec::new(),
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
            waits: Vec::new(),
        }
    }
    /// This script with an extra wait of `d` before its piece `i` (piece 0 is the response
    /// head of [`Script::sse`]).
    pub fn wait_before(mut self, i: usize, d: Duration) -> Script {
        if self.waits.len() <= i {
            self.waits.resize(i + 1, Duration::ZERO);
        }
        self.waits[i] = d;
        self
    }
    /// Raw bytes, whatever they are.
    pub fn raw(bytes: &[u8]) -> Script {
        Script {
            pieces: vec![bytes.to_vec()],
            pause: Duration::ZERO,
            hang: None,
            waits: Vec::new(),
        }
    }
}

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers every request with the same [`Script`] (or
/// POST `k` with script `k` mod their number, [`RawServer::start_each`]) and remembers the
/// requests (one thread per connection; `GET /v1/models` is answered too).
pub struct RawServer {
    pub addr: std::net::SocketAddr,
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
    pub connections: Arc<AtomicUsize>,
}

impl RawServer {
    pub fn start(script: Script) -> RawServer {
        RawServer::start_each(vec![script])
    }
    /// A server whose `k`-th POST (from 0, in arrival order) gets `scripts[k % len]`: a run
    /// where some answers differ from the others.
    pub fn start_each(scripts: Vec<Script>) -> RawServer {
        assert!(!scripts.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (seen2, conns2) = (seen.clone(), connections.clone());
        let scripts = Arc::new(scripts);
        let posts = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                conns2.fetch_add(1, Ordering::SeqCst);
                let (seen, scripts, posts) = (seen2.clone(), scripts.clone(), posts.clone());
                std::thread::spawn(move || serve(stream, &scripts, &posts, &seen));
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

fn serve(
    stream: TcpStream,
    scripts: &[Script],
    posts: &AtomicUsize,
    seen: &Mutex<Vec<SeenRequest>>,
) {
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
        let script = match req.head.starts_with("POST ") {
            true => &scripts[posts.fetch_add(1, Ordering::SeqCst) % scripts.len()],
            false => &scripts[0],
        };
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
        for (i, p) in script.pieces.iter().enumerate() {
            if let Some(w) = script.waits.get(i) {
                std::thread::sleep(*w);
            }
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
