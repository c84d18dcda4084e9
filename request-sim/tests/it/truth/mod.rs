//! Issue 30, "every number true, every failure loud": sessions kept by detection, flags that
//! cannot act refused or warned about, saved prompts that say whether they are exact, and the
//! messages that used to mislead (each asserted with the wrong text absent).

mod flags;
mod messages;
mod saved_prompts;
mod sessions;
