//! Prompt building throughput (tokens/s), with the built-in word list and with the Qwen3
//! vocabulary (if `scripts/fetch-tokenizer.sh` has fetched it, or `$REQUEST_SIM_QWEN3_DIR`),
//! each with word prompts and with real-text prompts from the test corpus
//! (`tests/data/corpus/sharegpt.json`, `--prompt-corpus`): groups `prompt/NAME` and
//! `prompt/NAME-corpus`.
//!
//! `cargo bench -p request-sim --bench prompt`

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use request_sim::prompt::{load_tokenizer, Corpus, CorpusSpec, PromptBuilder, Vocab};
use request_sim::trace::TraceRequest;
use tokenizers::Tokenizer;

fn qwen3() -> Option<(Tokenizer, Vocab)> {
    let dir = std::env::var_os("REQUEST_SIM_QWEN3_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/tokenizers/qwen3")
        });
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        eprintln!(
            "prompt bench: no Qwen3 tokenizer in {} (run scripts/fetch-tokenizer.sh); builtin only",
            dir.display()
        );
        return None;
    }
    let tok = load_tokenizer(&path).ok()?;
    let vocab = Vocab::from_tokenizer(&tok).ok()?;
    Some((tok, vocab))
}

/// The test corpus, tokenized with `tok` (the built-in word list without).
fn corpus(tok: Option<&Tokenizer>) -> Arc<Corpus> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus/sharegpt.json");
    let enc = tok.map(|t| t as &dyn request_sim::prompt::Encoder);
    Arc::new(Corpus::load(&CorpusSpec::new(path), enc, false).expect("test corpus"))
}

/// A mooncake-like request: 24 blocks of 512 with a partial last block (12,035 tokens).
fn long_request() -> TraceRequest {
    TraceRequest {
        model: None,
        reasoning: Default::default(),
        images: None,
        index: 7,
        line: 8,
        timestamp_ms: 0.0,
        input_length: 12_035,
        output_length: 343,
        hash_ids: (1_000..1_024).collect(),
        session: None,
    }
}

fn bench_vocab(c: &mut Criterion, name: &str, vocab: Arc<Vocab>, corpus: Option<Arc<Corpus>>) {
    let b = PromptBuilder::with_corpus(vocab, corpus, 1, 512);
    let req = long_request();
    let n = req.input_length as usize;

    let mut g = c.benchmark_group(format!("prompt/{name}"));
    g.throughput(Throughput::Elements(512));
    let mut text = String::with_capacity(512 * 16);
    let mut h = 0u64;
    g.bench_function("block_text_512", |bench| {
        bench.iter(|| {
            text.clear();
            h = h.wrapping_add(1);
            b.write_block_text(black_box(h), 512, &mut text);
            black_box(text.len())
        })
    });
    g.throughput(Throughput::Elements(n as u64));
    let mut text = String::new();
    g.bench_function("write_text_12035", |bench| {
        bench.iter(|| {
            text.clear();
            b.write_text(black_box(&req), n, &mut text);
            black_box(text.len())
        })
    });
    let mut bytes = Vec::new();
    g.bench_function("write_text_bytes_12035", |bench| {
        bench.iter(|| {
            bytes.clear();
            b.write_text_bytes(black_box(&req), n, &mut bytes);
            black_box(bytes.len())
        })
    });
    let mut ids = Vec::new();
    g.bench_function("write_token_ids_12035", |bench| {
        bench.iter(|| {
            ids.clear();
            b.write_token_ids(black_box(&req), n, &mut ids);
            black_box(ids.len())
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let builtin = Arc::new(Vocab::builtin());
    bench_vocab(c, "builtin", builtin.clone(), None);
    bench_vocab(c, "builtin-corpus", builtin, Some(corpus(None)));
    if let Some((tok, v)) = qwen3() {
        let v = Arc::new(v);
        bench_vocab(c, "qwen3", v.clone(), None);
        bench_vocab(c, "qwen3-corpus", v, Some(corpus(Some(&tok))));
    }
}

criterion_group!(prompt, benches);
criterion_main!(prompt);
