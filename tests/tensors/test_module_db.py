"""torch's own module test inputs (``module_db``) through LoggingTensor inputs.

The ``module_inputs_func`` samples of every ModuleInfo that supports float32 on CPU run in training
and (where the ModuleInfo says they differ) eval mode, each twice: once on plain tensors, once
with every input tensor wrapped in a LoggingTensor, on a deep copy of the same module (same
parameters and buffers) under the same seed. A sample matches when the outputs have the same
structure, every tensor output is itself a LoggingTensor with plain torch's value, the gradients
of the inputs and parameters equal plain torch's (where the sample requires grad), and the
buffers (BatchNorm's running stats...) end up equal. Where plain torch raises, the logged run
must raise the same error.

Runtime: at most ``MAX_SAMPLES`` samples per module and mode (taken evenly from its list, about
760 in all), which keeps the run under a minute on two busy cores; ``nn.LinearCrossEntropyLoss``
alone has 857 samples. ``pytest -s`` prints a table of every failing sample with its reason.

Known to differ: ``nn.LinearCrossEntropyLoss``'s chunked backward writes the input gradient into a
buffer it allocates itself (``torch.empty`` + ``out=``), so that gradient comes back plain.
"""
from __future__ import annotations

import copy
import traceback

import torch
from torch.testing._internal import common_modules  # needs the expecttest package (test extra)
from torch.utils._pytree import tree_flatten, tree_map

import syft_lab as sy
from syft_lab.tensors.base import ChainLayer

MAX_SAMPLES = 16  # per module and training mode
MATCH_TARGET = 0.99  # issue 22: LoggingTensor stays >= 99% (756/758 here; the known LinearCrossEntropyLoss gap)
DTYPE = torch.float32


def _unwrap(t):
    while isinstance(t, ChainLayer):
        t = t.child
    return t


def _fresh(t):
    """A copy of a sample's input (some are not leaves, which deepcopy refuses); a leaf again."""
    if not isinstance(t, torch.Tensor):
        return copy.deepcopy(t)
    return t.detach().clone().requires_grad_(t.requires_grad)


def _log(t, like):
    return sy.LoggingTensor(t, like.log if isinstance(like, sy.LoggingTensor) else None)


def _evenly(samples: list, n: int) -> list:
    if len(samples) <= n:
        return samples
    step = len(samples) / n
    return [samples[int(i * step)] for i in range(n)]


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]


def _compare_values(plain: list, logged: list, what: str) -> str | None:
    """None when every logged leaf matches its plain leaf, else the reason it does not."""
    for i, (p, q) in enumerate(zip(plain, logged)):
        if p is None or q is None:
            if p is not q:
                return f"{what} {i}: {'no value' if q is None else 'a value'} where plain torch has " \
                       f"{'none' if p is None else 'one'}"
            continue
        if isinstance(p, torch.Tensor):
            if not isinstance(q, sy.LoggingTensor):
                return f"{what} {i} not a LoggingTensor ({type(q).__name__})"
            if (q.shape, q.dtype, q.stride()) != (p.shape, p.dtype, _unwrap(q).stride()):
                return f"{what} {i}: wrapper metadata differs from its child"
            try:
                torch.testing.assert_close(_unwrap(q), p, equal_nan=True)
            except AssertionError as e:
                return f"{what} {i} differs: {str(e).splitlines()[0]}"
        elif p != q and not (p != p and q != q):  # NaN == NaN for our purpose
            return f"{what} {i}: {q!r} != {p!r}"
    return None


def _run(module, args, kwargs, seed):
    torch.manual_seed(seed)
    return module(*args, **kwargs)


def check_sample(info, sample, training: bool, seed: int) -> str | None:
    """Run one sample plain and logged; None when they agree, else the reason they do not."""
    cargs, ckwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    torch.manual_seed(seed)
    plain_module = info.module_cls(*cargs, **ckwargs).to(dtype=DTYPE).train(training)
    logged_module = copy.deepcopy(plain_module)  # same parameters and buffers (its state dict and more)

    fwd = sample.forward_input
    plain_args, plain_kwargs = tree_map(_fresh, (fwd.args, fwd.kwargs))
    logged_args, logged_kwargs = tree_map(
        lambda t: sy.LoggingTensor(_fresh(t)) if isinstance(t, torch.Tensor) else t, (fwd.args, fwd.kwargs))

    try:
        plain_out = _run(plain_module, plain_args, plain_kwargs, seed)
    except Exception as plain_error:
        try:
            _run(logged_module, logged_args, logged_kwargs, seed)
        except Exception as logged_error:
            if type(logged_error) is type(plain_error) and str(logged_error) == str(plain_error):
                return None
            return f"raises {_error_text(logged_error)}; plain torch: {_error_text(plain_error)}"
        return f"runs, but plain torch raises {_error_text(plain_error)}"
    try:
        logged_out = _run(logged_module, logged_args, logged_kwargs, seed)
    except Exception as e:
        return f"raises {_error_text(e)}"

    plain_leaves, plain_spec = tree_flatten(plain_out)
    logged_leaves, logged_spec = tree_flatten(logged_out)
    if plain_spec != logged_spec:
        return f"output structure {logged_spec} != plain {plain_spec}"
    reason = _compare_values(plain_leaves, logged_leaves, "output")
    if reason:
        return reason

    # Gradients of every input and parameter, for random output gradients (same on both sides).
    differentiable = [i for i, t in enumerate(plain_leaves)
                      if isinstance(t, torch.Tensor) and t.requires_grad]
    if differentiable:
        plain_inputs = [t for t in tree_flatten((plain_args, plain_kwargs))[0]
                        if isinstance(t, torch.Tensor) and t.requires_grad]
        logged_inputs = [t for t in tree_flatten((logged_args, logged_kwargs))[0]
                         if isinstance(t, torch.Tensor) and t.requires_grad]
        plain_params = [p for p in plain_module.parameters() if p.requires_grad]
        logged_params = [p for p in logged_module.parameters() if p.requires_grad]
        torch.manual_seed(seed)
        grad_outs = [torch.randn_like(plain_leaves[i]) for i in differentiable]
        try:
            plain_grads = torch.autograd.grad([plain_leaves[i] for i in differentiable],
                                              plain_inputs + plain_params, grad_outs, allow_unused=True)
        except Exception:
            plain_grads = None  # not differentiable in plain torch either: nothing to compare
        if plain_grads is not None:
            try:
                logged_grads = torch.autograd.grad(
                    [logged_leaves[i] for i in differentiable], logged_inputs + logged_params,
                    [_log(g, logged_leaves[i]) for g, i in zip(grad_outs, differentiable)],
                    allow_unused=True)
            except Exception as e:
                return f"backward raises {_error_text(e)}"
            reason = _compare_values(list(plain_grads), list(logged_grads), "gradient")
            if reason:
                return reason

    for (name, p), (_, q) in zip(plain_module.named_buffers(), logged_module.named_buffers()):
        try:
            torch.testing.assert_close(_unwrap(q), p, equal_nan=True)
        except AssertionError as e:
            return f"buffer {name} differs: {str(e).splitlines()[0]}"
    return None


def run_module_db():
    """(total samples, [(module, mode, sample description, reason)]) over the whole module_db."""
    total, failures = 0, []
    for info in common_modules.module_db:
        if DTYPE not in info.supported_dtypes("cpu"):
            continue
        for training in ([True, False] if info.train_and_eval_differ else [True]):
            try:
                samples = info.module_inputs_func(info, device="cpu", dtype=DTYPE, requires_grad=True,
                                                  training=training)
            except Exception as e:  # a generator that needs something this machine lacks
                failures.append((info.name, "train" if training else "eval", "(inputs)", _error_text(e)))
                total += 1
                continue
            for k, sample in enumerate(_evenly(list(samples), MAX_SAMPLES)):
                total += 1
                try:
                    reason = check_sample(info, sample, training, seed=k)
                except Exception as e:  # a bug in this harness or an unexpected failure: report it
                    reason = f"harness error {_error_text(e)} at " \
                             f"{traceback.extract_tb(e.__traceback__)[-1].lineno}"
                if reason:
                    failures.append((info.name, "train" if training else "eval",
                                     f"#{k} {sample.desc}".strip(), reason))
    return total, failures


def _table(failures) -> str:
    rows = [("module", "mode", "sample", "reason")] + failures
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)


def test_torch_module_db_through_logging_tensors_matches_plain_torch():
    with torch.random.fork_rng():
        total, failures = run_module_db()
    rate = 1 - len(failures) / total
    print(f"\nmodule_db through LoggingTensor: {total - len(failures)}/{total} samples match ({rate:.1%}); "
          f"{len(failures)} failing:\n{_table(failures) if failures else '(none)'}")
    assert total > 500  # the whole module_db ran, not an empty or broken generator
    assert rate >= MATCH_TARGET, f"{len(failures)}/{total} samples differ from plain torch:\n{_table(failures)}"
