//! The `mmsim._mmsim` extension module: thin PyO3 wrappers over `mmsim::api`, each returning the
//! JSON text the command line writes with `--json` (the Python side, python/mmsim/, parses it).
//! The simulation runs with the GIL released, so Python threads (and Dask's threaded workers)
//! run in parallel with it.

use std::path::Path;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use mmsim::api::{self, ApiError, Scenario};

create_exception!(mmsim, ScenarioError, PyException, "A scenario, --set or experiment name mmsim cannot use; the message names file:line:key as the CLI does.");

fn to_py(e: ApiError) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

/// run_path(path, sets) -> str: `mmsim run PATH --set ... --json` as JSON text.
#[pyfunction]
fn run_path(py: Python<'_>, path: String, sets: Vec<String>) -> PyResult<String> {
    py.detach(|| api::run_json(&Scenario::Path(Path::new(&path)), &sets)).map_err(to_py)
}

/// run_toml(name, toml, sets) -> str: the same for TOML text; `name` stands for the file in
/// error messages and names the scenario.
#[pyfunction]
fn run_toml(py: Python<'_>, name: String, toml: String, sets: Vec<String>) -> PyResult<String> {
    py.detach(|| api::run_json(&Scenario::Text { name: &name, toml: &toml }, &sets)).map_err(to_py)
}

/// reproduce(name, sets, seeds, scale) -> str: `mmsim reproduce NAME --json` as JSON text.
#[pyfunction]
#[pyo3(signature = (name, sets, seeds=None, scale=None))]
fn reproduce(py: Python<'_>, name: String, sets: Vec<String>, seeds: Option<u64>, scale: Option<u64>) -> PyResult<String> {
    py.detach(|| api::reproduce_json(&name, &sets, seeds, scale)).map_err(to_py)
}

/// knobs() -> str: the knob table as JSON text.
#[pyfunction]
fn knobs() -> String {
    api::knobs_json()
}

#[pymodule]
fn _mmsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add_function(wrap_pyfunction!(run_path, m)?)?;
    m.add_function(wrap_pyfunction!(run_toml, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(knobs, m)?)?;
    Ok(())
}
