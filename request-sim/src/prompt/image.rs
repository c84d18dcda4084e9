//! Images of known token cost (`docs/images.md`): how a request's images are sized so that
//! text + images = the row's input length exactly ([`ImageSettings::plan`]), and the images
//! themselves, PNGs whose pixels are a pure function of (seed, image id, size)
//! ([`encode_png`]), so a repeated id is the same bytes (vLLM's image-hash cache hits) and a new
//! one misses.
//!
//! The pixels are 28×28 tiles of one colour each (the colour a hash of the seed, the id and the
//! tile): rows repeat within a tile and pixels within a row, so PNG's `Up` and `Sub` filters
//! leave mostly zeros and a 448×448 image deflates to a few kilobytes.

use base64::Engine as _;
use llm_common::util::hash3;
use llm_common::vision::ImageRule;

use crate::trace::model::Image;

/// Side of a tile of one colour, pixels.
const TILE: u32 = 28;

/// How images are sized and made for a run (`--image-rule`, `--image-tokens`, `--seed`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageSettings {
    pub rule: ImageRule,
    /// Image tokens aimed at per image when the trace does not say (the markers not included).
    pub tokens: u32,
    pub seed: u64,
}

/// The sizes of one request's images and what they cost.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImagePlan {
    /// (width, height) per image, in order.
    pub sizes: Vec<(u32, u32)>,
    /// Σ image tokens (what vLLM reports as `multimodal_tokens.image`).
    pub image_tokens: u32,
    /// Σ (image tokens + markers): the prompt tokens the images take.
    pub cost: u32,
}

impl ImageSettings {
    /// The fewest prompt tokens `n` images can take under the rule.
    pub fn min_cost(&self, n: usize) -> u64 {
        n as u64 * u64::from(self.rule.min_tokens() + self.rule.extra_tokens)
    }

    /// Sizes for `images` that take at most `budget` prompt tokens (the row's input length
    /// less the template's overhead): each image aims at its own token count (a ServeGen
    /// sample: its prompt tokens, markers included) or [`Self::tokens`]; when they do not fit,
    /// every image gets an equal share of the budget. The text makes up the rest
    /// (`budget - cost`); when even the smallest images do not fit (the readers refuse such
    /// rows), they are the smallest and `cost` is over `budget`.
    pub fn plan(&self, images: &[Image], budget: u32) -> ImagePlan {
        let extra = self.rule.extra_tokens;
        let aim = |i: &Image| match i.tokens {
            0 => self.tokens,
            t => t.saturating_sub(extra),
        };
        let wanted: u64 = images.iter().map(|i| u64::from(aim(i) + extra)).sum();
        let share = (budget / images.len() as u32).saturating_sub(extra);
        let mut plan = ImagePlan::default();
        for i in images {
            let n = if wanted <= u64::from(budget) {
                aim(i)
            } else {
                aim(i).min(share)
            };
            let (w, h) = self.rule.size_for(n);
            let tokens = self.rule.tokens(w, h);
            plan.sizes.push((w, h));
            plan.image_tokens += tokens;
            plan.cost += tokens + extra;
        }
        plan
    }
}

/// The PNG of image `id` at `w`×`h` (RGB, 8 bits), a pure function of (seed, id, w, h),
/// appended to `out`.
pub fn encode_png(seed: u64, id: u64, (w, h): (u32, u32), out: &mut Vec<u8>) {
    let tiles_x = w.div_ceil(TILE);
    let mut row = vec![0u8; w as usize * 3];
    let mut enc = png::Encoder::new(&mut *out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Default);
    enc.set_filter(png::FilterType::Up);
    let Ok(mut writer) = enc.write_header() else {
        return;
    };
    let mut data = Vec::with_capacity(row.len() * h as usize);
    for y in 0..h {
        if y % TILE == 0 {
            let ty = u64::from(y / TILE);
            for tx in 0..tiles_x {
                let c = hash3(seed, id, ty * u64::from(tiles_x) + u64::from(tx)).to_le_bytes();
                let x0 = (tx * TILE) as usize;
                let x1 = ((tx + 1) * TILE).min(w) as usize;
                for px in row[x0 * 3..x1 * 3].chunks_exact_mut(3) {
                    px.copy_from_slice(&c[..3]);
                }
            }
        }
        data.extend_from_slice(&row);
    }
    let _ = writer.write_image_data(&data);
}

/// The `data:` URL of image `id` at `size` (see [`encode_png`]).
pub fn data_url(seed: u64, id: u64, size: (u32, u32)) -> String {
    let mut png = Vec::new();
    encode_png(seed, id, size, &mut png);
    let mut url = String::with_capacity(png.len() * 4 / 3 + 32);
    url.push_str("data:image/png;base64,");
    base64::engine::general_purpose::STANDARD.encode_string(&png, &mut url);
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use llm_common::vision::{image_size, QWEN2_VL};

    fn settings(tokens: u32) -> ImageSettings {
        ImageSettings {
            rule: QWEN2_VL,
            tokens,
            seed: 7,
        }
    }

    fn images(n: u64) -> Vec<Image> {
        (0..n).map(|id| Image { id, tokens: 0 }).collect()
    }

    #[test]
    fn plans_fit_the_budget_with_the_text_making_up_the_rest() {
        let s = settings(256);
        // Room for two 448² images: each costs 258.
        let p = s.plan(&images(2), 1000);
        assert_eq!(p.sizes, vec![(448, 448); 2]);
        assert_eq!((p.image_tokens, p.cost), (512, 516));
        // Too little room: an equal share each, never over the budget.
        for budget in [24, 25, 30, 100, 301, 515] {
            let p = s.plan(&images(4), budget);
            assert!(p.cost <= budget, "{budget}: {p:?}");
            assert!(budget - p.cost < 4 * 8, "{budget}: {p:?}");
        }
        // Four images need at least 4 × (4 + 2) tokens.
        assert_eq!(s.min_cost(4), 24);
        assert_eq!(s.plan(&images(4), 23).cost, 24);
        // A sample's own count (ServeGen), markers included.
        let p = s.plan(&[Image { id: 1, tokens: 66 }], 500);
        assert_eq!((p.sizes[0], p.cost), ((224, 224), 66));
    }

    #[test]
    fn the_same_id_is_the_same_bytes_and_the_header_says_the_size() {
        let a = data_url(7, 42, (448, 280));
        assert_eq!(a, data_url(7, 42, (448, 280)));
        assert_ne!(a, data_url(7, 43, (448, 280)));
        assert_ne!(a, data_url(8, 42, (448, 280)));
        let mut png = Vec::new();
        encode_png(7, 42, (448, 280), &mut png);
        assert_eq!(image_size(&png), Some((448, 280)));
        // Tiles compress: far below the raw 448 × 280 × 3 bytes.
        assert!(png.len() < 3_000, "{}", png.len());
        assert_eq!(QWEN2_VL.tokens(448, 280), 160);
    }
}
