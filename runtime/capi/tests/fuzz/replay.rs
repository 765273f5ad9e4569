//! Replays a fuzz target's committed corpus (`fuzz/corpus/<target>/`)
//! through its checks: a finding, once its input is in the corpus, stays a
//! regression test that runs on stable without libFuzzer.

/// Runs every input of `fuzz/corpus/<target>/` through `check`.
pub fn replay(target: &str, check: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus at {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    paths.sort();
    assert!(
        !paths.is_empty(),
        "no corpus inputs under {}",
        dir.display()
    );
    for path in &paths {
        let bytes = std::fs::read(path).expect("a corpus file");
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        assert!(outcome.is_ok(), "{} breaks an invariant", path.display());
    }
    println!("{target}: {} corpus inputs replayed", paths.len());
}
