"""Parameter sweeps on dask: a grid of independent runs gathered into one labelled dataset.

A *study* is a run function ``f(**params) -> xarray.Dataset`` and a grid ``{name: values}``.
:func:`run_sweep` maps ``f`` over the Cartesian product of the grid:

* every run is written to ``out_dir/runs/<key>.nc`` by the worker that computed it, as soon as
  it finishes (atomically), so an interrupted sweep loses nothing;
* rerunning the same sweep skips every run whose file exists: it resumes where it stopped;
* runs execute on dask — the threaded scheduler (``scheduler="threads"``), a
  ``distributed.LocalCluster`` sized to the machine (``scheduler="local"``, the default), or a
  user's cluster (``scheduler="tcp://host:8786"``), with nothing else changed;
* the gathered dataset has one dimension per grid parameter (``N``, ``beta``, ``seed``…) and
  records the grid, the fixed parameters and the package version in its attributes.

Runs are independent and seeded through their parameters, so the result does not depend on the
scheduler or on the order in which runs finish.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ._validation import check_int
from .results import load_dataset, provenance, save_dataset


def grid_points(grid: Mapping[str, Sequence]) -> list[dict]:
    """The Cartesian product of a grid, as a list of parameter dicts (first key slowest)."""
    if not grid:
        raise ValueError("grid must name at least one parameter with a list of values")
    for k, v in grid.items():
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or len(v) == 0:
            raise ValueError(f"grid[{k!r}] must be a non-empty list of values, got {v!r}")
        if len(set(map(repr, v))) != len(v):
            raise ValueError(f"grid[{k!r}] has repeated values: {list(v)}")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def run_key(params: Mapping) -> str:
    """A readable, unique file stem for one run: ``N=100_seed=3-<hash>``."""
    text = "_".join(f"{k}={v}" for k, v in params.items())
    text = re.sub(r"[^A-Za-z0-9=._+-]", "-", text)[:120]
    digest = hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    return f"{text}-{digest[:8]}"


def _run_and_save(func: Callable, params: dict, fixed: dict, path: str) -> str:
    """Worker side: compute one run and write it before reporting back."""
    import torch

    torch.set_num_threads(1)  # parallelism is across runs; one thread each avoids oversubscription
    ds = func(**params, **fixed)
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"the run function must return an xarray.Dataset, got {type(ds).__name__}")
    ds = ds.copy()
    ds.attrs.update({f"sweep_{k}": v for k, v in params.items()})
    save_dataset(ds, path)
    return path


def _client_for(scheduler: str, n_workers: int | None):
    from distributed import Client, LocalCluster

    if scheduler == "local":
        cluster = LocalCluster(
            n_workers=n_workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        return Client(cluster), cluster
    return Client(scheduler), None


def run_sweep(
    func: Callable[..., xr.Dataset],
    grid: Mapping[str, Sequence],
    out_dir,
    *,
    fixed: Mapping | None = None,
    scheduler: str = "local",
    n_workers: int | None = None,
    progress: bool = True,
) -> xr.Dataset:
    """Map ``func`` over ``grid``, writing each run as it finishes; resume; gather.

    Parameters
    ----------
    func : callable
        ``func(**grid_point, **fixed) -> xarray.Dataset``; a module-level function (it is
        shipped to worker processes).  Its randomness must come from its parameters (a
        ``seed`` grid axis), never from global state.
    grid : mapping of name -> list
        The swept parameters; the result has one dimension per name, in this order.
    out_dir : path
        Where ``runs/<key>.nc`` and the gathered ``sweep.nc`` are written.
    fixed : mapping, optional
        Parameters passed to every run (recorded in the attributes).
    scheduler : {"local", "threads"} or str
        ``"local"``: a ``distributed.LocalCluster`` of ``n_workers`` single-threaded processes
        (default: one per core); ``"threads"``: dask's threaded scheduler in this process; any
        other string is the address of a running dask scheduler.
    n_workers : int, optional
    progress : bool
        A progress bar of runs done and left.

    Returns
    -------
    xarray.Dataset
        The runs combined along the grid dimensions.
    """
    points = grid_points(grid)
    fixed = dict(fixed or {})
    if n_workers is not None:
        n_workers = check_int("n_workers", n_workers)
    if not callable(func):
        raise TypeError("func must be callable")
    out_dir = Path(out_dir)
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    paths = [str(out_dir / "runs" / f"{run_key(p)}.nc") for p in points]
    todo = [(p, path) for p, path in zip(points, paths, strict=True) if not Path(path).exists()]
    bar = tqdm(
        total=len(points),
        initial=len(points) - len(todo),
        disable=not progress,
        desc="sweep",
        unit="run",
    )
    if todo:
        if scheduler == "threads":
            import dask
            from dask.callbacks import Callback

            class _Bar(Callback):
                def _posttask(self, key, result, dsk, state, id):
                    if isinstance(result, str) and result.endswith(".nc"):
                        bar.update(1)

            tasks = [dask.delayed(_run_and_save)(func, p, fixed, path) for p, path in todo]
            with _Bar():
                dask.compute(*tasks, scheduler="threads", num_workers=n_workers)
        else:
            from distributed import as_completed

            client, cluster = _client_for(scheduler, n_workers)
            try:
                futures = [
                    client.submit(_run_and_save, func, p, fixed, path, pure=False)
                    for p, path in todo
                ]
                for fut in as_completed(futures):
                    fut.result()  # re-raise a failed run here, with its traceback
                    bar.update(1)
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()
    bar.close()
    result = gather_runs(paths, points, grid)
    result.attrs = provenance(
        {
            "sweep_grid": {k: list(map(_plain, v)) for k, v in grid.items()},
            "sweep_fixed": {k: _plain(v) for k, v in fixed.items()},
            "sweep_function": f"{func.__module__}.{func.__qualname__}",
            **{f"run_{k}": v for k, v in _common_attrs(result).items()},
        },
        seed=None,
    )
    save_dataset(result, out_dir / "sweep.nc")
    return result


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _common_attrs(ds: xr.Dataset) -> dict:
    return {k: v for k, v in ds.attrs.items() if not k.startswith("sweep_")}


def gather_runs(paths: Sequence, points: Sequence[Mapping], grid: Mapping) -> xr.Dataset:
    """Combine per-run datasets into one with a dimension per grid parameter."""
    runs = []
    for path, p in zip(paths, points, strict=True):
        ds = load_dataset(path)
        attrs = ds.attrs
        ds = ds.expand_dims({k: [v] for k, v in p.items()})
        ds.attrs = attrs
        runs.append(ds)
    shape = [len(v) for v in grid.values()]
    nested = np.empty(shape, dtype=object)
    for idx, ds in zip(itertools.product(*[range(n) for n in shape]), runs, strict=True):
        nested[idx] = ds
    # runs may differ in size (e.g. the particle axis across N): pad with NaN on the outer join
    combined = xr.combine_nested(
        nested.tolist(),
        concat_dim=list(grid),
        combine_attrs="drop",
        join="outer",
        fill_value=np.nan,
    )
    keep = {
        k: v
        for k, v in runs[0].attrs.items()
        if all(np.array_equal(np.asarray(r.attrs.get(k)), np.asarray(v)) for r in runs)
        and k not in ("created",)
    }
    combined.attrs = keep
    return combined
