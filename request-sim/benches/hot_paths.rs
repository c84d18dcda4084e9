//! Criterion benchmarks of the per-request hot paths (see docs/performance.md):
//!
//! - `prompt`: building the text of a 12,035-token prompt (the conversation trace's mean) from
//!   the built-in word list and, when present, the Qwen3 word list;
//! - `body`: serialising that prompt into a chat-completions request body (`encode_body`);
//! - `sse`: a vLLM-shaped chat stream of 343 tokens (the trace's mean output) through
//!   `SseParser` + `ResponseState`, one network chunk per event and in 1,460-byte segments;
//! - `record`: serialising records to JSONL as the writer thread does, and the writer thread
//!   itself (channel + JSONL + accumulator sink) into a temporary file.
//!
//! The Qwen3 tokenizer is looked up in `$REQUEST_SIM_QWEN3_DIR` or `.cache/tokenizers/qwen3`
//! (scripts/fetch-tokenizer.sh); without it the Qwen3 cases are skipped.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use request_sim::backend::sse::SseParser;
use request_sim::backend::{encode_body, ApiKind, BodyParams, PromptPayload, ResponseState};
use request_sim::prompt::{self, PromptBuilder, Vocab};
use request_sim::record::{Finished, Record, RecordWriter, Status, TokenSource};
use request_sim::trace::TraceRequest;

const PROMPT_TOKENS: u32 = 12_035;
const OUTPUT_TOKENS: u32 = 343;
const BLOCK: usize = 512;

fn request(index: usize) -> TraceRequest {
    let blocks = (PROMPT_TOKENS as usize).div_ceil(BLOCK) as u64;
    TraceRequest {
        model: None,
        reasoning: Default::default(),
        images: None,
        index,
        line: index + 1,
        timestamp_ms: 0.0,
        input_length: PROMPT_TOKENS,
        output_length: OUTPUT_TOKENS,
        hash_ids: (1000 * index as u64..1000 * index as u64 + blocks).collect(),
        session: None,
    }
}

fn qwen3_vocab() -> Option<Vocab> {
    let dir = std::env::var_os("REQUEST_SIM_QWEN3_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/tokenizers/qwen3")
        });
    let tok = prompt::load_tokenizer(&dir.join("tokenizer.json")).ok()?;
    Vocab::from_tokenizer(&tok).ok()
}

fn vocabs() -> Vec<(&'static str, Arc<Vocab>)> {
    let mut v = vec![("builtin", Arc::new(Vocab::builtin()))];
    match qwen3_vocab() {
        Some(q) => v.push(("qwen3", Arc::new(q))),
        None => eprintln!("hot_paths: Qwen3 tokenizer not found; skipping the qwen3 cases"),
    }
    v
}

fn bench_prompt(c: &mut Criterion) {
    let mut g = c.benchmark_group("prompt");
    g.throughput(Throughput::Elements(u64::from(PROMPT_TOKENS)));
    for (name, vocab) in vocabs() {
        let builder = PromptBuilder::new(vocab, 7, BLOCK);
        let mut text = String::new();
        let mut i = 0usize;
        g.bench_function(format!("build_text_12k/{name}"), |b| {
            b.iter(|| {
                // A different request each time: different blocks, as in a replay.
                i = (i + 1) % 4096;
                text.clear();
                builder.write_text(&request(i), PROMPT_TOKENS as usize, &mut text);
                black_box(text.len())
            })
        });
        let mut ids = Vec::new();
        g.bench_function(format!("build_ids_12k/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % 4096;
                ids.clear();
                builder.write_token_ids(&request(i), PROMPT_TOKENS as usize, &mut ids);
                black_box(ids.len())
            })
        });
    }
    g.finish();
}

fn bench_body(c: &mut Criterion) {
    let builder = PromptBuilder::new(Arc::new(Vocab::builtin()), 7, BLOCK);
    let text = builder.text(&request(1), PROMPT_TOKENS as usize);
    let params = BodyParams {
        model: "Qwen/Qwen3-8B".into(),
        stream: true,
        exact_output: true,
        extra: None,
        thinking: Default::default(),
    };
    let mut g = c.benchmark_group("body");
    g.throughput(Throughput::Bytes(text.len() as u64));
    let mut out = Vec::new();
    g.bench_function("encode_chat_12k", |b| {
        b.iter(|| {
            encode_body(
                ApiKind::Chat,
                &params,
                PromptPayload::Text(black_box(&text)),
                (OUTPUT_TOKENS, None),
                &mut out,
            );
            black_box(out.len())
        })
    });
    let ids = builder.token_ids(&request(1), PROMPT_TOKENS as usize);
    g.bench_function("encode_completions_ids_12k", |b| {
        b.iter(|| {
            encode_body(
                ApiKind::Completions,
                &params,
                PromptPayload::TokenIds(black_box(&ids)),
                (OUTPUT_TOKENS, None),
                &mut out,
            );
            black_box(out.len())
        })
    });
    g.finish();
}

/// A chat stream as vLLM sends it with `stream_options.include_usage`: a role-only chunk, one
/// chunk per token, an empty-choices usage chunk, `[DONE]`. One element per network chunk.
fn vllm_chat_stream(tokens: u32) -> Vec<Vec<u8>> {
    let head = "data: {\"id\":\"chatcmpl-9b1c52a6c0f54a3f8d2e\",\"object\":\"chat.completion.chunk\",\"created\":1763712000,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":";
    let mut events = vec![format!(
        "{head}{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
    )];
    let words = [" the", " model", " answers", " with", " tokens", " ok"];
    for i in 0..tokens {
        let w = words[i as usize % words.len()];
        let finish = if i + 1 == tokens {
            "\"length\",\"stop_reason\":null"
        } else {
            "null"
        };
        events.push(format!(
            "{head}{{\"content\":\"{w}\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]}}\n\n"
        ));
    }
    events.push(format!(
        "data: {{\"id\":\"chatcmpl-9b1c52a6c0f54a3f8d2e\",\"object\":\"chat.completion.chunk\",\"created\":1763712000,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{PROMPT_TOKENS},\"total_tokens\":{},\"completion_tokens\":{tokens},\"prompt_tokens_details\":{{\"cached_tokens\":11776}}}}}}\n\n",
        PROMPT_TOKENS + tokens
    ));
    events.push("data: [DONE]\n\n".to_string());
    events.into_iter().map(String::into_bytes).collect()
}

fn parse_stream(chunks: &[Vec<u8>], now: Instant) -> ResponseState {
    let mut parser = SseParser::new(8 << 20);
    let mut state = ResponseState::default();
    for c in chunks {
        parser
            .push(c, |data| {
                state.on_event(ApiKind::Chat, data, now).unwrap();
            })
            .unwrap();
    }
    parser.finish(|data| {
        state.on_event(ApiKind::Chat, data, now).unwrap();
    });
    state
}

fn bench_sse(c: &mut Criterion) {
    let events = vllm_chat_stream(OUTPUT_TOKENS);
    let bytes: Vec<u8> = events.concat();
    let segments: Vec<Vec<u8>> = bytes.chunks(1460).map(<[u8]>::to_vec).collect();
    let now = Instant::now();
    let check = parse_stream(&events, now);
    assert!(check.finished);
    assert_eq!(
        check.chunks, OUTPUT_TOKENS,
        "the role preamble is no token event"
    );
    assert_eq!(check.usage.unwrap().completion_tokens, Some(OUTPUT_TOKENS));

    let mut g = c.benchmark_group("sse");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("vllm_chat_343/event_per_chunk", |b| {
        b.iter(|| black_box(parse_stream(black_box(&events), now).chunks))
    });
    g.bench_function("vllm_chat_343/mss_segments", |b| {
        b.iter(|| black_box(parse_stream(black_box(&segments), now).chunks))
    });
    g.finish();
}

fn record(i: usize) -> Record {
    Record {
        timestamp: 123_456.0 + i as f64,
        scheduled_ms: 4_203.911 + i as f64,
        sent_ms: Some(4_203.957 + i as f64),
        drift_ms: Some(0.046),
        http_status: Some(200),
        ttft_ms: Some(41.207),
        ttfc_ms: Some(42.311),
        e2e_ms: Some(1_502.774),
        done_ms: Some(1_502.901),
        tpot_ms: Some(4.273),
        input_length: PROMPT_TOKENS,
        prompt_tokens: Some(PROMPT_TOKENS),
        cached_tokens: Some(11_776),
        output_length: OUTPUT_TOKENS,
        output_tokens: Some(OUTPUT_TOKENS),
        output_tokens_source: Some(TokenSource::Usage),
        chunks: OUTPUT_TOKENS + 1,
        ..Record::new(i, i + 1, Status::Ok)
    }
}

fn bench_record(c: &mut Criterion) {
    let records: Vec<Record> = (0..1000).map(record).collect();
    let mut g = c.benchmark_group("record");
    g.throughput(Throughput::Elements(records.len() as u64));
    let mut buf = Vec::with_capacity(1 << 20);
    g.bench_function("to_jsonl_1000", |b| {
        b.iter(|| {
            buf.clear();
            for r in &records {
                serde_json::to_writer(&mut buf, r).unwrap();
                buf.push(b'\n');
            }
            black_box(buf.len())
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.jsonl");
    let itl: Vec<f64> = vec![4.2; OUTPUT_TOKENS as usize];
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(4));
    g.bench_function("writer_thread_1000", |b| {
        b.iter_batched(
            || {
                records
                    .iter()
                    .map(|r| Finished {
                        record: r.clone(),
                        itl_ms: itl.clone(),
                        blocks: None,
                    })
                    .collect::<Vec<_>>()
            },
            |batch| {
                let (writer, tx) = RecordWriter::spawn(Some(&path), false, (), |_, f| {
                    black_box(f.record.index + f.itl_ms.len());
                })
                .unwrap();
                for f in batch {
                    tx.send(f).unwrap();
                }
                drop(tx);
                black_box(writer.finish().unwrap().0.written)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench_prompt, bench_body, bench_sse, bench_record);
criterion_main!(benches);
