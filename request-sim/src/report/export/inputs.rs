//! AIPerf's `inputs.json` (`InputsFile`: `{"data": [{"session_id", "payloads": [body, …]}]}`,
//! one entry per session, its turns' request bodies in order): the bodies request-sim sent.
//!
//! The producer threads hand each body they build to an [`InputsSink`] (the bytes are appended
//! to a temporary file beside the output, so memory holds only an offset per request); at the
//! end of the run [`InputsSink::finish`] writes the file in replay order, grouped by session. A
//! request without a session is a session of its own, named by its replay index.
//! `--live-history` turns are saved as built, before their earlier answers are filled in.

use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// AIPerf's file name.
pub const INPUTS_FILE: &str = "inputs.json";

/// Where one body sits in the temporary file.
struct Entry {
    index: usize,
    session: Option<String>,
    offset: u64,
    len: u64,
}

struct Inner {
    out: BufWriter<std::fs::File>,
    offset: u64,
    entries: Vec<Entry>,
    error: Option<std::io::Error>,
}

/// Collects the bodies sent, from any thread.
pub struct InputsSink {
    tmp: PathBuf,
    inner: Mutex<Inner>,
}

impl InputsSink {
    /// A sink whose file will be `path` (its temporary file is created beside it now).
    pub fn create(path: &Path) -> crate::Result<InputsSink> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir {
            std::fs::create_dir_all(d)
                .map_err(|e| crate::Error::io(format!("cannot create {}", d.display()), e))?;
        }
        let tmp = path.with_file_name(format!(".inputs.bodies-{}", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(|e| crate::Error::write(&tmp, e))?;
        Ok(InputsSink {
            tmp,
            inner: Mutex::new(Inner {
                out: BufWriter::with_capacity(1 << 20, file),
                offset: 0,
                entries: Vec::new(),
                error: None,
            }),
        })
    }

    /// Keep the body of request `index` (of session `session`).
    pub fn add(&self, index: usize, session: Option<&str>, body: &[u8]) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if g.error.is_some() {
            return;
        }
        if let Err(e) = g.out.write_all(body) {
            g.error = Some(e);
            return;
        }
        let offset = g.offset;
        g.offset += body.len() as u64;
        g.entries.push(Entry {
            index,
            session: session.map(str::to_string),
            offset,
            len: body.len() as u64,
        });
    }

    /// Write `path` (`inputs.json`) from the bodies kept; returns how many. The temporary file
    /// is removed either way.
    pub fn finish(&self, path: &Path) -> crate::Result<usize> {
        let r = self.write(path);
        let _ = std::fs::remove_file(&self.tmp);
        r
    }

    fn write(&self, path: &Path) -> crate::Result<usize> {
        let mut g = self
            .inner
            .lock()
            .map_err(|_| crate::Error::internal("inputs.json: a producer panicked"))?;
        let tmp_err =
            |e| crate::Error::io(format!("{} (inputs.json's bodies)", self.tmp.display()), e);
        if let Some(e) = g.error.take() {
            return Err(tmp_err(e));
        }
        g.out.flush().map_err(tmp_err)?;
        let mut entries = std::mem::take(&mut g.entries);
        drop(g);
        entries.sort_by_key(|e| e.index);
        // Sessions in the order of their first request, each with its turns in order.
        let mut order: Vec<Vec<usize>> = Vec::new();
        let mut by_session: rustc_hash::FxHashMap<&str, usize> = Default::default();
        for (i, e) in entries.iter().enumerate() {
            match e.session.as_deref() {
                Some(s) => {
                    let k = *by_session.entry(s).or_insert_with(|| {
                        order.push(Vec::new());
                        order.len() - 1
                    });
                    order[k].push(i);
                }
                None => order.push(vec![i]),
            }
        }
        let mut bodies = std::fs::File::open(&self.tmp).map_err(tmp_err)?;
        let mut out = crate::util::OutputFile::create(path)?;
        let werr = |e| crate::Error::io(format!("cannot write {}", path.display()), e);
        let mut buf = Vec::new();
        out.write_all(b"{\"data\":[").map_err(werr)?;
        for (k, session) in order.iter().enumerate() {
            let first = &entries[session[0]];
            let id = first
                .session
                .clone()
                .unwrap_or_else(|| first.index.to_string());
            let sep = if k == 0 { "" } else { "," };
            let head = format!(
                "{sep}{{\"session_id\":{},\"payloads\":[",
                serde_json::json!(id)
            );
            out.write_all(head.as_bytes()).map_err(werr)?;
            for (j, &i) in session.iter().enumerate() {
                let e = &entries[i];
                buf.resize(e.len as usize, 0);
                bodies.seek(SeekFrom::Start(e.offset)).map_err(tmp_err)?;
                bodies.read_exact(&mut buf).map_err(tmp_err)?;
                if j > 0 {
                    out.write_all(b",").map_err(werr)?;
                }
                out.write_all(&buf).map_err(werr)?;
            }
            out.write_all(b"]}").map_err(werr)?;
        }
        out.write_all(b"]}\n").map_err(werr)?;
        out.commit()?;
        Ok(entries.len())
    }
}

impl Drop for InputsSink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}
