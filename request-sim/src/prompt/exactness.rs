//! Whether prompts made of the built-in word list can be exact against the run's server, and the
//! one line that says so. The built-in words are one token each only for llm-sim's built-in
//! tokenizer (the built-in simulator, or an llm-sim endpoint); against a real model they are
//! several tokens each, so every prompt is longer than the trace says. Such a run is refused
//! unless the user opts into inexact prompts (`--allow-inexact-prompts`).

use super::{PromptError, VerifyReport};

/// Why the prompt words are the built-in list, and what can vouch for them.
#[derive(Debug, Clone, Copy)]
pub struct Fallback<'a> {
    /// Why the real vocabulary is not used (e.g. "the server has no POST /tokenize").
    pub reason: &'a str,
    /// The start-up check of sample prompts by the server's `/tokenize`, when it has one.
    pub checked: Option<&'a VerifyReport>,
    /// The server said it is llm-sim (`GET /version`).
    pub llm_sim: bool,
    /// `--allow-inexact-prompts`.
    pub allow: bool,
}

/// The verdict on a [`Fallback`]: `Ok(line)` to print (the words are exact, or the user
/// allowed inexact prompts), or `Err` with one line that says why the run is refused and what
/// to pass.
pub fn judge_fallback(f: &Fallback<'_>) -> Result<String, PromptError> {
    match f.checked {
        // Exact: one quiet line. The reason is left out: against llm-sim's built-in
        // vocabulary it is the failed vocabulary listing (its /detokenize has no tokens for the
        // control-character separators, "<unk>"), and the built-in list *is* that vocabulary.
        Some(v) if v.checked > 0 && v.ok() => {
            return Ok(format!(
                "prompt words: the built-in word list, which the server's /tokenize counts exactly ({}/{} sample prompts)",
                v.exact, v.checked
            ))
        }
        None if f.llm_sim => {
            return Ok(format!(
                "prompt words: the built-in word list ({}); the server is llm-sim, which counts them one token each",
                f.reason
            ))
        }
        _ => {}
    }
    let why = match f.checked {
        Some(v) => format!(
            "{}/{} sample prompts re-tokenize exactly on the server",
            v.exact, v.checked
        ),
        None => "the server did not say it is llm-sim (GET /version)".to_string(),
    };
    if f.allow {
        Ok(format!(
            "WARNING: prompt token counts are INEXACT: built-in word list ({}; {why}); running anyway (--allow-inexact-prompts)",
            f.reason
        ))
    } else {
        Err(PromptError::Inexact(format!(
            "prompts cannot have the trace's token counts: built-in word list ({}; {why}); pass --tokenizer with the model's tokenizer.json or directory, or --allow-inexact-prompts to run with approximate counts",
            f.reason
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(checked: usize, exact: usize) -> VerifyReport {
        VerifyReport {
            checked,
            exact,
            ..VerifyReport::default()
        }
    }

    #[test]
    fn exact_when_the_server_counts_them_or_is_llm_sim() {
        let ok = report(8, 8);
        let f = Fallback {
            reason: "r",
            checked: Some(&ok),
            llm_sim: false,
            allow: false,
        };
        assert!(judge_fallback(&f).unwrap().contains("8/8"));
        let f = Fallback {
            checked: None,
            llm_sim: true,
            ..f
        };
        assert!(judge_fallback(&f).unwrap().contains("llm-sim"));
    }

    #[test]
    fn refused_unless_allowed_otherwise() {
        let bad = report(8, 0);
        let f = Fallback {
            reason: "no /tokenize",
            checked: Some(&bad),
            llm_sim: true,
            allow: false,
        };
        let e = judge_fallback(&f).unwrap_err().to_string();
        assert!(
            e.contains("0/8") && e.contains("--allow-inexact-prompts"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let f = Fallback {
            checked: None,
            llm_sim: false,
            ..f
        };
        assert!(judge_fallback(&f).is_err());
        let allowed = Fallback { allow: true, ..f };
        assert!(judge_fallback(&allowed).unwrap().starts_with("WARNING"));
    }
}
