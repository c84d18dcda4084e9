//! The images of a trace row (`docs/images.md`), shared by the readers that give rows images:
//! Azure LMM's `NumImages` (and request-sim's optional `ImageIds` column), Bailian's
//! `type: image`, ServeGen's multimodal samples.
//!
//! An image without an id in the trace gets a placeholder id ([`fresh`]) that the pipeline
//! turns into one unique to the row ([`resolve`], from its line), so it misses every cache; an
//! id the trace gives is kept (shifted like hash ids in `--amplify` copies), so a repeated id
//! is the same image.

use std::sync::Arc;

use llm_common::util::hash3;
use llm_common::vision::RULES;

use crate::trace::error::RowError;
use crate::trace::model::{Image, Images};

/// The bit that marks a placeholder id (no id in the trace).
const FRESH: u64 = 1 << 63;

/// Salt of the ids made for placeholders.
const FRESH_SALT: u64 = 0x001a_6e5e_ed0f_1e57;

/// Images a row may carry at most.
pub(crate) const MAX_IMAGES: u64 = 1024;

/// The fewest prompt tokens one image can take under any known rule (Qwen2-VL: 4 image
/// tokens and the two vision markers).
pub(crate) fn min_image_cost() -> u64 {
    RULES
        .iter()
        .map(|(_, r)| u64::from(r.min_tokens() + r.extra_tokens))
        .min()
        .unwrap_or(1)
}

/// `n` images without ids (each unique to its row once [`resolve`]d).
pub(crate) fn fresh(n: u32) -> Option<Images> {
    (n > 0).then(|| {
        (0..u64::from(n))
            .map(|k| Image {
                id: FRESH | k,
                tokens: 0,
            })
            .collect()
    })
}

/// One image whose id derives from a row's first hash id (a Bailian `type: image` row).
pub(crate) fn from_hash(first_hash_id: u64) -> Option<Images> {
    let id = hash3(FRESH_SALT, u64::MAX, first_hash_id) & !FRESH;
    Some(Arc::from([Image { id, tokens: 0 }]))
}

/// Images without ids, each to cost `tokens[i]` prompt tokens (ServeGen's samples).
pub(crate) fn fresh_sized(tokens: &[u32]) -> Option<Images> {
    (!tokens.is_empty()).then(|| {
        tokens
            .iter()
            .enumerate()
            .map(|(k, &t)| Image {
                id: FRESH | k as u64,
                tokens: t,
            })
            .collect()
    })
}

/// The row's placeholder ids made unique to its `line` (any copy keeps its own shift).
pub(crate) fn resolve(images: Option<Images>, line: usize) -> Option<Images> {
    let images = images?;
    if images.iter().all(|i| i.id & FRESH == 0) {
        return Some(images);
    }
    Some(
        images
            .iter()
            .map(|i| match i.id & FRESH {
                0 => *i,
                _ => Image {
                    id: hash3(FRESH_SALT, line as u64, i.id) & !FRESH,
                    tokens: i.tokens,
                },
            })
            .collect::<Arc<[Image]>>(),
    )
}

/// Checks that `n` images can fit in a prompt of `input` tokens (`field`: the count's name).
pub(crate) fn check_fits(field: &str, n: u64, input: u32) -> Result<(), RowError> {
    let bad = |what: String| RowError::Field {
        field: field.into(),
        what,
    };
    if n > MAX_IMAGES {
        return Err(bad(format!("{n} images is more than {MAX_IMAGES}")));
    }
    let need = n * min_image_cost();
    if need > u64::from(input) {
        return Err(bad(format!(
            "{n} images take at least {need} prompt tokens (the smallest image costs {}), more than the row's {input} tokens",
            min_image_cost()
        )));
    }
    Ok(())
}

/// Parses an `ImageIds` cell: `n` non-negative integers separated by spaces or `;`.
pub(crate) fn parse_ids(field: &str, text: &str, n: u32) -> Result<Option<Images>, RowError> {
    let bad = |what: String| RowError::Field {
        field: field.into(),
        what,
    };
    let ids: Vec<u64> = text
        .split(|c: char| c == ';' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<u64>()
                .ok()
                .filter(|v| v & FRESH == 0)
                .ok_or_else(|| {
                    bad(format!(
                        "expected image ids (integers below 2^63), found {t:?}"
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    if ids.len() != n as usize {
        return Err(bad(format!(
            "{} image ids for {n} images (one id per image)",
            ids.len()
        )));
    }
    Ok((n > 0).then(|| ids.into_iter().map(|id| Image { id, tokens: 0 }).collect()))
}

/// Moves a row's image ids into copy `k`'s space (`--amplify`), as its hash ids are.
pub(crate) fn shift(images: &mut Option<Images>, by: u64) {
    if let Some(im) = images.as_mut() {
        *im = im
            .iter()
            .map(|i| Image {
                id: (i.id & FRESH) | ((i.id & !FRESH).wrapping_add(by) & !FRESH),
                tokens: i.tokens,
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_are_unique_per_line_and_given_ids_are_kept() {
        let a = resolve(fresh(2), 3).unwrap();
        let b = resolve(fresh(2), 4).unwrap();
        assert_ne!(a[0].id, a[1].id);
        assert_ne!(a[0].id, b[0].id);
        assert_eq!(a, resolve(fresh(2), 3).unwrap());
        let given = parse_ids("ImageIds", "7; 9", 2).unwrap();
        assert_eq!(resolve(given.clone(), 3), given);
        assert_eq!(
            parse_ids("ImageIds", "7", 2).unwrap_err().to_string(),
            "field `ImageIds`: 1 image ids for 2 images (one id per image)"
        );
        assert_eq!(
            check_fits("NumImages", 4, 20).unwrap_err().to_string(),
            "field `NumImages`: 4 images take at least 24 prompt tokens (the smallest image costs 6), more than the row's 20 tokens"
        );
        let mut s = fresh(1);
        shift(&mut s, 1 << 44);
        assert_ne!(
            resolve(s, 3).unwrap()[0].id,
            resolve(fresh(1), 3).unwrap()[0].id
        );
    }
}
