//! What a run trains: the image job, the tabular job, and their settings.

pub(crate) mod config;
pub(crate) mod image_splits;
pub(crate) mod images;
pub mod tabular;
