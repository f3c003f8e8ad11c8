#!/usr/bin/env python3
"""Keeps the minimum supported Rust version (MSRV) true.

The workspace's `rust-version` (Cargo.toml, `[workspace.package]`) is the
oldest toolchain the locked dependency tree builds with: the highest
`rust-version` any crate in Cargo.lock declares (cargo refuses to build a
crate on an older toolchain). Only one toolchain is installed where CI runs,
so instead of building on the old one this script checks, for every locked
crate (every feature, every platform):

* no crate declares a `rust-version` above the workspace's (else cargo on the
  stated MSRV refuses the build: raise the workspace's `rust-version`, or pin
  the crate to an older release with `cargo update -p NAME --precise VER`);
* the workspace's is not above the highest declared one (else the MSRV
  claims less than the truth: lower it);
* README.md states the same version.

Our own code's use of newer standard-library APIs is checked by clippy's
`incompatible_msrv` lint, which reads the same `rust-version`.

Run from anywhere: `python3 .ci/msrv.py`.
"""

import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def version(text):
    """'1.89' or '1.89.0' as a comparable tuple (1, 89, 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--all-features"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    members = set(meta["workspace_members"])
    workspace = re.search(
        r'^\[workspace\.package\][^\[]*?^rust-version\s*=\s*"([^"]+)"',
        (ROOT / "Cargo.toml").read_text(),
        re.M | re.S,
    )
    if not workspace:
        sys.exit('Cargo.toml: no `rust-version = "…"` in [workspace.package]: declare the MSRV there')
    msrv = workspace.group(1)

    errors = []
    declared = []
    for package in meta["packages"]:
        if package["id"] in members:
            if package.get("rust_version") and version(package["rust_version"]) != version(msrv):
                errors.append(
                    f"{package['name']}: rust-version {package['rust_version']} differs from the workspace's "
                    f"{msrv}: write `rust-version.workspace = true`"
                )
            continue
        if package.get("rust_version"):
            declared.append((version(package["rust_version"]), package["name"], package["version"], package["rust_version"]))
    if not declared:
        errors.append("no locked crate declares a rust-version: is Cargo.lock empty?")
    else:
        declared.sort()
        floor = declared[-1]
        for v, name, ver, text in declared:
            if v > version(msrv):
                errors.append(
                    f"{name} {ver} declares rust-version {text}, above the workspace's {msrv}: "
                    f"raise `rust-version` in Cargo.toml (and README.md) to {text}, "
                    f"or pin it to an older release (`cargo update -p {name} --precise VERSION`)"
                )
        if floor[0] < version(msrv):
            errors.append(
                f"the workspace's rust-version {msrv} is above every locked crate's (the highest: "
                f"{floor[1]} {floor[2]}, {floor[3]}): lower it in Cargo.toml and README.md to {floor[3]}"
            )
    readme = (ROOT / "README.md").read_text()
    stated = re.findall(r"Rust toolchain \((\d+\.\d+(?:\.\d+)?) or newer", readme)
    if stated != [msrv]:
        errors.append(
            f"README.md: the set-up must state the MSRV once as 'Rust toolchain ({msrv} or newer'; found {stated or 'none'}"
        )
    if errors:
        print("MSRV check failed:", *errors, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    print(f"MSRV {msrv}: every one of {len(declared)} locked crates with a rust-version declares at most {msrv} "
          f"(the highest: {floor[1]} {floor[2]})")


if __name__ == "__main__":
    main()
