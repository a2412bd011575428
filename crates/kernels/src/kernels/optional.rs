//! Reading an operand a kernel is compiled with or without (a bias): which one is known at
//! compile time, so the kernel without it has no branch.

use cubecl::prelude::*;

/// Element `index` of `operand`, or zero where the kernel has none.
#[cube]
#[allow(clippy::let_and_return)] // `#[comptime]` needs the match bound by a `let`
pub fn value_or_zero<F: Float>(operand: &ComptimeOption<Array<F>>, index: usize) -> F {
    #[comptime]
    let value = match operand {
        ComptimeOption::Some(operand) => operand[index],
        ComptimeOption::None => F::new(0.0),
    };
    value
}
