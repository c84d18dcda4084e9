//! vLLM's gRPC engine API (`--api vllm-grpc`) against a tiny engine on 127.0.0.1: a tonic
//! server implementing `Generate` (and `HealthCheck`) that streams a known token schedule. The
//! records must carry the prompts as built (the token ids the same replay sends to a
//! completions endpoint), the engine's usage and cached tokens, TTFT and ITL of the schedule,
//! and the engine's refusals as `http_error`.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use request_sim::backend::vllm_grpc::proto;
use request_sim::record::Status;
use tokio_stream::Stream;

use crate::support::*;

/// The engine's silence before the first token, and between tokens.
const FIRST: Duration = Duration::from_millis(120);
const GAP: Duration = Duration::from_millis(25);
/// A request asking for this many tokens is refused (INVALID_ARGUMENT).
const REFUSED_LEN: u32 = 7;
/// The engine's cache granule: cached tokens are the longest prefix shared with an earlier
/// prompt, floored to it.
const GRANULE: usize = 16;

type Seen = Arc<Mutex<Vec<proto::GenerateRequest>>>;
type Chunks = Pin<Box<dyn Stream<Item = Result<proto::GenerateResponse, tonic::Status>> + Send>>;

fn ids_of(r: &proto::GenerateRequest) -> Vec<u32> {
    match &r.input {
        Some(proto::Input::Tokenized(t)) => t.input_ids.clone(),
        _ => Vec::new(),
    }
}

/// The cached tokens the engine reports for `ids`, given the prompts before it.
fn cached(before: &[proto::GenerateRequest], ids: &[u32]) -> usize {
    let shared = before
        .iter()
        .map(|b| {
            let b = ids_of(b);
            b.iter().zip(ids).take_while(|(x, y)| x == y).count()
        })
        .max()
        .unwrap_or(0);
    // vLLM never reports the whole prompt cached: the last token is always computed.
    (shared.min(ids.len().saturating_sub(1)) / GRANULE) * GRANULE
}

/// `Generate`: one token per chunk, FIRST then GAP apart, then `GenerateComplete`.
fn generate(seen: &Seen, req: proto::GenerateRequest) -> Result<Chunks, tonic::Status> {
    let sp = req.sampling_params.clone().unwrap_or_default();
    let n = sp.max_tokens.unwrap_or(1);
    if n == REFUSED_LEN {
        return Err(tonic::Status::invalid_argument("max_tokens 7 is refused"));
    }
    let ids = ids_of(&req);
    let (prompt, cached) = {
        let mut s = seen.lock().unwrap();
        let c = cached(&s, &ids);
        s.push(req);
        (ids.len() as u32, c as u32)
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let chunk = |t: u32| proto::GenerateResponse {
            response: Some(proto::Response::Chunk(proto::GenerateStreamChunk {
                token_ids: vec![t],
                prompt_tokens: prompt,
                completion_tokens: 1,
                cached_tokens: cached,
                index: 0,
            })),
        };
        let start = tokio::time::Instant::now() + FIRST;
        for t in 0..n {
            tokio::time::sleep_until(start + GAP * t).await;
            if tx.send(Ok(chunk(1000 + t))).await.is_err() {
                return;
            }
        }
        let done = proto::GenerateComplete {
            output_ids: vec![1000 + n - 1],
            finish_reason: "length".into(),
            prompt_tokens: prompt,
            completion_tokens: 1,
            cached_tokens: cached,
            index: 0,
        };
        let _ = tx
            .send(Ok(proto::GenerateResponse {
                response: Some(proto::Response::Complete(done)),
            }))
            .await;
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

/// The engine on 127.0.0.1 (its own thread and runtime): `grpc://127.0.0.1:PORT`.
fn start_engine(seen: Seen) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let svc = tower::service_fn(move |req: http::Request<tonic::body::Body>| {
                let seen = seen.clone();
                async move { Ok::<_, Infallible>(route(seen, req).await) }
            });
            tonic::transport::Server::builder()
                .serve_with_incoming(svc, incoming)
                .await
                .unwrap();
        });
    });
    format!("grpc://127.0.0.1:{port}")
}

async fn route(
    seen: Seen,
    req: http::Request<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    use tonic_prost::ProstCodec;
    match req.uri().path() {
        "/vllm.grpc.engine.VllmEngine/Generate" => {
            let svc = tower::service_fn(move |r: tonic::Request<proto::GenerateRequest>| {
                let out = generate(&seen, r.into_inner()).map(tonic::Response::new);
                async move { out }
            });
            let codec = ProstCodec::<proto::GenerateResponse, proto::GenerateRequest>::default();
            tonic::server::Grpc::new(codec)
                .server_streaming(svc, req)
                .await
        }
        "/vllm.grpc.engine.VllmEngine/HealthCheck" => {
            let svc = tower::service_fn(|_: tonic::Request<proto::Empty>| async {
                Ok::<_, tonic::Status>(tonic::Response::new(proto::HealthCheckResponse {
                    healthy: true,
                    message: String::new(),
                }))
            });
            let codec = ProstCodec::<proto::HealthCheckResponse, proto::Empty>::default();
            tonic::server::Grpc::new(codec).unary(svc, req).await
        }
        _ => tonic::Status::unimplemented("not served here").into_http(),
    }
}

/// A generic trace (block 16): conversations whose prompts share their first blocks, one row
/// asking for [`REFUSED_LEN`] tokens.
fn trace(dir: &std::path::Path) -> std::path::PathBuf {
    let mut s = String::new();
    let rows: [(u32, u32, &str); 8] = [
        (40, 6, "[1,2]"),
        (70, 5, "[1,2,3,4,5]"),
        (33, 4, "[9,10,11]"),
        (90, 6, "[1,2,3,4,5,6]"),
        (20, REFUSED_LEN, "[20,21]"),
        (64, 3, "[9,10,11,12]"),
        (17, 2, "[30,31]"),
        (100, 5, "[1,2,3,4,5,6,7]"),
    ];
    for (i, (input, output, ids)) in rows.iter().enumerate() {
        s.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": {ids}}}\n",
            i * 150
        ));
    }
    let p = dir.join("trace.jsonl");
    std::fs::write(&p, s).unwrap();
    p
}

fn args(endpoint: &str, trace: &std::path::Path, dir: &std::path::Path) -> Vec<String> {
    let mut a = base_args(endpoint, trace, dir);
    a.extend(
        [
            "--token-ids",
            "--block-size",
            "16",
            "--record-itl",
            "--max-error-rate",
            "1",
        ]
        .map(String::from),
    );
    a
}

#[test]
fn a_grpc_replay_sends_the_built_ids_and_records_the_engine_stream() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());

    // The same replay to a completions endpoint: the token ids it builds.
    let http = RawServer::start(Script::whole(
        "200 OK",
        "application/json",
        br#"{"choices":[{"text":"x","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    ));
    let mut a = args(&http.url("/v1/completions"), &trace, dir.path());
    a.push("--no-stream".into());
    replay(&strs(&a));
    let built: Vec<Vec<u32>> = http
        .requests()
        .iter()
        .filter(|r| r.head.starts_with("POST"))
        .map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            serde_json::from_value(v["prompt"].clone()).unwrap()
        })
        .collect();
    assert_eq!(built.len(), 8);

    let seen = Seen::default();
    let url = start_engine(seen.clone());
    let grpc_dir = dir.path().join("grpc");
    std::fs::create_dir_all(&grpc_dir).unwrap();
    let mut a = args(&url, &trace, &grpc_dir);
    a.extend(["--api".into(), "vllm-grpc".into()]);
    let out = replay(&strs(&a));
    assert_eq!(
        out.summary.run.server.api.map(|a| a.to_string()).as_deref(),
        Some("vllm-grpc")
    );

    let recs = read_records_by_index(&grpc_dir.join("records.jsonl"));
    assert_eq!(recs.len(), 8);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        7,
        "the refused request is not counted by the engine"
    );
    let mut ids_seen: Vec<&str> = seen.iter().map(|r| r.request_id.as_str()).collect();
    ids_seen.sort_unstable();
    ids_seen.dedup();
    assert_eq!(ids_seen.len(), 7, "every request has its own request_id");
    for (i, r) in recs.iter().enumerate() {
        if r.output_length == REFUSED_LEN {
            assert_eq!(r.status, Status::HttpError, "{r:?}");
            let e = r.error.as_deref().unwrap_or("");
            assert!(
                e.contains("InvalidArgument") && e.contains("refused"),
                "{e}"
            );
            continue;
        }
        assert_eq!(r.status, Status::Ok, "{i}: {:?}", r.error);
        // The engine received exactly the prompt the completions replay built.
        let at = seen.iter().position(|s| ids_of(s) == built[i]);
        let at = at.unwrap_or_else(|| panic!("request {i}: its built ids were never received"));
        let req = &seen[at];
        assert_eq!(ids_of(req).len() as u32, r.input_length);
        let sp = req.sampling_params.clone().unwrap();
        assert_eq!(sp.max_tokens, Some(r.output_length));
        assert_eq!(
            (sp.min_tokens, sp.ignore_eos, req.stream),
            (r.output_length, true, true)
        );
        // Usage as the engine reported it: prompt, completion (the chunks' deltas summed), cached.
        assert_eq!(r.prompt_tokens, Some(r.input_length));
        assert_eq!(r.output_tokens, Some(r.output_length));
        assert_eq!(r.chunks, r.output_length);
        let want = cached(&seen[..at], &ids_of(req)) as u32;
        assert_eq!(r.cached_tokens, Some(want), "request {i}");
        // TTFT: the engine's FIRST (plus loopback and scheduling); ITL: its GAP.
        let ttft = r.ttft_ms.unwrap();
        assert!(
            (FIRST.as_millis() as f64..FIRST.as_millis() as f64 + 150.0).contains(&ttft),
            "{ttft}"
        );
        let itl = r.itl_ms.clone().unwrap();
        assert_eq!(itl.len() as u32, r.output_length - 1);
        // The engine's clock keeps its schedule (a late token is followed by an early one, or
        // both arrive in one read): the gaps add up to its GAPs.
        let gap = GAP.as_millis() as f64;
        let span: f64 = itl.iter().sum();
        let want = gap * (r.output_length - 1) as f64;
        assert!(span > want - 5.0 && span < want + 60.0, "{itl:?}");
        assert!(itl.iter().all(|&g| g >= 0.0), "{itl:?}");
        let e2e = r.e2e_ms.unwrap();
        assert!(e2e >= ttft + span - 1.0, "e2e {e2e} < ttft {ttft} + {span}");
    }
    let cached_total: u32 = recs.iter().filter_map(|r| r.cached_tokens).sum();
    assert!(
        cached_total >= 3 * GRANULE as u32,
        "the shared blocks hit: {cached_total}"
    );
}

#[test]
fn grpc_refusals_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    let mut a = base_args("grpc://127.0.0.1", &trace, dir.path());
    a.extend(["--api".into(), "vllm-grpc".into(), "--token-ids".into()]);
    let e = try_replay(&strs(&a)).unwrap_err().to_string();
    assert!(e.contains("port"), "{e}");
    // Nothing listens on port 1: every request is a connect error, none a panic (and
    // --token-ids is implied by the API).
    let mut a = base_args("grpc://127.0.0.1:1", &trace, dir.path());
    a.extend(
        [
            "--api",
            "vllm-grpc",
            "--block-size",
            "16",
            "--max-error-rate",
            "1",
            "--scale-factor",
            "20",
        ]
        .map(String::from),
    );
    let _ = try_replay(&strs(&a));
    let recs = read_records(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 8);
    assert!(
        recs.iter().all(|r| r.status == Status::ConnectError),
        "{:?}",
        recs[0]
    );
}
