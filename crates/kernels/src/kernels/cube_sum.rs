//! Summing values across the units of a cube in shared memory, shared by the kernels that
//! reduce: the conv weight gradient and the cross-entropy forward.

use cubecl::prelude::*;

/// Adds up `rows` rows of `shared` over the cube's units, halving the active units each
/// step; row r holds one value per unit from index r · `cube_size`, and its sum ends at
/// that index. Every unit of the cube must call it (it synchronizes the cube, also before
/// reading, so the caller's writes need no barrier of their own). The cube is
/// `cube_size` units, a power of two.
#[cube]
pub fn sum_rows_over_units<F: Float>(
    shared: &mut SharedMemory<F>,
    #[comptime] rows: u32,
    #[comptime] cube_size: u32,
) {
    sync_cube();
    let mut half = CUBE_DIM / 2;
    while half > 0 {
        if UNIT_POS < half {
            #[unroll]
            for r in 0..rows {
                let i = (r * cube_size + UNIT_POS) as usize;
                let other = shared[i + half as usize];
                shared[i] += other;
            }
        }
        sync_cube();
        half /= 2;
    }
}
