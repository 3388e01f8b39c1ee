//! The one error type of the crate.

use thiserror::Error;

/// Why an estimate could not be computed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum EstimateError {
    /// Fewer reports than the collection's minimum.
    #[error("collection has {have} reports; an estimate is released from {need}")]
    BelowMinimum {
        /// Reports counted.
        have: u64,
        /// The collection's minimum.
        need: u64,
    },
    /// A threshold parameter is negative or not finite.
    #[error("threshold parameter {name} = {} must be a finite number ≥ 0", ldpcov_privacy::limits::ShortNumber(*value))]
    ThresholdParameter {
        /// Parameter name.
        name: &'static str,
        /// Value given.
        value: f64,
    },
    /// A parameter other than a threshold's is out of range.
    #[error("parameter {name} = {} must be {requirement}", ldpcov_privacy::limits::ShortNumber(*value))]
    Parameter {
        /// Parameter name.
        name: &'static str,
        /// Value given.
        value: f64,
        /// What it must be.
        requirement: &'static str,
    },
    /// The sums do not have d entries.
    #[error("accumulator has {got} entries, collection needs {expected}")]
    SumLength {
        /// d of the collection.
        expected: usize,
        /// Entries in the sums.
        got: usize,
    },
    /// The eigensolver did not converge.
    #[error("symmetric eigendecomposition did not converge")]
    Eigen,
}
