//! [`TriangularDither`]: unbiased re-quantisation of an integer to a coarser power-of-two
//! step with a non-subtractive triangular (TPDF) dither, drawn exactly from random bits.
//!
//! For a value `x` in coarse units (a dyadic with `b` fractional bits) the output is
//! `round(x + U₁ + U₂)`, `U₁, U₂` independent uniform on `(−½, ½)`. With
//! `x + ½ = I + f`, `I` an integer and `f ∈ [0, 1)`, the sum `D = U₁ + U₂` is triangular
//! on `(−1, 1)` and the output is `I + ⌊f + D⌋` with
//! `P(+1) = P(D ≥ 1 − f) = f²/2`, `P(−1) = P(D < −f) = (1 − f)²/2`, `P(0)` the rest.
//! With `f = j/2^b` these are the rationals `j²/2^{2b+1}` and `(2^b − j)²/2^{2b+1}`, so
//! one uniform integer `R < 2^{2b+1}` decides exactly: `+1` if `R < j²`, `−1` if
//! `R ≥ 2^{2b+1} − (2^b − j)²`, else `0`. No continuous uniform is ever rounded.
//!
//! The error `e = output − x = ⌊f + D⌋ − f + ½` then has, for **every** `x`,
//! `E[e] = f²/2 − (1 − f)²/2 − f + ½ = 0` and, with `g = ½ − f`,
//! `E[e²] = g² + 2g(P(+1) − P(−1)) + P(+1) + P(−1) = g² − 2g² + f² − f + ½ = ¼`:
//! the quantisation adds exactly `Δ²/4` (`Δ` the coarse step) to each second moment
//! and nothing to the first (Wannamaker, Lipshitz & Vanderkooy 2000). Errors of
//! different coordinates are independent given the values, so cross moments are
//! unchanged.

use super::random_bits::RandomBits;
use rand::RngCore;
use thiserror::Error;

/// A step ratio the dither cannot handle.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the dither needs 1 to 31 fractional bits (one take of 2b + 1 ≤ 63 random bits), got {0}")]
pub struct DitherBitsError(pub u32);

/// Triangular-dither quantisation from a fine grid to one `2^b` times coarser (see the
/// derivation in `docs/PRIVACY.md`, §8.5): unbiased, with error second moment exactly ¼ coarse
/// unit², for every input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriangularDither {
    frac_bits: u32,
}

impl TriangularDither {
    /// A coarse unit is `2^frac_bits` fine units, `1 ≤ frac_bits ≤ 31`.
    pub fn new(frac_bits: u32) -> Result<Self, DitherBitsError> {
        if (1..=31).contains(&frac_bits) {
            Ok(TriangularDither { frac_bits })
        } else {
            Err(DitherBitsError(frac_bits))
        }
    }

    /// Random bits one quantisation consumes: `2b + 1`.
    pub fn random_bits(&self) -> u32 {
        2 * self.frac_bits + 1
    }

    /// `value` (fine units) quantised to coarse units, with `uniform` uniform on
    /// `[0, 2^{2b+1})` as the dither (exposed so that tests can enumerate it).
    ///
    /// # Panics
    /// If `uniform ≥ 2^{2b+1}` (a caller bug).
    pub fn quantise_with(&self, value: i64, uniform: u64) -> i64 {
        let b = self.frac_bits;
        assert!(uniform < 1 << (2 * b + 1), "dither {uniform} out of range");
        let shifted = i128::from(value) + (1i128 << (b - 1)); // (x + ½)·2^b
        let whole = shifted >> b; // I = ⌊x + ½⌋
        let j = (shifted - (whole << b)) as u64; // f·2^b ∈ [0, 2^b)
        let up = j * j;
        let down_from = (1u64 << (2 * b + 1)) - ((1u64 << b) - j) * ((1u64 << b) - j);
        // Constant work whatever the branch: both comparisons are always made.
        let step = i128::from(uniform < up) - i128::from(uniform >= down_from);
        // |value| < 2^63, so the result fits an i64.
        (whole + step) as i64
    }

    /// `value` quantised with `2b + 1` fresh bits of `bits`.
    pub fn quantise<R: RngCore>(&self, value: i64, bits: &mut RandomBits<R>) -> i64 {
        self.quantise_with(value, bits.take(self.random_bits()))
    }

    /// [`quantise`](Self::quantise), clamped to the i16 range (`±32 767`). The clamp
    /// acts on the already-private report (post-processing); for the rank-one report
    /// at `Δ_w = 2^−11` it bites with probability below `10⁻⁵²` per coordinate (see
    /// `docs/PRIVACY.md`).
    pub fn quantise_i16<R: RngCore>(&self, value: i64, bits: &mut RandomBits<R>) -> i16 {
        let q = self.quantise(value, bits);
        q.clamp(-i64::from(i16::MAX), i64::from(i16::MAX)) as i16
    }
}
