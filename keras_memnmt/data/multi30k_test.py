"""Multi30k loading: local folder, $MEMNMT_DATA, cache, and a real download from a
local HTTP server on 127.0.0.1 (good file, corrupted file, unreachable host)."""

import functools
import http.server
import os
import shutil
import socket
import threading

import pytest

from keras_memnmt.data import ChecksumError, CorpusError, DownloadError, load_multi30k
from keras_memnmt.data.multi30k import SHA256, multi30k_file
from keras_memnmt.files import sha256_file

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


@pytest.fixture
def serve():
    """serve(folder) -> base URL of a threaded HTTP server on 127.0.0.1 for that folder."""
    servers = []

    def start(folder):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *a, **k: None
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_shared_copy_matches_pinned_checksums(data_dir):
    for name, digest in SHA256.items():
        assert sha256_file(os.path.join(data_dir, name)) == digest, name


def test_local_data_dir_and_env(data_dir, monkeypatch):
    c = load_multi30k("en", "de", "val", data_dir=data_dir)
    assert len(c) == 1014
    monkeypatch.setenv("MEMNMT_DATA", data_dir)
    c2 = load_multi30k("en", "fr", "test_2016_flickr")
    assert len(c2) == 1000 and c2.source == load_multi30k("en", "cs", "test_2016_flickr", data_dir=data_dir).source


def test_bad_names_and_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="language 'xx'"):
        multi30k_file("train", "xx", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="split 'dev'"):
        multi30k_file("dev", "en", data_dir=str(tmp_path))
    with pytest.raises(CorpusError, match="data directory not found"):
        multi30k_file("train", "en", data_dir=str(tmp_path / "nope"))
    with pytest.raises(CorpusError, match="has no val.en.gz"):
        multi30k_file("val", "en", data_dir=str(tmp_path))


def test_download_verifies_and_caches(data_dir, tmp_path, serve):
    url = serve(data_dir)
    cache = tmp_path / "cache"
    c = load_multi30k("en", "de", "val", cache_dir=str(cache), base_url=url)
    assert len(c) == 1014
    for lang in ("en", "de"):
        cached = cache / f"val.{lang}.gz"
        assert sha256_file(str(cached)) == SHA256[f"val.{lang}.gz"]
    assert sorted(os.listdir(cache)) == ["val.de.gz", "val.en.gz"]  # no temporary leftovers
    # A second load is served from the cache: a dead URL does not matter any more.
    c2 = load_multi30k("en", "de", "val", cache_dir=str(cache), base_url="http://127.0.0.1:9")
    assert c2.target == c.target


def test_corrupted_download_raises_and_caches_nothing(data_dir, tmp_path, serve):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.copy(os.path.join(data_dir, "val.en.gz"), mirror / "val.en.gz")
    data = bytearray(open(os.path.join(data_dir, "val.de.gz"), "rb").read())
    data[len(data) // 2] ^= 0xFF
    (mirror / "val.de.gz").write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="checksum mismatch.*val.de.gz"):
        load_multi30k("en", "de", "val", cache_dir=str(cache), base_url=serve(mirror))
    assert sorted(os.listdir(cache)) == ["val.en.gz"]  # the good file only; nothing partial


def test_unreachable_host_says_how_to_use_a_local_copy(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as e:
        load_multi30k("en", "de", "val", cache_dir=str(cache), base_url=f"http://127.0.0.1:{port}")
    assert "--data-dir" in str(e.value) and "MEMNMT_DATA" in str(e.value)
    assert not any(cache.iterdir())


def test_http_error_is_a_download_error(tmp_path, serve):
    with pytest.raises(DownloadError, match="could not download"):
        load_multi30k("en", "de", "val", cache_dir=str(tmp_path / "c"), base_url=serve(tmp_path))
