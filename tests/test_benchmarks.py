"""The side-by-side benchmark's reading of OpenNMT-py's log and of our scripts' output."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import side_by_side  # noqa: E402

LOG = """\
[2026 INFO] Step 50/  400; acc: 9.1; ppl: 900.2; xent: 6.8; lr: 0.00100; sents:    3200; bsz:  820/ 900/64; 2000/ 2200 tok/s;     30 sec;
[2026 INFO] Step 150/  400; acc: 20.1; ppl: 100.2; xent: 4.6; lr: 0.00100; sents:    3200; bsz:  830/ 880/64; 1234/ 1300 tok/s;    123 sec;
[2026 INFO] Step 200/  400; acc: 22.0; ppl: 80.0; xent: 4.4; lr: 0.00100; sents:    3200; bsz:  830/ 800/64; 1100/ 1000 tok/s;    173 sec;
"""


def test_opennmt_pairs_per_second_counts_the_windows_after_warmup():
    pairs, words = side_by_side.opennmt_pairs_per_second(LOG, warmup=100)
    rates = [1300 * 64 / 880, 1000 * 64 / 800]  # tgt tok/s over tgt tokens per sentence
    assert pairs == pytest.approx(2 / (1 / rates[0] + 1 / rates[1]))
    assert words == pytest.approx((880 + 800) / 128)


def test_opennmt_log_without_steady_windows_is_an_error():
    with pytest.raises(ValueError, match="after step 500"):
        side_by_side.opennmt_pairs_per_second(LOG, warmup=500)


def test_parse_lines_reads_name_value_lines_only():
    text = "backend=tensorflow\n# throughput: python x.py --a=b\nrnnsearch_train_pairs_per_second=301.5\n"
    assert side_by_side.parse_lines(text) == {
        "backend": "tensorflow", "rnnsearch_train_pairs_per_second": "301.5"}
