"""llama.cpp's sequence state as kvstream views: the bytes of ``llama_state_seq_get_data`` parsed in place.

``llama_state_seq_get_data(ctx, buf, size, seq_id)`` writes one sequence's KV cache as (little-endian, as
llama.cpp 0.3.36's vendored source writes it, src/llama-context.cpp and src/llama-kv-cache.cpp):

    u32 magic 0xaf143cd8, i32 seq_id
    u32 n_stream (1 here), u32 cell_count
    per cell: i32 position, u32 n_seq_id, n_seq_id x i32 seq id
    u32 v_trans, u32 n_layer
    per layer: i32 K type (1 = F16), u64 K row size (channels x 2), cell_count rows of K
    per layer, v_trans = 0: i32 V type, u64 V row size, cell_count rows of V
    per layer, v_trans = 1: i32 V type, u32 element size (2), u32 channels, channels x cell_count values
                            (channel-major: V transposed)

``llama_state_seq_set_data`` takes the same bytes back. ``SeqState.parse`` checks every count and size
against the buffer (the bytes are untrusted: a state may come from another process) and gives K and V as
``[layers][tokens][channels]`` numpy views of the buffer itself, no copy: layer l's rows lie a constant
stride apart, and transposed V is the strided view with token stride 1. ``SeqState.build`` lays out an
empty state of a given shape for a decode process to fetch into (the views again) and hand to
``llama_state_seq_set_data``. Only F16 caches of one stream whose cells carry no extension (no M-RoPE) are
handled; anything else raises ``kvstream.UnsupportedError``, malformed bytes ``kvstream.CorruptDataError``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ._kvstream import CorruptDataError, InvalidArgumentError, UnsupportedError

MAGIC = 0xAF143CD8
GGML_TYPE_F16 = 1
MAX_LAYERS = 1024
MAX_CHANNELS = 65536
MAX_SEQ_IDS = 256


@dataclass
class SeqState:
    """One sequence's llama.cpp KV state and views of its K and V (sharing ``buffer``'s memory)."""

    buffer: object            # what was parsed or built (bytearray, ctypes array, ...): keep it alive
    seq_id: int
    positions: np.ndarray     # [tokens] int32, each cell's position
    v_trans: bool
    keys: np.ndarray          # [layers][tokens][channels] float16 view of buffer
    values: np.ndarray        # [layers][tokens][channels] float16 view of buffer

    @property
    def layers(self) -> int:
        return self.keys.shape[0]

    @property
    def tokens(self) -> int:
        return self.keys.shape[1]

    @property
    def channels(self) -> int:
        return self.keys.shape[2]

    @staticmethod
    def parse(buffer) -> "SeqState":
        data = memoryview(buffer).cast("B")
        size = len(data)
        offset = 0

        def take(fmt: str, what: str):
            nonlocal offset
            n = struct.calcsize(fmt)
            if offset + n > size:
                raise CorruptDataError(f"llama.cpp state: {what} needs {n} bytes at offset {offset} but only "
                                       f"{size - offset} remain")
            value = struct.unpack_from(fmt, data, offset)
            offset += n
            return value if len(value) > 1 else value[0]

        magic = take("<I", "magic")
        if magic != MAGIC:
            raise CorruptDataError(f"llama.cpp state: magic 0x{magic:08x}, expected 0x{MAGIC:08x} "
                                   "(not llama_state_seq_get_data bytes)")
        seq_id = take("<i", "seq_id")
        streams = take("<I", "stream count")
        if streams != 1:
            raise UnsupportedError(f"llama.cpp state: {streams} streams, only 1 is handled")
        cells = take("<I", "cell count")
        if cells == 0 or cells > (size - offset) // 12:
            raise CorruptDataError(f"llama.cpp state: cell count {cells} does not fit the {size} bytes")
        positions = np.empty(cells, np.int32)
        for i in range(cells):
            positions[i], n_seq = take("<iI", f"cell {i}")
            if n_seq > MAX_SEQ_IDS:
                raise CorruptDataError(f"llama.cpp state: cell {i} has {n_seq} seq ids, more than {MAX_SEQ_IDS}")
            offset += 4 * n_seq
            if offset > size:
                raise CorruptDataError(f"llama.cpp state: cell {i}'s seq ids run past the end")
        v_trans, layers = take("<II", "v_trans and layer count")
        if v_trans > 1 or layers == 0 or layers > MAX_LAYERS:
            raise CorruptDataError(f"llama.cpp state: v_trans {v_trans}, {layers} layers (expected 0/1, 1..{MAX_LAYERS})")

        def plane(what: str, transposed: bool):
            """The [layers][tokens][channels] view of K or V, after checking every layer's header and size."""
            nonlocal offset
            first = channels = None
            for layer in range(layers):
                kind = take("<i", f"{what} type of layer {layer}")
                if kind != GGML_TYPE_F16:
                    raise UnsupportedError(f"llama.cpp state: {what} of layer {layer} is ggml type {kind}; only F16 "
                                           f"(type {GGML_TYPE_F16}) caches are handled")
                if transposed:
                    element, c = take("<II", f"{what} element size and channels of layer {layer}")
                    if element != 2:
                        raise CorruptDataError(f"llama.cpp state: {what} element size {element}, expected 2")
                else:
                    row = take("<Q", f"{what} row size of layer {layer}")
                    if row % 2 or row == 0 or row > 2 * MAX_CHANNELS:
                        raise CorruptDataError(f"llama.cpp state: {what} row size {row}, expected 2 x channels")
                    c = row // 2
                if channels is None:
                    if not 1 <= c <= MAX_CHANNELS:
                        raise CorruptDataError(f"llama.cpp state: {what} has {c} channels, expected 1..{MAX_CHANNELS}")
                    channels, first = c, offset
                elif c != channels:
                    raise CorruptDataError(f"llama.cpp state: {what} of layer {layer} has {c} channels, layer 0 {channels}")
                layer_bytes = 2 * cells * channels
                if offset + layer_bytes > size:
                    raise CorruptDataError(f"llama.cpp state: {what} of layer {layer} needs {layer_bytes} bytes at "
                                           f"offset {offset} but only {size - offset} remain")
                offset += layer_bytes
            # Every layer's header (type + row size, or type + element size + channels) is 12 bytes, so
            # layer l's data starts 12 + its size after layer l-1's: one strided view over the buffer.
            stride = 12 + 2 * cells * channels
            end = first + (layers - 1) * stride + 2 * cells * channels
            base = np.frombuffer(data, np.uint8)[first:end].view(np.float16)
            return np.lib.stride_tricks.as_strided(
                base, shape=(layers, cells, channels),
                strides=(stride, 2, 2 * cells) if transposed else (stride, 2 * channels, 2))

        keys = plane("K", transposed=False)
        values = plane("V", transposed=bool(v_trans))
        if offset != size:
            raise CorruptDataError(f"llama.cpp state: {size - offset} bytes after the last layer's V")
        if values.shape != keys.shape:
            raise CorruptDataError(f"llama.cpp state: V {values.shape} but K {keys.shape}")
        return SeqState(buffer, seq_id, positions, bool(v_trans), keys, values)

    @staticmethod
    def build(layers: int, tokens: int, channels: int, *, v_trans: bool, seq_id: int = 0) -> "SeqState":
        """An all-zero state of positions 0..tokens-1 in sequence ``seq_id``, in a new bytearray."""
        for name, value, high in (("layers", layers, MAX_LAYERS), ("tokens", tokens, 1 << 24),
                                  ("channels", channels, MAX_CHANNELS)):
            if not 1 <= value <= high:
                raise InvalidArgumentError(f"{name}: {value}, expected 1..{high}")
        parts = [struct.pack("<IiII", MAGIC, seq_id, 1, tokens)]
        parts += [struct.pack("<iIi", p, 1, seq_id) for p in range(tokens)]
        parts.append(struct.pack("<II", int(v_trans), layers))
        layer = 2 * tokens * channels
        k_header = struct.pack("<iQ", GGML_TYPE_F16, 2 * channels)
        v_header = struct.pack("<iII", GGML_TYPE_F16, 2, channels) if v_trans else k_header
        parts += [k_header + bytes(layer)] * layers + [v_header + bytes(layer)] * layers
        return SeqState.parse(bytearray(b"".join(parts)))
