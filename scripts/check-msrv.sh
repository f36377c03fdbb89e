#!/usr/bin/env bash
# Checks that the workspace's rust-version is true as far as this machine can
# tell without an older toolchain: no dependency declares a higher one, and
# clippy's incompatible_msrv lint (run by CI with -D warnings) finds no std
# API newer than it in ferry's own code.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
m = json.load(sys.stdin)
ws = set(m["workspace_members"])
def v(s): return tuple(int(x) for x in (s.split(".") + ["0", "0"])[:3])
declared = {p["rust_version"] for p in m["packages"] if p["id"] in ws}
assert len(declared) == 1, f"workspace crates declare different rust-versions: {declared}"
declared = declared.pop()
need = max((p for p in m["packages"] if p.get("rust_version") and p["id"] not in ws),
           key=lambda p: v(p["rust_version"]))
if v(need["rust_version"]) > v(declared):
    sys.exit("rust-version %s is false: %s %s needs %s" % (declared, need["name"], need["version"], need["rust_version"]))
print("msrv: rust-version %s; the most demanding dependency is %s %s (%s)" % (declared, need["name"], need["version"], need["rust_version"]))
'
