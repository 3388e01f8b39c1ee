//! The parts of a released estimate, unpacked and checked against its dimension: the
//! matrices (covariance, correlation, precision, raw, standard errors), the mean, the
//! principal components, the variables' names and a picture's title.

use ldpcov_privacy::layout::unpack_symmetric;
use ldpcov_proto::v1::{Estimate, EstimateTarget};
use nalgebra::DMatrix;

use super::Part;

pub(super) fn bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

/// The full symmetric matrices of an estimate, checked against its dimension.
pub(super) struct Unpacked {
    pub(super) target: EstimateTarget,
    /// The covariance, row-major `p × p`.
    pub(super) covariance: Vec<f64>,
    /// The precision matrix Θ, row-major, for a precision target.
    pub(super) precision: Option<Vec<f64>>,
}

/// Unpacks `estimate`'s matrices; an error when an entry count does not match the
/// dimension or the target is unknown.
pub(super) fn unpack(estimate: &Estimate) -> std::io::Result<Unpacked> {
    let p = estimate.dim as usize;
    let d = ldpcov_privacy::layout::triangle_len(p);
    if estimate.upper_triangle.len() != d {
        return Err(bad(format!(
            "estimate carries {} entries, dimension {p} needs {d}",
            estimate.upper_triangle.len(),
        )));
    }
    let target = EstimateTarget::try_from(estimate.target)
        .map_err(|_| bad(format!("unknown estimate target {}", estimate.target)))?;
    let is_precision = matches!(
        target,
        EstimateTarget::PrecisionRidge | EstimateTarget::PrecisionGlasso
    );
    if is_precision && estimate.precision_upper_triangle.len() != d {
        return Err(bad(format!(
            "precision estimate carries {} entries, dimension {p} needs {d}",
            estimate.precision_upper_triangle.len(),
        )));
    }
    Ok(Unpacked {
        target,
        covariance: unpack_symmetric(p, &estimate.upper_triangle),
        precision: is_precision.then(|| unpack_symmetric(p, &estimate.precision_upper_triangle)),
    })
}

/// The `p × p` matrix of `estimate` that a picture of `what` shows. The one place
/// that chooses it: a new kind of picture is a new [`Part`] variant here.
pub fn part_matrix(estimate: &Estimate, what: Part) -> std::io::Result<DMatrix<f64>> {
    let p = estimate.dim as usize;
    let unpacked = unpack(estimate)?;
    let d = p * (p + 1) / 2;
    let packed_field = |packed: &[f64], name: &str| -> std::io::Result<Vec<f64>> {
        if packed.is_empty() {
            return Err(bad(format!(
                "the estimate carries no {name}: only mean-and-covariance collections release it"
            )));
        }
        if packed.len() != d {
            return Err(bad(format!(
                "{name} carries {} entries, dimension {p} needs {d}",
                packed.len()
            )));
        }
        Ok(unpack_symmetric(p, packed))
    };
    let values = match what {
        Part::Covariance => unpacked.covariance,
        Part::Precision => unpacked.precision.ok_or_else(|| {
            bad("the estimate carries no precision matrix (its target is the covariance)".into())
        })?,
        // Released with every estimate (of the released matrix).
        Part::Correlation => packed_field(&estimate.correlation, "correlation matrix")?,
        Part::SecondMoment => packed_field(&estimate.second_moment, "second moment")?,
        Part::Raw | Part::StandardErrors => {
            let bars = estimate.error_bars.as_ref().ok_or_else(|| {
                bad("the estimate carries no error bars: ask for them (--error-bars)".into())
            })?;
            if what == Part::Raw {
                packed_field(&bars.raw_upper_triangle, "raw matrix")?
            } else {
                packed_field(&bars.standard_errors, "standard errors")?
            }
        }
        Part::Mean => return Err(bad("the mean is a vector: see `mean_vector`".into())),
        Part::Components => {
            return Err(bad(
                "the components are K × p loadings: see `component_loadings`".into(),
            ));
        }
    };
    Ok(DMatrix::from_row_slice(p, p, &values))
}

/// The mean vector of `estimate` (mean-and-covariance collections), for
/// [`write_vector`](crate::write_vector).
pub fn mean_vector(estimate: &Estimate) -> std::io::Result<Vec<f64>> {
    let p = estimate.dim as usize;
    if estimate.mean.is_empty() {
        return Err(bad(
            "the estimate carries no mean: only mean-and-covariance collections release it".into(),
        ));
    }
    if estimate.mean.len() != p {
        return Err(bad(format!(
            "the mean carries {} entries, dimension {p} needs {p}",
            estimate.mean.len()
        )));
    }
    Ok(estimate.mean.clone())
}

/// The principal components of `estimate` as a `K × p` matrix of loadings (one row
/// per component, scikit-learn's `components_`), for CSV, NPY and pictures.
pub fn component_loadings(estimate: &Estimate) -> std::io::Result<DMatrix<f64>> {
    let p = estimate.dim as usize;
    let pcs = estimate.principal_components.as_ref().ok_or_else(|| {
        bad("the estimate carries no principal components: ask for them (--pca K)".into())
    })?;
    let k = pcs.components.len();
    if let Some(c) = pcs.components.iter().find(|c| c.loadings.len() != p) {
        return Err(bad(format!(
            "a component carries {} loadings, dimension {p} needs {p}",
            c.loadings.len()
        )));
    }
    Ok(DMatrix::from_fn(k, p, |c, i| pcs.components[c].loadings[i]))
}

/// The variables' names: the collection's, when it has one per variable, else
/// `x1 … xp` (1-based, the names every output of the CLI and the Python client use).
pub fn variable_names(estimate: &Estimate) -> Vec<String> {
    let p = estimate.dim as usize;
    if estimate.variable_names.len() == p {
        estimate.variable_names.clone()
    } else {
        (1..=p).map(|i| format!("x{i}")).collect()
    }
}

/// The raw matrix's eigenvalues that the principal components' `above_noise_edge`
/// flags test, largest first, one per component, as the server computed them
/// (`PrincipalComponent.raw_eigenvalue`: of the raw matrix, or of its correlation for
/// components of the correlation). `None` when the estimate carries no components.
pub fn raw_eigenvalues(estimate: &Estimate) -> Option<Vec<f64>> {
    let pcs = estimate.principal_components.as_ref()?;
    Some(pcs.components.iter().map(|c| c.raw_eigenvalue).collect())
}

/// The title of a picture of `what` of `estimate`: the matrix, the collection, the
/// number of reports n and the estimator's rule in short ([`short_rule`]; the JSON
/// output has it in full).
pub fn plot_title(estimate: &Estimate, what: Part) -> String {
    format!(
        "{} of {}, n = {}, {}",
        what.name(),
        estimate.collection_id,
        estimate.reports,
        short_rule(&estimate.threshold_rule)
    )
}

/// A rule's name without its parameters, for titles: `cv(diagonal=exempt, …): noise(c=2,
/// hard) β=1` becomes `cv: noise`; at most 32 characters.
pub fn short_rule(rule: &str) -> String {
    let head = |s: &str| -> String {
        s.split(['(', ';', ',', ' '])
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let short = match rule.find("): ") {
        Some(at) => format!("{}: {}", head(rule), head(&rule[at + 3..])),
        None => head(rule),
    };
    if short.chars().count() > 32 {
        short.chars().take(31).collect::<String>() + "…"
    } else {
        short
    }
}
