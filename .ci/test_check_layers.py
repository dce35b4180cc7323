#!/usr/bin/env python3
"""The layer check fails on a planted upward include (in each form) and a planted upward link."""
import importlib.util
import os
import tempfile
import unittest

spec = importlib.util.spec_from_file_location("check_layers", os.path.join(os.path.dirname(__file__), "check_layers.py"))
check_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)


def tree(files):
    root = tempfile.mkdtemp(prefix="check_layers_")
    for rel, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as fh:
            fh.write(text)
    return root


BASE = {
    "include/kvstream/status.h": "#pragma once\n",
    "include/kvstream/stream.h": '#include "kvstream/status.h"\n',
    "common/status.cpp": '#include "kvstream/status.h"\n',
    "bench/machine.h": "#pragma once\n",
    "bench/simulator.cpp": '#include "bench/machine.h"\n#include "kvstream/stream.h"\n#include "machine.h"\n',
    "lab/rd_schemes.h": "#pragma once\n",
    "lab/rd_study.cpp": '#include "lab/rd_schemes.h"\n#include "bench/machine.h"\n',
    "stream/receiver.cpp": '#include <vector>\n#include "kvstream/stream.h"\n',
    "codec/decompress/decoder.cpp": "#pragma once\n",
    "codec/compress/encoder.h": "#pragma once\n",
}


class Includes(unittest.TestCase):
    def test_the_base_tree_passes(self):
        self.assertEqual(check_layers.check_includes(tree(BASE)), [])

    def test_upward_includes_fail_in_every_form(self):
        for form in ('#include "bench/machine.h"\n', "#include <bench/machine.h>\n", "#  include <kvstream/../../bench/machine.h>\n"):
            with self.subTest(form=form):
                files = dict(BASE, **{"stream/receiver.cpp": BASE["stream/receiver.cpp"] + form})
                problems = check_layers.check_includes(tree(files))
                self.assertEqual(len(problems), 1, problems)
                self.assertIn("stream includes bench/machine.h", problems[0])

    def test_a_bare_name_resolved_through_the_include_directories_fails(self):
        files = dict(BASE, **{"machine.h": "#pragma once\n", "stream/receiver.cpp": '#include "lab/rd_schemes.h"\n'})
        self.assertEqual(len(check_layers.check_includes(tree(files))), 1)
        files = dict(BASE, **{"include/rd_schemes.h": "", "lab/rd_schemes.h": "",
                              "common/half.cpp": "#include <rd_schemes.h>\n"})
        self.assertEqual(check_layers.check_includes(tree(files)), [])  # include/rd_schemes.h is in no room
        files = dict(BASE, **{"tools/x.h": "", "include/x.h": "", "common/half.cpp": '#include "tools/x.h"\n'})
        self.assertEqual(len(check_layers.check_includes(tree(files))), 1)

    def test_nothing_outside_lab_includes_lab(self):
        files = dict(BASE, **{"tests/bench/t.cpp": '#include "lab/rd_schemes.h"\n'})
        self.assertEqual(len(check_layers.check_includes(tree(files))), 1)

    def test_the_decoder_does_not_include_the_encoder(self):
        files = dict(BASE, **{"codec/decompress/decoder.cpp": '#include "codec/compress/encoder.h"\n'})
        self.assertEqual(len(check_layers.check_includes(tree(files))), 1)

    def test_the_shared_pieces_include_neither_side(self):
        for side in ("codec/compress/encoder.h", "codec/decompress/decoder.cpp"):
            with self.subTest(side=side):
                files = dict(BASE, **{"codec/common/rans.h": f'#include "{side}"\n'})
                self.assertEqual(len(check_layers.check_includes(tree(files))), 1)


def dot(edges):
    names = sorted({n for e in edges for n in e})
    ids = {n: f"node{i}" for i, n in enumerate(names)}
    lines = [f'"{ids[n]}" [ label = "{n}", shape = egg ];' for n in names]
    lines += [f'"{ids[a]}" -> "{ids[b]}" // {a} -> {b}' for a, b in edges]
    return "digraph \"kvstream\" {\n" + "\n".join(lines) + "\n}\n"


GOOD = [("kvstream", "kvstream_bench"), ("kvstream_bench", "kvstream_measure"), ("kvstream_measure", "kvstream_model"),
        ("kvstream_stream", "kvstream_transport"), ("kvstream_codec", "kvstream_common"), ("kvstream_rd_study", "kvstream_bench"),
        ("stream_fetch_test", "kvstream_stream"), ("kvstream_stream", "PkgConfig::UCX")]


class Links(unittest.TestCase):
    def test_the_base_graph_passes(self):
        self.assertEqual(check_layers.link_problems(dot(GOOD)), [])

    def test_upward_links_fail(self):
        for edge in [("kvstream_stream", "kvstream_model"), ("kvstream_measure", "kvstream_bench"),
                     ("kvstream_bench", "kvstream_lab_rd"), ("stream_fetch_test", "kvstream_lab_rd"),
                     ("kvstream_codec_decompress", "kvstream_codec_compress")]:
            with self.subTest(edge=edge):
                problems = check_layers.link_problems(dot(GOOD + [edge]))
                self.assertEqual(len(problems), 1, problems)

    def test_a_target_in_no_room_fails(self):
        self.assertEqual(len(check_layers.link_problems(dot(GOOD + [("kvstream_newthing", "kvstream_common")]))), 1)


if __name__ == "__main__":
    unittest.main()
