//! Cost profiles (`--cost-profile F`): a TOML file holding only a `[cost]` table, applied after
//! the scenario file and before `--set`, so one machine's measured or cited costs can be put
//! under any scenario. `mmsim calibrate` writes one for the host; `scenarios/profiles/` ships
//! them. Errors name the profile file, its line and the key, as scenario errors do.
use std::collections::BTreeMap;

use super::{line_of, ConfigError, Loader, Origin, Value};

/// Parse `text` (the profile `file`) and override `values` with its `[cost]` keys.
pub(super) fn apply(values: &mut BTreeMap<&'static str, (Value, Origin)>, file: &str, text: &str) -> Result<(), ConfigError> {
    let doc = toml_edit::Document::parse(text).map_err(|e| ConfigError::Syntax {
        origin: Origin { file: file.to_string(), line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1) },
        msg: e.message().trim().to_string(),
    })?;
    let mut l = Loader { file, text, values: BTreeMap::new(), threads: Vec::new() };
    for (k, item) in doc.as_table().iter() {
        let span = doc.as_table().get_key_value(k).and_then(|(key, _)| key.span()).or_else(|| item.span());
        if k != "cost" || !item.is_table() {
            return Err(ConfigError::key(&l.origin(span), k, "a cost profile holds only a [cost] table (machine, kernel and workload keys belong in the scenario)"));
        }
    }
    l.table("", doc.as_table())?;
    values.extend(l.values);
    Ok(())
}

/// The profile `file` as `--set` strings (`cost.KEY=VALUE`, in file order), after checking it as
/// `--cost-profile` on a run does: for commands that take overrides as `--set` (reproduce).
pub fn as_sets(file: &str, text: &str) -> Result<Vec<String>, ConfigError> {
    super::load_str_profiled("<defaults>", "", Some((file, text)), &[])?;
    let doc = toml_edit::Document::parse(text).expect("parsed above");
    let cost = doc.as_table().get("cost").and_then(|c| c.as_table()).expect("checked above");
    Ok(cost.iter().map(|(k, v)| format!("cost.{k}={}", v.as_value().map(|v| v.clone().decorated("", "").to_string()).unwrap_or_default())).collect())
}

#[cfg(test)]
mod tests {
    use crate::config::load_str_profiled;

    #[test]
    fn profile_overrides_the_scenario_and_set_overrides_the_profile() {
        let prof = "# host\n[cost]\nsyscall_ns = 77.5\nfault_ns = 900\n";
        let c = load_str_profiled("s.toml", "[cost]\nsyscall_ns = 10\nfork_ns = 5\n", Some(("p.toml", prof)), &["cost.fault_ns=1".into()]).unwrap();
        assert_eq!(c.float("cost.syscall_ns"), 77.5);
        assert_eq!(c.float("cost.fault_ns"), 1.0);
        assert_eq!(c.float("cost.fork_ns"), 5.0);
    }

    #[test]
    fn a_profile_as_sets_gives_the_same_config_as_the_profile() {
        let prof = "# host\n[cost]\nsyscall_ns = 77.5 # measured\nfault_ns = 900\n";
        let sets = super::as_sets("p.toml", prof).unwrap();
        assert_eq!(sets, ["cost.syscall_ns=77.5", "cost.fault_ns=900"]);
        let a = load_str_profiled("s.toml", "", Some(("p.toml", prof)), &[]).unwrap();
        let b = load_str_profiled("s.toml", "", None, &sets).unwrap();
        assert_eq!((a.float("cost.syscall_ns"), a.float("cost.fault_ns")), (b.float("cost.syscall_ns"), b.float("cost.fault_ns")));
        assert!(super::as_sets("p.toml", "[cost]\nfault_ns = -1\n").unwrap_err().to_string().starts_with("p.toml:2: cost.fault_ns"));
    }

    #[test]
    fn profile_errors_name_the_profile_file_line_and_key() {
        let err = |p: &str| load_str_profiled("s.toml", "", Some(("host.toml", p)), &[]).unwrap_err().to_string();
        assert_eq!(err("[cost]\n\nsyscal_ns = 1\n"), "host.toml:3: cost.syscal_ns: unknown key (did you mean 'cost.syscall_ns'?)");
        assert!(err("[cost]\nfault_ns = -4\n").starts_with("host.toml:2: cost.fault_ns:"), "{}", err("[cost]\nfault_ns = -4\n"));
        assert!(err("[machine]\ncpus = 4\n").starts_with("host.toml:1: machine: a cost profile holds only a [cost] table"));
        assert!(err("[cost\n").starts_with("host.toml:1:"));
    }
}
