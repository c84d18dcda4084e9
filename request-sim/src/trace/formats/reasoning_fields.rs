//! The reasoning fields of a row (`docs/traces.md`, "Reasoning"), under the spellings real
//! request logs use: a recorded thinking length and a thinking budget. One place, so every
//! JSON format that carries them reads them alike.
//!
//! - Recorded length (tokens of the output that were thinking): `reasoning_length`,
//!   `reasoning_tokens`, or OpenAI usage `usage.completion_tokens_details.reasoning_tokens`
//!   (chat) / `usage.output_tokens_details.reasoning_tokens` (Responses).
//! - Budget: vLLM's request field `thinking_token_budget`, or Anthropic's
//!   `thinking.budget_tokens`.
//!
//! Two spellings of one value on a row must agree; a recorded length above the row's output
//! length is an error (the output length is the whole output: thinking + answer).

use serde_json::{Map, Value};

use super::fields;
use crate::trace::error::RowError;
use crate::trace::model::Reasoning;

/// The spellings of a recorded thinking length, as JSON paths.
const LENGTH_PATHS: [&[&str]; 4] = [
    &["reasoning_length"],
    &["reasoning_tokens"],
    &["usage", "completion_tokens_details", "reasoning_tokens"],
    &["usage", "output_tokens_details", "reasoning_tokens"],
];

/// The spellings of a thinking budget.
const BUDGET_PATHS: [&[&str]; 2] = [&["thinking_token_budget"], &["thinking", "budget_tokens"]];

fn bad(field: impl Into<String>, what: impl Into<String>) -> RowError {
    RowError::Field {
        field: field.into(),
        what: what.into(),
    }
}

/// The value at `path` in `row` (absent or null: `None`).
fn at<'a>(row: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut v = row.get(*first)?;
    for key in rest {
        v = v.as_object()?.get(*key)?;
    }
    (!v.is_null()).then_some(v)
}

/// The one token count given under any of `paths` (they must agree), as `(path, count)`.
fn one_count(
    row: &Map<String, Value>,
    paths: &[&[&str]],
) -> Result<Option<(String, u32)>, RowError> {
    let mut found: Option<(String, u32)> = None;
    for path in paths {
        let Some(v) = at(row, path) else { continue };
        let name = path.join(".");
        let n = v.as_u64().ok_or_else(|| {
            bad(
                &name,
                format!(
                    "expected a non-negative integer (tokens), found {}",
                    fields::describe_value(v)
                ),
            )
        })?;
        let n = fields::check_length(n, 0).map_err(|w| bad(&name, w))?;
        match &found {
            Some((first, m)) if *m != n => {
                return Err(bad(
                    &name,
                    format!("{n} disagrees with `{first}` = {m} on the same row"),
                ))
            }
            Some(_) => {}
            None => found = Some((name, n)),
        }
    }
    Ok(found)
}

/// The row's recorded thinking length and budget; `output_length` is the row's whole output
/// when it gives one (a recorded length may not exceed it).
pub(crate) fn reasoning(
    row: &Map<String, Value>,
    output_length: Option<u32>,
) -> Result<Reasoning, RowError> {
    let tokens = one_count(row, &LENGTH_PATHS)?;
    let budget = one_count(row, &BUDGET_PATHS)?.map(|(_, n)| n);
    checked(tokens, budget, output_length)
}

/// The flat spellings of a typed row (`generic.rs`): `reasoning_length` / `reasoning_tokens`
/// and `thinking_token_budget`, checked as [`reasoning`] checks them.
pub(crate) fn flat(
    (length, tokens, budget): (Option<u64>, Option<u64>, Option<u64>),
    output_length: u32,
) -> Result<Reasoning, RowError> {
    let count = |name: &str, v: Option<u64>| {
        v.map(|n| {
            fields::check_length(n, 0)
                .map(|n| (name.to_owned(), n))
                .map_err(|w| bad(name, w))
        })
        .transpose()
    };
    let (length, tokens) = (
        count("reasoning_length", length)?,
        count("reasoning_tokens", tokens)?,
    );
    if let (Some((_, a)), Some((name, b))) = (&length, &tokens) {
        if a != b {
            return Err(bad(
                name,
                format!("{b} disagrees with `reasoning_length` = {a} on the same row"),
            ));
        }
    }
    let budget = count("thinking_token_budget", budget)?.map(|(_, n)| n);
    checked(length.or(tokens), budget, Some(output_length))
}

/// A recorded length (named by its field) and a budget, the length at most `output_length`.
fn checked(
    tokens: Option<(String, u32)>,
    budget: Option<u32>,
    output_length: Option<u32>,
) -> Result<Reasoning, RowError> {
    if let (Some((name, r)), Some(out)) = (&tokens, output_length) {
        if *r > out {
            return Err(bad(
                name,
                format!(
                    "{r} thinking tokens exceed the row's output_length {out} (the output length counts thinking and answer)"
                ),
            ));
        }
    }
    Ok(Reasoning {
        tokens: tokens.map(|(_, n)| n),
        budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, out: Option<u32>) -> Result<Reasoning, String> {
        let row: Map<String, Value> = serde_json::from_str(text).unwrap();
        reasoning(&row, out).map_err(|e| e.to_string())
    }

    #[test]
    fn every_spelling_is_read() {
        let r = |t, b| Reasoning {
            tokens: t,
            budget: b,
        };
        assert_eq!(
            read(r#"{"reasoning_tokens": 30}"#, Some(40)),
            Ok(r(Some(30), None))
        );
        assert_eq!(
            read(r#"{"reasoning_length": 40}"#, Some(40)),
            Ok(r(Some(40), None))
        );
        assert_eq!(
            read(
                r#"{"usage": {"completion_tokens_details": {"reasoning_tokens": 7}}}"#,
                None
            ),
            Ok(r(Some(7), None))
        );
        assert_eq!(
            read(
                r#"{"usage": {"output_tokens_details": {"reasoning_tokens": 8}}}"#,
                None
            ),
            Ok(r(Some(8), None))
        );
        assert_eq!(
            read(r#"{"thinking_token_budget": 2048}"#, None),
            Ok(r(None, Some(2048)))
        );
        assert_eq!(
            read(
                r#"{"thinking": {"type": "enabled", "budget_tokens": 1500}, "reasoning_tokens": 3, "usage": {"completion_tokens_details": {"reasoning_tokens": 3}}}"#,
                Some(10)
            ),
            Ok(r(Some(3), Some(1500)))
        );
        assert_eq!(
            read(r#"{"reasoning_tokens": null}"#, None),
            Ok(r(None, None))
        );
    }

    #[test]
    fn bad_values_are_named() {
        assert_eq!(
            read(r#"{"reasoning_tokens": 41}"#, Some(40)).unwrap_err(),
            "field `reasoning_tokens`: 41 thinking tokens exceed the row's output_length 40 (the output length counts thinking and answer)"
        );
        assert_eq!(
            read(r#"{"thinking_token_budget": -1}"#, None).unwrap_err(),
            "field `thinking_token_budget`: expected a non-negative integer (tokens), found the number -1"
        );
        assert_eq!(
            read(
                r#"{"reasoning_tokens": 5, "usage": {"completion_tokens_details": {"reasoning_tokens": 6}}}"#,
                None
            )
            .unwrap_err(),
            "field `usage.completion_tokens_details.reasoning_tokens`: 6 disagrees with `reasoning_tokens` = 5 on the same row"
        );
    }
}
