//! Helpers below every stage of the pipeline (trace → … → report), holding no stage's types:
//! the one percentile interpolation both the trace analysis and the run statistics use, the
//! one way JSON files and JSON on stdout are written, and the one way a command's output file is
//! written (whole or not at all, never over its input: [`OutputFile`], [`refuse_input_as_output`]).
//! (The workspace's one SplitMix64 mixer is `llm_common::util`, the lowest crate.)

use std::path::{Path, PathBuf};

/// Give the memory freed so far back to the operating system. mimalloc (the binaries' global
/// allocator) keeps freed pages for reuse; start-up's tokenizer, once dropped, would otherwise
/// stay in the resident set for the whole run. No effect on memory of another allocator.
#[allow(unsafe_code)]
pub fn release_freed_memory() {
    // SAFETY: `mi_collect` takes no pointers; it only walks mimalloc's own heaps and arenas.
    // Hand-written: the `mimalloc` crate does not expose it.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// Linear-interpolation percentile of sorted values (numpy's default).
/// `p` in [0, 100]; returns 0 for no values.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let (lo, hi, frac) = rank(sorted.len() as u64, p);
    let a = sorted[lo as usize];
    let b = sorted[hi as usize];
    lerp(a, b, frac)
}

/// Index pair and fraction for percentile `p` of `n` values.
pub(crate) fn rank(n: u64, p: f64) -> (u64, u64, f64) {
    let p = p.clamp(0.0, 100.0);
    let pos = p / 100.0 * (n - 1) as f64;
    let lo = pos.floor() as u64;
    let lo = lo.min(n - 1);
    let hi = (lo + 1).min(n - 1);
    (lo, hi, pos - lo as f64)
}

pub(crate) fn lerp(a: f64, b: f64, frac: f64) -> f64 {
    if frac == 0.0 || a == b {
        a
    } else {
        // numpy's _lerp: a + (b - a) * t, evaluated from the nearer end for t >= 0.5.
        if frac >= 0.5 {
            b - (b - a) * (1.0 - frac)
        } else {
            a + (b - a) * frac
        }
    }
}

/// Write `value` as pretty JSON (and a newline) to `path`, creating its directory.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> crate::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        crate::Error::internal(format!("{}: cannot encode JSON: {e}", path.display()))
    })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
    }
    std::fs::write(path, text + "\n").map_err(|e| crate::Error::write(path, e))
}

/// Where a command writes a trace: standard output (`-`), or a file written whole or not at
/// all ([`OutputFile`]). Call [`Output::commit`] when everything is written; dropped without
/// it, a file output is left as it was.
pub enum Output {
    Stdout(std::io::BufWriter<std::io::StdoutLock<'static>>),
    File(OutputFile),
}

impl Output {
    /// Flush, and put a file output in place ([`OutputFile::commit`]).
    pub fn commit(self) -> crate::Result<()> {
        match self {
            Output::Stdout(mut w) => std::io::Write::flush(&mut w)
                .map_err(|e| crate::Error::io("cannot write to stdout", e)),
            Output::File(f) => f.commit(),
        }
    }
}

impl std::io::Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Stdout(w) => w.write(buf),
            Output::File(f) => f.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout(w) => w.write_all(buf),
            Output::File(f) => f.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Stdout(w) => w.flush(),
            Output::File(f) => f.flush(),
        }
    }
}

/// A buffered writer to `path` ([`OutputFile`]), or to standard output when `path` is `-`
/// (the commands that write a trace).
pub fn create_output(path: &Path) -> crate::Result<Output> {
    Ok(if path.as_os_str() == "-" {
        Output::Stdout(std::io::BufWriter::new(std::io::stdout().lock()))
    } else {
        Output::File(OutputFile::create(path)?)
    })
}

/// A file written whole or not at all. The bytes go to a temporary file beside `path`
/// (`.NAME.tmp-PID`, in the same directory so the rename stays on one file system);
/// [`OutputFile::commit`] renames it over `path`. Dropped without a commit (an error on the
/// way), the temporary file is removed and whatever was at `path` is untouched. A `path` that
/// is not a regular file (`/dev/null`, `/dev/stdout`, a named pipe) is written directly: it
/// cannot be replaced, and holds nothing to lose.
pub struct OutputFile {
    /// Where the file goes (a symbolic link's target: the link stays a link).
    path: PathBuf,
    /// The temporary file, `None` when writing `path` directly.
    tmp: Option<PathBuf>,
    out: std::io::BufWriter<std::fs::File>,
}

impl OutputFile {
    /// A new output for `path` (its directory created when missing).
    pub fn create(path: &Path) -> crate::Result<OutputFile> {
        let cannot = |e| crate::Error::write(path, e);
        // Follow a symbolic link, so the trace lands where it points (a dangling one is
        // replaced).
        let target = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
            }
            _ => path.to_path_buf(),
        };
        let existing = std::fs::metadata(&target).ok();
        if existing.as_ref().is_some_and(|m| !m.is_file()) {
            let file = std::fs::File::create(&target).map_err(cannot)?;
            return Ok(OutputFile {
                path: target,
                tmp: None,
                out: std::io::BufWriter::with_capacity(1 << 20, file),
            });
        }
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
        }
        let name = target
            .file_name()
            .ok_or_else(|| crate::Error::config(format!("{}: not a file name", path.display())))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = target.with_file_name(tmp_name);
        let file = std::fs::File::create(&tmp).map_err(cannot)?;
        // A replaced file keeps its permissions.
        if let Some(m) = &existing {
            let _ = file.set_permissions(m.permissions());
        }
        Ok(OutputFile {
            path: target,
            tmp: Some(tmp),
            out: std::io::BufWriter::with_capacity(1 << 20, file),
        })
    }

    /// Flush, sync and rename into place: from here `path` holds everything written.
    pub fn commit(mut self) -> crate::Result<()> {
        let cannot = |e| crate::Error::write(&self.path, e);
        std::io::Write::flush(&mut self.out).map_err(cannot)?;
        let Some(tmp) = self.tmp.take() else {
            return Ok(());
        };
        let placed = self
            .out
            .get_ref()
            .sync_all()
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(cannot(e));
        }
        Ok(())
    }
}

impl std::io::Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Drop for OutputFile {
    /// Not committed: the temporary file goes, `path` is as it was.
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Refuses to write `output` (named by `flag`) when it is the file `input` (named by `what`):
/// the same path once canonicalised, or on unix the same device and inode (a hard link). `-`
/// as the input is standard input, compared when it is a file. Checked before anything is read,
/// so the input is never overwritten with its own conversion.
pub fn refuse_input_as_output(
    output: &Path,
    flag: &str,
    input: &Path,
    what: &str,
) -> crate::Result<()> {
    if output.as_os_str() == "-" || !same_file(output, input) {
        return Ok(());
    }
    Err(crate::Error::config(format!(
        "{}: {flag} names the {what} {} itself: writing it would destroy the {what}; give {flag} another path",
        output.display(),
        input.display()
    )))
}

/// `files` written as `000000.json`, `000001.json`, … into a new directory `out`, whole or not
/// at all (a temporary directory beside it, renamed into place). `out` must not exist or be an
/// empty directory, and must not lie inside `input` (the trace read): nothing read is ever
/// written over or into.
pub fn write_directory(out: &Path, input: &Path, files: &[Vec<u8>]) -> crate::Result<()> {
    let refuse = |what: &str| {
        Err(crate::Error::config(format!(
            "{}: {what}; a corpus is written into a new (or empty) directory, never over the input",
            out.display()
        )))
    };
    if out.as_os_str() == "-" {
        return refuse("an agent corpus is a directory of files, not standard output");
    }
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (out_abs, in_abs) = (abs(out), abs(input));
    let in_real = std::fs::canonicalize(input).unwrap_or_else(|_| in_abs.clone());
    let out_real = out_abs
        .parent()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.join(out_abs.file_name().unwrap_or_default()))
        .unwrap_or_else(|| out_abs.clone());
    if out_real.starts_with(&in_real) || in_real.starts_with(&out_real) {
        return refuse(&format!(
            "it is the input {} or lies inside it",
            input.display()
        ));
    }
    match std::fs::read_dir(out).map(|mut d| d.next().is_some()) {
        Ok(true) => return refuse("exists and is not empty"),
        Ok(false) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return refuse("exists and is not a directory"),
    }
    let name = out_abs.file_name().unwrap_or_default().to_string_lossy();
    let tmp = out_abs.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&tmp)?;
        for (i, bytes) in files.iter().enumerate() {
            std::fs::write(tmp.join(format!("{i:06}.json")), bytes)?;
        }
        if out.exists() {
            std::fs::remove_dir(out)?;
        }
        std::fs::rename(&tmp, out)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        crate::Error::write(out, e)
    })
}

/// True when two output paths would be written as one file: one existing file ([`same_file`]),
/// or, for files not there yet, the same path once `.`, `..` and the symbolic links of the
/// existing part of the path are resolved (`rd/summary.json` and `./x/../rd/summary.json`).
/// Two names of a non-regular file (`/dev/null`) are not one output: it holds nothing to lose.
pub fn same_output(a: &Path, b: &Path) -> bool {
    let regular_or_absent = |p: &Path| std::fs::metadata(p).map_or(true, |m| m.is_file());
    if !(regular_or_absent(a) && regular_or_absent(b)) {
        return false;
    }
    same_file(a, b) || resolved(a) == resolved(b)
}

/// `p` as an absolute path with its existing part canonicalised (links followed) and the rest
/// folded lexically (`.` dropped, `..` taking off the component before it).
fn resolved(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    // The longest existing ancestor, canonicalised, then the rest on it.
    let mut base = abs.as_path();
    let mut rest = Vec::new();
    let canonical = loop {
        if let Ok(c) = std::fs::canonicalize(base) {
            break c;
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                base = parent;
            }
            _ => break base.to_path_buf(),
        }
    };
    let mut out = canonical;
    for name in rest.iter().rev() {
        out.push(name);
    }
    let mut folded = PathBuf::new();
    for c in out.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                folded.pop();
            }
            c => folded.push(c),
        }
    }
    folded
}

/// True when `a` and `b` are one existing regular file (see [`refuse_input_as_output`]; two
/// names of `/dev/null` are not one input and output).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let stdin = Path::new("/dev/stdin");
    let resolve = |p: &Path| {
        if p.as_os_str() == "-" && cfg!(unix) {
            stdin.to_path_buf()
        } else {
            p.to_path_buf()
        }
    };
    let (a, b) = (resolve(a), resolve(b));
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(&a), std::fs::metadata(&b)) else {
        return false;
    };
    if !(ma.is_file() && mb.is_file()) {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()) {
            return true;
        }
    }
    #[cfg(not(unix))]
    let _ = (&ma, &mb);
    matches!(
        (std::fs::canonicalize(&a), std::fs::canonicalize(&b)),
        (Ok(x), Ok(y)) if x == y
    )
}

/// Write `text` to stdout. A closed pipe (`request-sim analyze ... | head`) is not an error: the
/// reader has what it wanted, so the rest of the output is dropped (no panic, exit code 0).
pub fn print_stdout(text: &str) -> crate::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(crate::Error::io("cannot write to stdout", e))
        }
        _ => Ok(()),
    }
}

/// Print `value` as pretty JSON on stdout (see [`print_stdout`]).
pub fn print_json(value: &impl serde::Serialize) -> crate::Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| crate::Error::internal(format!("cannot encode JSON: {e}")))?;
    print_stdout(&(text + "\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_linear_percentiles() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_sorted(&v, 50.0), 2.5);
        assert_eq!(percentile_sorted(&v, 0.0), 1.0);
        assert_eq!(percentile_sorted(&v, 100.0), 4.0);
        assert!((percentile_sorted(&v, 99.0) - 3.97).abs() < 1e-12);
        assert!((percentile_sorted(&v, 90.0) - 3.7).abs() < 1e-12);
        assert_eq!(percentile_sorted(&[7.0], 99.0), 7.0);
        assert_eq!(percentile_sorted(&[], 99.0), 0.0);
    }

    #[test]
    fn an_output_file_is_whole_or_left_as_it_was() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.jsonl");
        let mut f = OutputFile::create(&path).unwrap();
        f.write_all(b"new\n").unwrap();
        assert!(!path.exists(), "nothing in place before the commit");
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let mut f = OutputFile::create(&path).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
        // A link to the file is the file; /dev/null is not an input.
        let link = dir.path().join("link");
        std::fs::hard_link(&path, &link).unwrap();
        assert!(same_file(&link, &path));
        assert!(!same_file(&link, &dir.path().join("missing")));
        assert!(!same_file(Path::new("/dev/null"), Path::new("/dev/null")));
        let e = refuse_input_as_output(&link, "-o", &path, "log").unwrap_err();
        assert!(e.to_string().contains("-o names the log"), "{e}");
    }
}
