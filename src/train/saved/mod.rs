//! A trained network leaving the run: read back from its directory onto a device, exported
//! under PyTorch's names, and weights under those names read into a new network.

pub(crate) mod export;
pub(crate) mod on_device;
pub(crate) mod saved_run;
pub(crate) mod torch_names;
