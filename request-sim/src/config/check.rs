//! Checks of one flag value that several setting groups share: a positive number, a file that
//! exists.

use crate::{Error, Result};

/// `v` when it is a finite number above 0, else the error naming `name`.
pub(super) fn positive(name: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::config(format!(
            "{name} must be a positive number, got {v}"
        )))
    }
}

/// The error naming `flag` when `p` does not exist.
pub(super) fn must_exist(flag: &str, p: &std::path::Path) -> Result<()> {
    if p.exists() {
        Ok(())
    } else {
        Err(Error::config(format!(
            "{flag} {}: no such file",
            p.display()
        )))
    }
}
