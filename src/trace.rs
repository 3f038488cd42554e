//! `mmsim trace record`: record a real program's page faults and mm syscalls with tracefs.
//! (Being written: the VMA-lookup issue.)

use std::path::PathBuf;
use std::process::ExitCode;

pub fn record_cli(out: Option<PathBuf>, cmd: Vec<String>) -> ExitCode {
    let _ = (out, cmd);
    eprintln!("mmsim trace record: not available in this build yet");
    ExitCode::from(2)
}
