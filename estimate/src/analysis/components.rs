//! Principal components of a released matrix, each marked by whether the raw
//! matrix's eigenvalue of the same rank stands above the noise.

use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::full_average::FullAverage;
use crate::input::EstimationInput;
use crate::moments::correlation;
use crate::psd::symmetric_eigen;
use crate::spectral::{DEFAULT_EDGE_MARGIN, bulk_edge, edge_margin};
use nalgebra::DMatrix;

/// One principal component.
#[derive(Debug, Clone, PartialEq)]
pub struct PrincipalComponent {
    /// The eigenvalue.
    pub eigenvalue: f64,
    /// `eigenvalue / trace`.
    pub explained_variance_ratio: f64,
    /// The unit eigenvector, its entry of largest magnitude positive.
    pub loadings: Vec<f64>,
    /// Whether the raw matrix's eigenvalue of the same rank ([`raw_eigenvalue`](Self::raw_eigenvalue))
    /// is above the noise edge.
    pub above_noise_edge: bool,
    /// The raw matrix's eigenvalue of the same rank (of its correlation for the
    /// components of the correlation): the value `above_noise_edge` tests.
    pub raw_eigenvalue: f64,
}

/// The top principal components of a released matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PrincipalComponents {
    /// Of the matrix's correlation rather than the matrix.
    pub of_correlation: bool,
    /// The trace the ratios divide by.
    pub total_variance: f64,
    /// The noise edge the raw eigenvalues were compared with (same units).
    pub noise_edge: f64,
    /// Largest eigenvalue first.
    pub components: Vec<PrincipalComponent>,
}

/// The top `k` (at most p) eigenpairs of `released` (or of its correlation), with the
/// explained-variance ratios and, for each, whether the raw matrix of `acc`'s reports
/// (its correlation) has an eigenvalue of that rank above the noise edge.
///
/// The edge is the spectral rules' spike detection (docs/ALGORITHMS.md): the raw
/// matrix's bulk level (its median eigenvalue, robust to a few spikes) plus `2σ_n√p`
/// plus a Tracy–Widom margin at 99.9 %, `σ_n` the spectral noise sd of the average. On the correlation the noise of entry ij is `σ_n/√(d_i·d_j)`, and the
/// edge uses its root mean square, `σ_n·mean(1/d_i)`.
pub fn principal_components(
    input: &EstimationInput,
    acc: &Accumulator,
    released: &DMatrix<f64>,
    k: usize,
    of_correlation: bool,
) -> Result<PrincipalComponents, EstimateError> {
    let p = input.dim();
    if k == 0 || k > p {
        return Err(EstimateError::Parameter {
            name: "principal_components",
            value: k as f64,
            requirement: "between 1 and the collection's dimension",
        });
    }
    let full = FullAverage::new(input, acc)?;
    let mut sigma_n = full.spectral_noise_sd();
    let (target, raw) = if of_correlation {
        let diagonal = full.matrix().diagonal();
        let positive: Vec<f64> = diagonal.iter().filter(|d| **d > 0.0).copied().collect();
        let mean_inverse = if positive.is_empty() {
            0.0
        } else {
            positive.iter().map(|d| 1.0 / d).sum::<f64>() / positive.len() as f64
        };
        sigma_n *= mean_inverse;
        (correlation(released), correlation(full.matrix()))
    } else {
        (released.clone(), full.matrix().clone())
    };
    let (values, vectors) = symmetric_eigen(&target)?;
    let (raw_values, _) = symmetric_eigen(&raw)?;
    let level = raw_values[p / 2];
    let noise_edge = level + bulk_edge(p, sigma_n) + edge_margin(p, sigma_n, DEFAULT_EDGE_MARGIN);
    let total_variance = target.trace();
    // Ascending from the eigensolver: the top k are the last k, largest first.
    let components = (0..k)
        .map(|rank| {
            let index = p - 1 - rank;
            let mut loadings: Vec<f64> = (0..p).map(|i| vectors[(i, index)]).collect();
            let largest = loadings
                .iter()
                .copied()
                .fold(0.0f64, |m, v| if v.abs() > m.abs() { v } else { m });
            if largest < 0.0 {
                loadings.iter_mut().for_each(|v| *v = -*v);
            }
            let eigenvalue = values[index];
            PrincipalComponent {
                eigenvalue,
                explained_variance_ratio: if total_variance > 0.0 {
                    eigenvalue / total_variance
                } else {
                    0.0
                },
                loadings,
                above_noise_edge: raw_values[index] > noise_edge,
                raw_eigenvalue: raw_values[index],
            }
        })
        .collect();
    Ok(PrincipalComponents {
        of_correlation,
        total_variance,
        noise_edge,
        components,
    })
}
