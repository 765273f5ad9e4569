//! Replays the committed corpus of fuzz target `capi_config` through its
//! checks (`fuzz/config.rs`, decision 0088). Its own process: the checks
//! need a process where no runtime runs between inputs.

#[path = "fuzz/config.rs"]
mod config;
#[path = "fuzz/replay.rs"]
mod replay;

#[test]
fn the_capi_config_corpus_keeps_its_invariants() {
    replay::replay("capi_config", config::capi_config);
}
