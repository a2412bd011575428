//! CSV tables: any bytes give a table of the asked columns with finite values, or an error
//! naming the problem — never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let columns = ["x".to_string(), "y".to_string()];
    if let Ok(table) = cubenet::data::Table::parse_csv(bytes, Path::new("fuzz.csv"), &columns) {
        assert_eq!(table.width(), 2);
        assert_eq!(table.values.len(), table.rows() * 2);
        assert!(table.values.iter().all(|v| v.is_finite()));
    }
});
