#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs clang-tidy (.clang-tidy, with clang's -Wthread-safety) on every translation unit of
src/, daemon/ and collectors/ in a build's compile_commands.json, in parallel.

A translation unit that passed once is not checked again while its preprocessed text, the
configuration and clang-tidy stay the same: the passes are remembered in
$ISOWATCH_TIDY_CACHE (default ~/.cache/isowatch-clang-tidy), keyed by a hash of those, with the
checkout's path taken out so that another checkout of the same code reuses them.

Usage: run_clang_tidy.py SOURCE_DIR BUILD_DIR [-j N] [FILE_REGEX]
Exit status: 0 when every unit passed, 1 when one has a finding, 2 on a usage error.
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

CLANG_TIDY = os.environ.get("CLANG_TIDY", "clang-tidy")
CLANG = os.environ.get("CLANG", "clang++")
EXTRA = ["-Wthread-safety", "-Wno-unknown-warning-option"]


def preprocess_args(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    # Skip a launcher (`cmake -E env ... ccache`) and the compiler: keep what follows the
    # compiler driver.
    for i, a in enumerate(args):
        if a.endswith(("c++", "g++", "clang++")) and not a.endswith("ccache"):
            args = args[i + 1:]
            break
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return [CLANG, "-E", "-P"] + EXTRA + out + ["-o", "-"]


def key_of(entry, root, salt):
    pre = subprocess.run(preprocess_args(entry), cwd=entry["directory"], capture_output=True)
    if pre.returncode != 0:
        return None  # clang-tidy will say why
    text = pre.stdout.replace(root.encode(), b"")
    h = hashlib.sha256(salt)
    h.update(os.path.relpath(entry["file"], root).encode())
    h.update(text)
    return h.hexdigest()


def check(entry, root, build, cache, salt):
    key = key_of(entry, root, salt)
    if key and os.path.exists(os.path.join(cache, key)):
        return entry["file"], True, True, ""
    cmd = [CLANG_TIDY, "-p", build, "--quiet"] + [f"--extra-arg={a}" for a in EXTRA]
    cmd.append(entry["file"])
    r = subprocess.run(cmd, capture_output=True, text=True)
    ok = r.returncode == 0
    if ok and key:
        open(os.path.join(cache, key), "w").close()
    out = "\n".join(l for l in (r.stdout + r.stderr).splitlines()
                    if not re.match(r"^\d+ warnings? (and \d+ errors? )?generated\.$", l))
    return entry["file"], ok, False, out


def main(argv):
    pos = [a for a in argv[1:] if not a.startswith("-j")]
    jobs = os.cpu_count() or 2
    for i, a in enumerate(argv):
        if a.startswith("-j"):
            jobs = int(a[2:] or argv[i + 1])
            if not a[2:]:
                pos.remove(argv[i + 1])
    if len(pos) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, build = os.path.realpath(pos[0]), os.path.realpath(pos[1])
    pattern = re.compile(pos[2]) if len(pos) > 2 else None
    cache = os.environ.get("ISOWATCH_TIDY_CACHE",
                           os.path.expanduser("~/.cache/isowatch-clang-tidy"))
    os.makedirs(cache, exist_ok=True)
    version = subprocess.run([CLANG_TIDY, "--version"], capture_output=True).stdout
    config = open(os.path.join(root, ".clang-tidy"), "rb").read()
    salt = version + config + " ".join(EXTRA).encode()
    entries = []
    for e in json.load(open(os.path.join(build, "compile_commands.json"))):
        rel = os.path.relpath(os.path.realpath(e["file"]), root)
        if not rel.startswith(("src/", "daemon/", "collectors/")):
            continue
        if pattern and not pattern.search(rel):
            continue
        entries.append(e)
    failed, cached = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(check, e, root, build, cache, salt) for e in entries]
        for f in concurrent.futures.as_completed(futures):
            name, ok, hit, out = f.result()
            cached += hit
            if not ok:
                failed.append(name)
                print(out, flush=True)
    print(f"run_clang_tidy: {len(entries)} units, {cached} unchanged since they passed, "
          f"{len(failed)} with findings")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
