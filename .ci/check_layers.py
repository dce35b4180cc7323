#!/usr/bin/env python3
"""Fails when a room of the tree includes or links a room above it (docs/architecture.md, "Rooms").

    .ci/check_layers.py [--root DIR] [--build DIR]

Includes: every #include of every C/C++/CUDA file under a room, in any form ("x.h", <x.h>, and bare names
resolved as the compiler would: the including file's folder, then include/ and the repository root, the
project's include directories). Links: the target graph CMake writes with --graphviz for the configured
build folder DIR (skipped without --build). Prints every violation and exits 1 if there is any.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# The rooms, and the rooms each may use (include or link). Everything not listed is forbidden; in
# particular nothing outside lab/ uses lab/, and no library uses bench/ or tools/.
PRODUCT = ["common", "codec", "model", "transport", "scheduler", "stream", "measure"]
ALLOWED = {
    "common": set(),
    "codec/common": {"common", "codec"},
    "codec/compress": {"common", "codec/common", "codec"},
    "codec/decompress": {"common", "codec/common", "codec"},
    "codec": {"common", "codec/common", "codec/compress", "codec/decompress"},
    "model": {"common"},
    "transport": {"common", "codec"},
    "scheduler": {"common", "codec", "transport"},
    "stream": {"common", "codec", "cuda", "transport", "scheduler"},
    "measure": {"common", "codec", "model", "transport", "scheduler", "stream"},
    "cuda": {"common", "codec"},
    "bindings": set(PRODUCT),
    "bench": set(PRODUCT) | {"cuda"},
    "tools": set(PRODUCT) | {"bench", "cuda"},
    "lab": set(PRODUCT) | {"bench"},
    "tests": set(PRODUCT) | {"bench", "tools", "cuda", "bindings"},
}
for room, uses in ALLOWED.items():  # the codec's parts count as the codec for every room outside it
    if "codec" in uses and not room.startswith("codec/"):
        uses |= {"codec/common", "codec/compress", "codec/decompress"}

# Which room each public header belongs to.
PUBLIC_HEADERS = {
    "status.h": "common", "tensor.h": "common", "rope.h": "common", "text_recomputer.h": "common",
    "codec.h": "codec", "level.h": "codec", "profile.h": "codec", "scheme.h": "codec", "kv_destination.h": "codec",
    "cuda.h": "cuda", "device_pipeline.h": "cuda",
    "model.h": "model", "kv_dump.h": "model", "quality.h": "model",
    "transport.h": "transport", "manifest.h": "transport",
    "scheduler.h": "scheduler", "level_policy.h": "scheduler",
    "stream.h": "stream",
}

SOURCE = re.compile(r"\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh|inc)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def room_of_path(rel):
    """The room of a repository-relative path, or None when it is in no room (docs, scripts, ...)."""
    parts = rel.split("/")
    if parts[0] == "include" and len(parts) >= 3 and parts[1] == "kvstream":
        return PUBLIC_HEADERS.get(parts[2], "unknown public header")
    if parts[0] == "codec" and len(parts) >= 3 and parts[1] in ("common", "compress", "decompress"):
        return "codec/" + parts[1]
    if parts[0] in ALLOWED:
        return parts[0]
    return None


def resolve(root, including, quote, name):
    """The repository-relative path an #include names, or None for a system header."""
    candidates = []
    if quote == '"':
        candidates.append(os.path.join(os.path.dirname(including), name))
    candidates += [os.path.join("include", name), name]
    for c in candidates:
        c = os.path.normpath(c)
        if not c.startswith("..") and os.path.isfile(os.path.join(root, c)):
            return c
    return None


def check_includes(root):
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d in ALLOWED or d == "include"]
            continue
        for f in filenames:
            if not SOURCE.search(f):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, f))
            room = room_of_path(rel)
            if room is None:
                continue
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            for m in INCLUDE.finditer(text):
                target = resolve(root, rel, m.group(1), m.group(2))
                if target is None:
                    continue
                used = room_of_path(target)
                if used is None or used == room:
                    continue
                if used not in ALLOWED.get(room, set()):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: {room} includes {target} ({used}), a room it may not use")
    return problems


# Targets by name: the library of each room, its executables, and the test binaries.
TARGET_ROOMS = [
    (re.compile(r"^kvstream_common$"), "common"),
    (re.compile(r"^kvstream_codec_(common|compress|decompress)$"), None),  # codec/<part>
    (re.compile(r"^kvstream_codec$"), "codec"),
    (re.compile(r"^kvstream_(model|transport|scheduler|stream|measure|cuda|bench)$"), None),
    (re.compile(r"^kvstream_(cuda_(plan|host_launch|ptx)|device_pipeline)$"), "cuda"),
    (re.compile(r"^kvstream_bindings|^_kvstream$|^nanobind-static$"), "bindings"),
    (re.compile(r"^(rans_bench|transform_sum_bench|kvstream_gpu_bench|kvstream_bench_(gpu(_chunks)?|pipeline))$"), "bench"),
    (re.compile(r"^kvstream$"), "tools"),
    (re.compile(r"^(kvstream_lab_.*|kvstream_rd_study|lab_.*)$"), "lab"),
    (re.compile(r".*(_test|_fuzz|_fuzz_seeds|_golden)$|^kvstream_gpu_check$|^kvstream_testing$"), "tests"),
]


def room_of_target(name):
    for pattern, room in TARGET_ROOMS:
        m = pattern.match(name)
        if m:
            if room is None:
                return ("codec/" + m.group(1)) if name.startswith("kvstream_codec_") else m.group(1)
            return room
    return None


def check_links(build):
    with tempfile.TemporaryDirectory() as tmp:
        dot = os.path.join(tmp, "targets.dot")
        # Re-running CMake on the configured folder is quick and writes the graph of direct link edges.
        subprocess.run(["cmake", f"--graphviz={dot}", build], check=True, stdout=subprocess.DEVNULL)
        with open(dot, encoding="utf-8") as fh:
            return link_problems(fh.read())


def link_problems(text):
    """The violations in a CMake --graphviz graph."""
    names = dict(re.findall(r'"(node\d+)"\s*\[\s*label\s*=\s*"([^"]+)"', text))
    problems, unknown = [], set()
    for a, b in re.findall(r'"(node\d+)"\s*->\s*"(node\d+)"', text):
        user, used = names.get(a, a), names.get(b, b)
        user_room, used_room = room_of_target(user), room_of_target(used)
        for name, room in ((user, user_room), (used, used_room)):
            if room is None and name.startswith("kvstream"):
                unknown.add(name)
        if user_room is None or used_room is None or user_room == used_room:
            continue
        if used_room not in ALLOWED.get(user_room, set()):
            problems.append(f"target {user} ({user_room}) links {used} ({used_room}), a room it may not use")
    problems += [f"target {n} is in no room: add it to TARGET_ROOMS in .ci/check_layers.py" for n in sorted(unknown)]
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--build", help="a configured CMake build folder, for the link check")
    args = parser.parse_args()
    problems = check_includes(args.root)
    if args.build:
        problems += check_links(args.build)
    for p in problems:
        print(p)
    what = "includes" + (" and links" if args.build else "")
    if problems:
        print(f"check_layers: {len(problems)} violation(s) of docs/architecture.md's rooms")
        return 1
    print(f"check_layers: {what} keep to docs/architecture.md's rooms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
