r"""Inference time and peak memory of a pretrained encoder, softmax against its linearizations.

The claim measured: kernel attention makes inference time linear in the sequence length ``L``,
where softmax attention is quadratic. :func:`inference_cost` times the transformer layers of a
pretrained BERT-family encoder (all-MiniLM-L6-v2 in the study: 6 layers, width 384, 12 heads of
``d_h = 32``) as loaded (softmax) and after :func:`~meanfield.attention.linearize.linearize` with
each feature map, at each ``L``; :func:`inference_cost_table` renders the result as Markdown tables.

What is timed. Position embeddings stop at 512 tokens, so the **encoder stack** is timed: the
model's transformer layers (attention + FFN, the real weights), ``model.encoder.encoder(h,
attention_mask=None)`` (what the full model runs for an all-ones mask), on synthetic hidden states
``h ~ N(0, 1)`` of shape ``(1, L, hidden)``, bypassing the embedding layer and the pooling head;
float32, ``eval()``, ``torch.inference_mode()``. Two checks, once per call (dataset attributes):
at ``L = min(512, max positions)`` the stack of ``linearize(model, "softmax")`` equals the
original's, and the stack on the embedding output equals the full model's last hidden state on
random token ids (so the bypass times what the model runs).

The cost depends on the feature map's kind and size only: a learned ``Omega`` (Phase A, the
Hedgehog loss) has the shape of a drawn one, so one linearization with the prior draw (seed 0)
stands for every method that uses that map. Trained weights are not needed either: the
projections' values do not change the arithmetic.

Time: per ``L``, interleaved repeats (each times every model once, in turn, so a change of the
machine's load hits all alike; one untimed warm-up call each at ``L <= 4096``). Reported: the median
wall time over the repeats, and the median of the *paired* ratios ``t / t_softmax`` within a repeat
(robust to a load that drifts between repeats); the same by this process's CPU time (with one
thread: the arithmetic without the waits of a shared machine). Repeats: ``repeats`` at ``L <=
1024``, at most 3 up to 4096, at most ``repeats_long`` above (:func:`repeats_at`). Slopes: the
least-squares slope of ``log t`` against ``log L`` over all lengths (2 for a quadratic cost, 1 for a
linear one; the softmax model's lies between, as its ``L^2`` attention overtakes the linear FFN).

Memory: per (model, ``L``), in a fresh Python process (``memory="subprocess"``): load the model,
build the input, one small warm-up call, reset the peak resident size (``5`` written to
``/proc/self/clear_refs`` resets ``VmHWM``), run one forward, report ``VmHWM`` after it minus
``VmRSS`` before it (``/proc/self/status``): the peak extra resident memory of one forward,
allocator caching included. Off Linux ``ru_maxrss`` after minus before is the fallback (a lower
bound: 0 if loading peaked higher); not on Linux, where the kernel keeps in it the peak of exited
threads (the loader's), which the reset does not clear. ``memory="inprocess"`` measures the same
way in this process (fast; for the tests); ``"none"`` skips it. Small allocations reuse memory the
allocator holds: the figures resolve large buffers only (MiB and up: the real model at L >= 512).

Examples
--------
>>> import tempfile
>>> from meanfield.attention.inference_cost import inference_cost, inference_cost_table
>>> from meanfield.attention.pretrained import save_tiny_bert
>>> folder = tempfile.mkdtemp()
>>> save_tiny_bert(folder)
>>> ds = inference_cost(folder, ["favor:8", "hedgehog"], [32, 64], repeats=1,
...                     memory="inprocess")
>>> ds["variant"].values.tolist(), ds["seconds"].dims
(['softmax', 'favor m=8', 'hedgehog m=8'], ('variant', 'L'))
>>> ds["ratio_to_softmax"].sel(variant="softmax").values.tolist()
[1.0, 1.0]
>>> table = inference_cost_table(ds)
>>> print(table.split("\n\n")[2].splitlines()[0])
| variant | feature outputs | L = 32 | L = 64 | log-log slope |
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..contract import Param, declare
from ..errors import InputError, InputTypeError, ResourceError
from .linear import ATTENTION_KINDS

__all__ = ["STUDY_LENGTHS", "RESOLVED_MIB", "STUDY_MAPS", "check_lengths", "forward_peak",
           "inference_cost", "inference_cost_table", "loglog_slope", "parse_maps", "repeats_at",
           "variant_name"]  # fmt: skip

#: The maps of the pretrained NLP study (paper_repro/nlp_pretrained/configs/full.toml):
#: FAVOR+ and PORF-softplus with m = 64, softmaxfeat with m = 32 (64 outputs) and the
#: published Hedgehog map (m = d_h, 2 d_h outputs).
STUDY_MAPS = ("favor:64", "porf-softplus:64", "softmaxfeat:32", "hedgehog")

#: The lengths of the study's inference table.
STUDY_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)

#: The largest L of the sanity checks (MiniLM's position embeddings stop at 512).
SANITY_L = 512

#: Lengths above which no warm-up call is made (a call there costs seconds, and the first
#: timed repeat is warm enough: the lazy initialisations are done at the smaller lengths).
WARMUP_MAX_L = 4096

#: The smallest peak-memory figure (MiB) taken as resolved: below it a forward is served
#: mostly from memory the allocator already holds (a page or two at L = 128 on MiniLM), so
#: such figures get no ratio and no part in the memory slope.
RESOLVED_MIB = 1.0

_SOFTMAX = "softmax"

#: Declared once: :func:`inference_cost` declares these, :func:`check_lengths` and
#: :func:`parse_maps` check with them, ``benchmarks/bench_pretrained_long.py`` makes its
#: flags from them.
_LENGTHS = Param("lengths", "int", "sequence lengths L", low=1, sequence=True)
_MAPS = Param("maps", "string", "feature maps linearize applies, 'KIND' or 'KIND:m'",
              sequence=True, examples=("favor:64",))  # fmt: skip


# --- the request ----------------------------------------------------------------------------------
def parse_maps(maps, head_dim: int | None = None) -> list[tuple[str, int | None]]:
    """The feature maps named ``"KIND"`` or ``"KIND:m"``, as ``(kind, m)`` pairs.

    Parameters
    ----------
    maps : sequence of str
        Each ``"KIND:m"`` (``m`` features per head, a positive integer) or ``"KIND"`` (the default
        of :func:`~meanfield.attention.linearize.linearize`: 64, or ``d_h`` for ``hedgehog``);
        ``KIND`` one of :data:`~meanfield.attention.linear.ATTENTION_KINDS`.
    head_dim : int, optional
        ``d_h``, to resolve ``"hedgehog"`` without ``m`` (left None otherwise).

    Returns
    -------
    list of (str, int or None)
        In the given order; ``m`` None for ``"softmax"`` (exact attention, no features) and
        for ``"hedgehog"`` without ``head_dim``.

    Raises
    ------
    meanfield.errors.InputError
        An unknown kind, an ``m`` that is not a positive integer (or any ``m`` for
        ``"softmax"``), or the same map twice (``"favor"`` and ``"favor:64"`` included).
    meanfield.errors.InputTypeError
        ``maps`` not a non-empty list or tuple of strings.

    See Also
    --------
    inference_cost : times one linearization per map.
    meanfield.attention.linearize.linearize : applies a ``(kind, m)``.

    Examples
    --------
    >>> from meanfield.attention.inference_cost import parse_maps
    >>> parse_maps(["favor:64", "softmaxfeat:32", "hedgehog"], head_dim=32)
    [('favor', 64), ('softmaxfeat', 32), ('hedgehog', 32)]
    >>> parse_maps(["favour:64"])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: maps: unknown feature map 'favour' in 'favour:64' (one of ...
    """
    maps = _MAPS.check(maps)
    out = []
    for item in maps:
        kind, colon, m_text = item.strip().partition(":")
        if kind not in ATTENTION_KINDS:
            raise InputError(
                f"maps: unknown feature map {kind!r} in {item!r} (one of "
                f"{', '.join(ATTENTION_KINDS)})"
            )
        if kind == "softmax" and colon:
            raise InputError(
                f"maps: 'softmax' (exact attention through the package's path) takes no m, "
                f"got {item!r}"
            )
        if kind == "softmax":
            m = None
        elif colon:
            try:
                m = int(m_text)
            except ValueError:
                m = 0
            if m < 1:
                raise InputError(
                    f"maps: the features m of {kind!r} must be a positive integer, got {item!r}"
                )
        else:
            m = head_dim if kind == "hedgehog" else 64
        if (kind, m) in out:
            raise InputError(f"maps names {kind!r} with m = {m} twice: {list(maps)!r}")
        out.append((kind, m))
    return out


def check_lengths(lengths) -> list[int]:
    """The sequence lengths, increasing: at least two, distinct, each an integer >= 1.

    Parameters
    ----------
    lengths : sequence of int

    Returns
    -------
    list of int
        Sorted increasing.

    Raises
    ------
    meanfield.errors.InputError
        Fewer than two lengths (the log-log slope of time in ``L`` is fitted over them), a
        repeated one, or one below 1.
    meanfield.errors.InputTypeError
        Not a list or tuple of integers.

    See Also
    --------
    inference_cost : times the stack at each length.
    loglog_slope : the slope fitted over them.

    Examples
    --------
    >>> from meanfield.attention.inference_cost import check_lengths
    >>> check_lengths([1024, 128, 512])
    [128, 512, 1024]
    >>> check_lengths([512])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: lengths must hold at least two distinct sequence lengths ...
    """
    values = _LENGTHS.check(lengths)
    if len(set(values)) != len(values):
        raise InputError(f"lengths must be distinct, got {list(lengths)!r}")
    if len(values) < 2:
        raise InputError(
            "lengths must hold at least two distinct sequence lengths (the log-log slope is "
            f"fitted over them), got {list(lengths)!r}"
        )
    return sorted(values)


def repeats_at(L: int, repeats: int, repeats_long: int) -> int:
    """Timed repeats at length ``L``: ``repeats`` up to 1024, at most 3 up to 4096, at most
    ``repeats_long`` above (a call at L = 8192 takes seconds).

    See Also
    --------
    inference_cost : times with these repeats.
    check_lengths : the lengths it is called at.

    Examples
    --------
    >>> from meanfield.attention.inference_cost import repeats_at
    >>> [repeats_at(L, 5, 2) for L in (512, 1024, 2048, 8192)]
    [5, 5, 3, 2]
    """
    if L <= 1024:
        return repeats
    if L <= WARMUP_MAX_L:
        return min(repeats, 3)
    return min(repeats, repeats_long)


def variant_name(kind: str | None, m: int | None) -> str:
    """The row label: ``"softmax"`` for the model as loaded, ``"linearized softmax"`` for
    ``linearize(model, "softmax")`` (the package's exact path), else ``"KIND m=M"``.

    See Also
    --------
    inference_cost : its ``variant`` coordinate.
    parse_maps : the ``(kind, m)`` pairs named.

    Examples
    --------
    >>> from meanfield.attention.inference_cost import variant_name
    >>> variant_name(None, None), variant_name("softmax", None), variant_name("favor", 64)
    ('softmax', 'linearized softmax', 'favor m=64')
    """
    if kind is None:
        return _SOFTMAX
    return "linearized softmax" if kind == _SOFTMAX else f"{kind} m={m}"


def loglog_slope(lengths, values) -> float:
    """Least-squares slope of ``log(values)`` against ``log(lengths)``.

    NaN (the slope is not defined) when a value is not positive; callers that store it say so.

    See Also
    --------
    inference_cost : stores the slopes of time and memory in ``L``.
    meanfield.stats.fit_power_law : a power-law fit with a confidence interval.

    Examples
    --------
    >>> from meanfield.attention.inference_cost import loglog_slope
    >>> round(loglog_slope([128, 256, 512], [1.0, 4.0, 16.0]), 12)
    2.0
    """
    v = np.asarray(values, dtype=float)
    if not np.all(v > 0):
        return float("nan")
    return float(np.polyfit(np.log(np.asarray(lengths, dtype=float)), np.log(v), 1)[0])


def _slope_where_resolved(lengths, values) -> float:
    """:func:`loglog_slope` over the lengths whose figure is at least :data:`RESOLVED_MIB`
    (small forwards are served from memory the allocator already holds); NaN if fewer than
    two are."""
    keep = np.asarray(values, dtype=float) >= RESOLVED_MIB
    if keep.sum() < 2:
        return float("nan")
    return loglog_slope(np.asarray(lengths)[keep], np.asarray(values, dtype=float)[keep])


# --- models ---------------------------------------------------------------------------------------
def _load_encoder(model_dir, impl: str, kind: str | None = None, m: int | None = None):
    """The BERT encoder (``AutoModel``) of ``model_dir`` in eval mode, linearized with
    ``kind`` (``m`` features, seed 0) unless ``kind`` is None."""
    from .linearize import linearize
    from .pretrained import load_pretrained_classifier

    model = load_pretrained_classifier(model_dir, attn_implementation=impl)[0].eval()
    if kind is not None:
        linearize(model, kind, n_features=m, seed=0)
    return model.encoder


def _stack_of(encoder):
    """``h -> encoder stack(h)``: the transformer layers alone, no mask (all tokens real)."""
    layers = encoder.encoder

    def run(h):
        return layers(h, attention_mask=None).last_hidden_state

    return run


def _sanity_checks(model_dir, impl: str, softmax_encoder) -> dict:
    """Linearized ``softmax`` stack vs the original's, and the stack vs the full model: a dict of
    ``L``, ``linearized_softmax_vs_original_max_abs_diff``, ``stack_vs_full_model_max_abs_diff``,
    ``output_max_abs`` and the attention implementations (``attn_implementation_original`` /
    ``_linearized``)."""
    cfg = softmax_encoder.config
    L = min(SANITY_L, cfg.max_position_embeddings)
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(1, L, cfg.hidden_size, generator=gen)
    lin = _load_encoder(model_dir, impl, "softmax")
    ids = torch.randint(1, cfg.vocab_size, (1, L), generator=gen)
    with torch.inference_mode():
        ref = _stack_of(softmax_encoder)(h)
        diff_lin = float((_stack_of(lin)(h) - ref).abs().max())
        full = softmax_encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
        emb = softmax_encoder.embeddings(input_ids=ids)
        diff_stack = float((_stack_of(softmax_encoder)(emb) - full.last_hidden_state).abs().max())
    out = {
        "L": L,
        "linearized_softmax_vs_original_max_abs_diff": diff_lin,
        "stack_vs_full_model_max_abs_diff": diff_stack,
        "output_max_abs": float(ref.abs().max()),
        "attn_implementation_original": cfg._attn_implementation,
        "attn_implementation_linearized": lin.config._attn_implementation,
    }
    del lin
    gc.collect()
    return out


def _sdpa_backend(num_heads: int, head_dim: int) -> str:
    """The kernel torch's CPU SDPA picks for unmasked float32 ``(1, H, L, d_h)`` inputs
    (``"unknown"`` if torch's private chooser is absent or changed)."""
    try:
        from torch.nn.attention import SDPBackend

        q = torch.zeros(1, num_heads, 64, head_dim)
        return SDPBackend(torch._fused_sdp_choice(q, q, q)).name
    except Exception:  # a private torch API
        return "unknown"


# --- memory ---------------------------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    """``VmRSS`` / ``VmHWM`` of ``/proc/self/status`` in kB (None off Linux)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset this process's peak resident size ``VmHWM`` (Linux >= 4.0: ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _maxrss_kb() -> int:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb // 1024 if sys.platform == "darwin" else kb  # bytes on macOS


def forward_peak(run, L: int, hidden: int) -> dict:
    """Peak extra resident memory of one forward ``run(h)`` at ``h ~ N(0, 1)``, ``(1, L, hidden)``.

    With the reset (Linux): ``VmHWM`` after the forward minus ``VmRSS`` before it, the peak
    reset just before. Without it: ``ru_maxrss`` after minus before, a lower bound.

    Returns
    -------
    dict
        ``peak_extra_mib`` (MiB, >= 0), ``rss_before_mib`` (None without the reset),
        ``method`` (``"VmHWM-reset"`` or ``"ru_maxrss-lower-bound"``) and ``seconds`` (the
        forward's wall time).

    See Also
    --------
    inference_cost : measures it per model and ``L``.
    inference_cost_table : the memory table.

    Examples
    --------
    >>> import torch
    >>> from meanfield.attention.inference_cost import forward_peak
    >>> r = forward_peak(lambda h: torch.ones(64 * 2**18), 64, 8)  # 64 MiB of float32
    >>> r["method"] in ("VmHWM-reset", "ru_maxrss-lower-bound"), r["peak_extra_mib"] >= 0
    (True, True)
    """
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(1, L, hidden, generator=gen)
    with torch.inference_mode():
        run(torch.randn(1, 16, hidden, generator=gen))  # lazy initialisations
        gc.collect()
        maxrss_before = _maxrss_kb()
        reset = _reset_peak()
        base = _status_kb("VmRSS") if reset else None
        reset = reset and base is not None
        t0 = time.perf_counter()
        y = run(h)
        seconds = time.perf_counter() - t0
        hwm = _status_kb("VmHWM") if reset else None
        maxrss = _maxrss_kb()
    del y
    if reset and hwm is not None:
        extra, method = hwm - base, "VmHWM-reset"
    else:
        extra, method = maxrss - maxrss_before, "ru_maxrss-lower-bound"
    rss_before = None if base is None else base / 1024
    return dict(peak_extra_mib=max(extra, 0) / 1024, rss_before_mib=rss_before, method=method,
                seconds=seconds)  # fmt: skip


def _child_main(spec_json: str | None = None) -> None:
    """The body of ``_memory_subprocess``'s fresh process: print :func:`forward_peak`'s
    dict as one JSON line."""
    spec = json.loads(sys.argv[1] if spec_json is None else spec_json)
    torch.set_num_threads(spec["threads"])
    enc = _load_encoder(spec["model_dir"], spec["impl"], spec["kind"], spec["m"])
    res = forward_peak(_stack_of(enc), spec["L"], enc.config.hidden_size)
    print(json.dumps(res), flush=True)


def _memory_subprocess(
    model_dir, impl: str, kind: str | None, m: int | None, L: int, threads: int
) -> dict:
    """:func:`forward_peak` of one (model, ``L``) in a fresh Python process.

    Parameters
    ----------
    model_dir : path-like
        The Hugging Face model folder.
    impl : {"sdpa", "eager"}
        ``transformers``' attention of the model as loaded.
    kind : str or None
        The feature map ``linearize`` applies (None: the model as loaded).
    m : int or None
        Its features per head (None: ``linearize``'s default).
    L : int
        The sequence length.
    threads : int
        torch threads of the child (and its ``OMP_NUM_THREADS``).

    Returns
    -------
    dict
        As :func:`forward_peak`.

    Raises
    ------
    meanfield.errors.ResourceError
        The child failed (its exit status and the end of its stderr are quoted).
    """
    spec = {"model_dir": str(model_dir), "impl": impl, "kind": kind, "m": m, "L": int(L)}
    spec["threads"] = int(threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    root = str(Path(__file__).resolve().parents[2])  # this checkout, installed or not
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    code = "from meanfield.attention.inference_cost import _child_main; _child_main()"
    argv = [sys.executable, "-c", code, json.dumps(spec)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise ResourceError(
            f"the memory subprocess for {variant_name(kind, m)} at L = {L} failed (exit "
            f"status {proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return json.loads(lines[-1])


def _machine(threads: int) -> dict:
    import transformers

    return {
        "machine": platform.node(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count() or 0,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "threads": threads,
    }


def _loadavg() -> str:
    """The 1, 5 and 15 min load averages as text (a netCDF attribute: a string survives
    every writer; ``"unknown"`` off Unix)."""
    if not hasattr(os, "getloadavg"):
        return "unknown"
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the measurement ------------------------------------------------------------------------------
def _time_lengths(runs: dict, lengths, hidden, repeats, repeats_long, log) -> dict:
    """Interleaved repeats per L: each repeat's wall and CPU time of every model."""
    gen = torch.Generator().manual_seed(0)
    names = list(runs)
    wall = {n: [] for n in names}  # per L: the list of the repeats' times
    cpu = {n: [] for n in names}
    for L in lengths:
        h = torch.randn(1, L, hidden, generator=gen)
        reps = repeats_at(L, repeats, repeats_long)
        for n in names:
            wall[n].append([])
            cpu[n].append([])
        with torch.inference_mode():
            if L <= WARMUP_MAX_L:
                for run in runs.values():
                    run(h)
            for _ in range(reps):
                for n, run in runs.items():
                    c0, t0 = time.process_time(), time.perf_counter()
                    run(h)
                    wall[n][-1].append(time.perf_counter() - t0)
                    cpu[n][-1].append(time.process_time() - c0)
        if log is not None:
            cells = ", ".join(f"{n} {np.median(wall[n][-1]):.4g} s" for n in names)
            log(f"L = {L} ({reps} repeats, median wall): {cells}")
    return {"wall": wall, "cpu": cpu}


def _per_repeat(raw: dict, names, n_lengths, max_reps) -> np.ndarray:
    """``(variant, L, repeat)`` times, NaN past a length's own repeats."""
    out = np.full((len(names), n_lengths, max_reps), np.nan)
    for i, n in enumerate(names):
        for j, times in enumerate(raw[n]):
            out[i, j, : len(times)] = times
    return out


def _medians(per_repeat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median time and median paired ratio to row 0 (softmax) over the repeats present."""
    seconds = np.nanmedian(per_repeat, axis=-1)
    ratio = np.nanmedian(per_repeat / per_repeat[:1], axis=-1)
    return seconds, ratio


@declare(
    _MAPS,
    _LENGTHS,
    Param("repeats", "int", "timed repeats at L <= 1024", low=1),
    Param("repeats_long", "int", "timed repeats at L > 4096", low=1),
    Param("threads", "int", "torch CPU threads", low=1),
    Param("memory", "choice", "where the peak memory is measured",
          choices=("subprocess", "inprocess", "none")),
    Param("softmax_impl", "choice", "transformers' attention of the softmax model",
          choices=("sdpa", "eager")),
    Param("sanity", "flag", "run the two sanity checks (module notes)"),
)  # fmt: skip
def inference_cost(
    model_dir,
    maps=STUDY_MAPS,
    lengths=STUDY_LENGTHS,
    *,
    repeats: int = 5,
    repeats_long: int = 2,
    threads: int = 1,
    memory: str = "subprocess",
    softmax_impl: str = "sdpa",
    sanity: bool = True,
    note: str = "",
    log=None,
):
    """Inference time and peak memory of an encoder's stack, softmax and linearized, per ``L``.

    The model as loaded (row ``"softmax"``) and one copy linearized with each map of
    ``maps`` (:func:`~meanfield.attention.linearize.linearize`, seed 0) are timed on
    ``(1, L, hidden)`` hidden states at each ``L`` (module notes: what is timed, the
    interleaved repeats, the paired ratios, the memory).

    Parameters
    ----------
    model_dir : path-like
        A Hugging Face BERT-family model folder (``config.json``, ``tokenizer.json``,
        ``model.safetensors``); the study's is all-MiniLM-L6-v2.
    maps : sequence of str, default :data:`STUDY_MAPS`
        ``"KIND"`` or ``"KIND:m"`` (:func:`parse_maps`).
    lengths : sequence of int, default :data:`STUDY_LENGTHS`
        At least two distinct ``L`` (:func:`check_lengths`); no upper bound is imposed
        (the eager softmax model holds ``H L^2`` float32 scores per layer).
    repeats, repeats_long : int
        Timed repeats (:func:`repeats_at`): ``repeats`` at ``L <= 1024``, at most 3 up to
        4096, at most ``repeats_long`` above.
    threads : int
        torch's CPU threads during the call (restored after), and the memory children's.
    memory : {"subprocess", "inprocess", "none"}
        Where the peak memory is measured (module notes); ``"none"`` leaves the memory
        variables out.
    softmax_impl : {"sdpa", "eager"}
        ``transformers``' attention of the softmax model; torch's CPU ``sdpa`` is blocked
        flash attention (never holds the ``L x L`` scores), ``eager`` materialises them.
    sanity : bool
        Run the two checks of the module notes (their results are attributes).
    note : str
        A line of context stored in the attributes (e.g. the machine's other load).
    log : callable, optional
        ``log(line)`` receives one progress line per length.

    Returns
    -------
    xarray.Dataset
        Dimensions ``variant`` (``"softmax"`` first, then ``"KIND m=M"`` in the order of ``maps``),
        ``L`` (increasing) and ``repeat``. Coordinates on ``variant``: ``feature_map``
        (``"softmax"`` for the model as loaded, whose ``n_features`` and ``n_outputs`` are 0: it
        has no feature map), ``n_features`` (``m``), ``n_outputs`` (features per head the
        attention sees: ``2 m`` for softmaxfeat and hedgehog), ``attn_implementation``. Variables:

        * ``seconds`` (variant, L): median wall time of one forward of the stack (s);
        * ``ratio_to_softmax`` (variant, L): median over repeats of ``t / t_softmax``
          within a repeat (exactly 1 for softmax);
        * ``cpu_seconds``, ``cpu_ratio_to_softmax``: the same by this process's CPU time;
        * ``seconds_per_repeat``, ``cpu_seconds_per_repeat`` (variant, L, repeat): every
          timed repeat; NaN past the repeats a length had (``n_repeats`` (L): their number);
        * ``slope_seconds``, ``slope_cpu_seconds`` (variant): least-squares log-log slope
          of the median time in ``L``;
        * ``scores_mib`` (L): the ``H L^2`` float32 score matrices of one layer that an
          eager softmax holds (MiB), for scale;
        * unless ``memory="none"``: ``peak_extra_mib`` (variant, L): peak extra resident
          memory of one forward (MiB, 1 MiB = 2^20 bytes); ``memory_method`` (variant, L);
          ``slope_peak_extra_mib`` (variant): the log-log slope over the lengths whose
          figure is at least :data:`RESOLVED_MIB` (a small forward is served from memory
          the allocator already holds), NaN if fewer than two are.

        Attributes: the model (``model_dir``, ``n_layers``, ``hidden_size``, ``num_heads``,
        ``head_dim``), what was timed (``timed``), ``softmax_impl``, ``sdpa_backend``,
        ``threads``, ``repeats``, ``repeats_long``, ``memory``, the machine (``machine``,
        ``platform``, ``processor``, ``cpu_count``, ``python_version``, ``torch_version``,
        ``transformers_version``), the load averages at start and end
        (``load_average_start`` / ``_end``: the 1, 5 and 15 min figures as text),
        ``wall_seconds``, ``note``, the sanity checks (``sanity_*``),
        ``meanfield_version`` and ``created`` (:func:`meanfield.results.provenance`).

    Raises
    ------
    meanfield.errors.InputError
        A bad ``lengths`` (:func:`check_lengths`), ``maps`` (:func:`parse_maps`), or a
        value out of its range; all before any work.
    meanfield.errors.InputTypeError
        A value of the wrong type (a boolean for a count included).
    meanfield.errors.MissingFileError
        ``model_dir`` is not a Hugging Face model folder.
    meanfield.errors.DependencyError
        ``transformers`` is not installed.
    meanfield.errors.ResourceError
        A memory subprocess failed.

    See Also
    --------
    inference_cost_table : the Markdown tables of the result.
    meanfield.attention.linearize.linearize : the linearization timed.
    meanfield.results.save_dataset : writes the result atomically.

    References
    ----------
    Choromanski, K. et al. (2021). Rethinking attention with Performers. ICLR 2021.
    Katharopoulos, A., Vyas, A., Pappas, N. & Fleuret, F. (2020). Transformers are RNNs:
    fast autoregressive Transformers with linear attention. ICML 2020.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield.attention.inference_cost import inference_cost
    >>> from meanfield.attention.pretrained import save_tiny_bert
    >>> folder = tempfile.mkdtemp()
    >>> save_tiny_bert(folder)
    >>> ds = inference_cost(folder, ["softmaxfeat:4"], [16, 32], repeats=2, memory="none")
    >>> ds["seconds"].shape, int(ds["n_outputs"].sel(variant="softmaxfeat m=4"))
    ((2, 2), 8)
    >>> inference_cost(folder, ["favor:8"], [32, 32])
    Traceback (most recent call last):
        ...
    meanfield.errors.InputError: lengths must be distinct, got [32, 32]
    """
    import xarray as xr

    from ..results import provenance
    from .pretrained import _check_model_dir, _transformers

    # every check before any work
    lengths = check_lengths(lengths)
    if not isinstance(model_dir, (str, os.PathLike)):
        raise InputTypeError(f"model_dir must be a path to a model folder, got {model_dir!r}")
    if not isinstance(note, str):
        raise InputTypeError(f"note must be a string, got {note!r}")
    if log is not None and not callable(log):
        raise InputTypeError(f"log must be a callable or None, got {log!r}")
    model_dir = _check_model_dir(model_dir)
    _transformers()
    config = json.loads((model_dir / "config.json").read_text())
    n_heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])
    specs = {_SOFTMAX: (None, None)}
    for kind, m in parse_maps(list(maps), head_dim=hidden // n_heads):
        specs[variant_name(kind, m)] = (kind, m)

    t_start = time.perf_counter()
    load_start = _loadavg()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        encoders = {n: _load_encoder(model_dir, softmax_impl, k, m) for n, (k, m) in specs.items()}
        cfg = encoders[_SOFTMAX].config
        checks = _sanity_checks(model_dir, softmax_impl, encoders[_SOFTMAX]) if sanity else {}
        impls = [encoders[n].config._attn_implementation for n in specs]
        runs = {n: _stack_of(e) for n, e in encoders.items()}
        timed = _time_lengths(runs, lengths, hidden, repeats, repeats_long, log)
        if memory != "inprocess":
            del encoders, runs
            gc.collect()
        mem = {}
        for n, (kind, m) in specs.items():
            if memory == "none":
                break
            if memory == "subprocess":
                mem[n] = [
                    _memory_subprocess(model_dir, softmax_impl, kind, m, L, threads)
                    for L in lengths
                ]
            else:
                mem[n] = [forward_peak(runs[n], L, hidden) for L in lengths]
            if log is not None:
                cells = ", ".join(f"{r['peak_extra_mib']:.1f}" for r in mem[n])
                log(f"memory of {n}, peak extra MiB per L: {cells}")
    finally:
        torch.set_num_threads(threads_before)

    names = list(specs)
    # features per head the attention sees: 2 m for the maps of paired exponentials
    outputs = [(2 if specs[n][0] in ("softmaxfeat", "hedgehog") else 1) * (specs[n][1] or 0)
               for n in names]  # fmt: skip
    n_reps = [repeats_at(L, repeats, repeats_long) for L in lengths]
    dims3 = ("variant", "L", "repeat")
    data = {"n_repeats": ("L", np.asarray(n_reps, dtype=np.int64))}
    for prefix, clock in (("", "wall"), ("cpu_", "cpu")):
        raw = _per_repeat(timed[clock], names, len(lengths), max(n_reps))
        seconds, ratio = _medians(raw)
        data[f"{prefix}seconds"] = (("variant", "L"), seconds)
        data[f"{prefix}ratio_to_softmax"] = (("variant", "L"), ratio)
        data[f"{prefix}seconds_per_repeat"] = (dims3, raw)
        data[f"slope_{prefix}seconds"] = ("variant", [loglog_slope(lengths, s) for s in seconds])
    data["scores_mib"] = ("L", np.asarray([n_heads * L * L * 4 / 2**20 for L in lengths]))
    if mem:
        peak = np.asarray([[r["peak_extra_mib"] for r in mem[n]] for n in names])
        data["peak_extra_mib"] = (("variant", "L"), peak)
        data["memory_method"] = (("variant", "L"), [[r["method"] for r in mem[n]] for n in names])
        data["slope_peak_extra_mib"] = (
            "variant",
            [_slope_where_resolved(lengths, p) for p in peak],
        )
    coords = {
        "variant": names,
        "L": np.asarray(lengths, dtype=np.int64),
        "repeat": np.arange(max(n_reps), dtype=np.int64),
        "feature_map": ("variant", [specs[n][0] or _SOFTMAX for n in names]),
        "n_features": ("variant", np.asarray([specs[n][1] or 0 for n in names], np.int64)),
        "n_outputs": ("variant", np.asarray(outputs, np.int64)),
        "attn_implementation": ("variant", impls),
    }
    params = {
        "model_dir": str(model_dir),
        "n_layers": int(cfg.num_hidden_layers),
        "hidden_size": hidden,
        "num_heads": n_heads,
        "head_dim": hidden // n_heads,
        "max_position_embeddings": int(cfg.max_position_embeddings),
        "timed": (
            f"the encoder stack ({cfg.num_hidden_layers} transformer layers, attention + FFN, "
            f"the checkpoint's weights) on synthetic hidden states N(0, 1) of shape (1, L, "
            f"{hidden}), float32, eval, inference_mode, attention_mask=None; the embedding "
            "layer and the pooling head bypassed; linearized copies: linearize(model, KIND, "
            "n_features=m, seed=0)"
        ),
        "softmax_impl": softmax_impl,
        "sdpa_backend": _sdpa_backend(n_heads, hidden // n_heads),
        "repeats": repeats,
        "repeats_long": repeats_long,
        "warmup": f"one untimed call per model at L <= {WARMUP_MAX_L}",
        "memory": memory,
        **_machine(threads),
        "load_average_start": load_start,
        "load_average_end": _loadavg(),
        "note": note,
        **{f"sanity_{k}": v for k, v in checks.items()},
    }
    ds = xr.Dataset(data, coords=coords, attrs=provenance(params, seed=0))
    ds["seconds"].attrs["units"] = "s"
    ds["cpu_seconds"].attrs["units"] = "s"
    if mem:
        ds["peak_extra_mib"].attrs["units"] = "MiB"
    ds.attrs["wall_seconds"] = time.perf_counter() - t_start
    return ds


# --- the tables -----------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    """Three significant digits, never in exponent form for the range of these tables."""
    if not math.isfinite(x):
        return "–"
    if x == 0:
        return "0"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}" if x >= 1e-3 else f"{x:.2e}"


_CLOCKS = {"wall": ("seconds", "ratio_to_softmax", "slope_seconds", "wall time")}
_CLOCKS["cpu"] = ("cpu_seconds", "cpu_ratio_to_softmax", "slope_cpu_seconds", "CPU time")


@declare(Param("clock", "choice", "which time the tables show", choices=("wall", "cpu", "both")))
def inference_cost_table(ds, *, clock: str = "wall") -> str:
    """Markdown tables of :func:`inference_cost`'s result: time per variant and ``L``, and
    peak memory.

    Parameters
    ----------
    ds : xarray.Dataset
        As :func:`inference_cost` returns it (or :func:`meanfield.results.load_dataset`
        reads it back).
    clock : {"wall", "cpu", "both"}
        ``"wall"``: ``seconds`` and ``ratio_to_softmax``; ``"cpu"``: the CPU-time ones;
        ``"both"``: a table of each, CPU time first.

    Returns
    -------
    str
        A caption paragraph (the model, the machine, the note), then per clock a table with
        one row per variant (softmax first), the features per head its attention sees, one
        column per ``L`` with cells ``"t s (×r)"`` (median time, median paired ratio to
        softmax) and a last column with the log-log slope of time in ``L``; then, if memory
        was measured, the same for the peak extra memory (``"M MiB (×r)"``, ``r`` the ratio
        to softmax's figure at that ``L``; a dash where it is not defined).

    Raises
    ------
    meanfield.errors.InputTypeError
        ``ds`` not an :class:`xarray.Dataset`.
    meanfield.errors.InputError
        ``ds`` lacks a variable the tables need.

    See Also
    --------
    inference_cost : the measurement tabulated.
    meanfield.results.load_dataset : reads a saved result back.

    Examples
    --------
    >>> import numpy as np
    >>> import xarray as xr
    >>> from meanfield.attention.inference_cost import inference_cost_table
    >>> t = np.array([[0.1, 0.4], [0.1, 0.2]])
    >>> ds = xr.Dataset(
    ...     {"seconds": (("variant", "L"), t), "ratio_to_softmax": (("variant", "L"), t / t[0]),
    ...      "slope_seconds": ("variant", [2.0, 1.0]), "n_repeats": ("L", [5, 5])},
    ...     coords={"variant": ["softmax", "favor m=64"], "L": [128, 256],
    ...             "n_outputs": ("variant", [0, 64])})
    >>> print(inference_cost_table(ds).split("\\n\\n", 2)[2])
    | variant | feature outputs | L = 128 | L = 256 | log-log slope |
    |---|---:|---:|---:|---:|
    | softmax | – | 0.1 s (×1.00) | 0.4 s (×1.00) | 2.00 |
    | favor m=64 | 64 | 0.1 s (×1.00) | 0.2 s (×0.50) | 1.00 |
    <BLANKLINE>
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset):
        raise InputTypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
    clocks = ["cpu", "wall"] if clock == "both" else [clock]
    needed = [v for c in clocks for v in _CLOCKS[c][:3]] + ["n_repeats", "n_outputs"]
    missing = [v for v in needed if v not in ds.variables]
    if missing:
        raise InputError(
            f"ds lacks the variable(s) {missing} of inference_cost's result (clock={clock!r})"
        )
    lengths = [int(L) for L in ds["L"].values]
    variants = [str(v) for v in ds["variant"].values]
    outputs = [int(x) for x in ds["n_outputs"].values]
    a = ds.attrs
    reps = sorted({int(r) for r in ds["n_repeats"].values}, reverse=True)
    caption = "Inference cost"
    if "n_layers" in a:
        caption += (
            f" of the encoder stack ({a['n_layers']} layers, width {a['hidden_size']}, "
            f"{a['num_heads']} heads of d_h = {a['head_dim']}; attention + FFN) on (1, L, "
            f"{a['hidden_size']}) hidden states, float32, batch 1"
        )
    caption += (
        ", softmax (the model as loaded) against its linearizations. The cost depends on the "
        "feature map's kind and size only: the methods that learn or redraw Omega (vanilla, "
        "Kernel, Hedgehog-loss) share their map's row. Feature outputs: features per head "
        "the attention sees (2 m for softmaxfeat and hedgehog)."
    )
    if "threads" in a:
        caption += (
            f" {a['threads']} torch thread(s) on {a.get('processor', '?')} "
            f"({a.get('cpu_count', '?')} cores), torch {a.get('torch_version', '?')}, "
            f"meanfield {a.get('meanfield_version', '?')}, {a.get('created', '?')}."
        )
    if a.get("note"):
        caption += f" Note: {a['note']}."
    header = "| variant | feature outputs | " + " | ".join(f"L = {L}" for L in lengths)
    header += " | log-log slope |"
    rule = "|---|---:|" + "---:|" * len(lengths) + "---:|"

    def rows(values, ratios, slopes, unit, floor=0.0):
        out = []
        for i, v in enumerate(variants):
            cells = []
            for j in range(len(lengths)):
                r = float(ratios[i, j])
                r_text = f"×{r:.2f}" if math.isfinite(r) else "–"
                if float(values[i, j]) < floor:
                    cells.append(f"< {floor:g} {unit} (–)")
                else:
                    cells.append(f"{_fmt(float(values[i, j]))} {unit} ({r_text})")
            feats = "–" if outputs[i] == 0 else str(outputs[i])
            slope = float(slopes[i])
            slope_text = f"{slope:.2f}" if math.isfinite(slope) else "–"
            out.append(f"| {v} | {feats} | " + " | ".join(cells) + f" | {slope_text} |")
        return out

    lines = [caption]
    for c in clocks:
        t_name, r_name, s_name, label = _CLOCKS[c]
        lines += [
            "",
            f"{label[0].upper()}{label[1:]} of one forward (s): median over "
            f"{'/'.join(map(str, reps))} interleaved repeats; in brackets the median of the "
            "paired per-repeat ratios to the softmax model.",
            "",
            header,
            rule,
            *rows(ds[t_name].values, ds[r_name].values, ds[s_name].values, "s"),
        ]
    if "peak_extra_mib" in ds.variables:
        peak = ds["peak_extra_mib"].values
        base = peak[variants.index(_SOFTMAX)] if _SOFTMAX in variants else peak[0]
        resolved = (peak >= RESOLVED_MIB) & (base >= RESOLVED_MIB)
        ratio = np.where(resolved, peak / np.where(resolved, base, 1.0), np.nan)
        if "slope_peak_extra_mib" in ds.variables:
            slopes = ds["slope_peak_extra_mib"].values
        else:
            slopes = np.full(len(variants), np.nan)
        where = "a fresh process per cell" if a.get("memory") == "subprocess" else "one process"
        flash = ""
        if a.get("softmax_impl") == "sdpa" and a.get("sdpa_backend") == "FLASH_ATTENTION":
            flash = (
                "; the softmax model runs torch's blocked flash-attention SDPA kernel, which "
                "never holds the L x L scores, so its memory grows about linearly too"
            )
        lines += [
            "",
            "Peak extra resident memory of one forward (MiB; VmHWM after minus VmRSS before, "
            f"measured in {where}); in brackets the ratio to the softmax model{flash}. A "
            f"figure below {RESOLVED_MIB:g} MiB is not resolved (served from memory the "
            "allocator already holds): no ratio, no part in the slope.",
            "",
            header,
            rule,
            *rows(peak, ratio, slopes, "MiB", floor=RESOLVED_MIB),
        ]
    return "\n".join(lines) + "\n"
