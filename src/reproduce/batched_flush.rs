//! (Being written.)

use std::path::PathBuf;
use std::process::ExitCode;

pub fn cli(json: Option<PathBuf>) -> ExitCode {
    let _ = json;
    eprintln!("mmsim reproduce: this experiment is not available in this build yet");
    ExitCode::from(2)
}
