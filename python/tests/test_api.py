import json
import subprocess

import pytest

import mmsim
from conftest import ROOT, SMALL


def test_run_path_matches_cli_json(tmp_path):
    r = mmsim.run("scenarios/munmap-storm.toml", {"machine.cpus": 8})
    assert r["scenario"] == "munmap-storm"
    assert r["counters"]["nr_tlb_remote_flush"] > 0
    exe = ROOT / "target" / "release" / "mmsim"
    if not exe.exists():
        pytest.skip("target/release/mmsim not built: cargo build --release to compare with the CLI")
    out = tmp_path / "r.json"
    subprocess.run([str(exe), "run", "scenarios/munmap-storm.toml", "--set", "machine.cpus=8", "--json", str(out)], check=True, capture_output=True)
    assert json.loads(out.read_text()) == r


def test_text_dict_and_path_agree():
    import tomllib

    a = mmsim.run(SMALL)
    b = mmsim.run(tomllib.loads(SMALL))
    assert a["counters"] == b["counters"]
    assert a["per_cpu"]["tlb_shootdowns"] == b["per_cpu"]["tlb_shootdowns"]
    # Deterministic: the same scenario and seed give the same numbers.
    assert mmsim.run(SMALL) == a
    # Overrides apply in order and change the run.
    c = mmsim.run(SMALL, {"kernel.preset": "linux-4.2", "machine.cpus": 4})
    assert len(c["per_cpu"]["tlb_shootdowns"]) == 4


def test_errors_are_scenario_errors_naming_file_line_key():
    with pytest.raises(mmsim.ScenarioError, match=r"^<string>:2: machine.cpus:"):
        mmsim.run("[machine]\ncpus = 0\n")
    with pytest.raises(mmsim.ScenarioError, match=r"^--set:1: machine.cpuz:"):
        mmsim.run(SMALL, {"machine.cpuz": 3})
    with pytest.raises(mmsim.ScenarioError, match=r"^scenarios/no-such\.toml: no such file"):
        mmsim.run("scenarios/no-such.toml")
    with pytest.raises(mmsim.ScenarioError, match="unknown experiment"):
        mmsim.reproduce("no-such-experiment")


def test_knobs():
    k = {x["key"]: x for x in mmsim.knobs()}
    assert k["machine.cpus"]["kind"] == "int" and k["machine.cpus"]["default"] == "2"
    assert "linux-4.3" in k["kernel.preset"]["values"]
    out = subprocess.run([str(ROOT / "target/release/mmsim"), "knobs"], capture_output=True, text=True)
    if out.returncode == 0:
        assert [line.split(" = ")[0] for line in out.stdout.splitlines() if not line.startswith(" ")] == list(k)


def test_reproduce_hvo():
    # 1/100 of the 500,000-page case: the full 1 TB machine takes a minute and 8 GiB.
    r = mmsim.reproduce("hvo", scale=100)
    assert isinstance(r, dict) and r
    assert any("1/100" in str(row["simulated"].get("scale", "")) for row in r["rows"])
    with pytest.raises(mmsim.ScenarioError, match="vmacache has one size"):
        mmsim.reproduce("vmacache", scale=2)


def test_frame():
    df = mmsim.frame([mmsim.run(SMALL), mmsim.run(SMALL, {"run.seed": 2})])
    assert len(df) == 2
    assert "counters.nr_tlb_remote_flush" in df.columns and "time.elapsed_ns" in df.columns
    assert (df["counters.nr_tlb_remote_flush"] > 0).all()
