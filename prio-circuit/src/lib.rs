//! The Prio3 validity circuit of a two-aggregator covariance collection (their first stage).
//!
//! Two non-colluding aggregators each hold an additive secret share of every user's report and
//! check, with Prio3's fully linear proof (FLP, the `prio` crate), that the shares add up to a
//! well-formed report without either of them learning it. This crate is the circuit, its
//! encoding and one report's round in bytes ([`exchange`]: the device's upload, the leader's
//! and the helper's verification); it is not yet wired into a daemon or client.
//!
//! # The report
//!
//! A user's clipped vector `u` (‖u‖ ≤ 1) is put on a fixed-point grid, `x_i = round(u_i·2^k)`,
//! each coordinate an integer in `[-2^(b-1), 2^(b-1))`. The report carries `x`, the upper
//! triangle of `x·xᵀ` (`y_ij = x_i·x_j` for `i ≤ j`, row by row, `p(p+1)/2` entries) and the
//! slack `s = B - ‖x‖²` of the norm bound `B = R²` (an integer on the grid's scale).
//!
//! # The encoded measurement
//!
//! [`CovarianceReport::encode`] lays out, in [`Field`] (Field128) elements:
//!
//! | part | length | content |
//! | --- | --- | --- |
//! | x bits | `p·b` | the bits of `x_i + 2^(b-1)`, least significant first (offset encoding: a negative coordinate is shifted into `[0, 2^b)`) |
//! | y | `p(p+1)/2` | `x_i·x_j` for `i ≤ j`, negatives as `q - |v|` |
//! | slack bits | `m` = bit length of `B` | the bits of `s = B - ‖x‖²` |
//!
//! # The validity circuit
//!
//! With `x_i = Σ_k 2^k·w_ik - 2^(b-1)` (affine in the shares; constants are divided by the
//! number of shares), the circuit checks
//!
//! 1. every bit (x's and the slack's) is 0 or 1: `w·(w - 1) = 0`, so each `x_i` is in range and
//!    `0 ≤ s < 2^m`;
//! 2. `y_ij = x_i·x_j` for every `i ≤ j`;
//! 3. `Σ_i y_ii + s = B`. With check 2, `y_ii = x_i²`, so this is `‖x‖² + s = B`, an equation
//!    between integers far below the field's modulus, hence `‖x‖² ≤ B`. It is linear: it costs
//!    no multiplication.
//!
//! Checks 1 and 2 are `T = p·b + m + p(p+1)/2` products, each `a_t·b_t - c_t = 0`. They are
//! evaluated by one gadget, `ParallelSum<Mul>` of `c = ⌈√T⌉` multiplications, called
//! `M = ⌈T/c⌉` times; call `j` sums `r_j^l·(a_t·b_t - c_t)` over its `c` constraints with a
//! joint random `r_j` per call (as `prio`'s `SumVec` does). The circuit has one output: that
//! sum plus `r_N·(Σ_i y_ii + s - B)`, check 3 folded in with one more joint random element
//! `r_N`. A single output keeps the circuit inside the FLP's analysed case: `prio`'s docs mark
//! the compression of several outputs with query randomness as still needing security
//! analysis.
//!
//! The aggregated output ([`Type::truncate`]) is `y`, followed by `x + 2^(b-1)` when
//! [`CovarianceReport::new`] was asked for `x` (mean-and-covariance collections);
//! [`Type::decode_result`] removes the offset (`n·2^(b-1)` for `n` reports) and maps field
//! elements above `q/2` to negative integers. The sums are exact while every `|Σ y_ij|` stays below
//! `q/2 ≈ 2^127`, i.e. for fewer than `2^(129 - 2b)` reports.
//!
//! # Field, soundness and number of proofs
//!
//! The field is `Field128` (`q = 2^128 - 28·2^64 + 1`), with one proof ([`NUM_PROOFS`]). A
//! dishonest client is caught except with probability at most (union bound)
//!
//! `ε ≤ (d·(P - 1) + c + 1) / (q - P)`, where `d = 2` is `Mul`'s degree, `P` the wire polynomials'
//! length (the power of two above `M`), `d·(P-1)` the degree of the gadget polynomial
//! (the FLP's Schwartz–Zippel bound, BBCG+19 Theorem 4.3, ≈ degree·calls/|F|), `c` the degree in
//! `r_j` of the random linear combination of a call's constraints and 1 for folding the norm
//! check in with `r_N`. The joint randomness is derived from the shares (Fiat–Shamir), so a
//! client that tries `A` sharings offline raises its chance to at most `A·ε` (random-oracle
//! model): `2^64` attempts still leave `2^-55` at `p = 100`.
//!
//! At `p = 100`, `b = 17`, `B = 2^30` (a collection's grid: `x = u·2^15` inside the unit
//! ball; `T = 1 700 + 31 + 5 050 = 6 781`, `c = 83`, `M = 82`, `P = 128`):
//! `ε ≤ (2·127 + 83 + 1)/q = 338/2^128 ≈ 2^-119.6`; at `p = 20` (`T = 581`, `c = 25`, `M = 24`,
//! `P = 32`): `ε ≤ 88/2^128 ≈ 2^-121.5`. [`CovarianceReport::soundness_error_log2`] gives the
//! figure for any parameters. Field64 would give about `2^-55.6` per proof at `p = 100`, and
//! would need two or three proofs (a longer upload and more verification) for the same margin;
//! Field128 also leaves room for exact sums of many reports, hence Field128 with one proof.
//!
//! # Upload size
//!
//! The client sends a public share (the joint randomness parts), the leader's input share (the
//! measurement and proof shares in full, `16·(input_len + proof_len)` bytes, and a blind) and the
//! helper's (seeds only). `cargo test -p ldpcov-prio -- --nocapture sizes` prints them at
//! `p = 20` and `p = 100`; on a collection's grid (`b = 17`, `B = 2^30`) with `x` in the
//! output it measured 11 264 bytes per report at `p = 20` (leader 11 136, helper 64, public 64)
//! and 115 392 at `p = 100` (leader 115 264): the upload grows as `16·p²/2` bytes, the triangle
//! `y` dominating.
//!
//! # Example: one report, shard → verify on two aggregators → aggregate → unshard
//!
//! ```
//! use ldpcov_prio::{CovarianceReport, new_prio3, verify_report};
//! use prio::vdaf::{Aggregatable, Aggregator, Client, Collector};
//!
//! // p = 3 coordinates of b = 4 bits (in [-8, 8)), ‖x‖² ≤ 100, x in the output too.
//! let report = CovarianceReport::new(3, 4, 100, true)?;
//! let vdaf = new_prio3(report)?;
//! let (verify_key, ctx, nonce) = ([7u8; 32], b"ldpcov example", [1u8; 16]);
//!
//! // The client.
//! let x = vec![3, -4, 5];
//! let (public_share, input_shares) = vdaf.shard(ctx, &x, &nonce)?;
//!
//! // The two aggregators: verification, then aggregation of the output shares.
//! let out_shares = verify_report(&vdaf, &verify_key, ctx, &nonce, &public_share, &input_shares)?;
//! let mut agg_shares = Vec::new();
//! for out_share in &out_shares {
//!     let mut agg_share = vdaf.aggregate_init(&());
//!     agg_share.accumulate(out_share)?;
//!     agg_shares.push(agg_share);
//! }
//!
//! // The collector.
//! let sum = vdaf.unshard(&(), agg_shares, 1)?;
//! assert_eq!(sum.y, vec![9, -12, 15, 16, -20, 25]);
//! assert_eq!(sum.x, Some(vec![3, -4, 5]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod exchange;

pub use exchange::{Upload, context};

use prio::codec::CodecError;
use prio::field::{Field128, FieldElement, FieldElementWithInteger};
use prio::flp::gadgets::{Mul, ParallelSum, ParallelSumGadget};
use prio::flp::{Flp, FlpError, Gadget, Type};
use prio::vdaf::prio3::{Prio3, Prio3InputShare, Prio3PublicShare};
use prio::vdaf::xof::XofTurboShake128;
use prio::vdaf::{Aggregatable, Aggregator, Client, Collector, OutputShare, VdafError};

/// The field of the circuit: Field128 (see the crate docs for why).
pub type Field = Field128;

/// The Prio3 instance for covariance reports: two aggregators, TurboSHAKE128 as XOF, 32-byte
/// seeds and verification key.
pub type Prio3Covariance = Prio3<CovarianceReport, XofTurboShake128, 32>;

/// The public share a client sends with its input shares.
pub type PublicShare = Prio3PublicShare<32>;

/// One aggregator's share of a report.
pub type InputShare = Prio3InputShare<Field, 32>;

/// Prio3 algorithm ID of this circuit: in the private range (`0xFFFF0000` and up).
pub const ALGORITHM_ID: u32 = 0xFFFF_0054;

/// Number of FLP proofs per report (one suffices with Field128; see the crate docs).
pub const NUM_PROOFS: u8 = 1;

/// Number of aggregators.
pub const NUM_AGGREGATORS: u8 = 2;

/// Length of a verification key in bytes.
pub const VERIFY_KEY_SIZE: usize = 32;

/// Length of a report's nonce in bytes.
pub const NONCE_SIZE: usize = 16;

/// Largest number of coordinates [`CovarianceReport::new`] accepts.
pub const MAX_DIM: usize = 1 << 12;

/// Largest number of bits per coordinate [`CovarianceReport::new`] accepts.
pub const MAX_BITS: usize = 32;

/// What goes wrong building the circuit, encoding a report or running a round.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The circuit's parameters are out of their domain.
    #[error("invalid parameters: {0}")]
    InvalidParameter(String),
    /// The report's length is not the collection's dimension.
    #[error("the report has {got} coordinates; the collection expects {want}")]
    WrongLength {
        /// The report's length.
        got: usize,
        /// The collection's dimension.
        want: usize,
    },
    /// A coordinate is off the grid's range.
    #[error("coordinate {index} is {value}, outside the grid's range [{min}, {max}]")]
    OutOfRange {
        /// Index of the coordinate.
        index: usize,
        /// Its value.
        value: i64,
        /// Smallest value on the grid.
        min: i64,
        /// Largest value on the grid.
        max: i64,
    },
    /// The report's squared norm exceeds the bound.
    #[error("squared norm {norm} exceeds the bound {bound}")]
    NormTooLarge {
        /// The report's squared norm.
        norm: u128,
        /// The bound `B`.
        bound: u64,
    },
    /// The aggregators rejected the report (invalid, or shares that do not match).
    #[error("report rejected: {0}")]
    Rejected(VdafError),
    /// Prio3 failed outside verification (sharding, aggregation, unsharding).
    #[error("prio3: {0}")]
    Vdaf(#[from] VdafError),
    /// A share failed to encode or decode.
    #[error("codec: {0}")]
    Codec(#[from] CodecError),
}

/// One of the circuit's three checks (a test can drop one to show that its test needs it).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Every bit is 0 or 1.
    Bits,
    /// `y_ij = x_i·x_j`.
    Products,
    /// `Σ y_ii + s = B`.
    Norm,
}

/// The Prio3 type of a covariance report: its encoding, validity circuit and output.
///
/// See the crate docs for the layout and the circuit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CovarianceReport {
    dim: usize,
    bits: usize,
    norm_bound: u64,
    output_x: bool,
    slack_bits: usize,
    chunk_length: usize,
    gadget_calls: usize,
    dropped: Option<Check>,
}

/// The collector's result: the sums over the aggregated reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CovarianceSum {
    /// `Σ y_ij` over the reports, upper triangle row by row (`i ≤ j`).
    pub y: Vec<i128>,
    /// `Σ x_i` over the reports, when the collection outputs `x`.
    pub x: Option<Vec<i128>>,
}

impl CovarianceReport {
    /// The type of a two-aggregator collection's circuit parameters.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn of_circuit(
        circuit: &ldpcov_privacy::two_aggregator::TwoAggregatorCircuit,
    ) -> Result<Self, Error> {
        Self::new(
            circuit.dim,
            circuit.range_bits as usize,
            circuit.norm_bound,
            circuit.output_x,
        )
    }

    /// The type for `dim` coordinates of `bits` bits each (in `[-2^(bits-1), 2^(bits-1))`),
    /// squared-norm bound `norm_bound` (`B = R²` on the grid) and, if `output_x`, `x` aggregated
    /// after `y`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] unless `1 ≤ dim ≤` [`MAX_DIM`], `2 ≤ bits ≤` [`MAX_BITS`] and
    /// `norm_bound ≥ 1`.
    pub fn new(dim: usize, bits: usize, norm_bound: u64, output_x: bool) -> Result<Self, Error> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::InvalidParameter(format!(
                "dim {dim} not in [1, {MAX_DIM}]"
            )));
        }
        if !(2..=MAX_BITS).contains(&bits) {
            return Err(Error::InvalidParameter(format!(
                "bits {bits} not in [2, {MAX_BITS}]"
            )));
        }
        if norm_bound == 0 {
            return Err(Error::InvalidParameter(
                "norm bound must be positive".into(),
            ));
        }
        let slack_bits = (u64::BITS - norm_bound.leading_zeros()) as usize;
        let constraints = dim * bits + slack_bits + dim * (dim + 1) / 2;
        let chunk_length = constraints.isqrt() + usize::from(!is_square(constraints));
        let gadget_calls = constraints.div_ceil(chunk_length);
        Ok(Self {
            dim,
            bits,
            norm_bound,
            output_x,
            slack_bits,
            chunk_length,
            gadget_calls,
            dropped: None,
        })
    }

    /// The same circuit without one check (tests only).
    #[cfg(test)]
    pub(crate) fn without(mut self, check: Check) -> Self {
        self.dropped = Some(check);
        self
    }

    /// Number of coordinates `p`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bits per coordinate `b`.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// The squared-norm bound `B`.
    pub fn norm_bound(&self) -> u64 {
        self.norm_bound
    }

    /// Whether `x` is aggregated after `y`.
    pub fn outputs_x(&self) -> bool {
        self.output_x
    }

    /// Number of entries of the upper triangle, `p(p+1)/2`.
    pub fn triangle_len(&self) -> usize {
        self.dim * (self.dim + 1) / 2
    }

    /// Number of bits of the slack `s` (the bit length of `B`).
    pub fn slack_bits(&self) -> usize {
        self.slack_bits
    }

    /// Number of multiplicative constraints `T` (bit checks and products).
    pub fn num_constraints(&self) -> usize {
        self.dim * self.bits + self.slack_bits + self.triangle_len()
    }

    /// Multiplications per gadget call `c`.
    pub fn chunk_length(&self) -> usize {
        self.chunk_length
    }

    /// Number of gadget calls `M`.
    pub fn gadget_calls(&self) -> usize {
        self.gadget_calls
    }

    /// The gadget's degree (`Mul`'s, 2).
    pub fn gadget_degree(&self) -> usize {
        2
    }

    /// `log2` of the soundness bound `(d·(P-1) + c + 1)/(q - P)` of one proof (crate docs).
    pub fn soundness_error_log2(&self) -> f64 {
        let wire_poly_len = (1 + self.gadget_calls).next_power_of_two();
        let numerator = self.gadget_degree() * (wire_poly_len - 1) + self.chunk_length + 1;
        // q - P is 2^128 to within a relative 2^-59.
        (numerator as f64).log2() - 128.0
    }

    fn offset(&self) -> i64 {
        1 << (self.bits - 1)
    }

    /// Encodes a report `x` (grid coordinates) as the measurement the client shards.
    ///
    /// # Errors
    ///
    /// [`Error::WrongLength`], [`Error::OutOfRange`] for a coordinate outside
    /// `[-2^(b-1), 2^(b-1))`, [`Error::NormTooLarge`] when `‖x‖² > B`.
    pub fn encode(&self, x: &[i64]) -> Result<Vec<Field>, Error> {
        if x.len() != self.dim {
            return Err(Error::WrongLength {
                got: x.len(),
                want: self.dim,
            });
        }
        let offset = self.offset();
        let mut norm: u128 = 0;
        for (index, &value) in x.iter().enumerate() {
            if value < -offset || value >= offset {
                return Err(Error::OutOfRange {
                    index,
                    value,
                    min: -offset,
                    max: offset - 1,
                });
            }
            norm += (i128::from(value) * i128::from(value)).unsigned_abs();
        }
        let bound = u128::from(self.norm_bound);
        if norm > bound {
            return Err(Error::NormTooLarge {
                norm,
                bound: self.norm_bound,
            });
        }
        let mut out = Vec::with_capacity(self.input_len());
        for &value in x {
            // In [0, 2^b) by the check above.
            push_bits(&mut out, (value + offset).unsigned_abs().into(), self.bits);
        }
        for (i, &xi) in x.iter().enumerate() {
            for &xj in &x[i..] {
                out.push(field_from_i128(i128::from(xi) * i128::from(xj)));
            }
        }
        push_bits(&mut out, bound - norm, self.slack_bits);
        Ok(out)
    }
}

fn is_square(n: usize) -> bool {
    let r = n.isqrt();
    r * r == n
}

fn push_bits(out: &mut Vec<Field>, value: u128, bits: usize) {
    for k in 0..bits {
        out.push(Field::from((value >> k) & 1));
    }
}

fn field_from_i128(v: i128) -> Field {
    if v >= 0 {
        Field::from(v.unsigned_abs())
    } else {
        -Field::from(v.unsigned_abs())
    }
}

/// The integer a field element stands for: above `q/2` is negative.
fn field_to_i128(f: Field) -> i128 {
    let v = u128::from(f);
    let q = Field::modulus();
    if v > q / 2 {
        -((q - v) as i128)
    } else {
        v as i128
    }
}

/// `Σ_k 2^k·w_k`.
fn weighted(bits: &[Field]) -> Field {
    let two = Field::from(2u128);
    let mut weight = Field::one();
    let mut sum = Field::zero();
    for &w in bits {
        sum += weight * w;
        weight *= two;
    }
    sum
}

impl Flp for CovarianceReport {
    type Field = Field;

    fn gadget(&self) -> Vec<Box<dyn Gadget<Field>>> {
        vec![Box::new(ParallelSum::<Field, Mul>::new(
            Mul::new(self.gadget_calls),
            self.chunk_length,
        ))]
    }

    fn num_gadgets(&self) -> usize {
        1
    }

    fn valid(
        &self,
        g: &mut Vec<Box<dyn Gadget<Field>>>,
        input: &[Field],
        joint_rand: &[Field],
        num_shares: usize,
    ) -> Result<Vec<Field>, FlpError> {
        self.valid_call_check(input, joint_rand)?;
        let gadget = g
            .first_mut()
            .ok_or_else(|| FlpError::Valid("no gadget".into()))?;
        let num_shares =
            u128::try_from(num_shares).map_err(|_| FlpError::Valid("too many shares".into()))?;
        let share_of_one = Field::from(num_shares).inv();

        let (x_bits, rest) = input.split_at(self.dim * self.bits);
        let (y, slack_bits) = rest.split_at(self.triangle_len());
        let offset_share = Field::from(self.offset().unsigned_abs() as u128) * share_of_one;
        let x: Vec<Field> = x_bits
            .chunks(self.bits)
            .map(|w| weighted(w) - offset_share)
            .collect();

        // The constraints a·b = c, zeroed when their check is dropped.
        let zero = (Field::zero(), Field::zero(), Field::zero());
        let mut constraints = Vec::with_capacity(self.num_constraints());
        let keep_bits = self.dropped != Some(Check::Bits);
        for &w in x_bits.iter().chain(slack_bits) {
            constraints.push(if keep_bits {
                (w, w - share_of_one, Field::zero())
            } else {
                zero
            });
        }
        let keep_products = self.dropped != Some(Check::Products);
        let mut diagonal = Field::zero();
        let mut y_entries = y.iter();
        for i in 0..self.dim {
            for j in i..self.dim {
                let &y_ij = y_entries
                    .next()
                    .ok_or_else(|| FlpError::Valid("short input".into()))?;
                if i == j {
                    diagonal += y_ij;
                }
                constraints.push(if keep_products {
                    (x[i], x[j], y_ij)
                } else {
                    zero
                });
            }
        }

        // Σ_j Σ_l r_j^l·(a·b - c), one gadget call per chunk of constraints.
        let mut products = Field::zero();
        let mut args = vec![Field::zero(); 2 * self.chunk_length];
        for (chunk, &r) in constraints.chunks(self.chunk_length).zip(joint_rand) {
            args.fill(Field::zero());
            let mut r_power = r;
            let mut linear = Field::zero();
            for (&(a, b, c), pair) in chunk.iter().zip(args.chunks_exact_mut(2)) {
                pair[0] = r_power * a;
                pair[1] = b;
                linear += r_power * c;
                r_power *= r;
            }
            products += gadget.eval(&args)? - linear;
        }

        let norm = if self.dropped == Some(Check::Norm) {
            Field::zero()
        } else {
            diagonal + weighted(slack_bits)
                - Field::from(u128::from(self.norm_bound)) * share_of_one
        };
        // The norm check folded into the one output with its own joint random element, the
        // last (`valid_call_check` has checked the length).
        let r_norm = joint_rand[self.gadget_calls];
        Ok(vec![products + r_norm * norm])
    }

    fn input_len(&self) -> usize {
        self.dim * self.bits + self.triangle_len() + self.slack_bits
    }

    fn proof_len(&self) -> usize {
        // Gadget arity + the gadget polynomial's length, d·(P - 1) + 1.
        2 * self.chunk_length + 2 * ((1 + self.gadget_calls).next_power_of_two() - 1) + 1
    }

    fn verifier_len(&self) -> usize {
        // The circuit's output, the wires at the query point, the gadget's value.
        2 + 2 * self.chunk_length
    }

    fn joint_rand_len(&self) -> usize {
        // One element per gadget call, and `r_N` for the norm check.
        self.gadget_calls + 1
    }

    fn eval_output_len(&self) -> usize {
        1
    }

    fn prove_rand_len(&self) -> usize {
        2 * self.chunk_length
    }
}

impl Type for CovarianceReport {
    type Measurement = Vec<i64>;
    type AggregateResult = CovarianceSum;

    fn encode_measurement(&self, measurement: &Vec<i64>) -> Result<Vec<Field>, FlpError> {
        self.encode(measurement)
            .map_err(|e| FlpError::Encode(e.to_string()))
    }

    fn truncate(&self, input: Vec<Field>) -> Result<Vec<Field>, FlpError> {
        self.truncate_call_check(&input)?;
        let x_len = self.dim * self.bits;
        let mut out = Vec::with_capacity(self.output_len());
        out.extend_from_slice(&input[x_len..x_len + self.triangle_len()]);
        if self.output_x {
            // x + 2^(b-1): the offset is removed once, at decoding.
            out.extend(input[..x_len].chunks(self.bits).map(weighted));
        }
        Ok(out)
    }

    fn decode_result(
        &self,
        data: &[Field],
        num_measurements: usize,
    ) -> Result<CovarianceSum, FlpError> {
        if data.len() != self.output_len() {
            return Err(FlpError::Decode(format!(
                "aggregate of length {}; want {}",
                data.len(),
                self.output_len()
            )));
        }
        let (y, x) = data.split_at(self.triangle_len());
        let y = y.iter().map(|&v| field_to_i128(v)).collect();
        let x = if self.output_x {
            let n = i128::try_from(num_measurements)
                .map_err(|_| FlpError::Decode("too many measurements".into()))?;
            let offset_sum = n * i128::from(self.offset());
            Some(x.iter().map(|&v| field_to_i128(v) - offset_sum).collect())
        } else {
            None
        };
        Ok(CovarianceSum { y, x })
    }

    fn output_len(&self) -> usize {
        self.triangle_len() + if self.output_x { self.dim } else { 0 }
    }
}

/// The two-aggregator Prio3 instance of `report` ([`ALGORITHM_ID`], [`NUM_PROOFS`]).
///
/// # Errors
///
/// [`Error::Vdaf`] if `prio` refuses the parameters.
pub fn new_prio3(report: CovarianceReport) -> Result<Prio3Covariance, Error> {
    Ok(Prio3::new(
        NUM_AGGREGATORS,
        NUM_PROOFS,
        ALGORITHM_ID,
        report,
    )?)
}

/// The Prio3 instance of a two-aggregator collection's reports, from its circuit's
/// parameters (`ldpcov_privacy::Collection::two_aggregator`): what the device shards with
/// and both aggregators verify with.
///
/// # Errors
///
/// [`Error::InvalidParameter`] or [`Error::Vdaf`] for parameters the circuit cannot take.
pub fn collection_prio3(
    circuit: &ldpcov_privacy::two_aggregator::TwoAggregatorCircuit,
) -> Result<Prio3Covariance, Error> {
    new_prio3(CovarianceReport::of_circuit(circuit)?)
}

/// Both aggregators' verification of one report, run in one process: each aggregator's
/// `verify_init`, the combined verifier message, each one's `verify_next`. Returns the two output
/// shares (leader's first).
///
/// # Errors
///
/// [`Error::Rejected`] when the report is invalid or its shares do not match.
pub fn verify_report<T>(
    vdaf: &Prio3<T, XofTurboShake128, 32>,
    verify_key: &[u8; VERIFY_KEY_SIZE],
    ctx: &[u8],
    nonce: &[u8; NONCE_SIZE],
    public_share: &PublicShare,
    input_shares: &[InputShare],
) -> Result<Vec<OutputShare<Field>>, Error>
where
    T: Type<Field = Field>,
{
    let mut states = Vec::with_capacity(input_shares.len());
    let mut verifier_shares = Vec::with_capacity(input_shares.len());
    for (agg_id, input_share) in input_shares.iter().enumerate() {
        let (state, share) = vdaf
            .verify_init(
                verify_key,
                ctx,
                agg_id,
                &(),
                nonce,
                public_share,
                input_share,
            )
            .map_err(Error::Rejected)?;
        states.push(state);
        verifier_shares.push(share);
    }
    let message = vdaf
        .verifier_shares_to_message(ctx, &(), verifier_shares)
        .map_err(Error::Rejected)?;
    states
        .into_iter()
        .map(|state| exchange::finish(vdaf, ctx, state, message.clone()))
        .collect()
}

/// A whole collection in one process: each report sharded with the nonce `[i; 16]` bytes of its
/// index `i` (little-endian), verified by both aggregators ([`verify_report`]), the output shares
/// aggregated per aggregator and the two aggregate shares unsharded. A test and example helper:
/// the client's sharding randomness comes from the OS (`prio` 0.18 keeps seeded sharding
/// crate-private).
///
/// # Errors
///
/// [`Error::Vdaf`] for a report `encode` refuses, [`Error::Rejected`] for one the aggregators
/// reject.
pub fn run_round(
    vdaf: &Prio3Covariance,
    verify_key: &[u8; VERIFY_KEY_SIZE],
    ctx: &[u8],
    reports: &[Vec<i64>],
) -> Result<CovarianceSum, Error> {
    let mut leader = vdaf.aggregate_init(&());
    let mut helper = vdaf.aggregate_init(&());
    for (i, x) in reports.iter().enumerate() {
        let mut nonce = [0u8; NONCE_SIZE];
        nonce[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let (public_share, input_shares) = vdaf.shard(ctx, x, &nonce)?;
        let out_shares =
            verify_report(vdaf, verify_key, ctx, &nonce, &public_share, &input_shares)?;
        let [l, h] = out_shares.as_slice() else {
            return Err(Error::Rejected(VdafError::Uncategorized(
                "expected two output shares".into(),
            )));
        };
        leader.accumulate(l)?;
        helper.accumulate(h)?;
    }
    Ok(vdaf.unshard(&(), [leader, helper], reports.len())?)
}

#[cfg(test)]
mod tests;
