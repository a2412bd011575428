//! Numeric tables: CSV files and generated sets, their seeded splits and standardization,
//! and device-resident row batches.

pub(crate) mod device_rows;
pub(crate) mod split;
pub mod synthetic;
pub(crate) mod table;
pub(crate) mod table_source;
