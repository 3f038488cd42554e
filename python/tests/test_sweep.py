import pytest

import mmsim
from conftest import SMALL

GRID = {"machine.cpus": [2, 4], "kernel.preset": ["linux-4.2", "linux-6.1", "linux-6.18"]}  # 2 x 3 points


def check_frame(df):
    assert len(df) == 6
    assert list(df.columns[:4]) == ["machine.cpus", "kernel.preset", "seed", "error"]
    assert df["error"].isna().all(), df["error"].tolist()
    # Grid order: the last key varies fastest.
    assert df["machine.cpus"].tolist() == [2, 2, 2, 4, 4, 4]
    assert df["kernel.preset"].tolist() == GRID["kernel.preset"] * 2
    assert [len(x) for x in df["per_cpu.tlb_shootdowns"]] == [2, 2, 2, 4, 4, 4]


@pytest.fixture(scope="module")
def local():
    return mmsim.sweep(SMALL, GRID, seeds=[1], backend="local", workers=2)


def numbers(df):
    return df.drop(columns=[c for c in df.columns if c.startswith("per_cpu.")]).to_dict("records")


def test_local(local):
    check_frame(local)
    # Each point equals a plain run with the same overrides.
    r = mmsim.run(SMALL, {"machine.cpus": 4, "kernel.preset": "linux-6.1", "run.seed": 1})
    assert local.iloc[4]["counters.nr_tlb_remote_flush"] == r["counters"]["nr_tlb_remote_flush"]
    assert local.iloc[4]["time.elapsed_ns"] == r["time"]["elapsed_ns"]


def test_failed_points_are_rows_not_exceptions():
    df = mmsim.sweep(SMALL, {"machine.cpus": [2, 0, 4]}, seeds=[1, 2], backend="local", workers=2)
    assert len(df) == 6
    bad = df[df["machine.cpus"] == 0]
    assert bad["error"].str.contains("machine.cpus").all()
    good = df[df["machine.cpus"] != 0]
    assert good["error"].isna().all() and (good["counters.nr_tlb_remote_flush"] > 0).all()


def test_seeds_and_base_sets():
    df = mmsim.sweep(SMALL, {"machine.cpus": [2]}, seeds=range(1, 4), sets={"kernel.preset": "linux-4.2"}, workers=2)
    assert df["seed"].tolist() == [1, 2, 3]
    assert df["error"].isna().all()


def test_bad_backend():
    with pytest.raises(ValueError):
        mmsim.sweep(SMALL, GRID, backend="spark")


def test_ray(local):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install './python[ray]'): Ray backend not tested")
    df = mmsim.sweep(SMALL, GRID, seeds=[1], backend="ray", workers=2)
    check_frame(df)
    assert numbers(df) == numbers(local)
    assert df["per_cpu.tlb_shootdowns"].tolist() == local["per_cpu.tlb_shootdowns"].tolist()


def test_dask(local):
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install './python[dask]'): Dask backend not tested")
    df = mmsim.sweep(SMALL, GRID, seeds=[1], backend="dask", workers=2)
    check_frame(df)
    assert numbers(df) == numbers(local)
    assert df["per_cpu.tlb_shootdowns"].tolist() == local["per_cpu.tlb_shootdowns"].tolist()
