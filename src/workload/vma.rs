//! The VMA-lookup workloads (system boot, kernel build, database, ebizzy) and trace replay.
//! (Being written: the VMA-lookup issue.)

use crate::config::{Config, ConfigError};
use crate::sim::Sim;
use crate::types::*;
use super::{Program, StepResult};

/// Per-task state of a VMA-lookup workload.
#[derive(Debug, Default)]
pub struct VmaState {}

impl Sim {
    /// Build the tasks of workload `kind` (one of knobs::WORKLOADS other than ops/synthetic).
    pub fn build_vma_workload(&mut self, cfg: &Config, kind: &str) -> Result<(), ConfigError> {
        let _ = cfg;
        Err(ConfigError::key(&cfg.origin("workload.kind"), "workload.kind", format!("workload '{kind}' is not available in this build yet")))
    }

    /// One step of a VMA-lookup workload task.
    pub fn step_vma(&mut self, cpu: CpuId, t: Tid, prog: &mut Program) -> StepResult {
        let _ = (cpu, t, prog);
        StepResult::Exit
    }
}
