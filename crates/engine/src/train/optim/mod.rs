//! The fused optimizers: one update launch for a whole model.

pub(crate) mod fused_adam;
pub(crate) mod fused_sgd;
pub(crate) mod fused_update;
pub(crate) mod optimizer_config;
pub(crate) mod schedule;
