//! The wheel (`scripts/wheel.sh` with `scripts/write-wheel.py`): it ships the programs of
//! `scripts/programs.sh` under their installed names (the drop-ins for `client` and `aiperf`
//! prefixed), and it refuses to tag a dynamically linked executable manylinux.
//!
//! The executables fed to it are not built here (that is `scripts/build-static.sh`, minutes of
//! release build): a static one is a minimal ELF file written by the test (the writer reads
//! only the headers), a dynamic one is this build's own `client` (a debug build, linked against
//! the system's glibc). Needs `python3` and `bash`; without python3 the tests say so loudly and
//! pass.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::CLIENT_BIN;

/// The repository root (scripts/ is there).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python3_or_skip(what: &str) -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("\n!!!!!!!! SKIPPING {what} test: python3 not found (the wheel writer needs it) !!!!!!!!\n");
    }
    found
}

/// A minimal x86-64 ELF executable's headers: one PT_LOAD covering the file, and with
/// `dynamic` a PT_DYNAMIC segment whose entries are DT_NEEDED `needed` (if any), DT_STRTAB and
/// DT_NULL. With `dynamic` and no `needed` it has the shape of a static-pie executable (a
/// dynamic section for its own relocations, no interpreter, no library).
fn elf(dynamic: bool, needed: Option<&str>) -> Vec<u8> {
    const BASE: u64 = 0x40_0000;
    let phnum: u16 = if dynamic { 2 } else { 1 };
    let dyn_at = 64 + 56 * u64::from(phnum);
    let entries: Vec<(i64, u64)> = needed
        .map(|_| (1i64, 1u64)) // DT_NEEDED at string 1 (after the table's leading NUL)
        .into_iter()
        .chain([(5, 0), (0, 0)]) // DT_STRTAB (address set below), DT_NULL
        .collect();
    let dyn_size = if dynamic {
        16 * entries.len() as u64
    } else {
        0
    };
    let strtab_at = dyn_at + dyn_size;
    let mut strtab = vec![0u8];
    if let Some(n) = needed {
        strtab.extend_from_slice(n.as_bytes());
        strtab.push(0);
    }
    let len = strtab_at + strtab.len() as u64;

    let mut b = Vec::new();
    b.extend_from_slice(b"\x7fELF\x02\x01\x01"); // 64-bit, little-endian, version 1
    b.resize(16, 0);
    b.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    b.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(BASE + 64).to_le_bytes()); // entry
    b.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
    b.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    b.extend_from_slice(&0u32.to_le_bytes()); // flags
    for h in [64u16, 56, phnum, 64, 0, 0] {
        b.extend_from_slice(&h.to_le_bytes()); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
    }
    let mut phdr = |p_type: u32, offset: u64, size: u64| {
        b.extend_from_slice(&p_type.to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes()); // R+X
        for v in [offset, BASE + offset, BASE + offset, size, size, 0x1000] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    };
    phdr(1, 0, len); // PT_LOAD
    if dynamic {
        phdr(2, dyn_at, dyn_size); // PT_DYNAMIC
    }
    if dynamic {
        for (tag, val) in entries {
            let val = if tag == 5 { BASE + strtab_at } else { val };
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&val.to_le_bytes());
        }
    }
    b.extend_from_slice(&strtab);
    assert_eq!(b.len() as u64, len);
    b
}

fn write_exe(path: &Path, body: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The Cargo binaries `scripts/wheel.sh` expects in BIN_DIR, written as static ELF files (two
/// of them static-pie-shaped).
const CARGO_BINS: [&str; 5] = ["request-sim", "llm-sim", "trace_replay", "client", "aiperf"];

fn static_bins(dir: &Path) {
    for (i, b) in CARGO_BINS.iter().enumerate() {
        write_exe(&dir.join(b), &elf(i % 2 == 1, None));
    }
}

/// `NO_BUILD=1 BIN_DIR=bins OUT=out scripts/wheel.sh`: exit code, stdout, stderr.
fn wheel_sh(bins: &Path, out: &Path) -> (i32, String, String) {
    let o = Command::new("bash")
        .arg(root().join("scripts/wheel.sh"))
        .env("NO_BUILD", "1")
        .env("BIN_DIR", bins)
        .env("OUT", out)
        .env_remove("CHECK")
        .env_remove("TAG")
        .env_remove("TARGET")
        .output()
        .expect("run bash scripts/wheel.sh");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every wheel file in `out`.
fn wheels(out: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(out) {
        Ok(d) => d
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "whl"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn the_wheel_ships_five_programs_under_their_installed_names() {
    if !python3_or_skip("wheel contents") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (bins, out) = (tmp.path().join("bins"), tmp.path().join("dist"));
    std::fs::create_dir(&bins).unwrap();
    static_bins(&bins);
    let (code, stdout, stderr) = wheel_sh(&bins, &out);
    assert_eq!(code, 0, "{stderr}");
    let whl = PathBuf::from(stdout.trim());
    assert!(
        whl.to_string_lossy()
            .ends_with("-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
        "{whl:?}"
    );
    let list = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
        ])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(list.status.success());
    let mut scripts: Vec<String> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(".data/scripts/").map(|(_, n)| n.to_string()))
        .collect();
    scripts.sort();
    assert_eq!(
        scripts,
        [
            "llm-sim",
            "request-sim",
            "request-sim-aiperf",
            "request-sim-client",
            "trace_replay"
        ],
        "no bare `client` or `aiperf` on a user's PATH"
    );
}

#[test]
fn the_wheel_refuses_a_dynamically_linked_executable() {
    if !python3_or_skip("wheel static check") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (bins, out) = (tmp.path().join("bins"), tmp.path().join("dist"));
    std::fs::create_dir(&bins).unwrap();
    static_bins(&bins);
    // A real dynamic executable: this build's `client` (interpreter and libc), by a link.
    std::fs::remove_file(bins.join("client")).unwrap();
    std::os::unix::fs::symlink(CLIENT_BIN, bins.join("client")).unwrap();
    let (code, stdout, stderr) = wheel_sh(&bins, &out);
    assert_eq!(code, 1, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stderr.contains("refusing request-sim-client")
            && stderr.contains(&bins.join("client").display().to_string())
            && stderr.contains("dynamically linked (interpreter /")
            && stderr.contains("libc.so"),
        "{stderr}"
    );
    assert_eq!(wheels(&out), Vec::<PathBuf>::new(), "no wheel is written");

    // A library dependency alone (DT_NEEDED, no interpreter) is dynamic linking too.
    std::fs::remove_file(bins.join("client")).unwrap();
    static_bins(&bins);
    write_exe(&bins.join("llm-sim"), &elf(true, Some("libfoo.so.1")));
    let (code, _, stderr) = wheel_sh(&bins, &out);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("refusing llm-sim") && stderr.contains("(needs libfoo.so.1)"),
        "{stderr}"
    );
    assert_eq!(wheels(&out), Vec::<PathBuf>::new());

    // The same file under a tag that promises nothing beyond this machine is not refused.
    let o = Command::new("python3")
        .arg(root().join("scripts/write-wheel.py"))
        .args(["--version", "0.1.0", "--tag", "linux_x86_64", "--out"])
        .arg(&out)
        .arg(bins.join("llm-sim"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
