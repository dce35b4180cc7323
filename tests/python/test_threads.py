"""The codec releases the GIL: several Python threads encode and decode at once, with the same results."""
import concurrent.futures

import numpy as np

import kvstream


def test_concurrent_encode_and_decode(dump):
    keys, values = dump["k"], dump["v"]
    expected = kvstream.encode(keys, values, 3)

    def round_trip(_):
        chunks = kvstream.encode(keys, values, 3)
        k, v = np.zeros_like(keys), np.zeros_like(values)
        for c in chunks:
            kvstream.decode_into(c, k, v)
        return chunks, k

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(round_trip, range(16)))
    first_k = results[0][1]
    for chunks, k in results:
        assert chunks == expected
        assert np.array_equal(k, first_k)
