#!/usr/bin/env bash
# Python peers for bench/python/pyrtt.py (bench-only, not CI): Cyclone DDS and
# Zenoh Python bindings (both prebuilt wheels; cyclonedds bundles the C library),
# numpy and matplotlib for the summary and plot. Idempotent: pip skips what is there.
set -euo pipefail
PY=${PYTHON:-python3}
# --break-system-packages: needed for a Debian-managed python3 (PEP 668), harmless elsewhere
"$PY" -m pip install -q --break-system-packages --root-user-action=ignore \
  "cyclonedds==11.0.1" \
  "eclipse-zenoh==1.10.2" \
  "numpy>=1.24" \
  "matplotlib>=3.6"
"$PY" - <<'PYEOF'
import cyclonedds.domain, zenoh, numpy, matplotlib
from importlib.metadata import version
print("bench-python-setup: ok (cyclonedds %s, eclipse-zenoh %s)" % (version("cyclonedds"), version("eclipse-zenoh")))
PYEOF
