//! A trained network leaving the run: read back from its directory onto a device, exported
//! under PyTorch's names or as an ONNX graph, and weights under those names read into a new
//! network.

pub(crate) mod export;
pub(crate) mod on_device;
mod onnx_export;
mod onnx_graph;
mod onnx_proto;
pub(crate) mod saved_run;
pub(crate) mod sidecar;
pub(crate) mod torch_names;
