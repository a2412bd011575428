//! [`Precision`], how a convolution's products multiply: a setting of the ops' options, of
//! run files and of saved configs, so it has a name (`fp32`, `tf32`, `bf16`) both ways.

/// How a convolution's products are computed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// fp32 multiply-adds, exact to fp32 rounding against the references.
    #[default]
    Fp32,
    /// The multi-channel GEMMs (forward, input and weight gradients) on the tensor cores,
    /// which read each fp32 operand as TF32 (10-bit mantissa) and accumulate in fp32, as
    /// PyTorch does with `allow_tf32`. Runtimes without TF32 matrix units (or an element
    /// type other than f32) compute in fp32, as does every other op.
    Tf32,
    /// The same GEMMs on the tensor cores with each operand rounded to bf16 (8-bit
    /// significand) and fp32 sums, as PyTorch's bf16 autocast multiplies; activations,
    /// weights, gradients and every other op stay fp32. Runtimes without bf16 matrix units
    /// (the CPU, Vulkan) compute in fp32.
    Bf16,
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
        })
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "fp32" => Ok(Precision::Fp32),
            "tf32" => Ok(Precision::Tf32),
            "bf16" => Ok(Precision::Bf16),
            other => Err(format!("unknown precision {other:?} (fp32, tf32 or bf16)")),
        }
    }
}
