#!/usr/bin/env python3
"""Writes a binary-only wheel (PEP 427) that puts executables on the PATH of the venv it is
installed into.

    scripts/write-wheel.py --version 0.1.0 --tag manylinux_2_17_x86_64.manylinux2014_x86_64 \
        --out dist request-sim llm-sim trace_replay request-sim-client=client

Each executable goes to `request_sim-<version>.data/scripts/` under its own file name, or under
NAME when given as NAME=PATH; pip (and uv, installer) copies them into the environment's `bin/`
with their executable bit. There is no Python module: the wheel is `py3-none-<platform>`, like
the wheels maturin writes for `bindings = "bin"`. Standard library only, and reproducible:
entries sorted, timestamps from SOURCE_DATE_EPOCH (default 1980-01-01), so the same binaries
give the same wheel bytes.

A manylinux or musllinux tag promises that the wheel runs on any Linux of that family, which
these executables keep only by loading no shared library: an ELF executable with an interpreter
(PT_INTERP) or a DT_NEEDED entry is refused, naming it, before anything is written.

Used by scripts/wheel.sh (docs/install.md explains why not maturin).
"""
import argparse
import base64
import hashlib
import os
import stat
import struct
import sys
import time
import zipfile

DIST = "request_sim"  # the normalised distribution name `request-sim` (PEP 503/427)
SUMMARY = ("Replay production LLM request traces against inference servers with exact prompts "
           "and timing (binaries: request-sim, llm-sim, trace_replay, request-sim-client, "
           "request-sim-aiperf)")
DESCRIPTION = """\
# request-sim

The `request-sim` trace replayer and the `llm-sim` simulated vLLM server as native executables,
with drop-ins that take other tools' command lines: `request-sim-client` (the blitz-serving
trace-replayer's `client`), `trace_replay` (UCM's `benchmarks/trace_replay.py`) and
`request-sim-aiperf` (AIPerf's `aiperf profile`). The wheel carries no Python code: installing
it puts these five programs in the environment's `bin/`.

```sh
request-sim replay   # the built-in demo: 200 requests against the built-in simulator
# a drop-in under the other tool's name, only where you ask for it:
ln -s "$(command -v request-sim-client)" ~/.local/bin/client
```

How the wheel is built and what it holds: docs/install.md in the request-sim repository.
"""


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5
PN_XNUM = 0xFFFF


def elf_dynamic_linking(body: bytes):
    """What makes an ELF executable dynamically linked: its interpreter (PT_INTERP, e.g.
    /lib64/ld-linux-x86-64.so.2) and the libraries its DT_NEEDED entries name. Both empty for a
    static executable, static-pie included (its PT_DYNAMIC holds only its own relocations).

    Read here from the program headers rather than with `readelf -d` or `file`: binutils is a
    compiler toolchain's package and `file` is missing from minimal systems and containers,
    while python3 is what this writer runs on anyway; and `file` has called static-pie
    executables "dynamically linked", which is exactly the distinction that matters here.
    Raises ValueError for an ELF file too short for its own headers."""
    try:
        if body[4] not in (1, 2) or body[5] not in (1, 2):
            raise ValueError("unknown ELF class or byte order")
        wide, end = body[4] == 2, "<" if body[5] == 1 else ">"
        # Elf64_Ehdr/Elf32_Ehdr: where the program headers are, their size and count.
        (phoff, shoff), (phentsize, phnum) = (
            (struct.unpack_from(end + "QQ", body, 0x20), struct.unpack_from(end + "HH", body, 0x36))
            if wide else
            (struct.unpack_from(end + "II", body, 0x1C), struct.unpack_from(end + "HH", body, 0x2A)))
        # Elf64_Phdr and Elf32_Phdr order their fields differently; (type, offset, vaddr, filesz).
        phdr, fields = (end + "IIQQQQQQ", (0, 2, 3, 5)) if wide else (end + "IIIIIIII", (0, 1, 2, 4))
        dyn, dyn_size = (end + "qQ", 16) if wide else (end + "iI", 8)  # one dynamic entry
        if phnum == PN_XNUM:  # more than 65534 headers: the count is section 0's sh_info
            (phnum,) = struct.unpack_from(end + "I", body, shoff + (0x2C if wide else 0x1C))
        headers = []
        for i in range(phnum):
            h = struct.unpack_from(phdr, body, phoff + i * phentsize)
            headers.append(tuple(h[f] for f in fields))
        interp, needed = "", []
        loads = [h for h in headers if h[0] == PT_LOAD]  # where a virtual address is in the file
        for p_type, offset, _, size in headers:
            if p_type == PT_INTERP:
                interp = body[offset:offset + size].split(b"\0")[0].decode(errors="replace") or "?"
            elif p_type == PT_DYNAMIC:
                entries = []
                for o in range(offset, offset + size - dyn_size + 1, dyn_size):
                    tag, val = struct.unpack_from(dyn, body, o)
                    if tag == DT_NULL:
                        break
                    entries.append((tag, val))
                strtab = next((v for t, v in entries if t == DT_STRTAB), None)
                base = next((off + strtab - vaddr for _, off, vaddr, sz in loads
                             if strtab is not None and vaddr <= strtab < vaddr + sz), None)
                for tag, val in entries:
                    if tag == DT_NEEDED:
                        at = base + val if base is not None else -1
                        name = body[at:body.find(b"\0", at)] if 0 <= at < len(body) else b"?"
                        needed.append(name.decode(errors="replace"))
        return interp, needed
    except (IndexError, struct.error) as e:
        raise ValueError(f"truncated ELF headers ({e})") from None


def portable_linux_tag(platforms) -> bool:
    """Does one of the platform tags promise any Linux of a family (manylinux, musllinux)?"""
    return any(p.startswith(("manylinux", "musllinux")) for p in platforms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--tag", required=True,
                    help="platform tag(s), dot-separated compressed set, e.g. "
                         "manylinux_2_17_x86_64.manylinux2014_x86_64")
    ap.add_argument("--out", default="dist")
    ap.add_argument("--license-file", default="", help="a license text to ship in dist-info")
    ap.add_argument("binaries", nargs="+", metavar="[NAME=]PATH",
                    help="executables to ship, under their own file names or as NAME")
    args = ap.parse_args()

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    dist_info = f"{DIST}-{args.version}.dist-info"
    data_scripts = f"{DIST}-{args.version}.data/scripts"
    platforms = args.tag.split(".")

    entries = []  # (archive name, bytes, mode)
    names, refused = set(), 0
    for spec in args.binaries:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = os.path.basename(spec), spec
        if not name or "/" in name or name in names:
            print(f"write-wheel: {spec}: the name must be a file name, once", file=sys.stderr)
            return 1
        names.add(name)
        with open(path, "rb") as f:
            body = f.read()
        if not body.startswith(b"\x7fELF") and not body.startswith((b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")):
            print(f"write-wheel: {path} is not an executable (ELF or Mach-O)", file=sys.stderr)
            return 1
        if body.startswith(b"\x7fELF") and portable_linux_tag(platforms):
            try:
                interp, needed = elf_dynamic_linking(body)
            except ValueError as e:
                print(f"write-wheel: {path}: {e}", file=sys.stderr)
                return 1
            if interp or needed:
                why = "; ".join(([f"interpreter {interp}"] if interp else [])
                                + ([f"needs {', '.join(needed)}"] if needed else []))
                print(f"write-wheel: refusing {name} ({path}): dynamically linked ({why}); "
                      f"a {args.tag} wheel must hold static executables "
                      "(scripts/build-static.sh builds them)", file=sys.stderr)
                refused += 1
        entries.append((f"{data_scripts}/{name}", body, 0o755))
    if refused:  # every dynamic one named, then nothing written
        return 1

    metadata = [
        "Metadata-Version: 2.1",
        "Name: request-sim",
        f"Version: {args.version}",
        f"Summary: {SUMMARY}",
        "License: Apache-2.0",
        "Requires-Python: >=3.7",
        "Classifier: Programming Language :: Rust",
        "Classifier: Environment :: Console",
        "Classifier: Topic :: System :: Benchmark",
        "Description-Content-Type: text/markdown",
        "",
        DESCRIPTION,
    ]
    entries.append((f"{dist_info}/METADATA", "\n".join(metadata).encode(), 0o644))
    wheel = ["Wheel-Version: 1.0", "Generator: request-sim scripts/write-wheel.py",
             "Root-Is-Purelib: false"] + [f"Tag: py3-none-{p}" for p in platforms]
    entries.append((f"{dist_info}/WHEEL", ("\n".join(wheel) + "\n").encode(), 0o644))
    if args.license_file:
        with open(args.license_file, "rb") as f:
            entries.append((f"{dist_info}/licenses/LICENSE", f.read(), 0o644))

    record_name = f"{dist_info}/RECORD"
    record = "".join(f"{name},{record_hash(body)},{len(body)}\n" for name, body, _ in entries)
    record += f"{record_name},,\n"
    entries.append((record_name, record.encode(), 0o644))

    os.makedirs(args.out, exist_ok=True)
    wheel_path = os.path.join(args.out, f"{DIST}-{args.version}-py3-none-{args.tag}.whl")
    tmp = wheel_path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        # Executables first, dist-info last with RECORD at the very end (PEP 427 recommends it).
        for name, body, mode in entries:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, so installers honour the mode bits
            zf.writestr(info, body)
    os.replace(tmp, wheel_path)
    print(wheel_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
