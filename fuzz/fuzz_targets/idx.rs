//! IDX files, raw or gzip: any bytes give an array whose size matches its dimensions, or
//! an error — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(array) = cubenet::data::decode_idx(bytes) {
        let elements: usize = array.dims.iter().product();
        assert_eq!(array.data.len(), elements);
    }
});
