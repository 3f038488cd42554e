//! Workloads: the op language for microbenchmarks ([`ops`]) and the synthetic access generator
//! ([`synth`]), LLM inference over mmapped weights ([`llm`]). A [`Program`] is one task's position in its workload.
pub mod llm;
pub mod ops;
mod spawn;
pub mod synth;
pub mod vma;

use std::sync::Arc;

use crate::types::Ns;

#[derive(Debug)]
pub enum Body {
    Ops { prog: Arc<Vec<ops::OpLine>>, pc: usize, loops: Vec<(usize, u64)>, cursor: u64 },
    Synth(synth::SynthState),
    /// The VMA-lookup workloads (boot, kbuild, database, ebizzy) and trace replay.
    Vma(Box<vma::VmaState>),
    /// LLM inference over mmapped weights (src/workload/llm.rs).
    Llm(Box<llm::LlmState>),
    /// kswapd of a node (a kernel thread: no mm).
    Kswapd(u32),
    /// The flusher of the file device (a kernel thread: no mm; mm/page_writeback.rs).
    Flusher,
}

#[derive(Debug)]
pub struct Program {
    pub body: Body,
    /// Scenario file, for runtime error messages.
    pub file: String,
    /// A forked child waiting in `WaitReap` has been released by its parent.
    pub released: bool,
}

/// What a task does after one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepResult {
    Continue,
    Block(Option<Ns>),
    Spin(Ns),
    Exit,
}
