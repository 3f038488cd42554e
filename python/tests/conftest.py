import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    """Scenario paths in the tests are relative to the repository root, as in the README."""
    monkeypatch.chdir(ROOT)


# A small scenario, quick to run: two threads on two CPUs unmapping in a loop.
SMALL = """
[run]
seed = 1

[machine]
cpus = 2
mem_per_node_mib = 64

[[workload.thread]]
cpu = 0
ops = '''
loop 20
  mmap b0 16
  touch b0 write
  munmap b0
end
'''

[[workload.thread]]
cpu = 1
ops = '''
loop 20
  mmap b1 16
  touch b1 write
  munmap b1
end
'''
"""
