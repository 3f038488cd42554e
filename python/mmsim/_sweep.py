"""``mmsim.sweep``: a grid of runs on a local process pool, a Ray cluster or a Dask cluster.

Points are the grid's Cartesian product (keys in the order given, the last key varying
fastest) times the seeds (innermost). Each point runs ``mmsim.run(scenario, sets)`` with the
base ``sets``, then the point's grid values, then ``run.seed``. The scenario is read once here and
sent as TOML text, so remote workers need no copy of the file. Rows come back in point order,
whatever order the workers finish in; a point that fails (a scenario error, a crashed worker) is
a row with its message in the ``error`` column, and the other points are kept.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Iterable, Mapping

BACKENDS = ("local", "ray", "dask")


def points(grid: Mapping[str, Iterable[Any]] | None, seeds: Iterable[int]) -> list[dict]:
    """The grid x seeds as a list of ``{key: value, ..., "seed": s}``, in sweep order."""
    grid = {k: list(v) for k, v in (grid or {}).items()}
    seeds = list(seeds)
    out = []
    for combo in itertools.product(*grid.values()):
        for s in seeds:
            p = dict(zip(grid.keys(), combo))
            p["seed"] = s
            out.append(p)
    return out


def _run_point(name: str, text: str, sets: list[str]) -> dict:
    """One point, in a worker: ``{"result": json}`` or ``{"error": message}``; never raises."""
    import json

    try:
        from . import _mmsim

        return {"result": json.loads(_mmsim.run_toml(name, text, sets))}
    except Exception as e:  # noqa: BLE001 - a failed point is reported, not raised
        return {"error": f"{type(e).__name__}: {e}"}


def _point_sets(base: list[str], point: Mapping[str, Any]) -> list[str]:
    from . import set_args

    grid = {k: v for k, v in point.items() if k != "seed"}
    return base + set_args(grid) + [f"run.seed={point['seed']}"]


def _missing(extra: str, module: str) -> ImportError:
    return ImportError(f"mmsim.sweep(backend={extra!r}) needs {module}: pip install './python[{extra}]' (or pip install mmsim[{extra}])")


def _local(jobs, workers):
    import concurrent.futures as cf
    import multiprocessing as mp

    # spawn, not fork: the parent may hold threads (Rayon's pool, a notebook's).
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        futs = [ex.submit(_run_point, *j) for j in jobs]
        return [_outcome(f.result) for f in futs]


def _ray(jobs, workers, address):
    try:
        import ray
    except ImportError:
        raise _missing("ray", "ray") from None
    started = False
    if not ray.is_initialized():
        if address is not None:
            ray.init(address=address)
        else:
            ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False)
        started = True
    try:
        remote = ray.remote(_run_point)
        refs = [remote.remote(*j) for j in jobs]
        return [_outcome(lambda r=r: ray.get(r)) for r in refs]
    finally:
        if started and address is None:
            ray.shutdown()


def _dask(jobs, workers, address, client):
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise _missing("dask", "dask.distributed") from None
    own = client is None
    cluster = None
    if own:
        if address is not None:
            client = Client(address)
        else:
            cluster = LocalCluster(n_workers=workers or os.cpu_count(), threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
    try:
        names, texts, sets = zip(*jobs) if jobs else ((), (), ())
        futs = client.map(_run_point, names, texts, sets, pure=False)
        return [_outcome(f.result) for f in futs]
    finally:
        if own:
            client.close()
            if cluster is not None:
                cluster.close()


def _outcome(get) -> dict:
    try:
        return get()
    except Exception as e:  # noqa: BLE001 - the backend lost the point: report it
        return {"error": f"{type(e).__name__}: {e}"}


def sweep(scenario, grid: Mapping[str, Iterable[Any]] | None = None, seeds: Iterable[int] = (1,), backend: str = "local",
          sets: Mapping[str, Any] | None = None, workers: int | None = None, address: str | None = None, client=None):
    """Run ``scenario`` at every point of ``grid`` x ``seeds``; one pandas DataFrame back.

    ``grid`` maps knob keys to the values to try (``{"machine.cpus": [2, 8, 32]}``); ``seeds``
    sets ``run.seed``. ``backend``: "local" (a process pool of ``workers`` processes), "ray"
    (``ray.init(address=address)``, or the already-initialised Ray, or a local Ray of ``workers``
    CPUs) or "dask" (``client``, or ``Client(address)``, or a local cluster of ``workers``
    processes). Columns: one per grid key, ``seed``, ``error`` (None when the point ran), then
    the run's JSON flattened (``scenario``, ``outcome``, ``counters.*``, ``time.*``,
    ``meminfo.*``, ``per_cpu.*`` as lists). The same grid gives the same numbers on every
    backend: each point is a deterministic run of its own.
    """
    import pandas as pd

    from . import flatten, resolve_scenario, set_args

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    name, text = resolve_scenario(scenario)
    pts = points(grid, seeds)
    base = set_args(sets)
    jobs = [(name, text, _point_sets(base, p)) for p in pts]
    if backend == "local":
        outs = _local(jobs, workers)
    elif backend == "ray":
        outs = _ray(jobs, workers, address)
    else:
        outs = _dask(jobs, workers, address, client)
    rows = []
    for p, o in zip(pts, outs):
        row = dict(p)
        row["error"] = o.get("error")
        if "result" in o:
            row.update(flatten(o["result"]))
        rows.append(row)
    return pd.DataFrame(rows)
