"""The batched-flush gain over CPU counts (seed 002, Linux 4.3's TTU_BATCH_FLUSH), as a sweep.

One reader process per CPU maps its own sparse file of 10 x MemTotal / nr_cpu and reads it page
by page (vm-scalability lru-file-mmap-read, the workload of `mmsim reproduce batched-flush`, here
on a small 256 MiB machine so that the whole sweep takes seconds). linux-4.2 flushes each page
as reclaim unmaps it; linux-4.3 batches the flushes. Run from the repository root:

    python python/examples/batched_flush_gain.py [--backend local|ray|dask] [--out docs/python-batched-flush-gain.png]
"""

import argparse

import pandas as pd

import mmsim

MEM_MIB = 256


def readers(cpus: int) -> dict:
    """The scenario for one CPU count, as a dict (mmsim turns it into TOML)."""
    pages = 10 * MEM_MIB * 256 // cpus
    return {
        "run": {"max_sim_ms": 100_000_000},
        "machine": {"cpus": cpus, "mem_per_node_mib": MEM_MIB},
        "workload": {
            "start_jitter_us": 1000,
            "thread": [
                {"process": c, "cpu": c, "ops": f"mmap f {pages} file:reader{c} sparse shared prot=r\ntouch f read\n"}
                for c in range(cpus)
            ],
        },
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="local")
    ap.add_argument("--out", default="docs/python-batched-flush-gain.png")
    args = ap.parse_args()

    # The scenario has one thread per CPU, so each CPU count is its own sweep over the kernels
    # and seeds; the frames are concatenated.
    frames = []
    for cpus in [2, 4, 8, 16]:
        df = mmsim.sweep(readers(cpus), grid={"kernel.preset": ["linux-4.2", "linux-4.3"]}, seeds=range(1, 4), backend=args.backend, workers=2)
        frames.append(df.assign(cpus=cpus))
    df = pd.concat(frames, ignore_index=True)
    assert df["error"].isna().all(), df["error"].dropna().tolist()

    df["sys_s"] = df["time.sys_ns"] / 1e9
    df["elapsed_s"] = df["time.elapsed_ns"] / 1e9
    df["tlb_irqs"] = df["counters.nr_tlb_remote_flush_received"]
    t = df.groupby(["cpus", "kernel.preset"])[["elapsed_s", "sys_s", "tlb_irqs"]].mean().unstack("kernel.preset")
    gain = pd.DataFrame({
        "elapsed gain %": 100 * (1 - t["elapsed_s"]["linux-4.3"] / t["elapsed_s"]["linux-4.2"]),
        "sys gain %": 100 * (1 - t["sys_s"]["linux-4.3"] / t["sys_s"]["linux-4.2"]),
        "TLB IPIs 4.2": t["tlb_irqs"]["linux-4.2"],
        "TLB IPIs 4.3": t["tlb_irqs"]["linux-4.3"],
    })
    print(gain.round(1).to_string())

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(gain.index, gain["elapsed gain %"], "o-", label="elapsed")
    ax.plot(gain.index, gain["sys gain %"], "s--", label="system time")
    ax.set_xscale("log", base=2)
    ax.set_xticks(gain.index, [str(c) for c in gain.index])
    ax.set_xlabel("CPUs (one reader per CPU)")
    ax.set_ylabel("gain of linux-4.3 over 4.2 (%)")
    ax.set_title("Batched unmap flush (seed 002), lru-file-mmap-read, 256 MiB")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
