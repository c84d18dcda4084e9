//! Real text for prompts (`--prompt-corpus`): a local text corpus cut into **units** — the
//! corpus's words, each with its leading space — whose tokens are known and stable, so that
//! any window of consecutive units re-tokenizes to exactly the units' tokens.
//!
//! At start-up ([`Corpus::load`]):
//! 1. the text is read ([`read_documents`]: ShareGPT JSON, JSONL with a text field, or plain
//!    UTF-8 text files), up to a byte budget, and split on whitespace into units `" " + word`;
//! 2. every distinct unit is tokenized once (with the local tokenizer or the server's
//!    `/tokenize`, both an [`Encoder`]); units of more than [`MAX_UNIT_TOKENS`] tokens are
//!    dropped (long URLs, base64 …);
//! 3. the units are checked **in corpus order**: groups of consecutive units are concatenated,
//!    encoded once and compared with the concatenation of their tokens; a failing group is
//!    halved until the unstable boundary is found and the unit after it is dropped; the new
//!    neighbours are checked again, until nothing fails. So every boundary a prompt can contain
//!    inside a window has been encoded and seen to split there.
//!
//! Why units are stable: byte-level BPE pre-tokenizers (GPT-2, Llama 3, Qwen, DeepSeek) start a
//! new piece at a space followed by a non-space, SentencePiece vocabularies have no piece that
//! spans `▁word▁`, and word-level pre-tokenizers split at spaces; step 3 checks what the theory
//! says, and drops what does not hold (for the Qwen3 tokenizer nothing is dropped in our test
//! corpus).
//!
//! The builder ([`super::PromptBuilder`]) takes windows of units; see `docs/prompts.md`.

use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustc_hash::FxHashMap;
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{Encoder, PromptError};
use crate::{Error, Result};

/// Units with more tokens than this are dropped (they would make blocks coarse to fill).
pub const MAX_UNIT_TOKENS: usize = 8;

/// Units longer than this many bytes are dropped before tokenization (URLs, hashes, base64).
pub const MAX_UNIT_BYTES: usize = 48;

/// Text read from a corpus by default (the first this-many bytes of unit text): a few hundred
/// thousand tokens of real text, read and checked in well under a second with a local
/// tokenizer, and plenty for random windows.
pub const DEFAULT_MAX_BYTES: usize = 4 << 20;

/// Consecutive units encoded together by the stability check.
const CHECK_GROUP: usize = 256;

/// Units on each side of a dropped unit checked again in the next round.
const RECHECK_SPAN: usize = 8;

/// After this many rounds, units of groups that still fail are all dropped.
const MAX_ROUNDS: usize = 8;

/// `--prompt-corpus PATH` and `--prompt-corpus-field NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusSpec {
    /// A ShareGPT `.json`, a `.jsonl`, a text file, or a directory of `.txt` files.
    pub path: PathBuf,
    /// The text field of JSONL rows (`text` by default).
    pub field: String,
    /// Stop reading after this many bytes of text ([`DEFAULT_MAX_BYTES`]).
    pub max_bytes: usize,
}

impl CorpusSpec {
    /// A corpus at `path` read with the defaults (field `text`, [`DEFAULT_MAX_BYTES`]).
    pub fn new(path: impl Into<PathBuf>) -> CorpusSpec {
        CorpusSpec {
            path: path.into(),
            field: "text".into(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// How the corpus file was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusFormat {
    /// A JSON array of `{"conversations": [{"from": .., "value": ..}, ..]}` (every value).
    ShareGpt,
    /// One JSON object per line; the text is the named field (a string or an array of strings).
    Jsonl,
    /// Plain UTF-8 text: one file, or every `.txt` file of a directory (recursively, by name).
    Text,
}

/// What the corpus gave (start-up line and summary).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusStats {
    pub path: String,
    pub format: CorpusFormat,
    /// Documents (conversation turns, rows, files) read.
    pub documents: usize,
    /// Words read (before any was dropped).
    pub words: usize,
    /// True when reading stopped at the byte budget.
    pub truncated: bool,
    /// Units kept, and their tokens.
    pub units: usize,
    pub tokens: usize,
    /// Distinct units among them.
    pub distinct_units: usize,
    /// Words dropped before tokenization (control characters, longer than [`MAX_UNIT_BYTES`]),
    /// or with no tokens or more than [`MAX_UNIT_TOKENS`].
    pub dropped_shape: usize,
    /// Units dropped because a boundary next to them did not re-tokenize stably.
    pub dropped_unstable: usize,
    /// Rounds of the stability check.
    pub check_rounds: usize,
    /// Start-up time: reading, tokenizing the distinct units, the stability check.
    pub read_ms: f64,
    pub tokenize_ms: f64,
    pub check_ms: f64,
}

/// The units of a corpus, ready to be cut into prompt windows. Immutable; shared by every
/// producer thread through the builder.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Every unit's text, in order (each starts with its space).
    text: String,
    /// Byte start of unit `i`; `starts[units]` is `text.len()`.
    starts: Vec<u32>,
    /// Token offset of unit `i` in `ids`; `cum[units]` is the number of tokens.
    cum: Vec<u32>,
    /// Every unit's token ids, in order.
    ids: Vec<u32>,
    stats: CorpusStats,
}

impl Corpus {
    /// Read `spec`, tokenize and check its units with `enc` (`None`: the built-in word list,
    /// which counts one token per whitespace-separated word). `strip_first_space`: the
    /// vocabulary is SentencePiece-style (see [`super::Vocab::strips_first_space`]), so a text
    /// that starts with a unit starts without its space.
    pub fn load(
        spec: &CorpusSpec,
        enc: Option<&dyn Encoder>,
        strip_first_space: bool,
    ) -> Result<Corpus> {
        let t = Instant::now();
        let read = read_documents(spec)?;
        let read_ms = ms(t);
        let mut stats = CorpusStats {
            path: spec.path.display().to_string(),
            format: read.format,
            documents: read.documents,
            words: 0,
            truncated: read.truncated,
            units: 0,
            tokens: 0,
            distinct_units: 0,
            dropped_shape: 0,
            dropped_unstable: 0,
            check_rounds: 0,
            read_ms,
            tokenize_ms: 0.0,
            check_ms: 0.0,
        };
        let t = Instant::now();
        let units = Units::tokenize(&read.text, enc, strip_first_space, &mut stats)?;
        stats.tokenize_ms = ms(t);
        let t = Instant::now();
        let seq = match enc {
            Some(enc) => units.check(enc, strip_first_space, &mut stats)?,
            None => units.seq.clone(),
        };
        stats.check_ms = ms(t);
        let corpus = units.into_corpus(&seq, stats);
        if corpus.units() == 0 {
            return Err(corpus_error(
                &spec.path,
                "no usable text (every word was dropped, or the file holds no text)",
            ));
        }
        Ok(corpus)
    }

    /// Number of units.
    pub fn units(&self) -> usize {
        self.starts.len() - 1
    }

    /// Number of tokens of all units.
    pub fn tokens(&self) -> usize {
        self.ids.len()
    }

    /// What was read and kept.
    pub fn stats(&self) -> &CorpusStats {
        &self.stats
    }

    /// Bytes worth reserving per token of corpus text.
    pub fn reserve_per_token(&self) -> usize {
        self.text.len().div_ceil(self.ids.len().max(1)) + 1
    }

    /// Text of units `r`.
    #[inline]
    pub(crate) fn text_of(&self, r: Range<u32>) -> &str {
        &self.text[self.starts[r.start as usize] as usize..self.starts[r.end as usize] as usize]
    }

    /// Token ids of units `r`.
    #[inline]
    pub(crate) fn ids_of(&self, r: Range<u32>) -> &[u32] {
        &self.ids[self.cum[r.start as usize] as usize..self.cum[r.end as usize] as usize]
    }

    /// Tokens of unit `i`.
    #[inline]
    pub(crate) fn unit_tokens(&self, i: u32) -> usize {
        (self.cum[i as usize + 1] - self.cum[i as usize]) as usize
    }

    /// Bytes of unit `i`.
    #[inline]
    pub(crate) fn unit_bytes(&self, i: u32) -> usize {
        (self.starts[i as usize + 1] - self.starts[i as usize]) as usize
    }

    /// The longest run of whole units from unit `start` on (wrapping at the end of the corpus)
    /// with at most `need` tokens, as one or more ranges handed to `f`; returns its tokens
    /// (`need` minus less than the next unit's tokens, so at most [`MAX_UNIT_TOKENS`] - 1 short).
    #[inline]
    pub(crate) fn window<F: FnMut(Range<u32>)>(&self, start: u32, need: usize, f: &mut F) -> usize {
        let m = self.units();
        let mut p = start as usize % m;
        let mut got = 0usize;
        loop {
            let left = need - got;
            let base = self.cum[p] as usize;
            // Last unit boundary q >= p with cum[q] - cum[p] <= left.
            let q = p + self.cum[p..=m].partition_point(|&c| c as usize - base <= left) - 1;
            if q > p {
                f(p as u32..q as u32);
                got += self.cum[q] as usize - base;
            }
            if q < m || got == need {
                return got;
            }
            p = 0; // the window runs on at the start of the corpus
        }
    }
}

/// `--prompt-source`: what prompt text is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PromptSource {
    /// One-token words of the vocabulary, drawn at random (the default without
    /// `--prompt-corpus`).
    Words,
    /// Windows of real text from `--prompt-corpus` (the default with it).
    Corpus,
}

/// The corpus a run asks for: `--prompt-source`, `--prompt-corpus`, `--prompt-corpus-field`
/// checked against each other (`Ok(None)`: word prompts).
pub fn corpus_spec(
    source: Option<PromptSource>,
    path: Option<&Path>,
    field: &str,
) -> std::result::Result<Option<CorpusSpec>, String> {
    match (source, path) {
        (Some(PromptSource::Words), Some(_)) => Err(
            "--prompt-corpus makes prompts of corpus text: it contradicts --prompt-source words"
                .into(),
        ),
        (Some(PromptSource::Corpus), None) => Err(
            "--prompt-source corpus needs --prompt-corpus PATH (ShareGPT JSON, JSONL or text)"
                .into(),
        ),
        (_, None) => Ok(None),
        (_, Some(p)) => {
            if !p.exists() {
                return Err(format!(
                    "--prompt-corpus {}: no such file or directory",
                    p.display()
                ));
            }
            if field.trim().is_empty() {
                return Err("--prompt-corpus-field must name a field".into());
            }
            Ok(Some(CorpusSpec {
                field: field.to_string(),
                ..CorpusSpec::new(p)
            }))
        }
    }
}

/// The corpus of a run, for the start-up line and the summary (`run.prompt_corpus`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusReport {
    #[serde(flatten)]
    pub stats: CorpusStats,
    /// Share of the run's prompt tokens (synthetic prompts, content after the chat overhead)
    /// that are corpus text; the rest are one-token words (block starts and completions).
    pub corpus_token_share: f64,
    /// The requests the share is computed over (a streamed trace's first requests, else all of
    /// the run's).
    #[serde(default)]
    pub share_of_requests: usize,
}

impl CorpusReport {
    /// The share of corpus tokens in the prompts `builder` makes for `requests` (each of
    /// `input_length - overhead` tokens), computed in parallel without building the text.
    pub fn new(
        builder: &super::PromptBuilder,
        requests: &[crate::trace::TraceRequest],
        overhead: u32,
    ) -> Option<CorpusReport> {
        use rayon::prelude::*;
        let corpus = builder.corpus()?;
        let (corpus_tokens, total) = requests
            .par_iter()
            .map(|r| {
                let n = r.input_length.saturating_sub(overhead) as usize;
                (builder.corpus_tokens(r, n), n)
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        Some(CorpusReport {
            share_of_requests: requests.len(),
            stats: corpus.stats().clone(),
            corpus_token_share: if total == 0 {
                0.0
            } else {
                corpus_tokens as f64 / total as f64
            },
        })
    }

    /// The start-up line.
    pub fn line(&self) -> String {
        let s = &self.stats;
        format!(
            "prompt text: corpus {} ({}, {} documents{}): {} units, {} tokens ({} distinct units; \
             dropped {} by shape and {} unstable at a boundary) in {:.0} ms; corpus text is {:.1}% \
             of the prompt tokens of {} requests",
            s.path,
            serde_json::to_value(s.format)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            s.documents,
            if s.truncated {
                ", read up to the byte budget"
            } else {
                ""
            },
            s.units,
            s.tokens,
            s.distinct_units,
            s.dropped_shape,
            s.dropped_unstable,
            s.read_ms + s.tokenize_ms + s.check_ms,
            100.0 * self.corpus_token_share,
            self.share_of_requests
        )
    }
}

/// The run's corpus, if it asks for one: read, tokenized with `enc` (the local tokenizer or
/// the server; `None`: built-in word list) and checked the way `vocab` makes prompts.
pub fn load_corpus(
    spec: Option<&CorpusSpec>,
    enc: Option<&dyn Encoder>,
    vocab: &super::Vocab,
) -> Result<Option<std::sync::Arc<Corpus>>> {
    let Some(spec) = spec else { return Ok(None) };
    if vocab.is_pieces() {
        // Pieces have no space before them: a unit's space could merge with the piece before.
        return Err(corpus_error(
            &spec.path,
            format!(
                "real text needs a vocabulary of words; this tokenizer's prompts use {}",
                vocab.method()
            ),
        ));
    }
    Ok(Some(std::sync::Arc::new(Corpus::load(
        spec,
        enc,
        vocab.strips_first_space(),
    )?)))
}

/// The tokenized units before the stability check.
struct Units<'a> {
    /// Distinct unit texts (with their space) and their token ids.
    distinct: Vec<&'a str>,
    tokens: Vec<Vec<u32>>,
    /// The corpus as distinct-unit indices, in order (shape-dropped units left out).
    seq: Vec<u32>,
}

impl<'a> Units<'a> {
    fn tokenize(
        text: &'a str,
        enc: Option<&dyn Encoder>,
        strip: bool,
        stats: &mut CorpusStats,
    ) -> Result<Units<'a>> {
        let mut index: FxHashMap<&'a str, u32> = FxHashMap::default();
        let mut distinct: Vec<&'a str> = Vec::new();
        let mut seq = Vec::new();
        // `text` holds the units back to back, each " " + word: split before every space.
        for unit in split_units(text) {
            stats.words += 1;
            if !usable_word(&unit[1..]) {
                stats.dropped_shape += 1;
                continue;
            }
            let next = distinct.len() as u32;
            let k = *index.entry(unit).or_insert_with(|| {
                distinct.push(unit);
                next
            });
            seq.push(k);
        }
        let tokens: Vec<Vec<u32>> = match enc {
            Some(enc) => {
                let texts: Vec<String> = distinct
                    .iter()
                    .map(|u| if strip { &u[1..] } else { u }.to_string())
                    .collect();
                enc.encode_many(&texts)?
            }
            // The built-in word list: one token per word (ids only identify the word).
            None => distinct
                .iter()
                .map(|u| vec![(llm_common::util::fmix64(fnv1a(u)) >> 33) as u32])
                .collect(),
        };
        let bad: Vec<bool> = tokens
            .iter()
            .map(|t| t.is_empty() || t.len() > MAX_UNIT_TOKENS)
            .collect();
        let before = seq.len();
        seq.retain(|&k| !bad[k as usize]);
        stats.dropped_shape += before - seq.len();
        Ok(Units {
            distinct,
            tokens,
            seq,
        })
    }

    /// The stability check (module docs, step 3): returns the kept sequence.
    fn check(&self, enc: &dyn Encoder, strip: bool, stats: &mut CorpusStats) -> Result<Vec<u32>> {
        let mut seq = self.seq.clone();
        let mut groups: Vec<Range<usize>> = (0..seq.len())
            .step_by(CHECK_GROUP)
            .map(|s| s..(s + CHECK_GROUP).min(seq.len()))
            .collect();
        for round in 1..=MAX_ROUNDS {
            stats.check_rounds = round;
            let drop = self.failing_units(enc, strip, &seq, groups, round == MAX_ROUNDS)?;
            if drop.is_empty() {
                break;
            }
            stats.dropped_unstable += drop.len();
            // Remove them, and check again around where they were (new neighbours meet).
            let mut keep = vec![true; seq.len()];
            drop.iter().for_each(|&i| keep[i] = false);
            let mut new_pos = Vec::with_capacity(drop.len());
            let mut kept = Vec::with_capacity(seq.len());
            for (i, &k) in seq.iter().enumerate() {
                if keep[i] {
                    kept.push(k);
                } else {
                    new_pos.push(kept.len());
                }
            }
            seq = kept;
            new_pos.dedup();
            groups = new_pos
                .iter()
                .map(|&p| p.saturating_sub(RECHECK_SPAN)..(p + RECHECK_SPAN).min(seq.len()))
                .filter(|r| r.len() > 1)
                .collect();
            if groups.is_empty() {
                break;
            }
        }
        // A window that reaches the end of the corpus runs on at its start: that boundary too.
        while seq.len() > 1 {
            let (last, first) = (seq[seq.len() - 1], seq[0]);
            let mut t = format!(
                "{}{}",
                self.distinct[last as usize], self.distinct[first as usize]
            );
            if strip {
                t.remove(0);
            }
            let got = enc.encode_many(&[t])?;
            let want = self.tokens[last as usize]
                .iter()
                .chain(&self.tokens[first as usize]);
            if got[0].iter().eq(want) {
                break;
            }
            seq.pop();
            stats.dropped_unstable += 1;
        }
        Ok(seq)
    }

    /// Positions (in `seq`) to drop so that every group re-tokenizes to its units' tokens: a
    /// failing group is halved until a failing pair of halves that each pass is found; the
    /// first unit of the second half is dropped (the boundary before it did not hold). With
    /// `all`, every unit of a failing group is dropped instead (the last round).
    fn failing_units(
        &self,
        enc: &dyn Encoder,
        strip: bool,
        seq: &[u32],
        mut pending: Vec<Range<usize>>,
        all: bool,
    ) -> Result<Vec<usize>> {
        let mut drop = Vec::new();
        // Failing groups whose halves are being checked: (group, left half ok?, right ok?).
        while !pending.is_empty() {
            let texts: Vec<String> = pending
                .iter()
                .map(|r| {
                    let mut t: String = seq[r.clone()]
                        .iter()
                        .map(|&k| self.distinct[k as usize])
                        .collect();
                    if strip {
                        t.remove(0);
                    }
                    t
                })
                .collect();
            let got = enc.encode_many(&texts)?;
            let mut next = Vec::new();
            for (r, ids) in pending.into_iter().zip(got) {
                let want = seq[r.clone()]
                    .iter()
                    .flat_map(|&k| self.tokens[k as usize].iter().copied());
                if ids.iter().copied().eq(want) {
                    continue;
                }
                if all {
                    drop.extend(r);
                } else if r.len() == 2 {
                    drop.push(r.start + 1);
                } else if r.len() > 2 {
                    let mid = r.start + r.len() / 2;
                    // The boundary at `mid` is checked by a pair straddling it.
                    next.push(r.start..mid);
                    next.push(mid..r.end);
                    next.push(mid - 1..mid + 1);
                }
            }
            pending = next;
        }
        drop.sort_unstable();
        drop.dedup();
        Ok(drop)
    }

    fn into_corpus(self, seq: &[u32], mut stats: CorpusStats) -> Corpus {
        let mut text = String::new();
        let mut starts = Vec::with_capacity(seq.len() + 1);
        let mut cum = Vec::with_capacity(seq.len() + 1);
        let mut ids = Vec::new();
        let mut seen = vec![false; self.distinct.len()];
        for &k in seq {
            starts.push(text.len() as u32);
            cum.push(ids.len() as u32);
            text.push_str(self.distinct[k as usize]);
            ids.extend_from_slice(&self.tokens[k as usize]);
            seen[k as usize] = true;
        }
        starts.push(text.len() as u32);
        cum.push(ids.len() as u32);
        stats.units = seq.len();
        stats.tokens = ids.len();
        stats.distinct_units = seen.iter().filter(|&&s| s).count();
        Corpus {
            text,
            starts,
            cum,
            ids,
            stats,
        }
    }
}

/// The units of `text` (a run of `" " + word` units): split before every space.
fn split_units(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let mut s = 0;
    std::iter::from_fn(move || {
        if s >= b.len() {
            return None;
        }
        let e = b[s + 1..]
            .iter()
            .position(|&c| c == b' ')
            .map_or(b.len(), |p| s + 1 + p);
        let u = &text[s..e];
        s = e;
        Some(u)
    })
}

/// A word worth keeping: short, and no control or replacement characters.
fn usable_word(w: &str) -> bool {
    w.len() <= MAX_UNIT_BYTES && !w.chars().any(|c| c.is_control() || c == '\u{FFFD}')
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn corpus_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Prompt(PromptError::Corpus {
        path: path.to_path_buf(),
        message: message.into(),
    })
}

/// The corpus text as read: its words, each with one leading space, back to back.
pub struct ReadText {
    pub text: String,
    pub format: CorpusFormat,
    pub documents: usize,
    pub truncated: bool,
}

/// Collects documents' words into one string, up to a byte budget.
struct Collector {
    text: String,
    max: usize,
    documents: usize,
}

impl Collector {
    fn full(&self) -> bool {
        self.text.len() >= self.max
    }

    fn add(&mut self, doc: &str) {
        self.documents += 1;
        for w in doc.split_whitespace() {
            if self.full() {
                return;
            }
            self.text.push(' ');
            self.text.push_str(w);
        }
    }
}

/// Read the corpus `spec` names: the format is taken from the path (a directory: text files;
/// `.jsonl`: JSONL; `.json`: ShareGPT when it starts with `[`, else JSONL; anything else:
/// text).
pub fn read_documents(spec: &CorpusSpec) -> Result<ReadText> {
    let path = &spec.path;
    let mut c = Collector {
        text: String::new(),
        max: spec.max_bytes.max(1),
        documents: 0,
    };
    let format = detect(path)?;
    match format {
        CorpusFormat::Text => read_text_files(path, &mut c)?,
        CorpusFormat::Jsonl => read_jsonl(path, &spec.field, &mut c)?,
        CorpusFormat::ShareGpt => read_sharegpt(path, &mut c)?,
    }
    if c.text.is_empty() {
        let what = match format {
            CorpusFormat::Jsonl => format!(
                "no row has a non-empty {:?} field (set --prompt-corpus-field)",
                spec.field
            ),
            CorpusFormat::ShareGpt => "no conversation has a non-empty value".to_string(),
            CorpusFormat::Text => "no text".to_string(),
        };
        return Err(corpus_error(path, what));
    }
    Ok(ReadText {
        truncated: c.full(),
        text: c.text,
        format,
        documents: c.documents,
    })
}

fn detect(path: &Path) -> Result<CorpusFormat> {
    if path.is_dir() {
        return Ok(CorpusFormat::Text);
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("jsonl") => Ok(CorpusFormat::Jsonl),
        Some("json") => {
            let mut f = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
            let mut head = [0u8; 4096];
            let n = f.read(&mut head).map_err(|e| Error::read(path, e))?;
            let first = head[..n]
                .iter()
                .find(|b| !b.is_ascii_whitespace() && **b != 0xEF && **b != 0xBB && **b != 0xBF);
            Ok(match first {
                Some(b'[') => CorpusFormat::ShareGpt,
                _ => CorpusFormat::Jsonl,
            })
        }
        _ => Ok(CorpusFormat::Text),
    }
}

/// A text file, or every `.txt` file under a directory (sorted by path).
fn read_text_files(path: &Path, c: &mut Collector) -> Result<()> {
    let mut files = Vec::new();
    if path.is_dir() {
        collect_txt(path, &mut files)?;
        if files.is_empty() {
            return Err(corpus_error(path, "the directory holds no .txt file"));
        }
    } else {
        files.push(path.to_path_buf());
    }
    for f in files {
        if c.full() {
            break;
        }
        // Read at most what the budget still takes (plus a margin for the last word).
        let budget = (c.max - c.text.len()) as u64 + 4096;
        let mut bytes = Vec::new();
        std::fs::File::open(&f)
            .and_then(|h| h.take(budget).read_to_end(&mut bytes))
            .map_err(|e| Error::read(&f, e))?;
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            // A budget cut can split the last character; anything else is not UTF-8.
            Err(e) if e.error_len().is_none() => {
                std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
            }
            Err(e) => {
                return Err(corpus_error(
                    &f,
                    format!(
                        "not UTF-8 text (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                ))
            }
        };
        c.add(text);
    }
    Ok(())
}

fn collect_txt(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::read(dir, e))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::read(dir, e))?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_txt(&p, out)?;
        } else if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("txt")) {
            out.push(p);
        }
    }
    Ok(())
}

/// JSONL: the `field` of every row (a string, or an array of strings); rows without it are
/// skipped; a line that is not JSON is an error naming it.
fn read_jsonl(path: &Path, field: &str, c: &mut Collector) -> Result<()> {
    let f = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    for (i, line) in BufReader::new(f).lines().enumerate() {
        if c.full() {
            break;
        }
        let line = line.map_err(|e| Error::read(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let row: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| corpus_error(path, format!("line {}: not a JSON object: {e}", i + 1)))?;
        match row.get(field) {
            Some(serde_json::Value::String(s)) => c.add(s),
            Some(serde_json::Value::Array(a)) => {
                a.iter().filter_map(|v| v.as_str()).for_each(|s| c.add(s))
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct Conversation {
    #[serde(default)]
    conversations: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    #[serde(default)]
    value: Option<String>,
}

/// ShareGPT JSON, read as a stream: conversations are parsed one at a time and reading stops
/// at the byte budget (the full ShareGPT file is 600+ MB).
fn read_sharegpt(path: &Path, c: &mut Collector) -> Result<()> {
    struct Rows<'c>(&'c mut Collector);
    impl<'de> Visitor<'de> for Rows<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON array of conversations")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
            // At the byte budget this returns before the end of the array: the parser then
            // reports trailing data, which `read_sharegpt` ignores (the rest is never read).
            while !self.0.full() {
                let Some(conv) = seq.next_element::<Conversation>()? else {
                    return Ok(());
                };
                for v in conv.conversations.iter().filter_map(|t| t.value.as_deref()) {
                    self.0.add(v);
                }
            }
            Ok(())
        }
    }
    impl<'de> DeserializeSeed<'de> for Rows<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(
            self,
            d: D,
        ) -> std::result::Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    let f = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 20, f));
    match Rows(c).deserialize(&mut de) {
        Ok(()) => Ok(()),
        Err(_) if c.full() => Ok(()),
        Err(e) => Err(corpus_error(
            path,
            format!(
                "not ShareGPT JSON ([{{\"conversations\": [{{\"from\": .., \"value\": ..}}]}}]): {e}"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::prompt::{PromptBuilder, Vocab};
    use crate::trace::test_request as req;

    fn data(p: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/corpus")
            .join(p)
    }

    #[test]
    fn units_split_before_every_space() {
        let u: Vec<&str> = split_units(" Hello, world! é").collect();
        assert_eq!(u, [" Hello,", " world!", " é"]);
        assert_eq!(split_units("").count(), 0);
    }

    #[test]
    fn the_three_formats_are_read() {
        let sg = read_documents(&CorpusSpec::new(data("sharegpt.json"))).unwrap();
        assert_eq!(sg.format, CorpusFormat::ShareGpt);
        assert!(sg.documents >= 60 && !sg.truncated, "{}", sg.documents);
        assert!(sg.text.starts_with(' ') && !sg.text.contains('\n'));
        let js = read_documents(&CorpusSpec::new(data("rows.jsonl"))).unwrap();
        assert_eq!(js.format, CorpusFormat::Jsonl);
        // 120 rows, 12 of which have no "text" field.
        assert_eq!(js.documents, 108);
        let tx = read_documents(&CorpusSpec::new(data("txt"))).unwrap();
        assert_eq!(tx.format, CorpusFormat::Text);
        assert_eq!(tx.documents, 2);
        let one = read_documents(&CorpusSpec::new(data("txt/a.txt"))).unwrap();
        assert!(tx.text.starts_with(&one.text));
    }

    #[test]
    fn reading_stops_at_the_byte_budget() {
        let spec = CorpusSpec {
            max_bytes: 1000,
            ..CorpusSpec::new(data("sharegpt.json"))
        };
        let r = read_documents(&spec).unwrap();
        assert!(r.truncated);
        assert!(
            r.text.len() >= 1000 && r.text.len() < 1000 + 64,
            "{}",
            r.text.len()
        );
    }

    #[test]
    fn bad_corpora_get_clear_messages() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, "{\"text\": \"fine\"}\nnot json\n").unwrap();
        let e = read_documents(&CorpusSpec::new(&bad))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("bad.jsonl") && e.contains("line 2"), "{e}");
        let nofield = dir.path().join("nofield.jsonl");
        std::fs::write(&nofield, "{\"prompt\": \"x y\"}\n").unwrap();
        let e = read_documents(&CorpusSpec::new(&nofield))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("\"text\"") && e.contains("--prompt-corpus-field"),
            "{e}"
        );
        let ok = read_documents(&CorpusSpec {
            field: "prompt".into(),
            ..CorpusSpec::new(&nofield)
        })
        .unwrap();
        assert_eq!(ok.text, " x y");
        let sg = dir.path().join("sg.json");
        std::fs::write(&sg, "[{\"conversations\": 5}]").unwrap();
        let e = read_documents(&CorpusSpec::new(&sg))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ShareGPT"), "{e}");
        let bin = dir.path().join("bin.txt");
        std::fs::write(&bin, b"ok \xff\xfe").unwrap();
        let e = read_documents(&CorpusSpec::new(&bin))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("UTF-8") && e.contains("offset 3"), "{e}");
    }

    #[test]
    fn spec_flags_are_checked_together() {
        let p = data("rows.jsonl");
        assert_eq!(corpus_spec(None, None, "text"), Ok(None));
        assert!(corpus_spec(Some(PromptSource::Words), Some(&p), "text").is_err());
        assert!(corpus_spec(Some(PromptSource::Corpus), None, "text").is_err());
        let s = corpus_spec(None, Some(&p), "body").unwrap().unwrap();
        assert_eq!((s.path, s.field.as_str()), (p, "body"));
        assert!(corpus_spec(None, Some(Path::new("/no/such/corpus")), "text").is_err());
    }

    /// The built-in word list: one token per whitespace-separated word, as llm-sim counts.
    fn builtin_builder(block: usize) -> PromptBuilder {
        let c = Corpus::load(&CorpusSpec::new(data("txt")), None, false).unwrap();
        assert_eq!(c.stats().dropped_unstable, 0);
        PromptBuilder::with_corpus(Arc::new(Vocab::builtin()), Some(Arc::new(c)), 9, block)
    }

    #[test]
    fn builtin_corpus_prompts_have_exact_word_counts_and_share_blocks() {
        let b = builtin_builder(16);
        for n in [0usize, 1, 2, 3, 17, 40, 100, 1500] {
            let r = req(n, vec![3, 4, 5], n as u32);
            let t = b.text(&r, n);
            assert_eq!(t.split_whitespace().count(), n, "{n}: {t}");
            assert_eq!(b.token_ids(&r, n).len(), n);
            assert_eq!(b.cut_points(&r, n).last(), Some(&(t.len(), n)));
        }
        // Same hash id, same block, whatever else the request holds.
        let a = b.text(&req(1, vec![7, 8], 32), 32);
        let c = b.text(&req(2, vec![7, 9], 40), 40);
        assert_eq!(
            a.split_whitespace().take(16).collect::<Vec<_>>(),
            c.split_whitespace().take(16).collect::<Vec<_>>()
        );
        let (a2, c2) = (a.split_whitespace().nth(16), c.split_whitespace().nth(16));
        assert_ne!(a2, c2, "blocks 8 and 9 start differently");
        // Most of a block is corpus text.
        let r = req(0, (0..64).collect(), 1024);
        assert!(b.corpus_tokens(&r, 1024) > 1024 * 8 / 10);
    }

    #[test]
    fn a_partial_block_is_the_full_block_up_to_its_last_unit() {
        let b = builtin_builder(512);
        let mut full = String::new();
        b.write_block_text(77, 512, &mut full);
        for len in [3usize, 10, 200, 511] {
            let mut part = String::new();
            b.write_block_text(77, len, &mut part);
            let common = full
                .split_whitespace()
                .zip(part.split_whitespace())
                .take_while(|(a, b)| a == b)
                .count();
            assert!(
                common + MAX_UNIT_TOKENS > len,
                "len {len}: {common} in common"
            );
        }
    }

    #[test]
    fn windows_wrap_and_fill_exactly() {
        let c = Corpus::load(
            &CorpusSpec {
                max_bytes: 200,
                ..CorpusSpec::new(data("txt/a.txt"))
            },
            None,
            false,
        )
        .unwrap();
        let m = c.units() as u32;
        for need in [0usize, 1, 5, 100, 1000] {
            let mut got = 0;
            let mut ranges = Vec::new();
            let n = c.window(m - 2, need, &mut |r| {
                got += c.ids_of(r.clone()).len();
                ranges.push(r)
            });
            assert_eq!((n, got), (need, need), "{ranges:?}");
        }
    }
}
