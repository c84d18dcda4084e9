//! The shape of the code, checked: no import circle between files, nor between the folders of
//! one folder, in `request-sim/src` and every crate of `tools/` (the claim of
//! `docs/architecture.md`, "Checking the shape").
//!
//! Written by hand: no crate reads Rust imports and resolves re-exports without compiling the
//! code (syn parses but does not resolve; rust-analyzer is not a library one can embed in a
//! test). What it reads, per file outside `#[cfg(test)]` modules, comments and strings:
//! - every path that starts with `crate::`, `super::`, `self::` or a child module declared in
//!   the file (`mod x;`), in `use` trees and inline in code;
//! - a path into a folder's `mod.rs` that names an item the `mod.rs` re-exports (`pub use`) is
//!   followed to the item's own file, so a facade of re-exports links nothing by itself.
//!
//! A file's edge goes to the file that defines the module the path names (the longest prefix
//! of the path that is a module). Folders: for each folder, its files and sub-folders are the
//! nodes, and a file edge between two of them (from anywhere inside each) is their edge.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// One crate's source: module path (`["trace", "model"]`) → file, and each file's text with
/// tests, comments and strings removed.
struct Crate {
    root: PathBuf,
    modules: BTreeMap<Vec<String>, PathBuf>,
    code: HashMap<PathBuf, String>,
}

fn module_path(root: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(root).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    match last.as_str() {
        "lib.rs" if parts.is_empty() => {}
        "main.rs" if parts.is_empty() => return None,
        "mod.rs" => {}
        name => parts.push(name.strip_suffix(".rs")?.to_owned()),
    }
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    Some(parts)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text with comments, string and char literals blanked out.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal ('x', '\n', '{'), not a lifetime ('a).
            b'\'' if b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\') => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The text without `#[cfg(test)]` items (a test module or function, its braces matched).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (Some(open), semi) = (after.find('{'), after.find(';')) else {
            rest = "";
            break;
        };
        if semi.is_some_and(|s| s < open) {
            // `#[cfg(test)] use ...;` or `mod tests;`
            rest = &after[semi.unwrap_or(0) + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (k, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        let mut modules = BTreeMap::new();
        let mut code = HashMap::new();
        for f in files {
            let Some(m) = module_path(root, &f) else {
                continue;
            };
            let text = fs::read_to_string(&f).expect("read a source file");
            code.insert(f.clone(), without_tests(&strip(&text)));
            modules.insert(m, f);
        }
        Crate {
            root: root.to_owned(),
            modules,
            code,
        }
    }

    fn module_of(&self, file: &Path) -> Vec<String> {
        module_path(&self.root, file).unwrap_or_default()
    }

    /// The `pub use` re-exports of a file: the name it gives → the absolute path it names.
    fn reexports(&self, file: &Path) -> HashMap<String, Vec<String>> {
        let here = self.module_of(file);
        let code = &self.code[file];
        let mut map = HashMap::new();
        for stmt in use_statements(code) {
            if !stmt.public {
                continue;
            }
            for path in expand_tree(&stmt.tree) {
                let (path, alias) = split_alias(path);
                let Some(abs) = self.absolute(&here, &path) else {
                    continue;
                };
                let name = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
                map.insert(name, abs);
            }
        }
        map
    }

    /// A path relative to the module `here` made absolute; `None` when it
    /// starts outside the crate (`std::`, another crate).
    fn absolute(&self, here: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        // The module whose children `super` and `self` are relative to.
        let mut base: Vec<String> = here.to_vec();
        let mut rest = path;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            name => {
                let mut child = here.to_vec();
                child.push(name.to_owned());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
        }
        let mut abs = base;
        abs.extend(rest.iter().cloned());
        Some(abs)
    }

    /// The file that defines what `abs` names, following `pub use` re-exports of `mod.rs`
    /// facades.
    fn resolve(&self, abs: &[String], depth: usize) -> Option<PathBuf> {
        let n = (0..=abs.len())
            .rev()
            .find(|&n| self.modules.contains_key(&abs[..n]))?;
        let file = &self.modules[&abs[..n]];
        if n < abs.len() && depth < 8 {
            if let Some(target) = self.reexports(file).get(&abs[n]) {
                let mut next = target.clone();
                next.extend(abs[n + 1..].iter().cloned());
                if next != abs {
                    return self.resolve(&next, depth + 1).or(Some(file.clone()));
                }
            }
        }
        Some(file.clone())
    }

    /// Every file → the files it takes something from (itself excluded).
    fn edges(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut edges = BTreeMap::new();
        for file in self.modules.values() {
            let here = self.module_of(file);
            let code = &self.code[file];
            let mut targets = BTreeSet::new();
            let mut add = |path: Vec<String>| {
                if let Some(abs) = self.absolute(&here, &path) {
                    if let Some(t) = self.resolve(&abs, 0) {
                        if &t != file {
                            targets.insert(t);
                        }
                    }
                }
            };
            for stmt in use_statements(code) {
                if stmt.public {
                    continue; // a re-export: followed where it is used
                }
                for path in expand_tree(&stmt.tree) {
                    add(split_alias(path).0);
                }
            }
            for path in inline_paths(&without_uses(code)) {
                add(path);
            }
            edges.insert(file.clone(), targets);
        }
        edges
    }
}

struct UseStatement {
    public: bool,
    tree: String,
    /// The statement's text from `use` to before its `;`, and that length.
    head: String,
    len: usize,
}

/// The code with its `use` statements blanked out (what `inline_paths` reads).
fn without_uses(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    for stmt in use_statements(code) {
        let Some(at) = rest.find(&stmt.head) else {
            continue;
        };
        out.push_str(&rest[..at]);
        rest = &rest[at + stmt.len..];
    }
    out.push_str(rest);
    out
}

/// The `use` statements of the code (`pub use`, `pub(crate) use` and plain `use`).
fn use_statements(code: &str) -> Vec<UseStatement> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while let Some(at) = code[i..].find("use ") {
        let start = i + at;
        i = start + 4;
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let line_start = code[..start].rfind('\n').map_or(0, |p| p + 1);
        let prefix = code[line_start..start].trim();
        let public = prefix.starts_with("pub");
        if !(prefix.is_empty() || public) {
            continue;
        }
        let Some(end) = code[start..].find(';') else {
            break;
        };
        out.push(UseStatement {
            public,
            tree: code[start + 4..start + end].split_whitespace().collect(),
            head: code[start..start + end].to_owned(),
            len: end,
        });
        i = start + end;
    }
    out
}

/// `a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e as f` as segments (an `as` alias
/// kept as a last segment `as f`).
fn expand_tree(tree: &str) -> Vec<Vec<String>> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let head = tree[..open].trim_end_matches("::");
            let mut p = prefix.to_vec();
            p.extend(segments(head));
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut last = 0;
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&p, &inner[last..k], out);
                        last = k + 1;
                    }
                    _ => {}
                }
            }
            go(&p, &inner[last..], out);
        } else if !tree.is_empty() {
            let mut p = prefix.to_vec();
            p.extend(segments(&tree.replace("as", " as ")));
            out.push(p);
        }
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

fn segments(s: &str) -> Vec<String> {
    s.split("::")
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `[a, b, "c as d"]` → (`[a, b, c]`, `Some(d)`); `self` at the end names the module itself.
fn split_alias(mut path: Vec<String>) -> (Vec<String>, Option<String>) {
    let mut alias = None;
    if let Some(last) = path.pop() {
        let mut words = last.split_whitespace();
        let name = words.next().unwrap_or_default().to_owned();
        if words.next() == Some("as") {
            alias = words.next().map(str::to_owned);
        }
        if name != "self" && name != "*" {
            path.push(name);
        }
    }
    (path, alias)
}

/// Paths in code (outside `use`): `crate::a::b`, `super::x`, `self::y`, `child::z`.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let starts = (c.is_ascii_alphabetic() || c == b'_')
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b':') {
            j += 1;
        }
        let word = &code[i..j];
        if word.contains("::") {
            out.push(segments(word));
        }
        i = j;
    }
    out
}

/// The circles of a graph (its strongly connected components of more than one node).
fn circles<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    // Tarjan's algorithm, iterative enough for a few hundred nodes (recursion depth is the
    // longest import chain).
    struct State<N> {
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on: BTreeSet<N>,
        out: Vec<Vec<N>>,
    }
    fn visit<N: Ord + Clone>(n: &N, edges: &BTreeMap<N, BTreeSet<N>>, s: &mut State<N>) {
        let k = s.index.len();
        s.index.insert(n.clone(), k);
        s.low.insert(n.clone(), k);
        s.stack.push(n.clone());
        s.on.insert(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            if !s.index.contains_key(m) {
                visit(m, edges, s);
                let l = s.low[m].min(s.low[n]);
                s.low.insert(n.clone(), l);
            } else if s.on.contains(m) {
                let l = s.index[m].min(s.low[n]);
                s.low.insert(n.clone(), l);
            }
        }
        if s.low[n] == s.index[n] {
            let mut comp = Vec::new();
            while let Some(m) = s.stack.pop() {
                s.on.remove(&m);
                let done = &m == n;
                comp.push(m);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in edges.keys() {
        if !s.index.contains_key(n) {
            visit(n, edges, &mut s);
        }
    }
    s.out
}

/// The circles of one crate, between files and between the entries of each folder, as
/// readable lines.
fn crate_circles(root: &Path) -> Vec<String> {
    let krate = Crate::read(root);
    let edges = krate.edges();
    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut found = Vec::new();
    for c in circles(&edges) {
        let names: Vec<String> = c.iter().map(|p| rel(p)).collect();
        // The arrows inside the circle, to show where to cut it.
        let mut arrows = Vec::new();
        for a in &c {
            for b in edges[a].iter().filter(|b| c.contains(b)) {
                arrows.push(format!("{} -> {}", rel(a), rel(b)));
            }
        }
        found.push(format!(
            "files: {}\n    ({})",
            names.join(" <-> "),
            arrows.join(", ")
        ));
    }
    // Folders: within each folder, the entry (file or sub-folder) each file sits in.
    let mut folders: BTreeSet<PathBuf> = BTreeSet::new();
    for f in edges.keys() {
        let mut d = f.parent();
        while let Some(dir) = d {
            if !dir.starts_with(root) {
                break;
            }
            folders.insert(dir.to_owned());
            d = dir.parent();
        }
    }
    for dir in folders {
        let entry = |f: &Path| -> Option<PathBuf> {
            let rest = f.strip_prefix(&dir).ok()?;
            let first = rest.iter().next()?;
            Some(dir.join(first))
        };
        let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (from, tos) in &edges {
            let Some(a) = entry(from) else { continue };
            for to in tos {
                let Some(b) = entry(to) else { continue };
                if a != b {
                    graph.entry(a.clone()).or_default().insert(b);
                }
            }
        }
        // Circles of files alone are reported above.
        for c in circles(&graph)
            .into_iter()
            .filter(|c| c.iter().any(|p| p.is_dir()))
        {
            let names: Vec<String> = c.iter().map(|p| rel(p)).collect();
            found.push(format!(
                "folders in {}/: {}",
                rel(&dir),
                names.join(" <-> ")
            ));
        }
    }
    found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

fn crate_roots() -> Vec<PathBuf> {
    let ws = workspace();
    let mut roots = vec![ws.join("request-sim/src")];
    let mut tools: Vec<PathBuf> = fs::read_dir(ws.join("tools"))
        .expect("tools/")
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    tools.sort();
    roots.extend(tools);
    roots
}

#[test]
fn no_import_circle_between_files_or_folders() {
    let mut all = Vec::new();
    for root in crate_roots() {
        for c in crate_circles(&root) {
            all.push(format!("{}: {c}", root.display()));
        }
    }
    assert!(all.is_empty(), "import circles:\n{}", all.join("\n"));
}

/// The check itself finds a circle: two files that take from each other, and two folders.
#[test]
fn the_check_finds_a_circle() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    fs::create_dir_all(src.join("a")).unwrap();
    fs::create_dir_all(src.join("b")).unwrap();
    fs::write(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n",
    )
    .unwrap();
    fs::write(src.join("c.rs"), "use crate::d::Y;\npub struct X;\n").unwrap();
    fs::write(
        src.join("d.rs"),
        "// use crate::c::X; in a comment is no import\npub struct Y(crate::c::X);\n",
    )
    .unwrap();
    fs::write(src.join("a/mod.rs"), "mod one;\npub use one::A;\n").unwrap();
    fs::write(src.join("a/one.rs"), "pub struct A(pub crate::b::B);\n").unwrap();
    fs::write(src.join("b/mod.rs"), "mod two;\npub use two::{B, C};\n").unwrap();
    fs::write(
        src.join("b/two.rs"),
        "pub struct B;\npub fn c(_: crate::a::A) {}\npub struct C;\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
    )
    .unwrap();
    let found = crate_circles(src);
    assert!(
        found
            .iter()
            .any(|c| c.starts_with("files: c.rs <-> d.rs\n")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|c| c.starts_with("files: a/one.rs <-> b/two.rs\n")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|c| c.starts_with("folders in /: ") || c.contains("a <-> ")),
        "{found:?}"
    );
    // Without the edge back, nothing.
    fs::write(src.join("d.rs"), "pub struct Y;\n").unwrap();
    fs::write(src.join("b/two.rs"), "pub struct B;\npub struct C;\n").unwrap();
    assert_eq!(crate_circles(src), Vec::<String>::new());
}

#[test]
#[ignore]
fn print_edges() {
    let root = workspace().join(std::env::var("SHAPE_CRATE").unwrap_or("request-sim/src".into()));
    let k = Crate::read(&root);
    let want = std::env::var("SHAPE_FILE").unwrap_or_default();
    for (f, t) in k.edges() {
        if f.ends_with(&want) {
            println!("{} -> {:?}", f.display(), t);
            println!("code: {}", &k.code[&f][..k.code[&f].len().min(3000)]);
        }
    }
}
