//! Convolution kernels, one file per way of computing them: the direct kernels (forward and
//! input gradient, any geometry), the implicit GEMM in fp32 and on the tensor cores (TF32
//! or bf16; on channels-last copies of its operands where the summed channels come in
//! whole 16-byte runs) for multi-channel layers, and the weight gradients of each (the GEMM's
//! also on the tensor cores). `crate::cube::conv` picks among them for a layer.

pub mod channels_last;
pub mod direct;
pub mod gemm;
pub mod gemm_bf16_mma;
pub mod gemm_channels_last;
pub mod gemm_tensor_cores;
pub mod gemm_tf32_mma;
pub mod gemm_tf32_wmma;
pub mod gemm_weight_grad;
pub mod gemm_weight_grad_channels_last;
pub mod gemm_weight_grad_tensor_cores;
pub mod gemm_weight_grad_tf32;
pub mod staged_runs;
pub mod tensor_tile;
pub mod weight_grad;
