//! Scenario configuration: raw TOML and `--set` → validated values with their origins → typed config.
//!
//! Configuration flows one way (ripgrep's low-level → high-level args): [`load`] parses and
//! validates every key against the one knob table in [`knobs`], with no side effects; [`Config`]
//! then exposes typed values. User mistakes are [`ConfigError`]s naming file, line and key;
//! they never panic.

pub mod knobs;
pub mod knobs_check;
pub mod knobs_llm;
pub mod knobs_numa;
pub mod knobs_hugetlb;
pub mod knobs_vma;
pub mod knobs_flush;
pub mod estimate;
pub mod presets;
pub mod profile;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use knobs::{Kind, Knob};

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => write!(f, "\"{v}\""),
        }
    }
}

/// Where a value came from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A user mistake in a scenario or on the command line. Displayed as one line:
/// `FILE:LINE: KEY: what is wrong`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: {key}: {msg}")]
    Key { origin: Origin, key: String, msg: String },
    #[error("{origin}: {msg}")]
    Syntax { origin: Origin, msg: String },
    #[error("{file}: {msg}")]
    Io { file: String, msg: String },
}

impl ConfigError {
    pub fn key(origin: &Origin, key: &str, msg: impl Into<String>) -> Self {
        ConfigError::Key { origin: origin.clone(), key: key.to_string(), msg: msg.into() }
    }
}

/// One `[[workload.thread]]` table of an `ops` workload.
#[derive(Clone, Debug)]
pub struct ThreadSpec {
    pub process: u32,
    pub cpu: Option<u32>,
    pub ops: String,
    /// Origin of the first line of `ops` (op-program errors add their line offset to it).
    pub ops_origin: Origin,
}

/// A validated scenario: every knob has a value (default, preset, file or `--set`).
#[derive(Clone, Debug)]
pub struct Config {
    values: BTreeMap<&'static str, (Value, Origin)>,
    pub threads: Vec<ThreadSpec>,
    pub name: String,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

fn check_value(knob: &Knob, v: Value, origin: &Origin) -> Result<Value, ConfigError> {
    let bad = |msg: String| Err(ConfigError::key(origin, knob.key, msg));
    match (knob.kind, v) {
        (Kind::Int { min, max }, Value::Int(i)) => {
            if i < min || i > max {
                // -1 is the documented "take the preset's value" for a few knobs.
                if knob.default == "-1" && i == -1 {
                    return Ok(Value::Int(i));
                }
                return bad(format!("{i} is out of range {min}..={max}{}", unit(knob)));
            }
            Ok(Value::Int(i))
        }
        // An integer written without a fraction but too big for i64 parses as a float.
        (Kind::Int { min, max }, Value::Float(x)) if x.is_finite() && x.fract() == 0.0 => {
            bad(format!("{x:.0} is out of range {min}..={max}{}", unit(knob)))
        }
        (Kind::Float { min, max }, v @ (Value::Float(_) | Value::Int(_))) => {
            let x = match v {
                Value::Float(x) => x,
                Value::Int(i) => i as f64,
                _ => unreachable!(),
            };
            if !x.is_finite() || x < min || x > max {
                return bad(format!("{x} is out of range {min}..={max}{}", unit(knob)));
            }
            Ok(Value::Float(x))
        }
        (Kind::Bool, Value::Bool(b)) => Ok(Value::Bool(b)),
        (Kind::Str, Value::Str(s)) => Ok(Value::Str(s)),
        (Kind::Enum(names), Value::Str(s)) => {
            if names.contains(&s.as_str()) {
                Ok(Value::Str(s))
            } else {
                bad(format!("'{s}' is not one of: {}", names.join(", ")))
            }
        }
        (kind, v) => bad(format!("expected {}, found {}", kind_name(kind), value_kind(&v))),
    }
}

fn unit(k: &Knob) -> String {
    if k.unit.is_empty() { String::new() } else { format!(" {}", k.unit) }
}

pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Int { .. } => "an integer",
        Kind::Float { .. } => "a number",
        Kind::Bool => "true or false",
        Kind::Enum(_) | Kind::Str => "a string",
    }
}

fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Bool(_) => "a boolean",
        Value::Str(_) => "a string",
    }
}

fn from_toml(v: &toml_edit::Value) -> Option<Value> {
    match v {
        toml_edit::Value::Integer(i) => Some(Value::Int(*i.value())),
        toml_edit::Value::Float(f) => Some(Value::Float(*f.value())),
        toml_edit::Value::Boolean(b) => Some(Value::Bool(*b.value())),
        toml_edit::Value::String(s) => Some(Value::Str(s.value().clone())),
        _ => None,
    }
}

/// Parse a value written on the command line (`--set key=value`) by the knob's type.
fn parse_cli_value(knob: &Knob, raw: &str) -> Value {
    let raw = raw.trim();
    match knob.kind {
        Kind::Enum(_) | Kind::Str => Value::Str(raw.trim_matches('"').to_string()),
        _ => {
            if let Ok(i) = raw.replace('_', "").parse::<i64>() {
                Value::Int(i)
            } else if let Ok(x) = raw.parse::<f64>() {
                Value::Float(x)
            } else if raw == "true" || raw == "false" {
                Value::Bool(raw == "true")
            } else {
                Value::Str(raw.to_string())
            }
        }
    }
}

struct Loader<'a> {
    file: &'a str,
    text: &'a str,
    values: BTreeMap<&'static str, (Value, Origin)>,
    threads: Vec<ThreadSpec>,
}

impl Loader<'_> {
    fn origin(&self, span: Option<std::ops::Range<usize>>) -> Origin {
        Origin { file: self.file.to_string(), line: span.map(|s| line_of(self.text, s.start)).unwrap_or(1) }
    }

    fn table(&mut self, prefix: &str, t: &toml_edit::Table) -> Result<(), ConfigError> {
        for (k, item) in t.iter() {
            let key_span = t.get_key_value(k).and_then(|(key, _)| key.span()).or_else(|| item.span());
            let full = if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
            let origin = self.origin(key_span);
            match item {
                toml_edit::Item::Table(sub) => self.table(&full, sub)?,
                toml_edit::Item::ArrayOfTables(arr) if full == "workload.thread" => {
                    for sub in arr.iter() {
                        self.thread(sub, &origin)?;
                    }
                }
                // The same threads spelt as an array of inline tables (`thread = [{ ... }]`, as
                // TOML writers such as Python's tomli-w emit them).
                toml_edit::Item::Value(toml_edit::Value::Array(arr)) if full == "workload.thread" => {
                    for v in arr.iter() {
                        let sub = v.as_inline_table().ok_or_else(|| ConfigError::key(&self.origin(v.span()), &full, "expected a table per thread"))?;
                        self.thread(&sub.clone().into_table(), &self.origin(v.span()))?;
                    }
                }
                toml_edit::Item::Value(toml_edit::Value::InlineTable(it)) => {
                    let sub = it.clone().into_table();
                    self.table(&full, &sub)?
                }
                toml_edit::Item::Value(v) => self.value(&full, v, origin)?,
                _ => return Err(ConfigError::key(&origin, &full, unknown_key_msg(&full))),
            }
        }
        Ok(())
    }

    fn value(&mut self, full: &str, v: &toml_edit::Value, origin: Origin) -> Result<(), ConfigError> {
        let knob = knobs::find(full).ok_or_else(|| ConfigError::key(&origin, full, unknown_key_msg(full)))?;
        let val = from_toml(v)
            .ok_or_else(|| ConfigError::key(&origin, full, format!("expected {}", kind_name(knob.kind))))?;
        let val = check_value(knob, val, &origin)?;
        self.values.insert(knob.key, (val, origin));
        Ok(())
    }

    fn thread(&mut self, t: &toml_edit::Table, at: &Origin) -> Result<(), ConfigError> {
        let mut spec = ThreadSpec { process: 0, cpu: None, ops: String::new(), ops_origin: at.clone() };
        let mut have_ops = false;
        for (k, item) in t.iter() {
            let span = t.get_key_value(k).and_then(|(key, _)| key.span());
            let origin = self.origin(span);
            let key = format!("workload.thread.{k}");
            let v = item.as_value();
            match k {
                "process" | "cpu" => {
                    let n = v
                        .and_then(|v| v.as_integer())
                        .filter(|&n| (0..=u32::MAX as i64).contains(&n))
                        .ok_or_else(|| ConfigError::key(&origin, &key, "expected a non-negative integer"))?;
                    if k == "process" { spec.process = n as u32 } else { spec.cpu = Some(n as u32) }
                }
                "ops" => {
                    let s = v.and_then(|v| v.as_str()).ok_or_else(|| ConfigError::key(&origin, &key, "expected a string"))?;
                    spec.ops = s.to_string();
                    // A multi-line basic string starting with a newline begins on the next line.
                    let vline = self.origin(v.and_then(|v| v.span()));
                    let raw_starts_nl = v
                        .and_then(|v| v.span())
                        .map(|sp| self.text[sp.start..].starts_with("\"\"\"\n") || self.text[sp.start..].starts_with("'''\n"))
                        .unwrap_or(false);
                    spec.ops_origin = Origin { file: vline.file, line: vline.line + raw_starts_nl as usize };
                    have_ops = true;
                }
                _ => {
                    let names: Vec<_> = knobs::THREAD_KEYS.iter().map(|(n, _)| *n).collect();
                    return Err(ConfigError::key(&origin, &key, format!("unknown key (a thread has: {})", names.join(", "))));
                }
            }
        }
        if !have_ops {
            return Err(ConfigError::key(at, "workload.thread.ops", "missing: every [[workload.thread]] needs an ops program"));
        }
        self.threads.push(spec);
        Ok(())
    }
}

fn unknown_key_msg(key: &str) -> String {
    // Suggest the closest knob (edit distance), as a kernel developer would expect from a CLI.
    let best = knobs::all()
        .map(|k| (strsim(key, k.key), k.key))
        .min_by_key(|&(d, _)| d)
        .filter(|&(d, _)| d <= 3);
    match best {
        Some((_, k)) => format!("unknown key (did you mean '{k}'?)"),
        None => "unknown key (see `mmsim knobs`)".to_string(),
    }
}

/// Levenshtein distance, for "did you mean".
fn strsim(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != cb) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Load a scenario from TOML text, then apply `--set key=value` overrides (in order).
pub fn load_str(file: &str, text: &str, sets: &[String]) -> Result<Config, ConfigError> {
    load_str_profiled(file, text, None, sets)
}

/// As [`load_str`], with a cost profile `(file name, TOML text)` applied after the scenario and
/// before `--set` (see [`profile`]).
pub fn load_str_profiled(file: &str, text: &str, cost_profile: Option<(&str, &str)>, sets: &[String]) -> Result<Config, ConfigError> {
    let doc = toml_edit::Document::parse(text).map_err(|e| ConfigError::Syntax {
        origin: Origin { file: file.to_string(), line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1) },
        msg: {
            // toml_edit's "duplicate key" and similar messages do not name the key: add the
            // text the error points at.
            let m = e.message().trim().to_string();
            match e.span().and_then(|sp| text.get(sp.clone())).map(str::trim).filter(|t| !t.is_empty() && !t.contains('\n')) {
                Some(t) if !m.contains(t) => format!("{m} `{t}`"),
                _ => m,
            }
        },
    })?;
    let mut l = Loader { file, text, values: BTreeMap::new(), threads: Vec::new() };
    l.table("", doc.as_table())?;
    let (mut values, threads) = (l.values, l.threads);
    if let Some((pf, pt)) = cost_profile {
        profile::apply(&mut values, pf, pt)?;
    }
    for (i, s) in sets.iter().enumerate() {
        let origin = Origin { file: "--set".to_string(), line: i + 1 };
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| ConfigError::Syntax { origin: origin.clone(), msg: format!("'{s}': expected key=value") })?;
        let k = k.trim();
        let knob = knobs::find(k).ok_or_else(|| ConfigError::key(&origin, k, unknown_key_msg(k)))?;
        let val = check_value(knob, parse_cli_value(knob, v), &origin)?;
        values.insert(knob.key, (val, origin));
    }
    let name = Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let cfg = Config { values, threads, name };
    cfg.check_consistency()?;
    Ok(cfg)
}

/// As [`load`], with the cost profile read from `cost_profile` (`--cost-profile F`).
pub fn load_profiled(path: &Path, cost_profile: Option<&Path>, sets: &[String]) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io { file: file.clone(), msg: e.to_string() })?;
    let prof = match cost_profile {
        None => None,
        Some(p) => {
            let pf = p.display().to_string();
            let pt = std::fs::read_to_string(p).map_err(|e| ConfigError::Io { file: pf.clone(), msg: e.to_string() })?;
            Some((pf, pt))
        }
    };
    load_str_profiled(&file, &text, prof.as_ref().map(|(f, t)| (f.as_str(), t.as_str())), sets)
}

pub fn load(path: &Path, sets: &[String]) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io { file: file.clone(), msg: e.to_string() })?;
    load_str(&file, &text, sets)
}

impl Config {
    /// A config with every knob at its default (plus the given overrides), for programmatic use.
    /// Programmatic scenarios (validate, bench) give their threads here rather than in TOML.
    pub fn defaults(sets: &[String]) -> Result<Config, ConfigError> {
        Self::with_threads(sets, Vec::new())
    }

    pub fn with_threads(sets: &[String], threads: Vec<ThreadSpec>) -> Result<Config, ConfigError> {
        let mut c = load_str("<defaults>", "", sets)?;
        c.threads = threads;
        // The threads' checks (a pinned CPU that does not exist) need the threads (found by
        // `mmsim fuzz`: an index out of bounds in Sim::build).
        c.check_consistency()?;
        Ok(c)
    }

    /// As [`Config::with_threads`], with a cost profile `(file name, TOML text)` applied
    /// before `sets`.
    pub fn with_profile(cost_profile: Option<(&str, &str)>, sets: &[String], threads: Vec<ThreadSpec>) -> Result<Config, ConfigError> {
        let mut c = load_str_profiled("<defaults>", "", cost_profile, sets)?;
        c.threads = threads;
        Ok(c)
    }

    pub(crate) fn raw(&self, key: &str) -> Option<&(Value, Origin)> {
        self.values.get(key)
    }

    fn knob(key: &str) -> &'static Knob {
        knobs::find(key).unwrap_or_else(|| panic!("simulator bug: undeclared knob {key}"))
    }

    fn default_value(knob: &Knob) -> Value {
        let doc = toml_edit::Document::parse(format!("v = {}", knob.default)).expect("knob default parses");
        let v = from_toml(doc.as_table().get("v").and_then(|i| i.as_value()).expect("value")).expect("scalar");
        match (knob.kind, v) {
            (Kind::Float { .. }, Value::Int(i)) => Value::Float(i as f64),
            (_, v) => v,
        }
    }

    pub fn get(&self, key: &str) -> Value {
        match self.raw(key) {
            Some((v, _)) => v.clone(),
            None => Self::default_value(Self::knob(key)),
        }
    }

    pub fn int(&self, key: &str) -> i64 {
        match self.get(key) {
            Value::Int(i) => i,
            v => panic!("simulator bug: knob {key} is {v:?}, not an int"),
        }
    }
    pub fn float(&self, key: &str) -> f64 {
        match self.get(key) {
            Value::Float(x) => x,
            Value::Int(i) => i as f64,
            v => panic!("simulator bug: knob {key} is {v:?}, not a float"),
        }
    }
    pub fn bool(&self, key: &str) -> bool {
        match self.get(key) {
            Value::Bool(b) => b,
            v => panic!("simulator bug: knob {key} is {v:?}, not a bool"),
        }
    }
    pub fn str(&self, key: &str) -> String {
        match self.get(key) {
            Value::Str(s) => s,
            v => panic!("simulator bug: knob {key} is {v:?}, not a string"),
        }
    }

    /// An `auto|on|off` mechanism switch: `auto` means "on in kernels from `since` onwards", by
    /// the kernel.preset version.
    pub fn switch(&self, key: &str, since: (u32, u32)) -> bool {
        match self.str(key).as_str() {
            "on" => true,
            "off" => false,
            _ => presets::version(&self.str("kernel.preset")) >= since,
        }
    }

    /// Origin of a key's value, or a pseudo-origin for a default.
    pub fn origin(&self, key: &str) -> Origin {
        self.raw(key).map(|(_, o)| o.clone()).unwrap_or(Origin { file: "<default>".into(), line: 0 })
    }

    /// Checks across knobs (each error is pinned to the key that makes the combination impossible).
    fn check_consistency(&self) -> Result<(), ConfigError> {
        let cpus = self.int("machine.cpus");
        let nodes = self.int("machine.nodes");
        let sockets = self.int("machine.sockets");
        if cpus % nodes != 0 {
            return Err(ConfigError::key(&self.origin("machine.nodes"), "machine.nodes", format!("{cpus} CPUs cannot be split evenly over {nodes} nodes")));
        }
        if nodes % sockets != 0 {
            return Err(ConfigError::key(&self.origin("machine.sockets"), "machine.sockets", format!("{nodes} nodes cannot be split evenly over {sockets} sockets")));
        }
        if self.int("machine.cpuless_nodes") > 0 && self.int("machine.cpuless_mem_mib") == 0 {
            return Err(ConfigError::key(&self.origin("machine.cpuless_mem_mib"), "machine.cpuless_mem_mib", "memory-only nodes need memory (set it above 0)"));
        }
        // Memory tiering (docs/tiering.md): a kernel older than the mechanism refuses the setting.
        let kver = presets::version(&self.str("kernel.preset"));
        if self.int("kernel.numa_balancing") & 2 != 0 && kver < presets::NUMA_TIERING_MODELLED_SINCE {
            let msg = if kver < presets::NUMA_TIERING_SINCE {
                "NUMA_BALANCING_MEMORY_TIERING (2) needs linux-5.18 or later"
            } else {
                "NUMA_BALANCING_MEMORY_TIERING (2) is modelled as of linux-6.0 (5.18-5.19 promoted every hinted folio)"
            };
            return Err(ConfigError::key(&self.origin("kernel.numa_balancing"), "kernel.numa_balancing", msg));
        }
        if self.bool("vm.demotion_enabled") && kver < presets::DEMOTION_SINCE {
            return Err(ConfigError::key(&self.origin("vm.demotion_enabled"), "vm.demotion_enabled", "demotion in reclaim needs linux-5.15 or later"));
        }
        for (k, ways_key) in [
            ("machine.tlb.l1d_4k_entries", "machine.tlb.l1d_4k_ways"),
            ("machine.tlb.l1d_2m_entries", "machine.tlb.l1d_2m_ways"),
            ("machine.tlb.l1i_4k_entries", "machine.tlb.l1i_4k_ways"),
            ("machine.tlb.l1i_2m_entries", "machine.tlb.l1i_2m_ways"),
            ("machine.tlb.stlb_entries", "machine.tlb.stlb_ways"),
        ] {
            let (e, w) = (self.int(k), self.int(ways_key));
            if e % w != 0 {
                // Blame whichever of the two the user set (the ways, if both or neither).
                let blame = if self.raw(k).is_some() && self.raw(ways_key).is_none() { k } else { ways_key };
                return Err(ConfigError::key(&self.origin(blame), blame, format!("{e} entries cannot form {w}-way sets")));
            }
        }
        // Flush alternatives (knobs_flush.rs): each instruction exists on one vendor only.
        let vendor = self.str("machine.cpu_vendor");
        if self.bool("machine.invlpgb") && vendor != "amd" {
            return Err(ConfigError::key(&self.origin("machine.invlpgb"), "machine.invlpgb", format!("INVLPGB is an AMD instruction (set machine.cpu_vendor = \"amd\"; it is \"{vendor}\")")));
        }
        if self.bool("machine.rar") && vendor != "intel" {
            return Err(ConfigError::key(&self.origin("machine.rar"), "machine.rar", format!("RAR is an Intel feature (machine.cpu_vendor is \"{vendor}\")")));
        }
        for t in &self.threads {
            if let Some(c) = t.cpu {
                if c as i64 >= cpus {
                    return Err(ConfigError::key(&t.ops_origin, "workload.thread.cpu", format!("CPU {c} does not exist (machine.cpus = {cpus})")));
                }
            }
        }
        Ok(())
    }

    /// Every knob with its effective value, for reports (deterministic order).
    pub fn effective(&self) -> Vec<(&'static str, Value)> {
        knobs::all().map(|k| (k.key, self.get(k.key))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        load_str("s.toml", text, &[]).unwrap_err().to_string()
    }

    #[test]
    fn misspelt_key_names_file_line_and_key() {
        let e = err("[machine]\ncpus = 2\nmem_per_nod_mib = 4\n[[workload.thread]]\nops = \"spin 1\"\n");
        assert_eq!(e, "s.toml:3: machine.mem_per_nod_mib: unknown key (did you mean 'machine.mem_per_node_mib'?)");
    }

    #[test]
    fn negative_size_and_zero_cpus_are_rejected() {
        let e = err("[machine]\nmem_per_node_mib = -4\n");
        assert!(e.starts_with("s.toml:2: machine.mem_per_node_mib: -4 is out of range"), "{e}");
        let e = err("machine.cpus = 0\n");
        assert!(e.starts_with("s.toml:1: machine.cpus: 0 is out of range"), "{e}");
    }

    #[test]
    fn wrong_type_and_bad_enum() {
        let e = err("[machine]\ncpus = \"two\"\n");
        assert_eq!(e, "s.toml:2: machine.cpus: expected an integer, found a string");
        let e = err("[kernel]\npreset = \"linux-9.9\"\n");
        assert!(e.starts_with("s.toml:2: kernel.preset: 'linux-9.9' is not one of"), "{e}");
    }

    #[test]
    fn set_overrides_and_reports_its_position() {
        let c = load_str("s.toml", "[[workload.thread]]\nops = \"spin 1\"\n", &["machine.cpus=4".into()]).unwrap();
        assert_eq!(c.int("machine.cpus"), 4);
        let e = load_str("s.toml", "", &["machine.cpus=4".into(), "machine.cpu=4".into()]).unwrap_err().to_string();
        assert_eq!(e, "--set:2: machine.cpu: unknown key (did you mean 'machine.cpus'?)");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let e = err("[machine]\ncpus = = 2\n");
        assert!(e.starts_with("s.toml:2: "), "{e}");
    }

    #[test]
    fn every_default_is_valid() {
        for k in knobs::all() {
            let v = Config::default_value(k);
            check_value(k, v, &Origin { file: "x".into(), line: 0 }).unwrap_or_else(|e| panic!("{}: {e}", k.key));
        }
    }

    #[test]
    fn ops_origin_points_at_the_program() {
        let c = load_str("s.toml", "[[workload.thread]]\ncpu = 1\nops = \"\"\"\nspin 1\n\"\"\"\n", &[]).unwrap();
        assert_eq!(c.threads[0].ops_origin.line, 4);
        assert_eq!(c.threads[0].cpu, Some(1));
    }
}
