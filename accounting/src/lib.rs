//! Privacy accounting for ldpcov: how much noise a guarantee needs, and what a
//! guarantee amounts to after shuffling. Pure functions of numbers, with no ldpcov
//! dependency and no I/O, each tested against independently computed values.
//!
//! * [`calibration`] — the analytic Gaussian mechanism (σ from ε, δ and the L2
//!   sensitivity Δ, Balle & Wang 2018), the classic formula kept for comparison, and the
//!   zCDP conversions the central model's budget ledger uses.
//! * [`amplification`] — amplification by shuffling: the central (ε, δ) of a shuffled
//!   batch of n pure ε0-LDP reports ([`amplification::shuffled_epsilon`], the smaller of
//!   two bounds), the ε0 that meets a central target, and FMT21's bound.
//! * [`variation_ratio`] — the variation-ratio bound of Wang et al. (VLDB 2024), the
//!   tightest published for a generic ε0-LDP randomizer.
//!
//! ```
//! use ldpcov_accounting::{amplification, calibration};
//!
//! // σ of the analytic Gaussian mechanism for Δ = √2 at (ε, δ) = (1, 10⁻⁶): less
//! // noise than the classic formula needs.
//! let sigma = calibration::analytic_sigma(2f64.sqrt(), 1.0, 1e-6)?;
//! assert!(sigma < calibration::classic_sigma(2f64.sqrt(), 1.0, 1e-6)?);
//! // One million reports at ε0 = 8 behind a shuffler: central ε below 0.5 at δ = 10⁻⁶.
//! let central = amplification::shuffled_epsilon(8.0, 1_000_000, 1e-6).unwrap();
//! assert!(central < 0.5);
//! # Ok::<(), ldpcov_accounting::calibration::CalibrationError>(())
//! ```

pub mod amplification;
mod binomial;
pub mod calibration;
mod clones;
pub mod variation_ratio;
