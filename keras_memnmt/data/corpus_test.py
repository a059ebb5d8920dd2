import gzip

import pytest

from keras_memnmt.data import CorpusError, read_lines, read_parallel

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


def write(path, data: bytes, gz=False):
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def test_plain_and_gz_read_the_same(tmp_path):
    text = b"ein Hund\nzwei Katzen\r\n"
    a = write(tmp_path / "a.txt", text)
    b = write(tmp_path / "b.txt.gz", text, gz=True)
    assert read_lines(a) == read_lines(b) == ["ein Hund", "zwei Katzen"]


def test_pairs_with_an_empty_side_are_dropped_and_counted(tmp_path):
    src = write(tmp_path / "s", b"a dog\n\nthree cats\n  \nend\n")
    tgt = write(tmp_path / "t", b"ein Hund\nnichts\ndrei Katzen\nleer\n\n")
    c = read_parallel(src, tgt)
    assert c.source == ["a dog", "three cats"]
    assert c.target == ["ein Hund", "drei Katzen"]
    assert c.dropped_empty == 3


def test_line_count_mismatch_names_both_files_and_counts(tmp_path):
    src = write(tmp_path / "train.en", b"a\nb\nc\n")
    tgt = write(tmp_path / "train.de", b"x\ny\n")
    with pytest.raises(CorpusError) as e:
        read_parallel(src, tgt)
    msg = str(e.value)
    assert str(src) in msg and str(tgt) in msg and "3" in msg and "2" in msg


def test_invalid_utf8_names_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.de.gz", b"gut\nauch gut\nschlecht \xff\xfe\n", gz=True)
    with pytest.raises(CorpusError, match=r"bad\.de\.gz, line 3: invalid UTF-8"):
        read_lines(bad)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(CorpusError, match="file not found"):
        read_lines(tmp_path / "nope.txt")
    with pytest.raises(CorpusError, match="directory"):
        read_lines(tmp_path)


def test_empty_corpus_is_an_error(tmp_path):
    src = write(tmp_path / "s", b"")
    tgt = write(tmp_path / "t", b"")
    with pytest.raises(CorpusError, match="empty corpus"):
        read_parallel(src, tgt)
    src = write(tmp_path / "s2", b"\n\n")
    tgt = write(tmp_path / "t2", b"x\n\n")
    with pytest.raises(CorpusError, match="2 pairs with an empty side"):
        read_parallel(src, tgt)


def test_corrupt_gzip_is_a_corpus_error(tmp_path):
    bad = write(tmp_path / "x.gz", b"not gzip at all")
    with pytest.raises(CorpusError, match="cannot read"):
        read_lines(bad)


def test_a_truncated_gzip_names_the_file_and_its_last_whole_line(tmp_path):
    whole = gzip.compress(b"".join(b"line %d of the file\n" % i for i in range(2000)))
    cut = write(tmp_path / "cut.gz", whole[: len(whole) // 2])
    with pytest.raises(CorpusError, match=r"^cannot read .*cut\.gz after line \d+: Compressed file ended"):
        read_lines(cut)


def test_take(tmp_path):
    src = write(tmp_path / "s", b"a\nb\nc\n")
    c = read_parallel(src, src)
    assert c.take(2).source == ["a", "b"] and len(c.take(None)) == 3
    with pytest.raises(CorpusError):
        c.take(0)
