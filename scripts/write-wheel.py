#!/usr/bin/env python3
"""Writes a binary-only wheel (PEP 427) that puts executables on the PATH of the venv it is
installed into.

    scripts/write-wheel.py --version 0.1.0 --tag manylinux_2_17_x86_64.manylinux2014_x86_64 \
        --out dist request-sim llm-sim client trace_replay

Each executable goes to `request_sim-<version>.data/scripts/`, which pip (and uv, installer)
copies into the environment's `bin/` with its executable bit. There is no Python module: the
wheel is `py3-none-<platform>`, like the wheels maturin writes for `bindings = "bin"`.
Standard library only, and reproducible: entries sorted, timestamps from SOURCE_DATE_EPOCH
(default 1980-01-01), so the same binaries give the same wheel bytes.

Used by scripts/wheel.sh (docs/install.md explains why not maturin).
"""
import argparse
import base64
import hashlib
import os
import stat
import sys
import time
import zipfile

DIST = "request_sim"  # the normalised distribution name `request-sim` (PEP 503/427)
SUMMARY = ("Replay production LLM request traces against inference servers with exact prompts "
           "and timing (binaries: request-sim, llm-sim, client, trace_replay)")
DESCRIPTION = """\
# request-sim

The `request-sim` trace replayer and the `llm-sim` simulated vLLM server as native executables,
with the `client` and `trace_replay` drop-ins for the blitz-serving trace replayer's command
lines. The wheel carries no Python code: installing it puts the four programs in the
environment's `bin/`.

```sh
request-sim replay   # the built-in demo: 200 requests against the built-in simulator
```

How the wheel is built and what it holds: docs/install.md in the request-sim repository.
"""


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--tag", required=True,
                    help="platform tag(s), dot-separated compressed set, e.g. "
                         "manylinux_2_17_x86_64.manylinux2014_x86_64")
    ap.add_argument("--out", default="dist")
    ap.add_argument("--license-file", default="", help="a license text to ship in dist-info")
    ap.add_argument("binaries", nargs="+", help="executables to ship under their own names")
    args = ap.parse_args()

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    dist_info = f"{DIST}-{args.version}.dist-info"
    data_scripts = f"{DIST}-{args.version}.data/scripts"
    platforms = args.tag.split(".")

    entries = []  # (archive name, bytes, mode)
    for path in args.binaries:
        with open(path, "rb") as f:
            body = f.read()
        if not body.startswith(b"\x7fELF") and not body.startswith((b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")):
            print(f"write-wheel: {path} is not an executable (ELF or Mach-O)", file=sys.stderr)
            return 1
        entries.append((f"{data_scripts}/{os.path.basename(path)}", body, 0o755))

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
