//! Matrix products on `gemm` (vectorized, cache-blocked): operands are read through their
//! strides, so a transposed operand costs no copy.

use gemm::{Parallelism, gemm};

/// A row-major matrix operand: its values and its (rows, columns) strides, so that a
/// transposed view is the same values with the strides swapped.
#[derive(Clone, Copy)]
pub(super) struct Operand<'a> {
    values: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Operand<'a> {
    /// `values` as a row-major matrix with `cols` columns.
    pub(super) fn rows(values: &'a [f32], cols: usize) -> Self {
        Self {
            values,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed matrix, read in place.
    pub(super) fn t(self) -> Self {
        Self {
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Panics unless a `[rows, cols]` matrix at these strides lies inside the values.
    fn check(&self, rows: usize, cols: usize) {
        if rows > 0 && cols > 0 {
            let last = (rows - 1) * self.row_stride + (cols - 1) * self.col_stride;
            assert!(last < self.values.len(), "matrix operand out of bounds");
        }
    }
}

/// How a product treats its destination.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Write {
    /// `dst = lhs · rhs`.
    Overwrite,
    /// `dst += lhs · rhs`.
    Accumulate,
}

/// `lhs [m, k] · rhs [k, n]` into the row-major `[m, n]` matrix `dst` on the threads
/// `parallelism` gives it.
pub(super) fn matmul_into(
    dst: &mut [f32],
    lhs: Operand,
    rhs: Operand,
    [m, k, n]: [usize; 3],
    write: Write,
    parallelism: Parallelism,
) {
    assert!(dst.len() >= m * n, "matrix product destination too small");
    lhs.check(m, k);
    rhs.check(k, n);
    if m * n == 0 {
        return;
    }
    if k == 0 {
        if write == Write::Overwrite {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    // SAFETY: `dst` holds the m·n elements written at row stride n, `lhs` and `rhs` the
    // m·k and k·n elements their strides reach (both checked above).
    unsafe {
        gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            write == Write::Accumulate,
            lhs.values.as_ptr(),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.values.as_ptr(),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Threads for one product of `work` multiply-adds that has the machine to itself: one
/// below where splitting costs more than it saves.
pub(super) fn parallelism(work: usize) -> Parallelism {
    const SERIAL_BELOW: usize = 1 << 16;
    if work < SERIAL_BELOW {
        Parallelism::None
    } else {
        Parallelism::Rayon(rayon::current_num_threads())
    }
}
