//! Image parts of chat messages (`docs/images.md`): an `image_url` part with a `data:` URL is
//! read for its size only (the PNG or JPEG header, [`llm_common::vision::image_size`]) and
//! costs the Qwen2-VL rule's tokens (`N` image tokens and the two vision markers), as vLLM
//! counts a Qwen2-VL / Qwen2.5-VL prompt.
//!
//! The image's tokens are ids derived from a hash of its encoded bytes, put before the text of
//! the prompt: the same bytes give the same ids (the prefix cache hits, as vLLM's image-hash
//! cache does), other bytes other ids (a miss from the image on). A request's image tokens
//! are all in front of its text, whatever message they came in (a simplification: vLLM keeps
//! them in place).

use std::hash::Hasher;

use base64::Engine as _;
use llm_common::util::hash3;
use llm_common::vision::{data_url_parts, image_size, QWEN2_VL};

use super::error::{bad, ApiError};
use super::http::Api;

/// The images of one request, as the engine sees them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PromptImages {
    /// The token ids of every image (markers included), in order; go before the text.
    pub ids: Vec<u32>,
    /// Per image: (the end of its tokens in the prompt, its image tokens without markers).
    pub regions: Vec<(u32, u32)>,
    /// Σ image tokens (what `multimodal_tokens.image` reports).
    pub image_tokens: u32,
}

impl PromptImages {
    /// `prompt` with the image tokens in front (unchanged without images).
    pub fn put_before(&self, mut prompt: Vec<u32>) -> Vec<u32> {
        if self.ids.is_empty() {
            return prompt;
        }
        let mut all = Vec::with_capacity(self.ids.len() + prompt.len());
        all.extend_from_slice(&self.ids);
        all.append(&mut prompt);
        all
    }

    /// Adds the image of `url` (an `image_url` part's URL); `vocab`: ids stay below it.
    pub fn add(&mut self, api: Api, url: &str, vocab: u32) -> Result<(), ApiError> {
        let Some((media, data)) = data_url_parts(url) else {
            let head: String = url.chars().take(40).collect();
            return Err(bad(
                api,
                format!("llm-sim accepts only base64 `data:` image URLs, got {head:?}."),
            ));
        };
        let (w, h) = decoded_size(data).ok_or_else(|| {
            bad(
                api,
                format!("The image ({media}) is not a PNG or JPEG whose size can be read."),
            )
        })?;
        let n = QWEN2_VL.tokens(w, h);
        let mut hasher = rustc_hash::FxHasher::default();
        hasher.write(data.as_bytes());
        let key = hasher.finish();
        let vocab = u64::from(vocab.max(1));
        let total = n + QWEN2_VL.extra_tokens;
        self.ids
            .extend((0..total).map(|i| (hash3(key, u64::from(i), 0x1a6e) % vocab) as u32));
        self.regions.push((self.ids.len() as u32, n));
        self.image_tokens += n;
        Ok(())
    }
}

/// The (width, height) of a base64 image, decoding only as much as its header needs (PNG:
/// the first 32 bytes; JPEG: up to its start-of-frame marker, so the whole when needed).
fn decoded_size(b64: &str) -> Option<(u32, u32)> {
    let engine = base64::engine::general_purpose::STANDARD;
    let head = b64.get(..44)?;
    let bytes = engine.decode(head).ok()?;
    if let Some(size) = image_size(&bytes) {
        return Some(size);
    }
    if bytes.starts_with(&[0xff, 0xd8]) {
        return image_size(&engine.decode(b64).ok()?);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_url(w: u32, h: u32, salt: u8) -> String {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&w.to_be_bytes());
        png.extend_from_slice(&h.to_be_bytes());
        png.extend_from_slice(&[8, 2, 0, 0, 0, salt, salt, salt, salt]);
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(png)
        )
    }

    #[test]
    fn counts_by_the_rule_and_keys_by_the_bytes() {
        let mut a = PromptImages::default();
        a.add(Api::Chat, &png_url(448, 448, 1), 1000).unwrap();
        a.add(Api::Chat, &png_url(300, 200, 1), 1000).unwrap();
        assert_eq!(a.image_tokens, 256 + 77);
        assert_eq!(a.ids.len(), 258 + 79);
        assert_eq!(a.regions, vec![(258, 256), (337, 77)]);
        assert!(a.ids.iter().all(|&i| i < 1000));
        let mut same = PromptImages::default();
        same.add(Api::Chat, &png_url(448, 448, 1), 1000).unwrap();
        assert_eq!(same.ids[..], a.ids[..258]);
        let mut other = PromptImages::default();
        other.add(Api::Chat, &png_url(448, 448, 2), 1000).unwrap();
        assert_ne!(other.ids[..], a.ids[..258]);
        let e = a.add(Api::Chat, "https://x/y.png", 1000).unwrap_err();
        assert!(e.message.contains("data:"), "{}", e.message);
    }
}
