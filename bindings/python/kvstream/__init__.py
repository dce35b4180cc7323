"""kvstream: compressed KV caches for LLM serving, streamed between prefill and decode nodes.

The codec works on arrays in place (numpy, torch CPU tensors, anything with ``__dlpack__`` or the
buffer protocol): ``encode`` turns a context's keys and values into self-contained chunks,
``decode_into`` writes a chunk into the caller's arrays, ``inspect`` reads a chunk's header.
``Profile`` holds a model's learned codec tables. ``Sender`` serves contexts, ``Receiver`` fetches
them over the network into the caller's arrays. Errors are ``kvstream.Error`` subclasses, one per
C++ status code, with the C++ library's messages. docs/python.md has a first example.
"""
from __future__ import annotations

from ._kvstream import (
    CHUNK_FORMAT_VERSION,
    CancelledError,
    CorruptDataError,
    Error,
    InternalError,
    InvalidArgumentError,
    IoError,
    NotFoundError,
    PermissionDeniedError,
    Profile,
    Receiver,
    ResourceExhaustedError,
    Sender,
    TimeoutError,
    UnavailableError,
    UnsupportedError,
    __version__,
    decode_into,
    encode,
    inspect,
)

__all__ = [
    "__version__",
    "CHUNK_FORMAT_VERSION",
    "CancelledError",
    "CorruptDataError",
    "Error",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "NotFoundError",
    "PermissionDeniedError",
    "Profile",
    "Receiver",
    "ResourceExhaustedError",
    "Sender",
    "TimeoutError",
    "UnavailableError",
    "UnsupportedError",
    "decode_into",
    "encode",
    "inspect",
]
