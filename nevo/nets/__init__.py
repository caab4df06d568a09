"""Networks: specs (here: layer shapes, the flat parameter layout, the parameter count,
initialisation), `vbn` (virtual batch norm folded into the weights), `obs_norm` (observation
statistics folded into the first layer), and `kernels/` (the forward pass: the NumPy reference,
Numba CPU and numba.cuda twins, and safe mutations' gradient kernels).

The networks are those of Such et al. 2017 (arXiv 1712.06567), as the reference TensorFlow code
builds them: "SAME" padding, ReLU after every layer but the output, inputs uint8 scaled to [0, 1].
A max-pool layer (no parameters) may follow a conv's ReLU: the MNIST nets of Zhang, Clune & Stanley
2017 (arXiv 1712.06564), whose TensorFlow code pools with "SAME" padding too.
A dense hidden layer may use tanh instead ("mlp-tanh": the 2 x 64 tanh policy of OpenAI-ES's
MuJoCo runs, Salimans et al. 2017, arXiv 1703.03864).

Flat layout of one individual's float32 parameter vector: for each layer in order, its weights then
its bias. Conv weights are TF HWIO, (KH, KW, Cin, Cout); dense weights are (in, out). The first
dense layer reads the last conv activation flattened in (H, W, C) order, as TF flattens NHWC.

`NetSpec` is the frozen, human-readable description; `NetSpec.table` is the same thing as a small
int64 array (one row per layer, columns named by the constants below) for the Numba kernels.
"""

from dataclasses import dataclass, field

import numpy as np

OBS_SHAPE = (4, 84, 84)  # (C, H, W): four stacked 84x84 grayscale frames, as AtariVectorEnv gives

# Layer recipes: ("conv", out_channels, kernel, stride), ("pool", size) (max over size x size
# windows, stride size, after a conv or a pool) or ("dense", units[, activation]), the activation
# "relu" (the default) or "tanh". The output layer (dense, n_actions, linear) is appended by make_spec.
NAMED_LAYERS = {
    "large": (("conv", 32, 8, 4), ("conv", 64, 4, 2), ("conv", 64, 3, 1), ("dense", 512)),
    "small": (("conv", 16, 8, 4), ("conv", 32, 4, 2), ("dense", 256)),
    # For vector observations (gymnasium control tasks): two hidden layers of 64.
    "mlp": (("dense", 64), ("dense", 64)),
    # The same with tanh: OpenAI-ES's MuJoCo policy (Salimans et al. 2017; bounded hidden units,
    # which with observation normalisation keep a perturbation's effect on the output even).
    "mlp-tanh": (("dense", 64, "tanh"), ("dense", 64, "tanh")),
    # Wider: the humanoid policy of OpenAI's ES code and of Conti et al. 2018's novelty search.
    "mlp-tanh-256": (("dense", 256, "tanh"), ("dense", 256, "tanh")),
    # Deep and narrow, for vector observations: 16 hidden layers of 32, where the effect of a
    # plain Gaussian mutation varies most from weight to weight (safe mutations, Lehman et al. 2018).
    "deep": (("dense", 32),) * 16,
    # MNIST (1 x 28 x 28, 10 classes), the nets of Zhang, Clune & Stanley 2017 (arXiv 1712.06564),
    # ES against SGD: their small net (28,938 parameters) and large one (3,274,634: the layers of
    # TensorFlow's MNIST tutorial).
    "mnist": (("conv", 16, 5, 1), ("pool", 2), ("conv", 32, 5, 1), ("pool", 2)),
    "mnist-large": (("conv", 32, 5, 1), ("pool", 2), ("conv", 64, 5, 1), ("pool", 2), ("dense", 1024)),
}
IMAGE_NETS = ("large", "small", "mnist", "mnist-large")  # the nets with convs: they need images
# A dense net of one's own by name: "dense:64,64" (ReLU hidden layers of 64 and 64) or
# "dense-tanh:256,256"; nevo.train(net=[64, 64]) writes the first.
DENSE_PREFIXES = {"dense": "relu", "dense-tanh": "tanh"}


def layers_of(name: str) -> tuple:
    """The layer recipe of a net's name: a key of NAMED_LAYERS or a dense net of one's own
    ("dense:64,64", "dense-tanh:256,256"); ValueError naming what is allowed otherwise."""
    if name in NAMED_LAYERS:
        return NAMED_LAYERS[name]
    prefix, _, widths = name.partition(":")
    units = widths.split(",") if widths else []
    if prefix in DENSE_PREFIXES and units and all(u.isdigit() and int(u) > 0 for u in units):
        return tuple(("dense", int(u), DENSE_PREFIXES[prefix]) for u in units)
    raise ValueError(
        f"unknown network {name!r}; valid names: {', '.join(NAMED_LAYERS)}, or dense:W1,W2,... "
        "(ReLU) / dense-tanh:W1,W2,... (hidden widths)"
    )


CONV, DENSE, POOL = 0, 1, 2
# Columns of NetSpec.table (one row per layer). Dense layers have KH = KW = STRIDE = 1, sizes 1x1.
# A pool has CIN = COUT (its channels), its window in KH = KW = STRIDE, W_OFF = B_OFF (no
# parameters), ACT linear (the conv before it applied the ReLU), and TF "SAME" pads (at most one
# cell, after) that never win the max.
(KIND, KH, KW, STRIDE, CIN, COUT, IN_H, IN_W, OUT_H, OUT_W) = range(10)
(PAD_T, PAD_B, PAD_L, PAD_R, W_OFF, B_OFF, ACT) = range(10, 17)
N_COLS = 17
# The ACT column's codes: what follows a layer's sum (the kernels' common.activate)
LINEAR, RELU, TANH = 0, 1, 2
ACT_CODES = {"linear": LINEAR, "relu": RELU, "tanh": TANH}
KIND_CODES = {"conv": CONV, "dense": DENSE, "pool": POOL}  # Layer.kind -> the KIND column
HIDDEN_ACTS = ("relu", "tanh")


def same_padding(size, kernel, stride):
    """TF "SAME" padding along one axis: (out, pad_before, pad_after), the smaller half before."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


@dataclass(frozen=True)
class Layer:
    """One layer: its shapes, its SAME padding and where its weights and bias sit in the vector."""

    kind: str  # "conv", "pool" or "dense"
    cin: int  # input channels (conv, pool) or input units (dense)
    cout: int  # output channels (conv, pool: cin) or output units (dense)
    kernel: int  # square kernel or pooling window size (1 for dense)
    stride: int  # stride (the window for pool, 1 for dense)
    in_hw: tuple  # (H, W) of the input ((1, 1) for dense)
    out_hw: tuple  # (H, W) of the output ((1, 1) for dense)
    pad: tuple  # (top, bottom, left, right) SAME padding ((0, 0, 0, 0) for dense)
    act: str  # after the sum: "relu" or "tanh" (hidden layers), "linear" (the output layer, pools)
    w_offset: int  # start of the weights in the flat vector
    b_offset: int  # start of the bias in the flat vector

    @property
    def relu(self):
        """Whether a ReLU follows this layer."""
        return self.act == "relu"

    @property
    def w_shape(self):
        """Weight shape: (KH, KW, Cin, Cout) for conv, (in, out) for dense, (0,) for pool (none)."""
        if self.kind == "conv":
            return (self.kernel, self.kernel, self.cin, self.cout)
        if self.kind == "pool":
            return (0,)
        return (self.cin, self.cout)

    @property
    def n_bias(self):
        """Bias length: Cout, 0 for a pool (it has no parameters)."""
        return 0 if self.kind == "pool" else self.cout

    @property
    def fan_in(self):
        """Inputs summed per output: KH*KW*Cin for conv, in for dense."""
        return self.kernel * self.kernel * self.cin


@dataclass(frozen=True, eq=False)
class NetSpec:
    """A network: its layers, its input shape, its parameter count and the kernels' int table."""

    name: str  # "large", "small" or "custom"
    obs_shape: tuple  # (C, H, W) of the input; vectors are (n, 1, 1)
    n_actions: int  # outputs of the last layer
    layers: tuple  # of Layer, in order
    n_params: int  # length of the flat float32 vector
    table: np.ndarray = field(repr=False)  # (n_layers, N_COLS) int64, for the Numba kernels
    obs_dtype: np.dtype = np.dtype(np.uint8)  # uint8 pixels (scaled by 1/255) or float32 (as given)
    # What the outputs choose: "argmax" (a discrete action: the first largest output), "tanh"
    # (a continuous action vector: tanh of each output, in [-1, 1]; the task maps it to its bounds)
    # or "bins" (a continuous action vector, each component one of BINS evenly spaced values in
    # [-1, 1]: the first largest of its BINS outputs; n_actions = components x BINS)
    action: str = "argmax"

    def __setstate__(self, state):
        """An unpickled spec (an emulator or Dask worker's copy) with its table read-only again, as
        make_spec leaves it: pickle gives arrays back writable, and Numba compiles (and caches) the
        kernels for each kind of table. speed: a worker's first forward loads the forward from the
        cache instead of compiling it for a writable table (20-40 s on a 2-core VM, in every
        emulator process of a fresh install at once)."""
        table = state["table"]
        if table.flags.writeable:
            table = table.copy()
            table.setflags(write=False)
        self.__dict__.update({**state, "table": table})

    @property
    def action_dims(self):
        """Length of an action vector ("tanh", "bins"); the number of choices for "argmax"."""
        return self.n_actions // BINS if self.action == "bins" else self.n_actions

    @property
    def obs_div(self):
        """What inputs are divided by: 255 for uint8 pixels, 1 (exact: unchanged) for float32."""
        return 255.0 if self.obs_dtype == np.uint8 else 1.0

    def unflatten(self, theta):
        """Views of a flat (n_params,) vector as [(weights, bias), ...] per layer."""
        return [
            (
                theta[lay.w_offset : lay.b_offset].reshape(lay.w_shape),
                theta[lay.b_offset : lay.b_offset + lay.n_bias],
            )
            for lay in self.layers
        ]


ACTIONS = ("argmax", "tanh", "bins")
BINS = 10  # "bins": outputs per action component (Salimans et al. 2017 discretised Hopper's into 10)


def make_spec(layers, obs_shape=OBS_SHAPE, n_actions=18, name="custom", obs_dtype=np.uint8, action="argmax"):
    """Build a NetSpec from a recipe of ("conv", cout, k, s) / ("pool", k) / ("dense", units),
    convs and pools first, a pool after a conv or a pool.

    obs_dtype: uint8 (pixels, scaled to [0, 1]) or float32 (vector observations, used as given).
    action: "argmax" (n_actions discrete actions), "tanh" (an n_actions-long action vector) or
    "bins" (an n_actions / BINS-long action vector, BINS outputs per component).
    """
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
    if action == "bins" and n_actions % BINS:
        raise ValueError(f"action 'bins' needs n_actions a multiple of {BINS} (components x {BINS})")
    obs_dtype = np.dtype(obs_dtype)
    if obs_dtype not in (np.uint8, np.float32):
        raise ValueError(f"obs_dtype must be uint8 or float32, got {obs_dtype}")
    c0, h0, w0 = (int(v) for v in obs_shape)
    c, h, w = c0, h0, w0
    if min(c, h, w) < 1 or n_actions < 1:
        raise ValueError(f"obs_shape {obs_shape} and n_actions {n_actions} must be positive")
    built, offset, flat, seen_dense = [], 0, False, False
    for item in tuple(layers) + (("dense", n_actions),):
        kind = item[0]
        if kind == "conv":
            if seen_dense:
                raise ValueError(f"conv layer {item} after a dense layer: convs must come first")
            _, cout, k, s = (kind, *map(int, item[1:]))
            oh, pt, pb = same_padding(h, k, s)
            ow, pl, pr = same_padding(w, k, s)
            lay = Layer("conv", c, cout, k, s, (h, w), (oh, ow), (pt, pb, pl, pr), "relu", 0, 0)
            c, h, w = cout, oh, ow
        elif kind == "pool":
            if not built or built[-1][0].kind not in ("conv", "pool"):
                raise ValueError(f"pool layer {item} must follow a conv or a pool (it pools their ReLU)")
            k = int(item[1])
            if k < 1:
                raise ValueError(f"pool layer {item}: the window must be at least 1")
            # TF "SAME" pooling: out = ceil(in / k); the padding cells are never the max
            oh, pt, pb = same_padding(h, k, k)
            ow, pl, pr = same_padding(w, k, k)
            lay = Layer("pool", c, c, k, k, (h, w), (oh, ow), (pt, pb, pl, pr), "linear", 0, 0)
            h, w = oh, ow
        elif kind == "dense":
            seen_dense = True
            if not flat:
                c, h, w, flat = c * h * w, 1, 1, True
            cout = int(item[1])
            act = item[2] if len(item) > 2 else "relu"
            if act not in HIDDEN_ACTS:
                raise ValueError(f"unknown activation {act!r} in {item}; use one of {HIDDEN_ACTS}")
            lay = Layer("dense", c, cout, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), act, 0, 0)
            c = cout
        else:
            raise ValueError(f"unknown layer kind {kind!r} in {item}; use 'conv', 'pool' or 'dense'")
        n_w = int(np.prod(lay.w_shape))
        built.append((lay, offset, offset + n_w))
        offset += n_w + lay.n_bias
    out = []
    for i, (lay, w_off, b_off) in enumerate(built):
        act = lay.act if i < len(built) - 1 else "linear"
        out.append(Layer(**{**lay.__dict__, "act": act, "w_offset": w_off, "b_offset": b_off}))
    table = np.zeros((len(out), N_COLS), dtype=np.int64)
    for i, lay in enumerate(out):
        table[i] = (
            (KIND_CODES[lay.kind], lay.kernel, lay.kernel, lay.stride)
            + (lay.cin, lay.cout, *lay.in_hw, *lay.out_hw, *lay.pad)
            + (lay.w_offset, lay.b_offset, ACT_CODES[lay.act])
        )
    table.setflags(write=False)
    return NetSpec(name, (c0, h0, w0), int(n_actions), tuple(out), offset, table, obs_dtype, action)


def net_spec(name, obs_shape=OBS_SHAPE, n_actions=18, obs_dtype=np.uint8, action="argmax"):
    """The named network (a key of NAMED_LAYERS, or a dense net of one's own: layers_of) for this
    input shape and action count."""
    return make_spec(layers_of(name), obs_shape, n_actions, name=name, obs_dtype=obs_dtype, action=action)


def require_relu(spec, what: str) -> None:
    """ValueError (one line) unless every hidden layer of spec is ReLU: what (safe mutations'
    gradients, virtual batch norm's fold) assumes it."""
    tanh = [i for i, lay in enumerate(spec.layers) if lay.act == "tanh"]
    if tanh:
        raise ValueError(
            f"{what} assumes ReLU hidden units; the {spec.name} net has tanh ones (layers {tanh})"
        )


def require_no_pool(spec, what: str) -> None:
    """ValueError (one line) if spec has a pool layer: what (virtual batch norm's fold) has none."""
    pools = [i for i, lay in enumerate(spec.layers) if lay.kind == "pool"]
    if pools:
        raise ValueError(f"{what} does not handle pool layers; the {spec.name} net has them (layers {pools})")


def init_scale(spec):
    """Per-parameter scale of the reference init: 1/sqrt(fan_in), output weights x0.1, biases 0."""
    scale = np.zeros(spec.n_params, dtype=np.float32)  # (n_params,)
    for i, lay in enumerate(spec.layers):
        s = 1.0 / np.sqrt(lay.fan_in)
        if i == len(spec.layers) - 1:
            s *= 0.1
        scale[lay.w_offset : lay.b_offset] = s
    return scale
