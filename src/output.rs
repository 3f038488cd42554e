//! Writing result files atomically: a killed run leaves either the old file or the new one,
//! never half of one.

use std::io::Write;
use std::path::Path;

/// Write `contents` to `path`: atomically (a temporary file in the same directory and a
/// rename) when `path` is a regular file or does not exist yet; through it otherwise. A symlink
/// is followed (its target is written, atomically if that is a regular file), and a device, a
/// FIFO or a socket is opened and written like `> path` would, so running as root with
/// `--json /dev/stdout` or `--json /dev/full` never replaces the node (issue 16).
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::canonicalize(path)?;
            return write_atomic(&target, contents);
        }
        Ok(m) if !m.file_type().is_file() => {
            if m.is_dir() {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "is a directory"));
            }
            let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
            return f.write_all(contents).and_then(|_| f.flush());
        }
        _ => {}
    }
    write_replace(path, contents)
}

/// The atomic path: a temporary file in the same directory, then a rename over `path`.
fn write_replace(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"))?;
    let tmp = dir.join(format!(".{}.tmp.{}", name.to_string_lossy(), std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Serialize to pretty JSON (deterministic: struct field order and BTreeMaps) and write atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> std::io::Result<()> {
    let mut s = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
    s.push('\n');
    write_atomic(path, s.as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_whole_file() {
        let d = std::env::temp_dir().join(format!("mmsim-out-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("r.json");
        super::write_atomic(&p, b"old").unwrap();
        super::write_atomic(&p, b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        let leftovers = std::fs::read_dir(&d).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
