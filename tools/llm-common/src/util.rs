//! Small helpers request-sim and llm-sim share: deterministic hashing (no global state, no
//! external PRNG crate) and a thread with its own tokio runtime.

/// SplitMix64's increment (2^64 / golden ratio).
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output step: a fast, well-mixed 64-bit hash of one word
/// (`fmix64(z + GOLDEN)`). The workspace's one SplitMix64; request-sim uses it too.
#[inline]
pub fn mix64(z: u64) -> u64 {
    fmix64(z.wrapping_add(GOLDEN))
}

/// The SplitMix64 finaliser alone: a bijective 64-bit mixer.
#[inline]
pub fn fmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hash of a tuple of words.
#[inline]
pub fn hash3(a: u64, b: u64, c: u64) -> u64 {
    mix64(mix64(mix64(a) ^ b) ^ c)
}

/// Spawns a thread named `name` that runs `body` with a current-thread tokio runtime of its own
/// (timers and IO enabled), or with the error of building it.
pub fn spawn_runtime_thread<T: Send + 'static>(
    name: &str,
    body: impl FnOnce(std::io::Result<tokio::runtime::Runtime>) -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            body(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build(),
            )
        })
}

/// A uniform draw in `[0, 1)` from a hash.
#[inline]
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}
