//! The packed upper-triangle layout shared by reports, accumulators and estimates:
//! entries `(i, j)` with `i ≤ j`, row-major, diagonal included.

/// Number of packed entries `d = p(p+1)/2` for dimension `p`.
pub const fn triangle_len(dim: usize) -> usize {
    dim * (dim + 1) / 2
}

/// Position of entry `(i, j)` (either order) in the packed triangle of dimension `dim`.
///
/// # Panics
/// If `i` or `j` is not below `dim` (a caller bug, never reachable from input).
pub fn triangle_index(dim: usize, i: usize, j: usize) -> usize {
    let (i, j) = if i <= j { (i, j) } else { (j, i) };
    assert!(j < dim, "entry ({i}, {j}) outside dimension {dim}");
    // Rows 0..i hold dim + (dim-1) + ... + (dim-i+1) = i·dim − i(i−1)/2 entries.
    i * dim - i * i.saturating_sub(1) / 2 + (j - i)
}

/// Iterates over `(i, j)` of the packed triangle in storage order.
pub fn triangle_pairs(dim: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..dim).flat_map(move |i| (i..dim).map(move |j| (i, j)))
}

/// Packs the upper triangle of the `dim × dim` row-major matrix `full`.
pub fn pack_upper(dim: usize, full: &[f64]) -> Vec<f64> {
    triangle_pairs(dim)
        .map(|(i, j)| full[i * dim + j])
        .collect()
}

/// Expands a packed triangle into a full symmetric `dim × dim` row-major matrix.
pub fn unpack_symmetric(dim: usize, packed: &[f64]) -> Vec<f64> {
    let mut full = vec![0.0; dim * dim];
    for ((i, j), &v) in triangle_pairs(dim).zip(packed) {
        full[i * dim + j] = v;
        full[j * dim + i] = v;
    }
    full
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_matches_iteration_order() {
        for dim in [1, 2, 3, 7, 20] {
            for (k, (i, j)) in triangle_pairs(dim).enumerate() {
                assert_eq!(triangle_index(dim, i, j), k);
                assert_eq!(triangle_index(dim, j, i), k);
            }
            assert_eq!(triangle_pairs(dim).count(), triangle_len(dim));
        }
    }

    #[test]
    fn pack_unpack_round_trip() {
        let dim = 4;
        let packed: Vec<f64> = (0..triangle_len(dim)).map(|k| k as f64).collect();
        let full = unpack_symmetric(dim, &packed);
        assert_eq!(pack_upper(dim, &full), packed);
        assert_eq!(full[dim + 3], full[3 * dim + 1]);
    }
}
