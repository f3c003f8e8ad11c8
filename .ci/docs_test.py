#!/usr/bin/env python3
"""The docs test: every shell command in README.md and docs/*.md runs as written.

How to mark a command (read this before adding one to the docs)
---------------------------------------------------------------
A command is a fenced block whose info string is `sh` (or `bash`, `shell`),
or an inline code span that starts like one (`cargo SUBCOMMAND …`, `bash SCRIPT.sh`,
`cat FILE | …`, `VAR=value cargo …`). Each is marked by an HTML comment, invisible on the
rendered page, right before it (for a block: on the line before its fence;
for a span: just before its backtick):

    <!-- docs-test: run -->          CI runs it, in the repository's root, and
                                     it must exit 0. The environment points
                                     the providers at the fakellm mock server
                                     (OPENAI_API_KEY, OPENAI_BASE_URL,
                                     ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) and
                                     holds TINYAGENTS_REDIS_URL and
                                     TINYAGENTS_POSTGRES_URL (Redis and
                                     PostgreSQL on loopback).
    <!-- docs-test: needs-key -->    as written it needs a real key or a server
                                     of the reader's (`KEY=…`). CI runs it with
                                     every `*_API_KEY=…` a mock key and every
                                     `*_BASE_URL=…` the fakellm server.
    <!-- docs-test: needs-collector --> it exports to an OpenTelemetry
                                     collector: CI runs it with
                                     OTEL_EXPORTER_OTLP_ENDPOINT set to a
                                     loopback sink of its own, which must
                                     receive at least one trace export.
    <!-- docs-test: server HOST:PORT --> it starts a server that runs until
                                     stopped: CI starts it, waits until it
                                     listens on HOST:PORT, then stops it.
    <!-- docs-test: ci-step STEP -->  a step of .ci/run covers it (STEP, a
                                     line of .ci/run, e.g. `cargo test
                                     --workspace`): not run again here, and it
                                     must not be (a test run inside a test run).
    <!-- docs-test: bench -->        a benchmark or measurement script
                                     (minutes each; CI never runs benchmarks,
                                     clippy compiles them): not run.

Whatever the mark, every `cargo` command is checked against the workspace:
its `-p` package exists, and so do its `--example`, `--bench`, `--test` and
`--bin` targets and its `--features`; every `bash FILE` names a file of the
repository. An inline span identical to a command of a marked block of the
same page needs no mark of its own. A command in a block fenced `text` (or
anything not shell) is an error: fence it `sh` and mark it. Two more checks:
every measured figure of README.md (ns, µs, ms, KiB, MB, a ratio `…x`) names
the bench that produces it in its paragraph, and README.md's "Use it in your
crate" blocks are the crate front page's (tinyagents/src/lib.rs), whose
program compiles and runs as a doc test.

Run it as CI does, with the servers up (see .ci/run):
    python3 .ci/docs_test.py            # check and run everything
    python3 .ci/docs_test.py --list     # only check and list, run nothing
"""

import http.server
import json
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
SHELL_FENCES = {"sh", "bash", "shell"}
KINDS = {"run", "needs-key", "needs-collector", "server", "ci-step", "bench"}
MARKER = re.compile(r"<!--\s*docs-test:\s*([a-z-]+)(?:\s+(.*?))?\s*-->")
COMMAND_START = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:cargo|bash|sh|cat|curl)\s")
# An inline span is a command when it reads as one to type: a cargo
# subcommand, a script run with bash, a pipe from cat (a program named in
# prose, `cargo` or `cat */x`, is not).
INLINE_COMMAND = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:cargo\s+[a-z]|bash\s+\S+\.sh\b|cat\s+\S+\s*\|)")
TIMEOUT_S = 1200  # one command, its build included


class Command:
    def __init__(self, page, line, text, kind, arg, inline):
        self.page, self.line, self.text, self.kind, self.arg, self.inline = page, line, text, kind, arg, inline

    def where(self):
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def logical_lines(text):
    """The block's commands: continuation lines joined, comments and blanks dropped."""
    out, current = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        stripped = re.sub(r"\s+#\s.*$", "", current).strip()
        if stripped and not stripped.startswith("#"):
            out.append(" ".join(stripped.split()))
        current = ""
    return out


def parse(page, errors):
    """The page's commands, and an error for each unmarked or misplaced one."""
    lines = page.read_text().splitlines()
    commands, pending, i = [], None, 0
    prose = []  # (line number, text) outside fences, for the inline spans
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)(```+)\s*([^`\s]*)", line)
        if fence:
            info = fence.group(3).split(",")[0]
            start = i + 1
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence.group(2)):
                j += 1
            body = "\n".join(l[len(fence.group(1)):] if l.startswith(fence.group(1)) else l for l in lines[i + 1 : j])
            marker = None
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k >= 0:
                marker = MARKER.fullmatch(lines[k].strip())
            if info in SHELL_FENCES:
                if not marker:
                    errors.append(f"{page.relative_to(ROOT)}:{start}: a ```{info} block with no `<!-- docs-test: KIND -->` line before it (see .ci/docs_test.py)")
                else:
                    commands.append(Command(page, start, body, marker.group(1), marker.group(2), False))
            else:
                for n, l in enumerate(lines[i + 1 : j], start + 1):
                    if COMMAND_START.match(l.strip()) and info not in ("rust", "toml", "json", "sql"):
                        errors.append(f"{page.relative_to(ROOT)}:{n}: a command in a ```{info or 'plain'} block: fence it ```sh and mark it")
                        break
                if marker:
                    errors.append(f"{page.relative_to(ROOT)}:{k + 1}: a docs-test mark before a ```{info or 'plain'} block: only shell blocks are marked")
            prose.extend((n + 1, "") for n in range(i, j + 1))
            i = j + 1
            continue
        prose.append((i + 1, line))
        i += 1

    # Inline spans: single backticks, possibly across one line break.
    text = "\n".join(l for _, l in prose)
    line_of = [n for n, _ in prose]
    offsets, pos = [], 0
    for _, l in prose:
        offsets.append(pos)
        pos += len(l) + 1
    block_commands = {c for cmd in commands for c in logical_lines(cmd.text)}
    for m in re.finditer(r"(?<!`)`([^`]+?)`(?!`)", text):
        span = " ".join(m.group(1).split())
        if not INLINE_COMMAND.match(span):
            continue
        n = line_of[max(0, sum(1 for o in offsets if o <= m.start()) - 1)]
        before = text[: m.start()].rstrip(" ")
        marker = re.search(r"<!--\s*docs-test:\s*([a-z-]+)(?:\s+([^>]*?))?\s*-->$", before)
        if marker:
            commands.append(Command(page, n, span, marker.group(1), marker.group(2), True))
        elif span not in block_commands:
            errors.append(f"{page.relative_to(ROOT)}:{n}: the command `{span}` has no `<!-- docs-test: KIND -->` before it and is no command of a marked block of the page")
    commands.sort(key=lambda c: c.line)
    for c in commands:
        if c.kind not in KINDS:
            errors.append(f"{c.where()}: unknown docs-test kind `{c.kind}`: one of {', '.join(sorted(KINDS))}")
    return commands


def workspace():
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
                                     cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    packages = {}
    for p in meta["packages"]:
        targets = {}
        for t in p["targets"]:
            for kind in t["kind"]:
                targets.setdefault(kind, set()).add(t["name"])
        packages[p["name"]] = (targets, set(p["features"]) | {d["rename"] or d["name"] for d in p["dependencies"] if d.get("optional")})
    return packages


def check_static(cmd, packages, errors):
    """The cargo commands' packages, targets and features exist; `bash FILE` exists."""
    for line in logical_lines(cmd.text):
        for part in re.split(r"\s*(?:\||&&|;)\s*", line):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]
            if words[:1] == ["bash"] and len(words) > 1 and not words[1].startswith("-"):
                if not (ROOT / words[1]).is_file():
                    errors.append(f"{cmd.where()}: `{line}`: no file {words[1]}")
            if words[:1] != ["cargo"]:
                continue
            args = words[: words.index("--")] if "--" in words else words
            opt = lambda name: [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
            for package in opt("-p"):
                if package not in packages:
                    errors.append(f"{cmd.where()}: `{line}`: no workspace package `{package}`")
                    continue
                targets, features = packages[package]
                for flag, kind in (("--example", "example"), ("--bench", "bench"), ("--test", "test"), ("--bin", "bin")):
                    for name in opt(flag):
                        if name not in targets.get(kind, set()) and name != "NAME" and not name.startswith("$"):
                            errors.append(f"{cmd.where()}: `{line}`: `{package}` has no {kind} `{name}`")
                for group in opt("--features"):
                    for feature in group.split(","):
                        dep, _, sub = feature.partition("/")
                        if sub:
                            if dep not in packages or sub not in packages[dep][1]:
                                errors.append(f"{cmd.where()}: `{line}`: no feature `{feature}`")
                        elif feature not in features:
                            errors.append(f"{cmd.where()}: `{line}`: `{package}` has no feature `{feature}`")


def environment(fakellm):
    env = dict(os.environ)
    env.update({
        "OPENAI_API_KEY": "mock-key",
        "OPENAI_BASE_URL": fakellm + "/v1",
        "ANTHROPIC_API_KEY": "mock-key",
        "ANTHROPIC_BASE_URL": fakellm,
        "CARGO_TERM_COLOR": "never",
    })
    return env


def execute(script, env, timeout=TIMEOUT_S):
    """Runs `script` with bash (errexit, pipefail) in the root; (ok, output)."""
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return False, out.decode(errors="replace") + f"\n(timed out after {timeout} s)"
    return proc.returncode == 0, out.decode(errors="replace") + f"\n(exit status {proc.returncode})"


def listening(host, port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def run_server(cmd, env):
    host, _, port = (cmd.arg or "").rpartition(":")
    if not host or not port.isdigit():
        return False, f"`server` needs HOST:PORT, got `{cmd.arg}`"
    port = int(port)
    if listening(host, port):
        return False, f"{host}:{port} is already taken before the server starts: stop what listens there"
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", cmd.text], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if listening(host, port):
                return True, f"listening on {host}:{port}"
            if proc.poll() is not None:
                return False, proc.stdout.read().decode(errors="replace") + f"\n(exited with {proc.returncode} before listening)"
            time.sleep(0.2)
        return False, f"not listening on {host}:{port} after {TIMEOUT_S} s"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_with_collector(cmd, env):
    received = []

    class Sink(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("content-length", "0"))
            self.rfile.read(min(length, 16 << 20))
            received.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}")
        ok, out = execute(cmd.text, env)
    finally:
        server.shutdown()
    if ok and "/v1/traces" not in received:
        return False, out + f"\n(the collector received no trace export; requests: {received})"
    return ok, out


def stand_ins(text, fakellm):
    text = re.sub(r"\b([A-Z][A-Z0-9_]*_API_KEY)=\S+", r"\1=mock-key", text)
    return re.sub(r"\b([A-Z][A-Z0-9_]*_BASE_URL)=\S+", lambda m: f"{m.group(1)}={fakellm}", text)


def fenced(text):
    """The bodies of the fenced blocks of `text`, in order."""
    return re.findall(r"^```[^\n]*\n(.*?)^```$", text, re.M | re.S)


def check_front_page(errors):
    """README's "Use it in your crate" blocks are the crate front page's, which compiles as a doc test."""
    readme = (ROOT / "README.md").read_text()
    lib = (ROOT / "tinyagents" / "src" / "lib.rs").read_text()
    doc = "\n".join(l[4:] if l.startswith("//! ") else l[3:] for l in lib.splitlines() if l.startswith("//!"))
    ours = readme.split("### Use it in your crate", 1)[-1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    theirs = doc.split("## Use it in your crate", 1)[-1].split("\n## ", 1)[0]
    if "### Use it in your crate" not in readme or "## Use it in your crate" not in doc:
        errors.append("README.md and tinyagents/src/lib.rs each need a 'Use it in your crate' section")
    elif fenced(ours)[:2] != fenced(theirs)[:2] or len(fenced(theirs)) < 2:
        errors.append("README.md's 'Use it in your crate' blocks (the Cargo.toml lines and the program) differ from "
                      "the crate front page's (tinyagents/src/lib.rs), the doc test that compiles them: copy them over")


def check_readme_figures(errors):
    """Every measured figure the README quotes names the bench that produces it (in its paragraph)."""
    readme = (ROOT / "README.md").read_text()
    prose = re.sub(r"^```.*?^```$", "", readme, flags=re.M | re.S)
    for paragraph in re.split(r"\n\s*\n", prose):
        figure = re.search(r"\d[\d,.]*\s*(?:ns|µs|ms|KiB|MiB|MB|x)(?![\w-])", paragraph)
        if figure and not re.search(r"bench", paragraph):
            errors.append(f"README.md: the figure `{figure.group(0)}` names no bench (`the dispatch bench`, "
                          f"`bash bench/compare.sh`, …) in its paragraph: {paragraph.strip()[:80]}…")


def main():
    list_only = "--list" in sys.argv[1:]
    errors, commands = [], []
    for page in PAGES:
        commands += parse(page, errors)
    packages = workspace()
    ci_run = {l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines()}
    for cmd in commands:
        check_static(cmd, packages, errors)
        if cmd.kind == "ci-step" and (cmd.arg or "").strip() not in ci_run:
            errors.append(f"{cmd.where()}: ci-step `{cmd.arg}` is no line of .ci/run")
        if cmd.kind == "needs-key" and "…" not in cmd.text and "_BASE_URL=" not in cmd.text:
            errors.append(f"{cmd.where()}: marked needs-key but it holds no `…` placeholder nor a server of the reader's: mark it run")
        if cmd.kind == "run" and "…" in cmd.text:
            errors.append(f"{cmd.where()}: marked run but it holds a `…` placeholder: it cannot run as written")
    check_front_page(errors)
    check_readme_figures(errors)
    for cmd in commands:
        print(f"{cmd.kind:16} {cmd.where():28} {' ; '.join(logical_lines(cmd.text))}")
    if errors:
        print("\ndocs test: the docs' commands are not all marked and well-formed:", *errors, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    if list_only:
        return

    fakellm = os.environ.get("FAKELLM_URL")
    missing = [v for v in ("FAKELLM_URL", "TINYAGENTS_REDIS_URL", "TINYAGENTS_POSTGRES_URL") if not os.environ.get(v)]
    if missing:
        sys.exit(f"docs test: {', '.join(missing)} not set: start the servers first (see .ci/run: start_fakellm, start_redis, start_postgres)")
    env = environment(fakellm)
    failures = []
    for cmd in commands:
        if cmd.kind in ("ci-step", "bench"):
            continue
        started = time.monotonic()
        if cmd.kind == "run":
            ok, out = execute(cmd.text, env)
        elif cmd.kind == "needs-key":
            ok, out = execute(stand_ins(cmd.text, fakellm), env)
        elif cmd.kind == "needs-collector":
            ok, out = run_with_collector(cmd, env)
        else:
            ok, out = run_server(cmd, env)
        print(f"{'ok  ' if ok else 'FAIL'} {time.monotonic() - started:6.1f}s {cmd.where()}", flush=True)
        if not ok:
            failures.append(cmd)
            print("\n".join("    " + l for l in out.strip().splitlines()[-60:]), file=sys.stderr)
    if failures:
        print("\ndocs test: these commands failed:", *[f"{c.where()}: {c.text}" for c in failures], sep="\n  ", file=sys.stderr)
        sys.exit(1)
    print(f"docs test: {sum(c.kind not in ('ci-step', 'bench') for c in commands)} commands ran, all ok")


if __name__ == "__main__":
    main()
