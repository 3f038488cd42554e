//! LUF, lazy unmap flush (seed 000; Byungchul Park, SK hynix; posted as v10 in May 2024 and
//! RFC v12 in February 2025, never merged). mechanisms.md §3, docs/luf.md.

/// `kernel.luf`: which form of the series runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Luf {
    #[default]
    Off,
    V10,
    V12,
}

impl Luf {
    pub fn from_config(c: &crate::config::Config) -> Luf {
        let v = match c.str("kernel.luf").as_str() {
            "auto" => crate::config::presets::luf(&c.str("kernel.preset")).to_string(),
            v => v.to_string(),
        };
        match v.as_str() {
            "v10" => Luf::V10,
            "v12" => Luf::V12,
            _ => Luf::Off,
        }
    }

    pub fn on(self) -> bool {
        self != Luf::Off
    }
}
