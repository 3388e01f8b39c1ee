use super::*;
use crate::packed::matrix_to_packed;
use nalgebra::DMatrix;

#[test]
fn hard_threshold_keeps_diagonal_unless_asked() {
    let mut m = DMatrix::from_row_slice(3, 3, &[0.1, 0.5, -0.2, 0.5, 2.0, 0.05, -0.2, 0.05, 0.3]);
    let kept = apply_threshold(
        &mut m.clone(),
        &Thresholds::Uniform(0.25),
        ThresholdKind::Hard,
        false,
    );
    assert_eq!(kept, 4); // 3 diagonal + (0,1)
    let kept = apply_threshold(
        &mut m,
        &Thresholds::Uniform(0.25),
        ThresholdKind::Hard,
        true,
    );
    assert_eq!(kept, 3); // (0,1), (1,1), (2,2)
    assert_eq!(m[(0, 0)], 0.0);
    assert_eq!(m[(2, 0)], 0.0);
    assert_eq!(m[(1, 0)], 0.5);
}

#[test]
fn hard_and_soft_on_one_value() {
    assert_eq!(ThresholdKind::Hard.apply(0.5, 0.3), 0.5);
    assert_eq!(ThresholdKind::Hard.apply(-0.3, 0.3), 0.0);
    assert!((ThresholdKind::Soft.apply(0.5, 0.3) - 0.2).abs() < 1e-15);
    assert!((ThresholdKind::Soft.apply(-0.5, 0.3) + 0.2).abs() < 1e-15);
    assert_eq!(ThresholdKind::Soft.apply(0.2, 0.3), 0.0);
}

#[test]
fn apply_threshold_hard_vs_soft_on_a_matrix() {
    let m = DMatrix::from_row_slice(3, 3, &[1.0, 0.5, -0.2, 0.5, 2.0, -0.4, -0.2, -0.4, 0.1]);
    let t = Thresholds::Uniform(0.3);
    let mut hard = m.clone();
    assert_eq!(
        apply_threshold(&mut hard, &t, ThresholdKind::Hard, false),
        5
    );
    assert_eq!(hard[(0, 1)], 0.5);
    assert_eq!(hard[(2, 1)], -0.4);
    assert_eq!(hard[(0, 2)], 0.0);
    assert_eq!(hard[(2, 2)], 0.1); // diagonal exempt
    let mut soft = m.clone();
    assert_eq!(apply_threshold(&mut soft, &t, ThresholdKind::Soft, true), 4);
    assert!((soft[(0, 1)] - 0.2).abs() < 1e-15 && soft[(0, 1)] == soft[(1, 0)]);
    assert!((soft[(1, 2)] + 0.1).abs() < 1e-15);
    assert!((soft[(0, 0)] - 0.7).abs() < 1e-15);
    assert_eq!(soft[(2, 2)], 0.0); // 0.1 ≤ 0.3 with the diagonal included
}

#[test]
fn diagonal_shrinkage_pools_toward_the_mean_variance() {
    // Diagonal (1, 2, 6): mean 3. β = 0.5 → (2, 2.5, 4.5); β = 1 → 3·I on the
    // diagonal; off-diagonal entries untouched; packed and full forms agree.
    let mut m = DMatrix::from_row_slice(3, 3, &[1.0, 0.4, 0.0, 0.4, 2.0, 0.1, 0.0, 0.1, 6.0]);
    let mut packed = matrix_to_packed(&m);
    shrink_diagonal(&mut m, 0.5);
    shrink_packed_diagonal(3, &mut packed, 0.5);
    assert_eq!((m[(0, 0)], m[(1, 1)], m[(2, 2)]), (2.0, 2.5, 4.5));
    assert_eq!(m[(0, 1)], 0.4);
    let again = matrix_to_packed(&m);
    assert_eq!(packed, again);
    shrink_diagonal(&mut m, 1.0);
    assert_eq!((m[(0, 0)], m[(1, 1)], m[(2, 2)]), (3.0, 3.0, 3.0));
}
