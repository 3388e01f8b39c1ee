//! The one error type of the crate.

use ldpcov_estimate::EstimateError;

/// Why a statistic was not added or a release not made. Nothing changes on an error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CentralError {
    /// A vector of the wrong length.
    #[error("expected {expected} coordinates, got {got}")]
    Length {
        /// The dimension.
        expected: usize,
        /// What was given.
        got: usize,
    },
    /// A grid vector outside the unit ball.
    #[error("the vector's squared norm is {norm2}, outside the unit ball")]
    OutsideUnitBall {
        /// Its squared norm in units of the ball.
        norm2: f64,
    },
    /// A coordinate that is NaN or infinite.
    #[error("coordinate {index} is not a finite number")]
    NotFinite {
        /// The first such coordinate.
        index: usize,
    },
    /// A parameter out of range (ρ, ε, dimension, grid).
    #[error("{0}")]
    Parameter(String),
    /// A release over no users.
    #[error("no users have been counted: nothing to release")]
    Empty,
    /// The eigensolver failed.
    #[error("eigendecomposition failed: {0}")]
    Eigen(EstimateError),
}
