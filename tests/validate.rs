//! `mmsim validate`'s command line, JSON and `--cost-profile` (issues 11 and 16), without a host:
//! the host-dependent agreement test is `validate_agrees_with_the_host_kernel` in integration.rs.
use std::process::Command;

fn mmsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
}

/// A scratch directory in the system temp dir, removed when the returned guard drops.
fn tmpdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("mmsim-vt-{name}-")).tempdir().unwrap()
}

#[test]
fn repeats_zero_is_a_usage_error() {
    let o = mmsim().args(["validate", "--sim-only", "--repeats", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    // The library entry point refuses it too.
    assert_eq!(mmsim::validate::cli(Some("mprotect".into()), Some(1), Some(1), Some("none".into()), 0, true, None), std::process::ExitCode::from(2));
}

#[test]
fn help_names_the_page_counts_it_runs() {
    let o = mmsim().args(["validate", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    let n = mmsim::validate::DEFAULT_PAGES.len();
    assert!(help.contains(&format!("x {n} page counts")), "{help}");
    let list: Vec<String> = mmsim::validate::DEFAULT_PAGES.iter().map(|p| p.to_string()).collect();
    assert!(help.contains(&list.join(", ")), "{help}");
}

#[test]
fn json_has_simulated_ns_per_op_and_a_profile_changes_it() {
    let d = tmpdir("json");
    let run = |profile: Option<&std::path::Path>| {
        let json = d.path().join("v.json");
        let mut c = mmsim();
        c.args(["validate", "--sim-only", "--op", "mmap-anon", "--pages", "64", "--iters", "20", "--remote", "none", "--json"]).arg(&json);
        if let Some(p) = profile {
            c.arg("--cost-profile").arg(p);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let case = v["cases"][0].clone();
        assert!(case.get("host_ns_per_op").is_some() && case["host_ns_per_op"].is_null());
        case["sim_ns_per_op"].as_f64().unwrap()
    };
    let base = run(None);
    assert!(base > 0.0);
    let prof = d.path().join("slow-faults.toml");
    std::fs::write(&prof, "[cost]\nfault_ns = 5000 # 4.5 us more per fault, 64 faults per op\n").unwrap();
    let slow = run(Some(&prof));
    assert!((slow - base - 64.0 * 4500.0).abs() < 1.0, "{base} -> {slow}");
}

#[test]
fn a_bad_cost_profile_names_its_file_line_and_key() {
    let d = tmpdir("badprof");
    let prof = d.path().join("host.toml");
    std::fs::write(&prof, "# measured\n[cost]\nfault_nss = 3\n").unwrap();
    for args in [vec!["run", "scenarios/munmap-storm.toml"], vec!["validate", "--sim-only", "--op", "mprotect"]] {
        let o = mmsim().current_dir(env!("CARGO_MANIFEST_DIR")).args(&args).arg("--cost-profile").arg(&prof).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&format!("{}:3: cost.fault_nss: unknown key", prof.display())), "{args:?}: {err}");
    }
}

#[test]
fn every_shipped_cost_profile_applies_to_a_scenario() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for entry in std::fs::read_dir(root.join("scenarios/profiles")).unwrap() {
        let prof = entry.unwrap().path();
        let base = mmsim::config::load(&root.join("scenarios/munmap-storm.toml"), &[]).unwrap();
        let c = mmsim::config::load_profiled(&root.join("scenarios/munmap-storm.toml"), Some(&prof), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(c.float("cost.syscall_ns"), base.float("cost.syscall_ns"), "{}", prof.display());
        let o = mmsim().current_dir(root).args(["run", "scenarios/munmap-storm.toml", "--only", "summary", "--cost-profile"]).arg(&prof).output().unwrap();
        assert!(o.status.success(), "{}: {}", prof.display(), String::from_utf8_lossy(&o.stderr));
        n += 1;
    }
    assert!(n >= 1);
}

/// `--race`: an unknown race and zero rounds are usage errors; `--sim-only` prints and writes the
/// model's two verdicts without touching the host (the host side needs root: docs/host-findings.md §9).
#[test]
fn race_sim_only_gives_the_models_verdicts() {
    let o = mmsim().args(["validate", "--race", "nope"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let o = mmsim().args(["validate", "--race", "reclaim-writeback", "--rounds", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let o = mmsim().args(["validate", "--race", "reclaim-writeback", "--op", "mprotect"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "--race with --op: {}", String::from_utf8_lossy(&o.stderr));
    let o = mmsim().args(["validate", "--sim-only", "--rounds", "5"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "--rounds without --race: {}", String::from_utf8_lossy(&o.stderr));
    let d = tmpdir("race");
    let json = d.path().join("race.json");
    let o = mmsim().args(["validate", "--race", "reclaim-writeback", "--sim-only", "--json"]).arg(&json).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("lost-write") && out.contains("no violation") && out.contains("not measured"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["model"][0]["violation"], "lost-write");
    assert!(v["model"][1]["violation"].is_null());
    assert_eq!(v["host"].as_array().map(|a| a.len()), Some(0));
}

/// `mmsim calibrate --rounds 2` on a host that can be measured: the profile it writes applies to
/// validate's model and says how its figures were combined (skipped, with a message, where the
/// host cannot be measured, as `validate_agrees_with_the_host_kernel` is).
#[test]
fn calibrate_in_rounds_writes_a_profile_that_applies() {
    if let Err(e) = mmsim::validate::host::probe() {
        eprintln!("skipped: this host cannot be measured: {e}");
        return;
    }
    let o = mmsim().args(["calibrate", "--rounds", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let d = tmpdir("calibrate");
    let prof = d.path().join("host.toml");
    let o = mmsim().args(["calibrate", "--rounds", "2", "--out"]).arg(&prof).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&prof).unwrap();
    assert!(text.contains("then the lowest over the rounds") && text.contains("fault_ns = "), "{text}");
    let o = mmsim().args(["validate", "--sim-only", "--op", "mmap-anon", "--pages", "16", "--remote", "none", "--cost-profile"]).arg(&prof).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
