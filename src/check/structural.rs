//! Structural checkers (issue 6): invariants of the model's own state, checked between steps
//! when the oracle is on. Stub: filled in by the structural-checker work.

use crate::sim::Sim;

impl Sim {
    /// Check the structural invariants; each broken one is reported to the oracle as
    /// `Class::Structural`. Called between steps (never inside one) by `Sim::run`.
    pub fn check_structure(&mut self) {}
}
