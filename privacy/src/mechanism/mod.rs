//! The seam for a report mechanism: everything that differs between the ways a device
//! can report, behind one type per mechanism and one enum, [`ReportMechanism`], that a
//! [`Collection`](crate::Collection) derives once from its spec and holds.
//!
//! A mechanism is four things:
//! 1. **what a device computes** from its clipped vector `u` (‖u‖ ≤ 1): the exact,
//!    deterministic statistic on the mechanism's grid. The randomness a device adds
//!    (noise, stochastic rounding) lives in the client (`ldpcov-client`'s
//!    `mechanism` module, keyed by this enum) and in `ldpcov-noise`, never here;
//! 2. **how it is encoded** on the wire: the encoding, the wire step and range, the
//!    clamp;
//! 3. **how the aggregator checks and sums it**: [`ReportMechanism::decode`] is the one
//!    length, range and encoding check a report passes on ingest, and returns the
//!    entries the accumulator adds (a central report is expanded there);
//! 4. **the noise model the estimators read**: [`NoiseModel`], the noise of one
//!    report's entries.
//!
//! Today there are three mechanisms:
//! * [`GaussianReport`] (local collections, (ε, δ)-LDP): `(w·u, svec(uuᵀ))` (the mean
//!   block only for mean-and-covariance collections; off-diagonal products carried as
//!   `√2·uᵢuⱼ`, or as `uᵢuⱼ` in collections created before that weighting) on the grid
//!   `2^−k`, plus independent discrete Gaussian noise per entry;
//! * [`RankOneReport`] (local collections, pure ε-LDP): one PrivUnitG draw `y` whose
//!   second moment carries `uuᵀ`, `p` i16 values; the server expands it into `y` and
//!   `triu(yyᵀ)` on the grid `2^−22`;
//! * [`RawVectorReport`] (central collections): `u` on the grid `2^−15`, sent without
//!   noise, expanded by the server into the same statistic on the grid `2^−30`.
//!
//! Every mechanism's summed entries have one layout (the mean block, then the packed
//! upper triangle), and [`Unbiasing`] turns their averages into unbiased estimates of
//! the mean and second moment of `u`.
//!
//! Invariant: a collection's mechanism is derived from its spec by
//! [`Collection::from_spec`](crate::Collection::from_spec) and nothing else, so a device
//! and the aggregator that read the same spec agree on every parameter here. A new
//! mechanism is one new variant with its type (and its device half in the client).

pub mod entries;
pub mod gaussian;
pub mod rank_one;
pub mod raw_vector;

pub use entries::{OUTER_PRODUCT_MAX, OuterProduct, ReportEntries};
pub use gaussian::{GaussianReport, OffDiagonalWeighting};
pub use rank_one::RankOneReport;
pub use raw_vector::RawVectorReport;

use crate::encoding::{WireError, bytes_per_entry};
use ldpcov_proto::v1::{Encoding, LocalMechanism, PrivacyModel};

/// The public weight `w` of the mean block of a
/// [`Moments::MeanAndCovariance`](ldpcov_proto::v1::Moments::MeanAndCovariance) report
/// `(w·u, triu(uuᵀ))`.
///
/// Why 1/2: the covariance error is `(c_ε²Δ(w)²/n)·[p² + 2(p + 1)‖ū‖²/w²]` plus an
/// `n⁻²` term in `τ⁴ ∝ w⁻⁴` (docs/ALGORITHMS.md): a larger `w` raises the noise of
/// every entry through `Δ₀(w) = (2 + w²)/√2`, a smaller one the noise of the mean,
/// which enters the covariance through `μ̂μ̂ᵀ`. The best `w` depends on the unknown
/// mean; over p ∈ {10, 20, 50}, ‖ū‖/R ∈ {0.5, 0.9} and n from 10⁴ to 10⁶ (ε = 1,
/// δ = 10⁻⁶) the constant 1/2 is within 8.1 % of the optimal error, and within 19 %
/// for centred data, where any mean is wasted budget. It costs `Δ₀(1/2) = 1.591`
/// instead of √2 (27 % more variance on the second-moment block). Being a power of
/// two, `w·uᵢ` rounds to the grid exactly like the products `uᵢuⱼ`. It must stay
/// `≤ 1` (the validation bound assumes honest entries of at most 1) and `≤ √2` (the
/// domain of [`joint_base_sensitivity`]'s closed form).
pub const MEAN_WEIGHT: f64 = 0.5;

/// The exact ℓ₂ sensitivity `Δ₀(w) = sup ‖v(u) − v(u')‖` of the joint statistic
/// `v(u) = (w·u, triu(uuᵀ))` over the unit ball (p ≥ 2), before grid rounding:
/// `(2 + w²)/√2` for `w ≤ √2`, `2w` beyond.
///
/// Derivation (docs/PRIVACY.md): packing counts an off-diagonal pair once, so
/// `‖triu(A)‖ ≤ ‖A‖_F` with equality for diagonal `A`; `‖uuᵀ − u'u'ᵀ‖_F² = a⁴ + b⁴ − 2c²`
/// (`a, b` the norms, `c = u·u'`) and the whole square grows with `a` and `b`, so
/// unit vectors are worst and `Δ₀² = max_c 2w²(1 − c) + 2(1 − c²)`, at `c = −w²/2`.
/// Attained by `u = (cos t, −sin t, 0…)`, `u' = (−sin t, cos t, 0…)`,
/// `sin 2t = min(w²/2, 1)`, whose `uuᵀ − u'u'ᵀ` is diagonal. At `w = 0` it is the
/// second moment's √2.
pub fn joint_base_sensitivity(w: f64) -> f64 {
    if w <= std::f64::consts::SQRT_2 {
        (2.0 + w * w) / std::f64::consts::SQRT_2
    } else {
        2.0 * w
    }
}

/// The statistic both mechanisms carry: the mean block's weight `w` (0 without one)
/// and the sensitivity `Δ₀` of `(w·u, triu(uuᵀ))` before any grid rounding.
pub(crate) fn statistic_of(has_mean: bool) -> (f64, f64) {
    if has_mean {
        (MEAN_WEIGHT, joint_base_sensitivity(MEAN_WEIGHT))
    } else {
        (0.0, std::f64::consts::SQRT_2)
    }
}

/// The noise of one report's summed entries (before [`Unbiasing`]), in their own
/// units: what the estimators read about a collection's reports.
///
/// One variant per kind of noise. A Gaussian report adds i.i.d. noise of one sd to
/// every entry. A rank-one report's summed entries `yᵢyⱼ` and `yᵢ` have, to leading
/// order in `‖u‖` (`p ≫ 1`), variance 2 on the diagonal and 1 off it and in the mean
/// block, and the mean block's noise is coupled to the signal: `Cov(y) = I + (κ − c²)ũũᵀ`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseModel {
    /// Every entry of a report carries independent centred noise of sd `sigma`,
    /// independent of the signal.
    IidGaussian {
        /// Per-entry noise sd, unit-ball units.
        sigma: f64,
    },
    /// The rank-one report's entries: `y ~ N(0, I)` off the direction of `ũ` and the
    /// cap's law along it (`ldpcov_privacy::mechanism::rank_one`).
    RankOne {
        /// κ: `E[yyᵀ] = I + κũũᵀ`.
        kappa: f64,
        /// c: `E[y] = c·ũ` (0 for the symmetric cap).
        mean_scale: f64,
        /// `e₄ = E[t⁴] − 3(E[t²])²` of the cap's law of `t = ⟨y, ũ⟩`
        /// ([`CapMoments::excess_fourth_moment`](rank_one::CapMoments)).
        excess_fourth_moment: f64,
        /// `Δ_w²/4`, the variance the wire's dither adds to every entry of `y`.
        dither_variance: f64,
    },
    /// Independent centred Gaussian noise, independent of the signal, of sd `sigma` on
    /// every mean and diagonal entry and `off_diagonal_sigma` on every off-diagonal
    /// one, with no [`Unbiasing`] divisor to undo: a central release in the `svec`
    /// weighting (`off_diagonal_sigma = σ/√2`, docs/PRIVACY.md §6b).
    SplitGaussian {
        /// Noise sd of a mean or diagonal entry, unit-ball units.
        sigma: f64,
        /// Noise sd of an off-diagonal entry, unit-ball units.
        off_diagonal_sigma: f64,
    },
    /// Reports carry no noise (a central collection: its releases add the noise).
    Noiseless,
}

impl NoiseModel {
    /// Noise sd of one diagonal second-moment entry of a report (leading order).
    pub fn diagonal_sd(&self) -> f64 {
        match *self {
            NoiseModel::IidGaussian { sigma } | NoiseModel::SplitGaussian { sigma, .. } => sigma,
            NoiseModel::RankOne { .. } => std::f64::consts::SQRT_2,
            NoiseModel::Noiseless => 0.0,
        }
    }

    /// Noise sd of one off-diagonal second-moment entry of a report (leading order).
    pub fn off_diagonal_sd(&self) -> f64 {
        match *self {
            NoiseModel::IidGaussian { sigma } => sigma,
            NoiseModel::SplitGaussian {
                off_diagonal_sigma, ..
            } => off_diagonal_sigma,
            NoiseModel::RankOne { .. } => 1.0,
            NoiseModel::Noiseless => 0.0,
        }
    }

    /// Noise sd of one mean-block entry of a report, at `u = 0`.
    pub fn mean_sd(&self) -> f64 {
        match *self {
            NoiseModel::IidGaussian { sigma } | NoiseModel::SplitGaussian { sigma, .. } => sigma,
            NoiseModel::RankOne { .. } => 1.0,
            NoiseModel::Noiseless => 0.0,
        }
    }

    /// The noise sd of one report's unbiased estimate of an `entry`: this model's sd
    /// over the [`Unbiasing`] divisor of that kind of entry.
    pub fn unbiased_sd(&self, unbiasing: &Unbiasing, entry: Entry) -> f64 {
        match entry {
            Entry::Diagonal => self.diagonal_sd() / unbiasing.diagonal_divisor,
            Entry::OffDiagonal => self.off_diagonal_sd() / unbiasing.off_diagonal_divisor,
            Entry::Mean => self.mean_sd() / unbiasing.mean_divisor,
        }
    }

    /// `b` in the covariance of a report's mean block, `mean_sd²·I + b·ũũᵀ`: 0 for noise
    /// independent of the signal, `κ − c²` for the rank-one report.
    pub fn mean_signal_coupling(&self) -> f64 {
        match *self {
            NoiseModel::RankOne {
                kappa, mean_scale, ..
            } => kappa - mean_scale * mean_scale,
            _ => 0.0,
        }
    }

    /// The variance across reports of one off-diagonal summed entry `yᵢyⱼ` (unit-ball
    /// units, before the [`Unbiasing`] divisor) of a rank-one report, in a population
    /// whose `u` has second moments `m_ii = E[uᵢ²]`, `m_jj`, `m_ij = E[uᵢuⱼ]`; `None`
    /// for the other models (whose noise does not depend on the signal: their sums of
    /// squares give the variance).
    ///
    /// For one input (`aᵢ = ũᵢ²`) the entry has variance
    /// `(1 + κaᵢ)(1 + κaⱼ) + (κ² + e₄)aᵢaⱼ`
    /// ([`CapMoments::second_moment_entry_variance`](rank_one::CapMoments) times κ²), and
    /// each coordinate's dither `d` (variance `s²`, independent) adds
    /// `s²(2 + κ(aᵢ + aⱼ)) + s⁴`. Averaged over the population, plus the variance of the
    /// conditional mean `κũᵢũⱼ`:
    /// `1 + (κ + s²)(m_ii + m_jj) + (3κ² + e₄)ξ − κ²m_ij² + 2s² + s⁴`, with
    /// `ξ = E[uᵢ²uⱼ²]`, a fourth moment of the data that the sums do not carry: it is
    /// taken as Isserlis' `m_ii·m_jj + 2m_ij²` (exact for centred Gaussian `u`), capped
    /// at `min(m_ii, m_jj)` (as `uⱼ² ≤ 1`). Its coefficient `3 + e₄/κ²` lies in
    /// `[−6.6, 0.8]` for ε ∈ [0.5, 8] (docs/PRIVACY.md §8.2) against a leading term
    /// `1/κ²` of 14 to 0.0125, and `ξ` is of order `1/p²` for data spread over the
    /// coordinates, so the approximation moves the variance by a few per cent at most.
    /// The moments are clamped to what a vector in the unit ball can have (noisy
    /// estimates can fall outside), and the result is floored at 1, the variance at
    /// `u = 0`, so that noisy moments cannot drive it toward 0.
    pub fn off_diagonal_population_variance(&self, m_ii: f64, m_jj: f64, m_ij: f64) -> Option<f64> {
        let (m_ii, m_jj) = (m_ii.clamp(0.0, 1.0), m_jj.clamp(0.0, 1.0));
        let m_ij = m_ij.clamp(-(m_ii * m_jj).sqrt(), (m_ii * m_jj).sqrt());
        let xi = (m_ii * m_jj + 2.0 * m_ij * m_ij).min(m_ii.min(m_jj));
        self.off_diagonal_variance_given_fourth_moment(m_ii, m_jj, m_ij, xi)
            .map(|v| v.max(1.0))
    }

    /// [`off_diagonal_population_variance`](Self::off_diagonal_population_variance)
    /// with the population's fourth moment `ξ = E[uᵢ²uⱼ²]` given, and nothing clamped:
    /// `1 + (κ + s²)(m_ii + m_jj) + (3κ² + e₄)ξ − κ²m_ij² + 2s² + s⁴` (exact for any
    /// population); `None` for the models other than the rank-one report's.
    pub fn off_diagonal_variance_given_fourth_moment(
        &self,
        m_ii: f64,
        m_jj: f64,
        m_ij: f64,
        xi: f64,
    ) -> Option<f64> {
        let NoiseModel::RankOne {
            kappa: k,
            excess_fourth_moment: e4,
            dither_variance: s2,
            ..
        } = *self
        else {
            return None;
        };
        Some(
            1.0 + (k + s2) * (m_ii + m_jj) + (3.0 * k * k + e4) * xi - k * k * m_ij * m_ij
                + 2.0 * s2
                + s2 * s2,
        )
    }
}

/// A kind of entry of the mean and second moment a report estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A diagonal second-moment entry `uᵢ²`.
    Diagonal,
    /// An off-diagonal second-moment entry `uᵢuⱼ`, `i ≠ j`.
    OffDiagonal,
    /// A mean entry `uᵢ`.
    Mean,
}

/// How the averages of a mechanism's summed entries (unit-ball units, `a`) become
/// unbiased estimates of the mean and second moment of `u`: a mean entry
/// `a/mean_divisor`, a diagonal entry `(a − diagonal_offset)/diagonal_divisor`, an
/// off-diagonal entry `a/off_diagonal_divisor`. The noise sd of an unbiased entry is the
/// [`NoiseModel`]'s divided by the same divisor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unbiasing {
    /// `w` (Gaussian), `c` (rank-one), 1 (central or no mean block).
    pub mean_divisor: f64,
    /// 0, or `1 + Δ_w²/4` for the rank-one report.
    pub diagonal_offset: f64,
    /// 1, or κ.
    pub diagonal_divisor: f64,
    /// 1, √2 (`svec` Gaussian) or κ.
    pub off_diagonal_divisor: f64,
}

impl Unbiasing {
    /// Nothing to undo: every divisor 1, no offset (a central collection's sums).
    pub const IDENTITY: Unbiasing = Unbiasing {
        mean_divisor: 1.0,
        diagonal_offset: 0.0,
        diagonal_divisor: 1.0,
        off_diagonal_divisor: 1.0,
    };
}

/// The mechanism of a collection's reports: one variant per mechanism.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportMechanism {
    /// Local collections: the device perturbs `(w·u, triu(uuᵀ))` with Gaussian noise.
    Gaussian(GaussianReport),
    /// Local collections, pure ε: the device sends one PrivUnitG draw `y`; the server
    /// expands it into `y` and `triu(yyᵀ)`.
    RankOne(RankOneReport),
    /// Central collections: the device sends `u` without noise; the server expands it.
    RawVector(RawVectorReport),
}

impl ReportMechanism {
    /// The privacy model this mechanism serves: local for a perturbed report, central
    /// for a raw vector.
    pub fn privacy_model(&self) -> PrivacyModel {
        match self {
            ReportMechanism::Gaussian(_) | ReportMechanism::RankOne(_) => PrivacyModel::Local,
            ReportMechanism::RawVector(_) => PrivacyModel::Central,
        }
    }

    /// The local mechanism this is (unspecified for a central collection's raw vector).
    pub fn local_mechanism(&self) -> LocalMechanism {
        match self {
            ReportMechanism::Gaussian(g) => match g.weighting() {
                OffDiagonalWeighting::Svec => LocalMechanism::Gaussian,
                OffDiagonalWeighting::Raw => LocalMechanism::GaussianTriu,
            },
            ReportMechanism::RankOne(_) => LocalMechanism::RankOne,
            ReportMechanism::RawVector(_) => LocalMechanism::Unspecified,
        }
    }

    /// The wire encoding of a report.
    pub fn encoding(&self) -> Encoding {
        match self {
            ReportMechanism::Gaussian(g) => g.encoding(),
            ReportMechanism::RankOne(r) => r.encoding(),
            ReportMechanism::RawVector(_) => Encoding::RawI32Le,
        }
    }

    /// Entries the aggregator sums per report (after a rank-one or central report's
    /// expansion, norm bins included).
    pub fn entries(&self) -> usize {
        match self {
            ReportMechanism::Gaussian(g) => g.entries(),
            ReportMechanism::RankOne(r) => r.entries(),
            ReportMechanism::RawVector(r) => r.entries(),
        }
    }

    /// The weight `w` of the mean block, `E[mean entry] = w·u` (0 without one): ½ for
    /// the Gaussian report, `c` for the rank-one report.
    pub fn mean_weight(&self) -> f64 {
        match self {
            ReportMechanism::Gaussian(g) => g.mean_weight(),
            ReportMechanism::RankOne(r) if r.has_mean() => r.params().moments.mean_scale,
            ReportMechanism::RankOne(_) => 0.0,
            ReportMechanism::RawVector(r) => r.mean_weight(),
        }
    }

    /// ℓ₂ sensitivity of the statistic before grid rounding (√2, or Δ₀(w)); 0 for the
    /// rank-one report, which is not an additive-noise mechanism.
    pub fn base_sensitivity(&self) -> f64 {
        match self {
            ReportMechanism::Gaussian(g) => g.base_sensitivity(),
            ReportMechanism::RankOne(_) => 0.0,
            ReportMechanism::RawVector(r) => r.base_sensitivity(),
        }
    }

    /// ℓ₂ sensitivity of the summed entries, unit-ball units (with the grid rounding
    /// term for a Gaussian report; none for a raw vector, exact on its grid; 0 for the
    /// rank-one report).
    pub fn sensitivity(&self) -> f64 {
        match self {
            ReportMechanism::Gaussian(g) => g.sensitivity(),
            ReportMechanism::RankOne(_) => 0.0,
            ReportMechanism::RawVector(r) => r.base_sensitivity(),
        }
    }

    /// k: the summed entries are multiples of `2^−k` unit-ball units.
    pub fn grid_bits(&self) -> u32 {
        match self {
            ReportMechanism::Gaussian(g) => g.grid_bits(),
            ReportMechanism::RankOne(_) => rank_one::RANK_ONE_GRID_BITS,
            ReportMechanism::RawVector(_) => raw_vector::CENTRAL_GRID_BITS,
        }
    }

    /// Per-entry Gaussian noise sd of a report, unit-ball units (0 for a raw vector and
    /// for the rank-one report, whose noise is not additive: see
    /// [`noise`](Self::noise)).
    pub fn sigma(&self) -> f64 {
        match self {
            ReportMechanism::Gaussian(g) => g.sigma(),
            _ => 0.0,
        }
    }

    /// Largest |summed entry| of one report, grid units.
    pub fn max_abs_grid_value(&self) -> i64 {
        match self {
            ReportMechanism::Gaussian(g) => g.max_abs_grid_value(),
            ReportMechanism::RankOne(_) => rank_one::RANK_ONE_WIRE_MAX.pow(2),
            ReportMechanism::RawVector(_) => 1 << raw_vector::CENTRAL_GRID_BITS,
        }
    }

    /// Grid units per wire unit (rank-one: `2^11`, the factor of its mean block).
    pub fn wire_step(&self) -> i64 {
        match self {
            ReportMechanism::Gaussian(g) => g.wire_step(),
            ReportMechanism::RankOne(_) => 1 << rank_one::WIRE_STEP_BITS,
            ReportMechanism::RawVector(_) => 1,
        }
    }

    /// Largest |wire value|.
    pub fn wire_max(&self) -> i64 {
        match self {
            ReportMechanism::Gaussian(g) => g.wire_max(),
            ReportMechanism::RankOne(_) => rank_one::RANK_ONE_WIRE_MAX,
            ReportMechanism::RawVector(_) => 1 << raw_vector::CENTRAL_COORDINATE_BITS,
        }
    }

    /// Values a device sends per report: the entries for a Gaussian report, `p` for a
    /// rank-one report or a raw vector.
    pub fn wire_entries(&self) -> usize {
        match self {
            ReportMechanism::Gaussian(g) => g.entries(),
            ReportMechanism::RankOne(r) => r.wire_entries(),
            ReportMechanism::RawVector(r) => r.dim(),
        }
    }

    /// Bytes of one report's payload.
    pub fn payload_bytes(&self) -> usize {
        match self {
            ReportMechanism::Gaussian(g) => {
                g.entries() * bytes_per_entry(g.encoding()).unwrap_or(4)
            }
            ReportMechanism::RankOne(r) => r.payload_bytes(),
            ReportMechanism::RawVector(r) => 4 * r.dim(),
        }
    }

    /// The noise of one report's summed entries.
    pub fn noise(&self) -> NoiseModel {
        match self {
            ReportMechanism::Gaussian(g) => g.noise(),
            ReportMechanism::RankOne(r) => r.noise(),
            ReportMechanism::RawVector(_) => NoiseModel::Noiseless,
        }
    }

    /// One report's total noise variance over the unbiased `p × p` second moment (both
    /// triangles), unit-ball units, for a user with `‖u‖² = s`: `p·σ² + p(p−1)·σ²/f²`
    /// for a Gaussian report (`f` the off-diagonal weighting's factor: the svec report's
    /// off-diagonal entries have variance σ²/2), the rank-one report's
    /// [`CapMoments::second_moment_total_variance`](rank_one::CapMoments::second_moment_total_variance),
    /// 0 for a raw vector. What [`plan`](crate::plan) predicts from.
    pub fn second_moment_report_variance(&self, s: f64) -> f64 {
        match self {
            ReportMechanism::Gaussian(g) => {
                let p = g.dim() as f64;
                let var = g.sigma() * g.sigma();
                let f = g.weighting().factor();
                p * var + p * (p - 1.0) * var / (f * f)
            }
            ReportMechanism::RankOne(r) => {
                r.params().moments.second_moment_total_variance(r.dim(), s)
            }
            ReportMechanism::RawVector(_) => 0.0,
        }
    }

    /// How averaged summed entries become unbiased estimates.
    pub fn unbiasing(&self) -> Unbiasing {
        match self {
            ReportMechanism::Gaussian(g) => g.unbiasing(),
            ReportMechanism::RankOne(r) => r.unbiasing(),
            ReportMechanism::RawVector(r) => Unbiasing {
                mean_divisor: if r.mean_weight() > 0.0 {
                    r.mean_weight()
                } else {
                    1.0
                },
                ..Unbiasing::IDENTITY
            },
        }
    }

    /// Serialises wire values of this mechanism, each clamped to `±wire_max` so that
    /// the output always decodes (a raw vector's coordinates as little-endian i32).
    pub fn encode(&self, wire_values: &[i32]) -> Vec<u8> {
        match self {
            ReportMechanism::Gaussian(g) => g.encode(wire_values),
            ReportMechanism::RankOne(r) => r.encode(wire_values),
            ReportMechanism::RawVector(_) => {
                crate::encoding::encode_clamped(Encoding::RawI32Le, self.wire_max(), wire_values)
            }
        }
    }

    /// The ingest check: decodes a report's payload sent in `encoding` (unspecified
    /// means the collection's) into the entries the aggregator sums, in grid units,
    /// checking the encoding against the mechanism, the length, and each entry's range
    /// (a raw vector: inside the unit ball exactly). Nothing else on ingest needs to
    /// check a report again: the result stands for [`entries`](Self::entries) values
    /// (a rank-one report as its [`OuterProduct`], which the accumulators add a batch at
    /// a time).
    pub fn decode(&self, encoding: i32, payload: &[u8]) -> Result<ReportEntries, WireError> {
        let got = Encoding::try_from(encoding).map_err(|_| WireError::UnknownEncoding(encoding))?;
        let expected = self.encoding();
        // An unspecified encoding on the report means the collection's.
        let got = if got == Encoding::Unspecified {
            expected
        } else {
            got
        };
        let raw = matches!(self, ReportMechanism::RawVector(_));
        if (got == Encoding::RawI32Le) != raw {
            return Err(WireError::ModelMismatch {
                privacy_model: self.privacy_model(),
                got,
            });
        }
        if got != expected {
            return Err(WireError::EncodingMismatch { expected, got });
        }
        match self {
            ReportMechanism::Gaussian(g) => g.decode(payload).map(ReportEntries::Dense),
            ReportMechanism::RankOne(r) => r.decode(payload).map(ReportEntries::OuterProduct),
            ReportMechanism::RawVector(r) => r.decode(payload).map(ReportEntries::Dense),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Collection;
    use ldpcov_proto::v1::{CollectionSpec, Moments};

    fn spec(model: PrivacyModel, moments: Moments) -> CollectionSpec {
        CollectionSpec {
            collection_id: "m".into(),
            dim: 4,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            moments: moments as i32,
            privacy_model: model as i32,
            ..Default::default()
        }
    }

    /// A collection chooses its mechanism from its spec: a stored local spec without a
    /// mechanism the raw-weighted Gaussian report, a new one (`create`) the `svec`
    /// Gaussian report, both with i.i.d. noise at the collection's σ on every summed
    /// entry, the `svec` one's unbiased off-diagonal entries at σ/√2; a rank-one spec the
    /// rank-one report; central collections the raw vector, noiseless. The collection's
    /// derived parameters are the mechanism's.
    #[test]
    fn the_collection_chooses_its_mechanism_and_noise_model() {
        for moments in [Moments::SecondMoment, Moments::MeanAndCovariance] {
            let stored = Collection::from_spec(&spec(PrivacyModel::Local, moments)).unwrap();
            let created = Collection::create(&spec(PrivacyModel::Local, moments)).unwrap();
            for (local, weighting, mechanism) in [
                (
                    &stored,
                    OffDiagonalWeighting::Raw,
                    LocalMechanism::GaussianTriu,
                ),
                (
                    &created,
                    OffDiagonalWeighting::Svec,
                    LocalMechanism::Gaussian,
                ),
            ] {
                let ReportMechanism::Gaussian(g) = local.mechanism() else {
                    panic!("a local collection has the Gaussian report by default");
                };
                assert_eq!(g.weighting(), weighting);
                assert_eq!(local.spec().local_mechanism, mechanism as i32);
                assert_eq!(
                    local.noise_model(),
                    NoiseModel::IidGaussian { sigma: g.sigma() }
                );
                let noise = local.noise_model();
                for sd in [
                    noise.diagonal_sd(),
                    noise.off_diagonal_sd(),
                    noise.mean_sd(),
                ] {
                    assert_eq!(sd, local.sigma());
                }
                assert_eq!(
                    local.unbiased_report_noise_sd(Entry::OffDiagonal),
                    local.sigma() / weighting.factor()
                );
                assert_eq!(
                    local.unbiased_report_noise_sd(Entry::Diagonal),
                    local.sigma()
                );
                assert_eq!(
                    (g.entries(), g.mean_entries(), g.grid_bits()),
                    (local.entries(), local.mean_entries(), local.grid_bits())
                );
            }
            // Same Δ₀ for both weightings; the svec rounding term is 2^−10 larger, which
            // moves σ by more than a device's 1e-12 comparison and less than 1e-8.
            assert_eq!(stored.base_sensitivity(), created.base_sensitivity());
            assert!(created.sigma() > stored.sigma() * (1.0 + 1e-11));
            assert!(created.sigma() <= stored.sigma() * (1.0 + 1e-8));
            let central = Collection::from_spec(&spec(PrivacyModel::Central, moments)).unwrap();
            assert!(matches!(central.mechanism(), ReportMechanism::RawVector(_)));
            assert_eq!(central.noise_model(), NoiseModel::Noiseless);
            assert_eq!(
                (central.sigma(), central.noise_model().off_diagonal_sd()),
                (0.0, 0.0)
            );
            assert_eq!(central.spec().local_mechanism, 0);
            assert_eq!(central.mechanism().privacy_model(), PrivacyModel::Central);
            assert_eq!(stored.mechanism().privacy_model(), PrivacyModel::Local);

            let mut rank_one_spec = spec(PrivacyModel::Local, moments);
            rank_one_spec.local_mechanism = LocalMechanism::RankOne as i32;
            rank_one_spec.delta = 0.0;
            let rank_one = Collection::create(&rank_one_spec).unwrap();
            let ReportMechanism::RankOne(r) = rank_one.mechanism() else {
                panic!("a rank-one spec has the rank-one report");
            };
            let kappa = r.params().moments.kappa;
            assert_eq!(rank_one.encoding(), Encoding::I16Le);
            assert_eq!(rank_one.payload_bytes(), 2 * 4);
            assert_eq!(rank_one.entries(), stored.entries());
            assert_eq!(
                rank_one.rho(),
                ldpcov_accounting::calibration::pure_dp_rho(1.0)
            );
            assert_eq!(
                rank_one.unbiased_report_noise_sd(Entry::OffDiagonal),
                1.0 / kappa
            );
            assert_eq!(
                rank_one.unbiased_report_noise_sd(Entry::Diagonal),
                std::f64::consts::SQRT_2 / kappa
            );
            assert_eq!(
                rank_one.spec().local_mechanism,
                LocalMechanism::RankOne as i32
            );
            let params = rank_one.params();
            let wire = params
                .rank_one
                .as_ref()
                .expect("rank-one parameters are published");
            assert_eq!(wire.kappa, kappa);
            assert_eq!(Collection::from_params(&params).unwrap(), rank_one);
            assert_eq!(
                r.params().cap,
                if moments == Moments::MeanAndCovariance {
                    rank_one::Cap::OneSided
                } else {
                    rank_one::Cap::Symmetric
                }
            );
        }
    }

    /// A device that predates the svec weighting ignores `local_mechanism` and derives
    /// the raw report from the same spec; the parameters of an svec collection then
    /// disagree with its derivation beyond the 1e-12 it tolerates, so it refuses to
    /// report rather than send raw-weighted entries the server would divide by √2. Here
    /// an old device is the stored path's reading of the spec without the field. Checked
    /// at the finest grid and the smallest report (p = 1), where the margin moves σ least.
    #[test]
    fn an_old_client_refuses_an_svec_collection() {
        for (dim, moments) in [
            (1, Moments::SecondMoment),
            (4, Moments::MeanAndCovariance),
            (200, Moments::SecondMoment),
        ] {
            let mut s = spec(PrivacyModel::Local, moments);
            s.dim = dim;
            let svec = Collection::create(&s).unwrap();
            let mut as_old_device_reads_it = svec.params();
            as_old_device_reads_it
                .spec
                .as_mut()
                .expect("a spec")
                .local_mechanism = 0;
            assert!(
                matches!(
                    Collection::from_params(&as_old_device_reads_it),
                    Err(crate::SpecError::ParamsMismatch { .. })
                ),
                "p = {dim}"
            );
            // The new device accepts it.
            assert_eq!(Collection::from_params(&svec.params()).unwrap(), svec);
        }
    }
}
