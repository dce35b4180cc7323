"""
kvstream's C++ library: the codec, profiles, errors (import kvstream, not this module)
"""

import asyncio
from collections.abc import Sequence
import os

import builtins

__version__: str

class Error(Exception):
    """Base of every kvstream error; str(e) is the C++ library's message, e.code its StatusCode name."""
    code: str

class CancelledError(Error):
    """The operation was cancelled."""

class CorruptDataError(Error):
    """Bytes from a file or the wire are malformed (magic, CRC, sizes)."""

class InternalError(Error):
    """A bug in kvstream."""

class InvalidArgumentError(Error, builtins.ValueError):
    """An argument is unusable (shape, dtype, strides, option); the message names it."""

class IoError(Error):
    """The operating system refused a read, write or socket operation."""

class NotFoundError(Error):
    """A file, model, context or profile does not exist."""

class PermissionDeniedError(Error):
    """Authentication failed (wrong secret)."""

class ResourceExhaustedError(Error):
    """A configured limit would be exceeded."""

class TimeoutError(Error, builtins.TimeoutError):
    """A deadline or configured timeout passed."""

class UnavailableError(Error):
    """A peer is gone or refuses service."""

class UnsupportedError(Error):
    """Well-formed but not handled (format version, dtype, device)."""



class Profile:
    """
    A model's codec profile: level ladder, quantisation parameters, entropy tables (docs/codec.md).
    Immutable; safe to share between threads.
    """

    @staticmethod
    def load(path: str | os.PathLike) -> Profile:
        """Reads a profile file (kvstream profile --out); errors name the file."""

    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> Profile:
        """Parses profile bytes (untrusted: every count and table is checked)."""

    @staticmethod
    def learn(model: str | os.PathLike[str], *, text: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None, contexts: int = 4, context_tokens: int = 512, samples: Sequence[tuple[object, object]] | None = None, eval_tokens: int = 128, chunk_tokens: int = 256, transform: bool = False, predict: bool = False, byte_predictors: bool = False, fine_fraction: float = 0.08, fine_level: int | str = 2, weigh_slices: bool = False, ladder: Sequence[float] = [], measure: bool = False, max_tables: int = 16, channel_exponent: float = 0.0, tokenizer: str | os.PathLike[str] | None = None, threads: int = 0) -> Profile:
        """
        Learns a model's profile as `kvstream profile` does, each keyword its flag (--context-tokens is
        context_tokens, ...): prefills `contexts` windows of the text with kvstream's reference engine,
        learns the profile, then codes the window after them at every level (measure=True also scores the
        eval_tokens after it and records each level's quality: see summary()).

        model: a short name (stories260K, tinystories656k, smollm2) or a checkpoint path.
        text: a file or a list of files (default GPL-3); window i comes from file i mod n.
        samples: (keys, values) pairs of another engine's KV of this model, in the model's own layout
        (like --kv-dump; contexts=0 to learn from them alone).
        """

    @staticmethod
    def learn_from_samples(samples: Sequence[tuple[object, object]], *, model: str = '', transform: bool = False, predict: bool = False, byte_predictors: bool = False, rope_head_dim: int = 64, rope_theta: float = 10000.0, rope_layout: str = 'interleaved', max_tables: int = 16, ladder: Sequence[float] = [], channel_exponent: float = 0.0) -> Profile:
        """
        Learns a profile from sample contexts alone, without a model (no held-out coding, no qualities).

        samples: a list of (keys, values) pairs, each a context from position 0 in encode's layouts.
        model: the name recorded in the profile.
        transform / predict: also learn those schemes (predict implies transform); their keys are
        de-rotated with the model's RoPE (rope_head_dim, rope_theta, rope_layout: "interleaved" for
        llama.cpp and llama2.c caches, "rotate-half" for Hugging Face's).
        ladder: the levels' step multipliers (default 0.10, 0.15, 0.25, 0.35, 0.5, 1.0).
        """

    def save(self, path: str | os.PathLike) -> None:
        """Writes the profile's bytes to a file (what load reads)."""

    def to_bytes(self) -> bytes:
        """The canonical bytes (what a profile file holds)."""

    @property
    def hash(self) -> int:
        """64-bit hash of the bytes: what chunks reference."""

    @property
    def model(self) -> str: ...

    @property
    def layers(self) -> int: ...

    @property
    def channels(self) -> int: ...

    @property
    def levels(self) -> list[str]:
        """The lossy levels it serves, "L1".."Ln"."""

    def supports(self, scheme: str) -> bool:
        """Whether chunks of this scheme can be coded with it."""

    def summary(self) -> dict[str, object]:
        """What `kvstream inspect PROFILE` prints, as a dict."""

    def __repr__(self) -> str: ...

CHUNK_FORMAT_VERSION: int = 7

def encode(keys: object, values: object, level: int | str, profile: Profile | None = None, scheme: str = 'channel-uniform', chunk_tokens: int = 256, *, token_ids: Sequence[int] | None = None, importance: Sequence[float] | None = None, fine_fraction: float = 0.08, fine_level: int | str = 2, threads: int = 1, batch_index: int = 0, token_begin: int = 0, out: object | None = None) -> list[bytes] | list[memoryview]:
    """
    Encodes a context's KV into chunks of chunk_tokens tokens (the last may be shorter); returns their bytes.

    keys, values: one [layers][tokens][channels] array each, or a sequence of per-layer Hugging Face
    [batch][kv_heads][tokens][head_dim] arrays (row batch_index is encoded; these are gathered once, the
    others read in place). float16, bfloat16 or float32, any non-negative strides.
    level: "fp16", "int8", "text" (needs token_ids), a lossy level n or "L<n>".
    scheme: "channel-uniform", "transform" or "predicted" (the last two need a profile learned for them).
    importance: per token attention received; with the transform and predicted schemes the fine_fraction
    most important tokens are coded at fine_level.
    token_begin: the context position of the arrays' first token (for a window of a context); positions
    below 4 are the sink rows lossy chunks store exactly.
    out: a writable buffer (bytearray, uint8 array) the chunks are written into one after the other;
    they are then returned as memoryviews of it. For a caller that encodes again and again into memory
    it keeps: a new bytes object is new memory, whose first touch the operating system pays for.
    Too small: ResourceExhaustedError (what was written before stays).
    """

def decode_into(chunk: bytes | bytearray | memoryview, keys_out: object, values_out: object, profile: Profile | None = None, *, token_offset: int = 0, threads: int = 1, batch_index: int = 0) -> None:
    """
    Decodes one chunk in place into destinations that hold the context: the chunk's tokens go to their
    positions (from its header) minus token_offset. Destinations are laid out as encode's inputs are and
    written without copies; nothing is written when an argument or the chunk's header is wrong.
    """

def inspect(chunk: bytes | bytearray | memoryview) -> dict[str, object]:
    """
    Validates a chunk (header, index, every CRC32C) without decoding it; returns its header as a dict.
    """

class Sender:
    """
    A prefill node's server: serves registered contexts' chunks to Receivers (kvstream serve).
    Safe to use from several threads; close() (or a with block) stops serving.
    """

    def __init__(self, host: str = '127.0.0.1', port: int = 0, profile: Profile | None = None, secret: object | None = None, *, scheme: str = 'channel-uniform', levels: object | None = None, chunk_tokens: int = 256, fine_fraction: float = 0.08, fine_level: object = 2, cache_bytes: int = 536870912, encode_threads: int = 1, max_connections: int = 256) -> None:
        """
        Starts serving on host:port (port 0 picks a free one: .port). levels: those offered (default fp16,
        int8, every lossy level and text where token ids exist); secret: a shared secret receivers must know.
        """

    @property
    def port(self) -> int: ...

    def register(self, context_id: str, keys: object, values: object, token_ids: object | None = None, *, importance: object | None = None, batch_index: int = 0) -> None:
        """
        Serves a context: keys and values as encode takes them, read in place while it is registered (a
        Hugging Face layout is copied once); token_ids allow the text level, importance fine rows.
        """

    def unregister(self, context_id: str) -> None: ...

    def stats(self) -> dict:
        """
        connections, chunks_sent, bytes_sent, cache_bytes, encodes, sends_pending, contexts
        """

    def close(self) -> None:
        """Stops serving: connections close and pending sends fail."""

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> None: ...

class Receiver:
    """
    A decode node's connection to a Sender: fetches contexts into the caller's arrays (kvstream fetch).
    Fetches from several threads run one at a time.
    """

    def __init__(self, host: str, port: int, secret: object | None = None, profile: Profile | None = None, *, max_inflight_chunks: int = 2, decode_threads: int = 1, chunk_timeout_ms: int = 10000, connect_timeout_ms: int = 5000) -> None:
        """
        Connects and authenticates (PermissionDeniedError for a wrong secret, UnavailableError when nobody
        listens). profile: the one the sender encodes with, needed for its lossy chunks.
        """

    def manifest(self, context_id: str) -> dict:
        """
        What the sender offers for a context: shape, chunks, levels with their bytes and quality.
        """

    def fetch(self, context_id: str, keys_out: object, values_out: object, deadline_ms: float = 1000.0, policy: str = 'kvstream', *, batch_index: int = 0) -> dict[str, object]:
        """
        Fetches every chunk into keys_out / values_out (either layout, holding the whole context). policy:
        "kvstream" (adaptive), "cachegen-rule" or "fixed-<level>". Returns what kvstream fetch --json
        prints (bytes, kv_ready_ms, last_byte_ms, decode_ms, retries, deadline_met, path, ...), the
        bandwidth estimate and per chunk its level, bytes, and transfer and decode times.
        """

    def fetch_async(self, context_id: str, keys_out: object, values_out: object, deadline_ms: float = 1000.0, policy: str = 'kvstream', *, batch_index: int = 0) -> asyncio.Future[dict[str, object]]:
        """
        fetch in the running event loop's executor: `result = await receiver.fetch_async(...)`.
        """

    def close(self) -> None: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *args) -> None: ...
