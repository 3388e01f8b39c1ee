//! The one conversion between a packed upper triangle (the layout of reports, sums
//! and releases: [`ldpcov_privacy::layout`]) and the symmetric matrix it stands for.

use ldpcov_privacy::layout::{triangle_pairs, unpack_symmetric};
use nalgebra::DMatrix;

/// The symmetric `p × p` matrix of a packed upper triangle (entries past the end of
/// a short `packed` are 0).
pub fn packed_to_matrix(p: usize, packed: &[f64]) -> DMatrix<f64> {
    DMatrix::from_row_slice(p, p, &unpack_symmetric(p, packed))
}

/// The packed upper triangle of a square matrix `m` (row-major, diagonal included).
pub fn matrix_to_packed(m: &DMatrix<f64>) -> Vec<f64> {
    triangle_pairs(m.nrows()).map(|(i, j)| m[(i, j)]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_a_symmetric_matrix() {
        let packed = [4.0, 2.0, -1.0, 9.0, 0.5, 3.0];
        let m = packed_to_matrix(3, &packed);
        assert_eq!(
            m,
            DMatrix::from_row_slice(3, 3, &[4.0, 2.0, -1.0, 2.0, 9.0, 0.5, -1.0, 0.5, 3.0])
        );
        assert_eq!(matrix_to_packed(&m), packed);
    }
}
