#!/usr/bin/python3
"""Generate the PyTorch reference fixtures of tests/reference/.

Each fixture describes a small network as a list of layers (the same calls
the C API offers), its initial parameters (drawn here with a fixed seed, in
libpcnn's parameter order: layers in order of addition, each in PyTorch's
order), a few batches of inputs with labels or targets, the optimizer and
its options, and what PyTorch computes from them in float64:

  grads0        the parameter gradients on the first batch, before training
  losses        the training loss of each step (before that step's update)
  final_params  the parameters after all steps
  predict       the eval-mode output (batch-norm running statistics) on x_eval

File format (text, whitespace-separated, one directive per line):

  pcnn-fixture 1
  name <name>
  input <C> <H> <W>                         (images; or, for volumes:)
  input3d <C> <D> <H> <W>
  layer <kind> <input index>... <args>...   (the input is 0, layers 1, 2, ...)
  loss <cross_entropy|mse|l1|bce_logits> <layer index>
  optimizer <sgd|momentum|adam>
  option <learning_rate|momentum|weight_decay|adam_beta1|adam_beta2|adam_epsilon> <value>
  batch <n>
  steps <n>
  array <name> <count>
  <count numbers, several per line>
  end

Layer arguments, by kind: conv2d in cout k stride pad bias | maxpool2d in k
stride pad | avgpool2d in k stride pad | global_avgpool in | dense in out
bias | flatten in | relu in | leaky_relu in slope | batchnorm in eps momentum
| add a b | add_scaled a b scale | pixel_shuffle in r | conv3d in cout k stride
pad bias | maxpool3d in k stride pad | avgpool3d in k stride pad | sigmoid in |
tanh in | upsample2d in factor mode | upsample3d in factor mode (mode 0
nearest, 1 linear) | conv_transpose2d in cout k stride pad output_pad bias |
conv_transpose3d in cout k stride pad output_pad bias | concat count in....

Floats are written as the shortest decimal that round-trips the float32
value.  Run: /usr/bin/python3 scripts/make_fixtures.py [output dir]
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "reference", "fixtures")

# Number of inputs of each kind; the remaining fields are arguments.
KIND_INPUTS = {
    "conv2d": 1, "maxpool2d": 1, "avgpool2d": 1, "global_avgpool": 1, "dense": 1,
    "flatten": 1, "relu": 1, "leaky_relu": 1, "batchnorm": 1, "add": 2,
    "add_scaled": 2, "pixel_shuffle": 1, "conv3d": 1, "maxpool3d": 1, "avgpool3d": 1,
    "sigmoid": 1, "tanh": 1, "upsample2d": 1, "upsample3d": 1, "conv_transpose2d": 1,
    "conv_transpose3d": 1, "concat": None,  # None: any number, written first
}


# The smallest distance of a ReLU input or an L1 residual from its kink, or
# of a max pool's winner from the runner-up of its window, seen while
# training: float32 and float64 must not disagree on which side it is.
KINK_MARGIN = [np.inf]
MIN_KINK_MARGIN = 1e-4


def f32(a):
    return np.asarray(a, dtype=np.float32)


def quantized(rng, shape, lo, hi, step):
    """Uniform values on a grid of `step`: exact in float32, short in text."""
    return f32(np.round(rng.uniform(lo, hi, size=shape) / step) * step)


class Net(torch.nn.Module):
    """Interprets a fixture's layer list, the way the C test builds it."""

    def __init__(self, in_shape, layers, rng):
        super().__init__()
        self.layers = layers
        self.mods = torch.nn.ModuleList()
        shapes = [in_shape]
        init = []
        for kind, ins, args in layers:
            c = shapes[ins[0]][0]
            features = int(np.prod(shapes[ins[0]]))
            mod = None
            if kind == "conv3d":
                cout, k, s, p, bias = args
                mod = torch.nn.Conv3d(c, cout, k, s, p, bias=bool(bias))
                bound = 1.0 / np.sqrt(c * k * k * k)
                init.append(quantized(rng, (cout, c, k, k, k), -bound, bound, 2**-12))
                if bias:
                    init.append(quantized(rng, (cout,), -0.1, 0.1, 2**-12))
            elif kind == "conv2d":
                cout, k, s, p, bias = args
                mod = torch.nn.Conv2d(c, cout, k, s, p, bias=bool(bias))
                bound = 1.0 / np.sqrt(c * k * k)
                init.append(quantized(rng, (cout, c, k, k), -bound, bound, 2**-12))
                if bias:
                    init.append(quantized(rng, (cout,), -0.1, 0.1, 2**-12))
            elif kind in ("conv_transpose2d", "conv_transpose3d"):
                cout, k, s, p, op, bias = args
                vol = kind == "conv_transpose3d"
                cls = torch.nn.ConvTranspose3d if vol else torch.nn.ConvTranspose2d
                mod = cls(c, cout, k, s, p, output_padding=op, bias=bool(bias))
                taps = k ** (3 if vol else 2)
                bound = 1.0 / np.sqrt(cout * taps)
                init.append(quantized(rng, (c, cout) + (k,) * (3 if vol else 2), -bound, bound,
                                      2**-12))
                if bias:
                    init.append(quantized(rng, (cout,), -0.1, 0.1, 2**-12))
            elif kind == "dense":
                out, bias = args
                mod = torch.nn.Linear(features, out, bias=bool(bias))
                bound = 1.0 / np.sqrt(features)
                init.append(quantized(rng, (out, features), -bound, bound, 2**-12))
                if bias:
                    init.append(quantized(rng, (out,), -0.1, 0.1, 2**-12))
            elif kind == "batchnorm":
                eps, momentum = args
                # The C side passes float32 eps and momentum.
                bn = torch.nn.BatchNorm3d if len(shapes[ins[0]]) == 4 else torch.nn.BatchNorm2d
                mod = bn(c, eps=float(f32(eps)), momentum=float(f32(momentum)))
                init.append(quantized(rng, (c,), 0.8, 1.2, 2**-12))
                init.append(quantized(rng, (c,), -0.1, 0.1, 2**-12))
            self.mods.append(mod if mod is not None else torch.nn.Identity())
            with torch.no_grad():
                probe = [torch.zeros(2, *s) for s in shapes]
                y = self._apply(kind, ins, args, mod, probe)
            shapes.append(tuple(y.shape[1:]))
        self.shapes = shapes
        # The shape probes ran in training mode: forget what they did to
        # the running statistics.
        for mod in self.mods:
            if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
                mod.reset_running_stats()
        self.param_list = [p for m in self.mods for p in m.parameters()]
        flat = np.concatenate([a.ravel() for a in init]) if init else f32([])
        self.set_flat(flat)
        self.init_flat = f32(flat)

    @staticmethod
    def _apply(kind, ins, args, mod, outs):
        a = outs[ins[0]]
        n = a.shape[0]
        if kind in ("conv2d", "conv3d", "batchnorm", "conv_transpose2d", "conv_transpose3d"):
            return mod(a)
        if kind in ("upsample2d", "upsample3d"):
            factor, mode = args
            if mode == 0:
                return F.interpolate(a, scale_factor=factor, mode="nearest")
            linear = "trilinear" if kind == "upsample3d" else "bilinear"
            return F.interpolate(a, scale_factor=factor, mode=linear, align_corners=False)
        if kind == "dense":
            return mod(a.reshape(n, -1)).reshape(n, -1, 1, 1)
        if kind == "flatten":
            return a.reshape(n, -1, 1, 1)
        if kind in ("relu", "leaky_relu"):
            KINK_MARGIN[0] = min(KINK_MARGIN[0], float(a.detach().abs().min()))
        if kind == "relu":
            return F.relu(a)
        if kind == "leaky_relu":
            return F.leaky_relu(a, float(f32(args[0])))
        if kind == "maxpool2d":
            return F.max_pool2d(a, args[0], args[1], args[2])
        if kind == "avgpool2d":
            return F.avg_pool2d(a, args[0], args[1], args[2], count_include_pad=True)
        if kind == "maxpool3d":
            k, s, p = args
            # The gap between each window's winner and its runner-up.
            padded = F.pad(a.detach(), (p,) * 6, value=-np.inf)
            win = padded.unfold(2, k, s).unfold(3, k, s).unfold(4, k, s).reshape(
                *a.shape[:2], -1, k * k * k)
            top = win.topk(2, dim=-1).values
            KINK_MARGIN[0] = min(KINK_MARGIN[0], float((top[..., 0] - top[..., 1]).min()))
            return F.max_pool3d(a, k, s, p)
        if kind == "avgpool3d":
            return F.avg_pool3d(a, args[0], args[1], args[2], count_include_pad=True)
        if kind == "global_avgpool":
            return a.mean(dim=tuple(range(2, a.dim())), keepdim=True).reshape(n, -1, 1, 1)
        if kind == "add":
            return a + outs[ins[1]]
        if kind == "add_scaled":
            return a + float(f32(args[0])) * outs[ins[1]]
        if kind == "pixel_shuffle":
            return F.pixel_shuffle(a, args[0])
        if kind == "concat":
            return torch.cat([outs[i] for i in ins], dim=1)
        if kind == "sigmoid":
            return torch.sigmoid(a)
        if kind == "tanh":
            return torch.tanh(a)
        raise ValueError(kind)

    def forward(self, x, upto):
        outs = [x]
        for (kind, ins, args), mod in zip(self.layers, self.mods):
            outs.append(self._apply(kind, ins, args, mod, outs))
        return outs[upto]

    def set_flat(self, flat):
        off = 0
        with torch.no_grad():
            for p in self.param_list:
                k = p.numel()
                chunk = np.asarray(flat[off:off + k], dtype=np.float64)
                p.copy_(torch.from_numpy(chunk).reshape(p.shape))
                off += k
        assert off == len(flat)

    def flat(self, grads=False):
        return np.concatenate([(p.grad if grads else p).detach().numpy().ravel()
                               for p in self.param_list])


def loss_fn(kind, out, lab, tgt):
    out = out.reshape(out.shape[0], -1)
    if kind == "l1":
        KINK_MARGIN[0] = min(KINK_MARGIN[0], float((out - tgt).detach().abs().min()))
    if kind == "cross_entropy":
        return F.cross_entropy(out, lab)
    if kind == "mse":
        return F.mse_loss(out, tgt)
    if kind == "l1":
        return F.l1_loss(out, tgt)
    if kind == "bce_logits":
        return F.binary_cross_entropy_with_logits(out, tgt)
    raise ValueError(kind)


def make_case(name, in_shape, layers, loss, optimizer, options, batch=3, steps=3, seed=0):
    """layers: list of (kind, [inputs], [args]); loss: (kind, layer index).
    Redraws the data until no ReLU input or L1 residual comes near its kink."""
    for attempt in range(50):
        text = make_case_once(name, in_shape, layers, loss, optimizer, options, batch, steps,
                              seed * 1000 + attempt)
        if text is not None:
            return name, text
    raise RuntimeError("%s: no draw kept away from the kinks" % name)


def make_case_once(name, in_shape, layers, loss, optimizer, options, batch, steps, seed):
    rng = np.random.default_rng(seed)
    layers = [(k, list(ins), list(args)) for k, ins, args in layers]
    for k, ins, _ in layers:
        assert KIND_INPUTS[k] is None or len(ins) == KIND_INPUTS[k], k
    net = Net(in_shape, layers, rng)
    KINK_MARGIN[0] = np.inf  # (the shape probes ran on zeros)
    loss_kind, out_index = loss
    out_shape = net.shapes[out_index]
    out_size = int(np.prod(out_shape))
    sample = int(np.prod(in_shape))

    xs = quantized(rng, (steps, batch) + tuple(in_shape), -1, 1, 2**-7)
    x_eval = quantized(rng, (batch,) + tuple(in_shape), -1, 1, 2**-7)
    if loss_kind == "cross_entropy":
        labs = rng.integers(0, out_size, size=(steps, batch))
        tgts = None
    else:
        labs = None
        lo = 0 if loss_kind == "bce_logits" else -1  # BCE: probabilities
        tgts = quantized(rng, (steps, batch, out_size), lo, 1, 2**-7)

    def batch_args(s):
        lab = torch.from_numpy(labs[s]).long() if labs is not None else None
        tgt = torch.from_numpy(tgts[s].astype(np.float64)) if tgts is not None else None
        return torch.from_numpy(xs[s].astype(np.float64)), lab, tgt

    # Gradients at the initial parameters on the first batch (training mode,
    # but on a copy of the state: running statistics must not move).
    state = {k: v.clone() for k, v in net.state_dict().items()}
    net.train()
    x, lab, tgt = batch_args(0)
    net.zero_grad()
    loss_fn(loss_kind, net(x, out_index), lab, tgt).backward()
    grads0 = net.flat(grads=True)
    net.load_state_dict(state)
    net.zero_grad()

    lr = options["learning_rate"]
    wd = options.get("weight_decay", 0.0)
    if optimizer == "sgd":
        opt = torch.optim.SGD(net.param_list, lr=lr, weight_decay=wd)
    elif optimizer == "momentum":
        opt = torch.optim.SGD(net.param_list, lr=lr, momentum=options["momentum"],
                              weight_decay=wd)
    elif optimizer == "adam":
        opt = torch.optim.Adam(net.param_list, lr=lr,
                               betas=(options.get("adam_beta1", 0.9),
                                      options.get("adam_beta2", 0.999)),
                               eps=options.get("adam_epsilon", 1e-8), weight_decay=wd)
    else:
        raise ValueError(optimizer)

    losses = []
    for s in range(steps):
        x, lab, tgt = batch_args(s)
        opt.zero_grad()
        loss = loss_fn(loss_kind, net(x, out_index), lab, tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if KINK_MARGIN[0] < MIN_KINK_MARGIN:
        return None
    net.eval()
    with torch.no_grad():
        pred = net(torch.from_numpy(x_eval.astype(np.float64)), out_index)
    pred = pred.reshape(batch, -1).numpy()

    head = "input3d %d %d %d %d" if len(in_shape) == 4 else "input %d %d %d"
    lines = ["pcnn-fixture 1", "name " + name, head % tuple(in_shape)]
    for kind, ins, args in layers:
        count = [str(len(ins))] if KIND_INPUTS[kind] is None else []
        lines.append(" ".join(["layer", kind] + count + [str(i) for i in ins] +
                              [fmt(a) for a in args]))
    lines.append("loss %s %d" % (loss_kind, out_index))
    lines.append("optimizer " + optimizer)
    for k, v in options.items():
        lines.append("option %s %s" % (k, fmt(v)))
    lines.append("batch %d" % batch)
    lines.append("steps %d" % steps)

    def array(aname, values, ints=False):
        values = np.asarray(values).ravel()
        lines.append("array %s %d" % (aname, len(values)))
        toks = [str(int(v)) for v in values] if ints else [fmt(v) for v in values]
        for i in range(0, len(toks), 12):
            lines.append(" ".join(toks[i:i + 12]))

    array("params", net.init_flat)
    array("x", xs)
    if labs is not None:
        array("labels", labs, ints=True)
    else:
        array("targets", tgts)
    array("grads0", grads0)
    array("losses", losses)
    array("final_params", net.flat())
    array("x_eval", x_eval)
    array("predict", pred)
    lines.append("end")
    assert xs.size == steps * batch * sample
    return "\n".join(lines) + "\n"


def fmt(v):
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    v = np.float32(v)
    assert np.isfinite(v)
    return str(v)  # numpy prints the shortest string that round-trips


def cases():
    # conv(3->4, k3, p1) + relu + maxpool + dense, cross entropy.
    cnn = [("conv2d", [0], [4, 3, 1, 1, 1]), ("relu", [1], []),
           ("maxpool2d", [2], [2, 2, 0]), ("dense", [3], [10, 1])]
    yield make_case("cnn_sgd", (3, 5, 5), cnn, ("cross_entropy", 4), "sgd",
                    {"learning_rate": 0.1}, seed=1)
    yield make_case("cnn_momentum_wd", (3, 5, 5), cnn, ("cross_entropy", 4), "momentum",
                    {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 5e-3}, seed=2)
    yield make_case("cnn_adam", (3, 5, 5), cnn, ("cross_entropy", 4), "adam",
                    {"learning_rate": 0.01, "adam_beta1": 0.9, "adam_beta2": 0.999,
                     "adam_epsilon": 1e-8}, seed=3)
    # conv (no bias: a batch norm follows) + bn + relu + conv + residual add +
    # global avgpool + dense; eval-mode predict uses the running statistics.
    res = [("conv2d", [0], [4, 3, 1, 1, 0]), ("batchnorm", [1], [1e-5, 0.1]),
           ("relu", [2], []), ("conv2d", [3], [4, 3, 1, 1, 1]), ("add", [3, 4], []),
           ("global_avgpool", [5], []), ("dense", [6], [5, 1])]
    yield make_case("resnet_bn_momentum", (3, 5, 5), res, ("cross_entropy", 7), "momentum",
                    {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 1e-3},
                    batch=4, steps=4, seed=4)
    yield make_case("resnet_bn_adam", (3, 5, 5), res, ("cross_entropy", 7), "adam",
                    {"learning_rate": 0.01, "adam_beta1": 0.8, "adam_beta2": 0.99,
                     "adam_epsilon": 1e-6}, batch=4, steps=4, seed=5)
    # conv + pixel shuffle, MSE (super-resolution shape).
    sr = [("conv2d", [0], [8, 3, 1, 1, 1]), ("pixel_shuffle", [1], [2])]
    yield make_case("shuffle_mse_adam", (2, 4, 4), sr, ("mse", 2), "adam",
                    {"learning_rate": 0.01}, seed=6)
    # dense + leaky relu + dense with L1 on a (C,H,W) input.
    mlp = [("dense", [0], [8, 1]), ("leaky_relu", [1], [0.1]), ("dense", [2], [3, 0])]
    yield make_case("dense_l1_sgd", (1, 4, 4), mlp, ("l1", 3), "sgd",
                    {"learning_rate": 0.1}, batch=4, seed=7)
    # strided conv + leaky relu + avgpool + conv, scaled residual, flatten,
    # dense, MSE, momentum with weight decay.
    mix = [("conv2d", [0], [4, 3, 2, 1, 1]), ("leaky_relu", [1], [0.2]),
           ("avgpool2d", [2], [3, 1, 1]), ("conv2d", [3], [4, 3, 1, 1, 0]),
           ("add_scaled", [3, 4], [0.5]), ("flatten", [5], []), ("dense", [6], [6, 1])]
    yield make_case("mixed_mse_momentum_wd", (3, 5, 5), mix, ("mse", 7), "momentum",
                    {"learning_rate": 0.02, "momentum": 0.9, "weight_decay": 1e-2}, seed=8)


    # conv2d with padding >= kernel (windows of pure padding: the bias).
    pad = [("conv2d", [0], [3, 1, 1, 1, 1]), ("conv2d", [1], [2, 3, 2, 3, 1])]
    yield make_case("conv2d_padding_ge_kernel", (2, 5, 4), pad, ("mse", 2), "sgd",
                    {"learning_rate": 0.1}, seed=9)
    # Volumes (C, D, H, W).  conv3d alone, strided, odd sizes, MSE.
    yield make_case("conv3d_sgd", (2, 5, 4, 6), [("conv3d", [0], [3, 3, 2, 1, 1])],
                    ("mse", 1), "sgd", {"learning_rate": 0.1}, seed=10)
    # conv3d + max_pool3d (windows overlap: stride 2, padding 1) + dense.
    mp = [("conv3d", [0], [3, 3, 1, 1, 0]), ("maxpool3d", [1], [3, 2, 1]),
          ("dense", [2], [4, 1])]
    yield make_case("maxpool3d_momentum", (2, 5, 5, 4), mp, ("mse", 3), "momentum",
                    {"learning_rate": 0.05, "momentum": 0.9}, seed=11)
    # conv3d + avg_pool3d + a 1x1x1 conv3d with padding 1, flatten, L1.
    ap = [("conv3d", [0], [4, 3, 1, 2, 1]), ("avgpool3d", [1], [2, 2, 0]),
          ("conv3d", [2], [2, 1, 1, 1, 1]), ("flatten", [3], [])]
    yield make_case("avgpool3d_adam", (2, 4, 5, 3), ap, ("l1", 4), "adam",
                    {"learning_rate": 0.01}, seed=12)
    # CosmoFlow in miniature: conv3d + batch norm + leaky ReLU + avg pool,
    # strided conv3d + leaky ReLU, dense + leaky ReLU + dense, MSE, Adam.
    cosmo = [("conv3d", [0], [4, 3, 1, 1, 0]), ("batchnorm", [1], [1e-5, 0.1]),
             ("leaky_relu", [2], [0.01]), ("avgpool3d", [3], [3, 2, 1]),
             ("conv3d", [4], [6, 3, 2, 1, 0]), ("leaky_relu", [5], [0.01]),
             ("dense", [6], [8, 1]), ("leaky_relu", [7], [0.01]), ("dense", [8], [4, 1])]
    yield make_case("cosmoflow_mini_adam", (2, 7, 6, 5), cosmo, ("mse", 9), "adam",
                    {"learning_rate": 0.005}, batch=4, steps=4, seed=13)
    # Rows of 16 and 14: libpcnn runs both convolutions' forward and dW and
    # the second's dx (rows of 14 back to 16) by its direct 3D kernels
    # (lib/kernels/vol_direct*.c).
    rows = [("conv3d", [0], [4, 3, 1, 1, 1]), ("leaky_relu", [1], [0.1]),
            ("conv3d", [2], [3, 3, 1, 1, 0]), ("flatten", [3], []), ("dense", [4], [2, 1])]
    yield make_case("conv3d_rows16_adam", (2, 3, 4, 16), rows, ("mse", 5), "adam",
                    {"learning_rate": 0.01}, seed=14)
    # Encoder-decoder outputs: tanh between convolutions, a sigmoid head
    # trained with MSE, and logits trained with BCE (segmentation).
    sq = [("conv2d", [0], [4, 3, 1, 1, 1]), ("tanh", [1], []),
          ("conv2d", [2], [2, 3, 2, 1, 1]), ("sigmoid", [3], [])]
    yield make_case("tanh_sigmoid_mse_adam", (3, 7, 5), sq, ("mse", 4), "adam",
                    {"learning_rate": 0.01}, seed=15)
    seg = [("conv3d", [0], [3, 3, 1, 1, 1]), ("tanh", [1], []),
           ("conv3d", [2], [2, 1, 1, 0, 1])]
    yield make_case("bce_logits_conv3d_momentum", (2, 3, 5, 4), seg, ("bce_logits", 3),
                    "momentum", {"learning_rate": 0.1, "momentum": 0.9}, seed=16)
    # A decoder: strided conv down, a strided transposed conv back up with
    # output padding, nearest and bilinear upsampling, odd sizes.
    dec = [("conv2d", [0], [4, 3, 2, 1, 1]), ("tanh", [1], []),
           ("conv_transpose2d", [2], [3, 3, 2, 1, 1, 1]), ("upsample2d", [3], [2, 0]),
           ("conv2d", [4], [3, 3, 2, 0, 1]), ("upsample2d", [5], [3, 1]),
           ("conv_transpose2d", [6], [2, 4, 1, 2, 0, 0])]
    yield make_case("decoder2d_adam", (2, 7, 5), dec, ("mse", 7), "adam",
                    {"learning_rate": 0.01}, batch=2, seed=17)
    # Volumes: trilinear upsampling then a strided transposed conv3d with
    # output padding, nearest upsampling, a k2 s2 transposed conv3d.
    dec3 = [("upsample3d", [0], [2, 1]), ("conv_transpose3d", [1], [3, 3, 2, 1, 1, 1]),
            ("sigmoid", [2], []), ("conv3d", [3], [2, 3, 3, 1, 1]), ("upsample3d", [4], [2, 0]),
            ("conv3d", [5], [2, 3, 2, 0, 1]), ("conv_transpose3d", [6], [2, 2, 2, 0, 0, 0])]
    yield make_case("decoder3d_sgd", (2, 3, 2, 3), dec3, ("mse", 7), "sgd",
                    {"learning_rate": 0.5}, batch=2, steps=2, seed=18)
    # U-Nets in miniature: down by a strided conv, up by a transposed conv
    # (output padding to the skip's odd size) or by upsampling, joined to
    # the skip by concat (three inputs, one repeated, in 2D).
    unet = [("conv2d", [0], [3, 3, 1, 1, 1]), ("tanh", [1], []),
            ("conv2d", [2], [4, 3, 2, 1, 1]), ("tanh", [3], []),
            ("conv_transpose2d", [4], [3, 3, 2, 1, 0, 1]),
            ("concat", [5, 2, 5], []), ("conv2d", [6], [2, 3, 1, 1, 1])]
    yield make_case("unet2d_adam", (2, 7, 5), unet, ("mse", 7), "adam",
                    {"learning_rate": 0.01}, batch=2, seed=19)
    unet3 = [("conv3d", [0], [3, 3, 1, 1, 1]), ("sigmoid", [1], []),
             ("avgpool3d", [2], [2, 2, 0]), ("conv3d", [3], [4, 3, 1, 1, 1]),
             ("upsample3d", [4], [2, 1]), ("concat", [2, 5], []),
             ("conv3d", [6], [1, 1, 1, 0, 1])]
    yield make_case("unet3d_bce_momentum", (1, 4, 4, 6), unet3, ("bce_logits", 7), "momentum",
                    {"learning_rate": 0.1, "momentum": 0.9}, batch=2, seed=20)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else OUT_DIR
    os.makedirs(out_dir, exist_ok=True)
    for name, text in cases():
        path = os.path.join(out_dir, name + ".txt")
        with open(path, "w") as f:
            f.write(text)
        print("%-28s %6d bytes" % (path, len(text)))


if __name__ == "__main__":
    main()
