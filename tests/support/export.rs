//! The files of the engine's archive exporter (`--archive-export-dir`):
//! a fresh directory per test, and the lines the files hold.

/// A fresh directory for an exporter's files.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("asynqdeck-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Every line of every `.ndjson.gz` file in `dir` (files by name, gzip
/// members in order).
pub fn exported_lines(dir: &std::path::Path) -> Vec<String> {
    use std::io::Read;
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    names.sort();
    let mut lines = Vec::new();
    for path in names {
        assert!(path.to_string_lossy().ends_with(".ndjson.gz"), "{path:?}");
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    lines
}
