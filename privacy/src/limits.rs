//! The limits of a collection: the largest dimension, ε and names a spec may ask for,
//! the ranges that keep derived quantities finite, and how a number is echoed back in
//! an error message. A leaf: it imports nothing of the crate but the triangle length.

use crate::layout::triangle_len;

/// Largest dimension a collection may have. At p = 4096 a report holds 8.4 M entries
/// (33.6 MB as i32), which is as large as we let one gRPC message be.
pub const MAX_DIM: usize = 4096;
/// Largest ε a collection may ask for. Beyond it a report protects next to nothing,
/// and `e^ε` in the analytic calibration loses precision.
pub const MAX_EPSILON: f64 = 100.0;
/// Longest collection id.
pub const MAX_ID_LEN: usize = 128;
/// Longest variable name, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 64;
/// Most dyadic norm bins a central collection may keep (`CollectionSpec.norm_bins`).
pub const MAX_NORM_BINS: u32 = 15;
/// Most entries a collection's sums may have: those of a local joint report at
/// [`MAX_DIM`] (`p + p(p+1)/2`, about 8.4 M). Norm bins multiply a central
/// collection's entries by `1 + 2·norm_bins`, so they are refused beyond it (the sums
/// and each expanded report would not fit what a server is sized for).
pub const MAX_ENTRIES: usize = MAX_DIM + triangle_len(MAX_DIM);

/// Smallest clip radius a new collection may have. Estimates are in data units,
/// scaled by `R²` from the grid averages: at `R ≥ 1e-100`, `R² ≥ 1e-200` stays a
/// normal f64 (above 2.2e-308) with a factor 1e108 of margin, so no estimate entry
/// underflows to a subnormal or to zero. `R = 5e-324` would square to 0.
pub const MIN_CLIP_RADIUS: f64 = 1e-100;
/// Largest clip radius a new collection may have. `R² ≤ 1e200` leaves a factor 1e108
/// below f64's 1.8e308 for `R²·σ` (the noise sd of one report's entry in data units),
/// the clamp of `WIRE_CLAMP_SIGMAS` of it and the sums of squares an estimator forms.
/// `R = 1e308` squares to `inf`, and every estimate would fail.
pub const MAX_CLIP_RADIUS: f64 = 1e100;
/// Largest magnitude of a new collection's centre: the same margin as
/// [`MAX_CLIP_RADIUS`], since the centre is added back to estimates of the same scale.
pub const MAX_CENTRE_MAGNITUDE: f64 = 1e100;
/// Smallest δ a new collection may ask for. The analytic calibration solves for a
/// Gaussian tail of about δ; at 1e-100 that tail is about 21 σ and computed to full
/// precision, while below about 1e-300 it is subnormal and the solve loses its
/// meaning. 1e-100 is far below any δ a deployment needs (1/n² for every person
/// alive is about 1e-20).
pub const MIN_DELTA: f64 = 1e-100;

/// A number for an error message: as written when it is short (0, or a magnitude in
/// [1e-4, 1e15)), in scientific notation otherwise, so a 300-digit value is never
/// echoed back digit by digit.
#[derive(Debug, Clone, Copy)]
pub struct ShortNumber(pub f64);

impl std::fmt::Display for ShortNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        let a = v.abs();
        if !v.is_finite() || v == 0.0 || (1e-4..1e15).contains(&a) {
            write!(f, "{}", if v == 0.0 { 0.0 } else { v })
        } else {
            write!(f, "{v:e}")
        }
    }
}

/// The largest ε the rank-one mechanism accepts. The sampler's cost hardly grows with
/// ε (about 6 rounds of `p + 1` draws at ε = 1, 10 at ε = 8, 13 at ε = 16); beyond 16
/// a report protects next to nothing, the lattice slack `η/q` grows like `e^{γ²/2}`
/// and the i16 wire clamp's argument (`e^ε·2Φ̄(15.99)`, `docs/PRIVACY.md` §8.5) loses
/// its margin.
pub const MAX_RANK_ONE_EPSILON: f64 = 16.0;
