"""Packs sealer binaries as platform wheels and npm packages, with the
standard library only (scripts/release.sh runs it).

    python3 packaging/pack.py --version 0.1.0 --out DIR GOOS/GOARCH=BINARY ...

For each binary: a wheel ``mcp_sealer_bin-VERSION-py3-none-<platform>.whl``
(the binary under mcp_sealer_bin/bin, a ``sealer`` console script that
execs it, RECORD with every file's hash) and an npm package
``@mcp-sealer/sealer-<platform>-<arch>`` restricted by os and cpu; then the
npm wrapper ``@mcp-sealer/sealer``, which lists each platform package as an
optionalDependency of this exact version. Every archive is reproducible:
fixed times (SOURCE_DATE_EPOCH, else 2020-01-01), sorted entries, fixed modes.
"""

from __future__ import annotations

import argparse
import base64
import csv
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1577836800"))

# Go's GOOS/GOARCH -> the wheel's platform tags. The binary is static
# (CGO_ENABLED=0), so one linux wheel serves glibc and musl alike; Go 1.26
# needs macOS 12 or later.
WHEEL_TAGS = {
    "linux/amd64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    "linux/arm64": ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    "darwin/amd64": ["macosx_12_0_x86_64"],
    "darwin/arm64": ["macosx_12_0_arm64"],
    "windows/amd64": ["win_amd64"],
}
# Go's GOOS/GOARCH -> npm's os and cpu (process.platform, process.arch).
NPM_PLATFORMS = {
    "linux/amd64": ("linux", "x64"),
    "linux/arm64": ("linux", "arm64"),
    "darwin/amd64": ("darwin", "x64"),
    "darwin/arm64": ("darwin", "arm64"),
    "windows/amd64": ("win32", "x64"),
}
LICENSE = "Apache-2.0"
SUMMARY = "The sealer (MCP requestState sealing service) as a static binary: `sealer` on PATH, no Go needed"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_add(z: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def wheel(version: str, goos_arch: str, binary: Path, out: Path) -> Path:
    """Writes the platform wheel of one binary; returns its path."""
    tags = WHEEL_TAGS[goos_arch]
    name, dist = "mcp_sealer_bin", f"mcp_sealer_bin-{version}"
    exe = "sealer.exe" if goos_arch.startswith("windows/") else "sealer"
    files: list[tuple[str, bytes, int]] = []
    for src in sorted((HERE / "python" / name).iterdir()):
        if src.is_file() and src.suffix in (".py", ".typed"):
            files.append((f"{name}/{src.name}", src.read_bytes(), 0o644))
    files.append((f"{name}/bin/{exe}", binary.read_bytes(), 0o755))
    readme = (HERE / "python" / "README.md").read_text(encoding="utf-8")
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: mcp-sealer-bin\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        f"License: {LICENSE}\n"
        "Requires-Python: >=3.9\n"
        "Description-Content-Type: text/markdown\n\n" + readme
    )
    wheel_meta = "Wheel-Version: 1.0\nGenerator: sealer packaging/pack.py\nRoot-Is-Purelib: false\n"
    wheel_meta += "".join(f"Tag: py3-none-{t}\n" for t in tags)
    files += [
        (f"{dist}.dist-info/METADATA", metadata.encode(), 0o644),
        (f"{dist}.dist-info/WHEEL", wheel_meta.encode(), 0o644),
        (f"{dist}.dist-info/entry_points.txt", b"[console_scripts]\nsealer = mcp_sealer_bin:main\n", 0o644),
    ]
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for name_, data, _ in files:
        w.writerow([name_, _record_hash(data), len(data)])
    w.writerow([f"{dist}.dist-info/RECORD", "", ""])
    files.append((f"{dist}.dist-info/RECORD", record.getvalue().encode(), 0o644))
    path = out / f"{dist}-py3-none-{'.'.join(tags)}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, data, mode in files:
            _zip_add(z, p, data, mode)
    return path


def _tgz(path: Path, files: list[tuple[str, bytes, int]]) -> Path:
    """An npm package tarball: every file under package/, fixed times and owners."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode in sorted(files):
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode, info.mtime = len(data), mode, EPOCH
            t.addfile(info, io.BytesIO(data))
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=EPOCH, filename="") as g:
        g.write(buf.getvalue())
    return path


def _npm_file(name: str) -> str:
    return name.replace("@", "").replace("/", "-")


def npm_platform(version: str, goos_arch: str, binary: Path, out: Path) -> Path:
    os_, cpu = NPM_PLATFORMS[goos_arch]
    name = f"@mcp-sealer/sealer-{os_}-{cpu}"
    exe = "sealer.exe" if os_ == "win32" else "sealer"
    manifest = {
        "name": name,
        "version": version,
        "description": f"The sealer's static binary for {os_} {cpu}: installed by @mcp-sealer/sealer, which runs it",
        "license": LICENSE,
        "os": [os_],
        "cpu": [cpu],
        "files": [f"bin/{exe}"],
        "preferUnplugged": True,
    }
    files = [("package.json", (json.dumps(manifest, indent=2) + "\n").encode(), 0o644), (f"bin/{exe}", binary.read_bytes(), 0o755)]
    return _tgz(out / f"{_npm_file(name)}-{version}.tgz", files)


def npm_wrapper(version: str, platforms: list[str], out: Path) -> Path:
    src = HERE / "npm" / "sealer"
    name = "@mcp-sealer/sealer"
    manifest: dict[str, object] = {
        "name": name,
        "version": version,
        "description": "The sealer (MCP requestState sealing service) as a static binary: npx sealer, no Go, nothing downloaded",
        "license": LICENSE,
        "type": "module",
        "bin": {"sealer": "bin/sealer.js"},
        "exports": {".": "./index.js"},
        "files": ["bin/sealer.js", "index.js", "README.md"],
        "engines": {"node": ">=18"},
        "optionalDependencies": {f"@mcp-sealer/sealer-{'-'.join(NPM_PLATFORMS[p])}": version for p in sorted(NPM_PLATFORMS)},
    }
    files = [
        ("package.json", (json.dumps(manifest, indent=2) + "\n").encode(), 0o644),
        ("bin/sealer.js", (src / "bin" / "sealer.js").read_bytes(), 0o755),
        ("index.js", (src / "index.js").read_bytes(), 0o644),
        ("README.md", (src / "README.md").read_bytes(), 0o644),
    ]
    return _tgz(out / f"{_npm_file(name)}-{version}.tgz", files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", required=True, help="the release's version, without v (0.1.0)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("binaries", nargs="+", help="GOOS/GOARCH=PATH")
    args = ap.parse_args()
    if not re.fullmatch(r"\d+\.\d+\.\d+", args.version):
        ap.error(f"--version {args.version!r}: want MAJOR.MINOR.PATCH (the same for the wheel and npm)")
    args.out.mkdir(parents=True, exist_ok=True)
    platforms = []
    for spec in args.binaries:
        goos_arch, _, path = spec.partition("=")
        if goos_arch not in WHEEL_TAGS or not path:
            ap.error(f"{spec!r}: want one of {', '.join(WHEEL_TAGS)}=PATH")
        platforms.append(goos_arch)
        print(wheel(args.version, goos_arch, Path(path), args.out).name)
        print(npm_platform(args.version, goos_arch, Path(path), args.out).name)
    print(npm_wrapper(args.version, platforms, args.out).name)


if __name__ == "__main__":
    main()
