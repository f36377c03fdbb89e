"""Fixtures of ferry's Python tests: the Rust peer and CLI binaries (built
once per session), a private discovery domain, and child processes that are
always killed at the end."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent


# A test run started from a background job inherits SIGINT as ignored, and
# an ignored signal stays ignored across exec: the children of the Ctrl-C
# tests would never see their Ctrl-C. With a handler here instead, every
# child starts with SIGINT at its default (exec resets caught signals).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def private_domain() -> int:
    """Every node of the session (children inherit it) in a domain of its
    own, so parallel ferry processes on the machine stay out of the way."""
    domain = random.Random(os.getpid()).randint(120, 220)
    os.environ["FERRY_DOMAIN_ID"] = str(domain)
    return domain


@pytest.fixture(scope="session")
def bins() -> dict[str, pathlib.Path]:
    """Paths of the Rust interop peer (`py_peer` example) and the `ferry` CLI."""
    # Two builds: `--example` would apply to every `-p` of one command.
    for what in (["-p", "ferry-cli"], ["-p", "ferry", "--example", "py_peer"]):
        subprocess.run(["cargo", "build", "--release", "-q", *what], cwd=ROOT, check=True, timeout=1800)
    return {
        "peer": ROOT / "target/release/examples/py_peer",
        "ferry": ROOT / "target/release/ferry",
        "roles": HERE / "roles.py",
    }


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses."""
    return f"/pytest/t{uuid.uuid4().hex[:10]}"


class Procs:
    """Child processes of one test; all killed when it ends."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen] = []

    def start(self, args: list, env: dict | None = None, **kw) -> subprocess.Popen:
        """Starts `args` with pipes for stdout/stderr (text)."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        p = subprocess.Popen(
            [str(a) for a in args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full_env,
            **kw,
        )
        self.children.append(p)
        return p

    def python(self, *args, env: dict | None = None) -> subprocess.Popen:
        """Starts `python3 roles.py args...`."""
        return self.start([sys.executable, HERE / "roles.py", *args], env=env)

    def kill_all(self) -> None:
        for p in self.children:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            try:
                p.communicate(timeout=5)
            except Exception:
                pass


@pytest.fixture
def procs():
    """Starts child processes and kills them after the test."""
    ps = Procs()
    yield ps
    ps.kill_all()


def wait_line(p: subprocess.Popen, want: str, timeout: float = 20.0) -> str:
    """Reads `p`'s stdout until a line starting with `want` (bounded)."""
    import selectors
    import time

    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    seen = []
    while time.monotonic() < end:
        if not sel.select(timeout=max(0.0, end - time.monotonic())):
            continue
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(want):
            return line.strip()
    err = ""
    if p.poll() is not None:
        err = p.stderr.read()
    raise AssertionError(f"no `{want}` line within {timeout}s; stdout: {seen!r}; stderr: {err[-2000:]}")
