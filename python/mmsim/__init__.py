"""mmsim: a deterministic simulator of Linux memory management and TLB flushing.

The Python face of the `mmsim` command line (docs/python.md):

- ``run(scenario, sets={})`` -> dict: the JSON of ``mmsim run SCENARIO --set ... --json``;
- ``reproduce(name, sets={}, seeds=None, scale=None)`` -> dict: the JSON of ``mmsim reproduce NAME --json``;
- ``knobs()`` -> list of dicts: the table of ``mmsim knobs``;
- ``frame(results)`` -> pandas.DataFrame: one row per run result, counters flattened;
- ``sweep(scenario, grid, seeds, backend)`` -> pandas.DataFrame: a grid of runs on a local
  process pool, a Ray cluster or a Dask cluster (see ``mmsim.sweep``'s docstring).

A scenario is a path (a str naming an existing file, or an ``os.PathLike``), TOML text (any
other str) or a dict (turned into TOML). Mistakes in it raise ``ScenarioError`` with the
command line's ``FILE:LINE: KEY: what is wrong`` message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping

from . import _mmsim
from ._mmsim import ScenarioError

__all__ = ["run", "reproduce", "knobs", "frame", "sweep", "ScenarioError", "resolve_scenario", "set_args"]


def set_args(sets: Mapping[str, Any] | None) -> list[str]:
    """``{"machine.cpus": 8}`` -> ``["machine.cpus=8"]``, as ``--set`` takes them (in order)."""
    out = []
    for k, v in (sets or {}).items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append(f"{k}={v}")
    return out


def resolve_scenario(scenario: str | os.PathLike | Mapping[str, Any]) -> tuple[str, str]:
    """The scenario as (name, TOML text): the name stands for the file in error messages.

    A str naming an existing file (or a PathLike) is read; any other str is TOML text; a dict is
    written as TOML (with tomli-w)."""
    if isinstance(scenario, Mapping):
        import tomli_w

        return "<dict>", tomli_w.dumps(dict(scenario))
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and "\n" not in scenario and os.path.isfile(scenario)):
        path = os.fspath(scenario)
        try:
            with open(path, encoding="utf-8") as f:
                return path, f.read()
        except OSError as e:
            raise ScenarioError(f"{path}: {e.strerror}") from None
    if isinstance(scenario, str):
        if "\n" not in scenario and scenario.strip().endswith(".toml"):
            # Meant as a path (TOML text of one line cannot end so): say the file is missing.
            raise ScenarioError(f"{scenario}: no such file (a str scenario is a path if it names an existing file, else TOML text)")
        return "<string>", scenario
    raise TypeError(f"scenario must be a path, TOML text or a dict, not {type(scenario).__name__}")


def run(scenario: str | os.PathLike | Mapping[str, Any], sets: Mapping[str, Any] | None = None) -> dict:
    """Run a scenario with ``--set``-style overrides; returns the CLI's ``--json`` document."""
    name, text = resolve_scenario(scenario)
    return json.loads(_mmsim.run_toml(name, text, set_args(sets)))


def reproduce(name: str, sets: Mapping[str, Any] | None = None, seeds: int | None = None, scale: int | None = None) -> dict:
    """``mmsim reproduce NAME``'s JSON. ``sets`` and ``seeds`` apply to batched-flush only, as on
    the command line; ``scale`` is ``--scale K`` (batched-flush, hvo, numa-delayed-map, luf;
    None runs each at the seed's full size, as the CLI does). vmacache includes the real traces
    when run from the repository root, as the CLI does."""
    return json.loads(_mmsim.reproduce(name, set_args(sets), seeds, scale))


def knobs() -> list[dict]:
    """Every scenario knob: key, kind, default, unit, doc, source, values (enums), min, max."""
    return json.loads(_mmsim.knobs())


def flatten(result: Mapping[str, Any]) -> dict:
    """One run's JSON as one flat row: nested objects joined with '.' (``counters.nr_tlb_remote_flush``,
    ``time.elapsed_ns``, ``meminfo.MemFree``); lists (``per_cpu.*``, ``errors``) stay lists."""
    row: dict = {}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, Mapping):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else k, x)
        else:
            row[prefix] = v

    walk("", result)
    return row


def frame(results: Mapping[str, Any] | Iterable[Mapping[str, Any]]):
    """A pandas DataFrame with one row per result of ``run`` (flattened as ``flatten`` does)."""
    import pandas as pd

    if isinstance(results, Mapping):
        results = [results]
    return pd.DataFrame([flatten(r) for r in results])


from ._sweep import sweep  # noqa: E402  (sweep needs the functions above)
