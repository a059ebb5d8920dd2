"""Multi30k task 1 (Elliott et al. 2016): en, de, fr, cs raw parallel text.

Where the files come from, first match wins:

1. ``data_dir`` (the CLI's ``--data-dir``), else ``$MEMNMT_DATA``: a local folder
   holding ``{split}.{lang}.gz`` (or uncompressed ``{split}.{lang}``);
2. the cache folder (``cache_dir``, else ``$MEMNMT_CACHE/multi30k``, else
   ``~/.cache/keras_memnmt/multi30k``);
3. a download from the dataset's public repository, checked against the sha256
   below before it is moved into the cache (a bad file is never cached).
"""

from __future__ import annotations

import os
import sys
import tempfile
import urllib.error
import urllib.request

from keras_memnmt.data.corpus import CorpusError, ParallelCorpus, read_parallel
from keras_memnmt.files import sha256_file

LANGUAGES = ("en", "de", "fr", "cs")
SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"

# sha256 of the public files (those of BASE_URL).
SHA256 = {
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}


class DownloadError(RuntimeError):
    """The public source could not be reached or served a bad file."""


class ChecksumError(DownloadError):
    """A downloaded file's sha256 does not match the pinned one (nothing was cached)."""


def default_cache_dir() -> str:
    root = os.environ.get("MEMNMT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "keras_memnmt")
    return os.path.join(root, "multi30k")


def _check_names(split: str, lang: str) -> None:
    if lang not in LANGUAGES:
        raise ValueError(f"unknown Multi30k language {lang!r}; expected one of {LANGUAGES}")
    if split not in SPLITS:
        raise ValueError(f"unknown Multi30k split {split!r}; expected one of {SPLITS}")


def _local_file(folder: str, split: str, lang: str) -> str | None:
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def download(
    name: str, cache_dir: str, base_url: str = BASE_URL, timeout: float = 30.0, quiet: bool | None = None
) -> str:
    """Downloads ``base_url/name`` into ``cache_dir`` after checking its sha256.

    A progress bar goes to stderr unless ``quiet`` (None, the default: only when stderr
    is a terminal, so that logs stay free of it; False: always).

    The file is written to a temporary name first and only moved into the cache
    once its checksum matches, so an interrupted or corrupted download leaves
    nothing behind.

    Raises:
        ChecksumError: the file's sha256 differs from the pinned one.
        DownloadError: the host could not be reached or answered with an error.
    """
    # Not keras.utils.get_file (Keras 3.x): it downloads straight into the cache under the
    # file's final name and checks file_hash only afterwards, so a file with the wrong hash
    # stays in the cache after its ValueError, and a kill mid-download (SIGKILL, power)
    # leaves a partial file there (re-fetched only because its hash differs); its progress
    # bar and messages go to stdout, where `memnmt` prints results; a network failure is a
    # bare Exception. Here: a temporary file moved into place only once its sha256 matches,
    # the bar on stderr (a terminal only, by default), and DownloadError / ChecksumError
    # lines that say what to do instead.
    url = f"{base_url.rstrip('/')}/{name}"
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=cache_dir)
    try:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, os.fdopen(fd, "wb") as out:
                total = int(resp.headers.get("Content-Length") or 0) or None
                from tqdm.auto import tqdm

                with tqdm(
                    total=total,
                    unit="B",
                    unit_scale=True,
                    desc=name,
                    file=sys.stderr,
                    disable=True if quiet else (None if quiet is None else False),
                ) as bar:
                    for block in iter(lambda: resp.read(1 << 16), b""):
                        out.write(block)
                        bar.update(len(block))
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            raise DownloadError(
                f"could not download {url}: {getattr(e, 'reason', e)}.\n"
                "If you have a local copy of Multi30k, pass --data-dir DIR (or set "
                "MEMNMT_DATA=DIR) pointing to the folder that holds files like train.en.gz."
            ) from e
        expected = SHA256.get(name)
        actual = sha256_file(tmp)
        if expected is None:
            print(f"warning: no pinned sha256 for {name}; got {actual}", file=sys.stderr)
        elif actual != expected:
            raise ChecksumError(
                f"checksum mismatch for {url}: expected sha256 {expected}, got {actual}; "
                "the file was not cached. Try again, or use a local copy with --data-dir."
            )
        final = os.path.join(cache_dir, name)
        os.replace(tmp, final)
        return final
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def multi30k_file(
    split: str,
    lang: str,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    base_url: str = BASE_URL,
    download_if_missing: bool = True,
) -> str:
    """The path of one Multi30k file, found locally or downloaded (see module docstring)."""
    _check_names(split, lang)
    data_dir = data_dir or os.environ.get("MEMNMT_DATA") or None
    if data_dir:
        if not os.path.isdir(data_dir):
            raise CorpusError(f"data directory not found: {data_dir}")
        path = _local_file(data_dir, split, lang)
        if path is None:
            raise CorpusError(f"{data_dir} has no {split}.{lang}.gz (nor {split}.{lang})")
        return path
    cache_dir = cache_dir or default_cache_dir()
    path = _local_file(cache_dir, split, lang)
    if path is not None:
        return path
    if not download_if_missing:
        raise CorpusError(f"{split}.{lang}.gz is neither in a data directory nor in {cache_dir}")
    return download(f"{split}.{lang}.gz", cache_dir, base_url=base_url)


def load_multi30k(
    src: str,
    tgt: str,
    split: str = "train",
    data_dir: str | None = None,
    cache_dir: str | None = None,
    base_url: str = BASE_URL,
) -> ParallelCorpus:
    """Loads one Multi30k split as a :class:`ParallelCorpus` of ``src`` → ``tgt`` pairs.

    Example:
        >>> corpus = load_multi30k("en", "de", "val", data_dir="/data/multi30k")  # doctest: +SKIP
    """
    if src == tgt:
        raise ValueError(f"source and target language are both {src!r}")
    paths = [multi30k_file(split, lang, data_dir, cache_dir, base_url) for lang in (src, tgt)]
    return read_parallel(*paths)
