//! The project's own source files, for the convention tests that read them.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, not descending into the folders `skip` says.
pub fn rust_files(dir: &Path, skip: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, skip, &mut out);
    out
}

fn collect(dir: &Path, skip: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            if !skip(&path) {
                collect(&path, skip, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
