//! `tokenizer.json` → [`Tokenizer`] with a lower memory peak than `Tokenizer::from_bytes`.
//!
//! `tokenizers` reads the `model` object through an untagged enum, which buffers the whole
//! vocabulary and merge list twice (serde's `Content`, then a `serde_json::Value`) before
//! building the model: loading Qwen3's 11 MB file peaks ~95 MB above what the tokenizer keeps
//! (measured). Here the file's top-level fields are borrowed as raw JSON, a BPE model is
//! deserialized straight into [`BPE`] (its own visitor, no buffering of the vocabulary), and the
//! tokenizer is assembled from the parts the way `tokenizers` does it: normalizer,
//! pre-tokenizer, post-processor, decoder, truncation, padding, then the added tokens in file
//! order (so their ids come out the same). Other model types take the library's own path.
//! Hand-written because the library has no lower-memory loader; its public builder is used.

use serde::Deserialize;
use serde_json::value::RawValue;
use tokenizers::models::bpe::BPE;
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PaddingParams,
    PostProcessorWrapper, PreTokenizerWrapper, Tokenizer, TokenizerBuilder, TruncationParams,
};

/// The top level of `tokenizer.json`, each part kept as its raw JSON text.
#[derive(Deserialize)]
struct Parts<'a> {
    #[serde(default)]
    version: Option<String>,
    #[serde(borrow, default)]
    truncation: Option<&'a RawValue>,
    #[serde(borrow, default)]
    padding: Option<&'a RawValue>,
    #[serde(borrow, default)]
    added_tokens: Option<&'a RawValue>,
    #[serde(borrow, default)]
    normalizer: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pre_tokenizer: Option<&'a RawValue>,
    #[serde(borrow)]
    model: &'a RawValue,
    #[serde(borrow, default)]
    decoder: Option<&'a RawValue>,
    #[serde(borrow, default)]
    post_processor: Option<&'a RawValue>,
}

/// The model's `type`, read without keeping anything else.
#[derive(Deserialize)]
struct ModelType<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a str>,
}

/// An `added_tokens` entry.
#[derive(Deserialize)]
struct AddedTokenWithId {
    #[allow(dead_code)]
    id: u32,
    #[serde(flatten)]
    token: AddedToken,
}

type Result<T> = std::result::Result<T, String>;

/// A part, `None` when absent or `null`.
fn part<'de, T: Deserialize<'de>>(name: &str, raw: Option<&'de RawValue>) -> Result<Option<T>> {
    match raw {
        None => Ok(None),
        Some(r) => serde_json::from_str::<Option<T>>(r.get()).map_err(|e| format!("{name}: {e}")),
    }
}

/// Parse `tokenizer.json`.
pub(super) fn from_bytes(bytes: &[u8]) -> Result<Tokenizer> {
    let parts: Parts = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let kind = serde_json::from_str::<ModelType>(parts.model.get())
        .map_err(|e| format!("model: {e}"))?
        .kind;
    if kind != Some("BPE") {
        return Tokenizer::from_bytes(bytes).map_err(|e| e.to_string());
    }
    if let Some(v) = parts.version.as_deref().filter(|v| *v != "1.0") {
        return Err(format!("Unknown tokenizer version '{v}'"));
    }
    let bpe: BPE = serde_json::from_str(parts.model.get()).map_err(|e| format!("model: {e}"))?;
    let built = TokenizerBuilder::<
        ModelWrapper,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    >::new()
    .with_model(bpe.into())
    .with_normalizer(part("normalizer", parts.normalizer)?)
    .with_pre_tokenizer(part("pre_tokenizer", parts.pre_tokenizer)?)
    .with_post_processor(part("post_processor", parts.post_processor)?)
    .with_decoder(part("decoder", parts.decoder)?)
    .with_truncation(part::<TruncationParams>("truncation", parts.truncation)?)
    .with_padding(part::<PaddingParams>("padding", parts.padding)?)
    .build()
    .map_err(|e| e.to_string())?;
    let mut tok = Tokenizer::from(built);
    let added: Vec<AddedTokenWithId> =
        part("added_tokens", parts.added_tokens)?.unwrap_or_default();
    let added: Vec<AddedToken> = added.into_iter().map(|t| t.token).collect();
    tok.add_tokens(&added);
    Ok(tok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small byte-level BPE tokenizer with a normalizer, a post-processor and added tokens
    /// (one of them already in the vocabulary).
    const TINY: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [
        {"id": 9, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 10, "content": "<|im|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 3, "content": "ab", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}
      ],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
        "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
        "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "Ġ": 4, "Ġa": 5, "abc": 6, "Ġab": 7, "x": 8},
        "merges": [["a", "b"], ["Ġ", "a"], ["ab", "c"], ["Ġa", "b"]]}
    }"#;

    #[test]
    fn same_tokenizer_as_the_library_loader() {
        let ours = from_bytes(TINY.as_bytes()).unwrap();
        let theirs = Tokenizer::from_bytes(TINY.as_bytes()).unwrap();
        assert_eq!(ours.get_vocab(true), theirs.get_vocab(true));
        assert_eq!(ours.token_to_id("<|im|>"), Some(10));
        for text in ["abc ab a<|end|>b", " ab<|im|>abc x", "cab"] {
            let a = ours.encode(text, true).unwrap();
            let b = theirs.encode(text, true).unwrap();
            assert_eq!(a.get_ids(), b.get_ids(), "{text}");
            assert_eq!(a.get_tokens(), b.get_tokens(), "{text}");
        }
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        // Not a BPE model, or not JSON: the library's own path and its error.
        let wl = r#"{"model": {"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"}}"#;
        assert_eq!(from_bytes(wl.as_bytes()).unwrap().get_vocab_size(true), 2);
        assert!(from_bytes(b"{").is_err());
        assert!(from_bytes(TINY.replace("\"1.0\"", "\"2.0\"").as_bytes()).is_err());
    }
}
