//! SIGINT, SIGTERM and SIGHUP for the CLI: the first signal asks the running command to stop
//! cleanly (a run prints what it simulated so far; `trace record` stops its command, writes the
//! trace and removes its tracefs instance); a second one exits at once, after running the
//! registered emergency cleanup (the tracefs instance). Only the binary installs the handler: the
//! library (and the Python binding) only reads the flag, which stays clear there.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// Signals received since `install`.
static SIGNALS: AtomicU32 = AtomicU32::new(0);
/// What a second signal must undo before the process exits (a tracefs instance directory).
static EMERGENCY: Mutex<Option<Box<dyn Fn() + Send>>> = Mutex::new(None);

/// The exit status of a command stopped by a signal (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Install the handler (once, from main). An error means another handler is installed already.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) >= 1 {
            if let Ok(mut g) = EMERGENCY.lock() {
                if let Some(f) = g.take() {
                    f();
                }
            }
            eprintln!("mmsim: interrupted again; exiting now");
            std::process::exit(EXIT_INTERRUPTED as i32);
        }
        eprintln!("mmsim: interrupted; stopping cleanly (again to exit now)");
    });
}

/// Has a stop been requested?
#[inline]
pub fn requested() -> bool {
    SIGNALS.load(Ordering::Relaxed) != 0
}

/// Register (Some) or clear (None) the cleanup a second signal runs before exiting.
pub fn on_forced_exit(f: Option<Box<dyn Fn() + Send>>) {
    if let Ok(mut g) = EMERGENCY.lock() {
        *g = f;
    }
}
