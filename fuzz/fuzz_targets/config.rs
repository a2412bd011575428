//! Run files: any text (with an optional `--set` override after a NUL byte) gives a config
//! that resolves or is refused, and a resolved config prints as TOML that parses again —
//! never a panic.
#![no_main]

use cubenet::run_file::RunConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let (file, overrides) = match text.split_once('\0') {
        Some((file, set)) => (file, vec![set.to_string()]),
        None => (text, Vec::new()),
    };
    let Ok(config) = RunConfig::load_str(file, &overrides) else {
        return;
    };
    if let Ok((resolved, _)) = config.resolve() {
        let printed = resolved.to_toml();
        RunConfig::load_str(&printed, &[]).expect("a printed config parses again");
    }
});
