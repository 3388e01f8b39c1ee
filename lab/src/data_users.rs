//! A data file's rows as the users of a load-generator run (`loadgen --data FILE`):
//! each row is one user's vector `x`, perturbed on "its device" like any other.
//!
//! What this module decides, so that the load generator and the tests share it:
//!
//! * **The users.** By default each row is one user, once, in file order
//!   ([`DataUsers::user_rows`] with `None`). With a number of users `N`, `N` rows are
//!   drawn uniformly *with replacement* from a seeded generator (the same seed gives the
//!   same users).
//! * **The dimension** is the file's number of columns; an explicit dimension that
//!   differs is refused ([`DataUsers::check_dim`]).
//! * **Standardizing** (optional) maps every column to mean 0 and population standard
//!   deviation 1 with the file's *own* moments before anything is sent. That is a
//!   preprocessing the operator does on data they hold; in a real deployment each
//!   device must scale with *public* constants, since scales computed from everyone's
//!   data are not private.
//! * **The clip radius** R is never computed from the data silently: raw data need an
//!   explicit R (the error names the file's largest row norm for reference and says
//!   that using it is not private); standardized data default to `R = √(2p)` (each
//!   standardized row has mean squared norm p, so R² is twice that).
//! * **The centre.** A collection may carry a public centre `c` (none: `c = 0`); its
//!   devices report `clip((x − c)/R)`. Everything that depends on where the rows sit
//!   — the clipped fraction, the second moment, whether the data are centred — is
//!   taken about the centre given, never silently about 0.
//! * **The truth.** The file's population covariance (its correlation matrix when
//!   standardized), and its second moment about the centre `(1/n) Σ (x − c)(x − c)ᵀ`,
//!   which is what a second-moment collection estimates (the average of
//!   `R²·triu(uuᵀ)`). The two differ by `(μ̂ − c)(μ̂ − c)ᵀ`; the data count as
//!   *centred* when `max_j |μ̂_j − c_j| / sd_j ≤` [`CENTRED_TOLERANCE`].
//!
//! Invariants: the rows held are exactly the values sent (standardized when asked);
//! every moment is computed from them, with the population `1/n`.

use std::path::Path;

use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};
use thiserror::Error;

use crate::data::{DataError, DataSet};

/// Largest `|μ̂_j| / sd_j` over the columns for which the data count as centred.
///
/// The second moment's entry `(j, j)` is `sd_j² + μ̂_j²`: at this tolerance the mean
/// adds at most `0.1² = 1 %` of a variance to the diagonal (and, off the diagonal,
/// `|μ̂_j μ̂_k| ≤ 1 %` of `sd_j sd_k`), below the noise of most runs.
pub const CENTRED_TOLERANCE: f64 = 0.1;

/// Why a data file cannot supply the users of a run. Every message is one line.
#[derive(Debug, Error)]
pub enum DataUsersError {
    /// The file could not be read or parsed, or standardizing failed (the reader's
    /// error, prefixed by the file unless it already names it).
    #[error("{}", file_message(path, reason))]
    File {
        /// The data file.
        path: String,
        /// The reader's error (already in this error's one-line message, so not
        /// chained as its source).
        reason: DataError,
    },
    /// An explicit dimension differs from the file's number of columns.
    #[error("--dim {given} conflicts with the data file, which has {columns} columns")]
    DimMismatch {
        /// The dimension asked for.
        given: u32,
        /// The file's number of columns.
        columns: usize,
    },
    /// Raw (not standardized) data without an explicit clip radius.
    #[error(
        "raw data need an explicit clip radius (--clip-radius R, chosen from public knowledge of the data's scale) or --standardize; for reference the file's largest row norm is {largest_row_norm:.6} (a value computed from the data: using it is not private)"
    )]
    RadiusRequired {
        /// The largest Euclidean norm of a row.
        largest_row_norm: f64,
    },
    /// The number of columns does not fit a collection's `u32` dimension.
    #[error("the data file has {columns} columns, more than a collection can hold")]
    TooManyColumns {
        /// The file's number of columns.
        columns: usize,
    },
}

/// `path: message`, or the message alone when it already names the file.
fn file_message(path: &str, source: &DataError) -> String {
    match source {
        DataError::Io { .. } => source.to_string(),
        _ => format!("{path}: {source}"),
    }
}

/// The rows of a data file as users, with the matrices a run is compared against.
#[derive(Debug, Clone)]
pub struct DataUsers {
    /// The values sent (standardized when asked).
    data: DataSet,
    /// Whether the columns were standardized.
    standardized: bool,
    /// Population covariance of the values sent.
    covariance: DMatrix<f64>,
    /// Column means μ̂ of the values sent.
    mean: DVector<f64>,
}

impl DataUsers {
    /// Reads `path` with [`DataSet::read`] and, with `standardize`, standardizes it.
    /// Every bad file is refused here, before any report can be built.
    pub fn from_file(path: &Path, standardize: bool) -> Result<Self, DataUsersError> {
        let file_err = |reason| DataUsersError::File {
            path: path.display().to_string(),
            reason,
        };
        let data = DataSet::read(path).map_err(file_err)?;
        Self::new(data, standardize).map_err(file_err)
    }

    /// The users of `data`, standardized when `standardize` (which refuses a constant
    /// column).
    pub fn new(data: DataSet, standardize: bool) -> Result<Self, DataError> {
        let data = if standardize {
            data.standardized()?
        } else {
            data
        };
        Ok(DataUsers {
            covariance: data.covariance(),
            mean: data.mean(),
            data,
            standardized: standardize,
        })
    }

    /// The dimension p (the file's number of columns).
    pub fn dim(&self) -> usize {
        self.data.cols
    }

    /// The number of rows n.
    pub fn rows(&self) -> usize {
        self.data.rows
    }

    /// The column names of a CSV header, if the file had one.
    pub fn names(&self) -> Option<&[String]> {
        self.data.names.as_deref()
    }

    /// Whether the columns were standardized.
    pub fn standardized(&self) -> bool {
        self.standardized
    }

    /// Row `i` as sent (standardized when asked). Panics if `i ≥ rows`.
    pub fn row(&self, i: usize) -> &[f64] {
        self.data.row(i)
    }

    /// A row drawn uniformly at random (the load test's users).
    pub fn random_row<R: Rng + ?Sized>(&self, rng: &mut R) -> &[f64] {
        self.data.row(rng.random_range(0..self.data.rows))
    }

    /// The target a run is scored against: the file's population covariance, or its
    /// correlation matrix when standardized (the covariance of the standardized rows).
    pub fn truth(&self) -> &DMatrix<f64> {
        &self.covariance
    }

    /// `(1/n) Σ (x − c)(x − c)ᵀ` of the rows sent, about `centre` (empty: about 0):
    /// what a second-moment collection with that centre estimates (up to clipping and
    /// noise). Equals [`truth`](Self::truth) plus `(μ̂ − c)(μ̂ − c)ᵀ`.
    pub fn second_moment(&self, centre: &[f64]) -> DMatrix<f64> {
        let offset = self.mean_offset(centre);
        &self.covariance + &offset * offset.transpose()
    }

    /// `max_j |μ̂_j − c_j| / sd_j` of the rows sent, about `centre` (empty: about 0;
    /// ∞ for a constant column off the centre).
    pub fn max_abs_mean_over_sd(&self, centre: &[f64]) -> f64 {
        let offset = self.mean_offset(centre);
        (0..self.dim())
            .map(|j| {
                let sd = self.covariance[(j, j)].max(0.0).sqrt();
                match (offset[j] == 0.0, sd > 0.0) {
                    (true, _) => 0.0,
                    (false, true) => offset[j].abs() / sd,
                    // A constant column off the centre: all offset, no spread.
                    (false, false) => f64::INFINITY,
                }
            })
            .fold(0.0, f64::max)
    }

    /// Whether the rows sent are centred about `centre` (empty: about 0):
    /// `max_j |μ̂_j − c_j| / sd_j ≤` [`CENTRED_TOLERANCE`].
    pub fn is_centred(&self, centre: &[f64]) -> bool {
        self.max_abs_mean_over_sd(centre) <= CENTRED_TOLERANCE
    }

    /// `μ̂ − c` (`μ̂` for an empty centre).
    fn mean_offset(&self, centre: &[f64]) -> DVector<f64> {
        DVector::from_fn(self.dim(), |j, _| {
            self.mean[j] - centre.get(j).copied().unwrap_or(0.0)
        })
    }

    /// The collection's dimension: the file's, refusing an explicit `given` that
    /// differs.
    pub fn check_dim(&self, given: Option<u32>) -> Result<u32, DataUsersError> {
        let columns = self.dim();
        let dim = u32::try_from(columns).map_err(|_| DataUsersError::TooManyColumns { columns })?;
        match given {
            Some(g) if g != dim => Err(DataUsersError::DimMismatch { given: g, columns }),
            _ => Ok(dim),
        }
    }

    /// The clip radius: `given` when there is one; else `√(2p)` for standardized data;
    /// else an error (a radius computed from raw data would not be private).
    pub fn clip_radius(&self, given: Option<f64>) -> Result<f64, DataUsersError> {
        match (given, self.standardized) {
            (Some(r), _) => Ok(r),
            (None, true) => Ok((2.0 * self.dim() as f64).sqrt()),
            (None, false) => Err(DataUsersError::RadiusRequired {
                largest_row_norm: self.data.iter_rows().map(norm).fold(0.0, f64::max),
            }),
        }
    }

    /// The fraction of rows farther than `radius` from `centre` (empty: from 0): those
    /// the devices of a collection with that centre clip, which biases the estimate
    /// toward zero.
    pub fn clipped_fraction(&self, radius: f64, centre: &[f64]) -> f64 {
        let distance = |row: &[f64]| {
            let c = |j: usize| centre.get(j).copied().unwrap_or(0.0);
            row.iter()
                .enumerate()
                .map(|(j, v)| (v - c(j)).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let clipped = self
            .data
            .iter_rows()
            .filter(|r| distance(r) > radius)
            .count();
        clipped as f64 / self.data.rows as f64
    }

    /// The row of each user, in order: every row once (`users = None`), or `users` rows
    /// drawn uniformly with replacement by a generator seeded with `seed`. Holds one
    /// index per user.
    pub fn user_rows(&self, users: Option<u64>, seed: u64) -> Vec<usize> {
        match users {
            None => (0..self.data.rows).collect(),
            Some(n) => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                (0..n)
                    .map(|_| rng.random_range(0..self.data.rows))
                    .collect()
            }
        }
    }
}

/// Euclidean norm.
fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(text: &str, standardize: bool) -> DataUsers {
        DataUsers::new(DataSet::from_csv_str(text).unwrap(), standardize).unwrap()
    }

    #[test]
    fn second_moment_is_covariance_plus_mean_outer_product() {
        // x = (1, 3), (3, 5): μ = (2, 4), Cov = [[1, 1], [1, 1]],
        // (1/n) Σ xxᵀ = [[(1 + 9)/2, (3 + 15)/2], [·, (9 + 25)/2]] = [[5, 9], [9, 17]].
        let u = users("a,b\n1,3\n3,5\n", false);
        assert_eq!(u.second_moment(&[])[(0, 0)], 5.0);
        assert_eq!(u.second_moment(&[])[(0, 1)], 9.0);
        assert_eq!(u.second_moment(&[])[(1, 1)], 17.0);
        assert_eq!(u.truth()[(0, 1)], 1.0);
        // max(|2|/1, |4|/1) = 4: far from centred.
        assert_eq!(u.max_abs_mean_over_sd(&[]), 4.0);
        assert!(!u.is_centred(&[]));
        assert_eq!(u.names().map(<[String]>::len), Some(2));
    }

    #[test]
    fn standardized_users_are_centred_and_scored_against_the_correlation() {
        let text = "1,3,0\n2,5,1\n3,7,0\n6,13,1\n";
        let raw = DataSet::from_csv_str(text).unwrap();
        let u = users(text, true);
        let cor = raw.correlation().unwrap();
        for j in 0..3 {
            for k in 0..3 {
                assert!((u.truth()[(j, k)] - cor[(j, k)]).abs() < 1e-14);
                // Mean 0: the second moment is the correlation too.
                assert!((u.second_moment(&[])[(j, k)] - cor[(j, k)]).abs() < 1e-14);
            }
        }
        assert!(u.is_centred(&[]), "{}", u.max_abs_mean_over_sd(&[]));
        assert!(u.standardized());
        // Default radius √(2p) = √6.
        assert_eq!(u.clip_radius(None).unwrap(), 6f64.sqrt());
        assert_eq!(u.clip_radius(Some(2.5)).unwrap(), 2.5);
    }

    #[test]
    fn raw_data_need_a_radius_and_the_file_dimension() {
        let u = users("3,4\n0,1\n", false);
        // Largest row norm √(9 + 16) = 5.
        let e = u.clip_radius(None).unwrap_err().to_string();
        assert!(e.contains("--clip-radius") && e.contains("5.000000"), "{e}");
        assert!(e.contains("not private"), "{e}");
        assert_eq!(u.clip_radius(Some(7.0)).unwrap(), 7.0);
        assert_eq!(u.check_dim(None).unwrap(), 2);
        assert_eq!(u.check_dim(Some(2)).unwrap(), 2);
        assert_eq!(
            u.check_dim(Some(3)).unwrap_err().to_string(),
            "--dim 3 conflicts with the data file, which has 2 columns"
        );
        // Rows of norm 5 and 1: half exceed R = 4.
        assert_eq!(u.clipped_fraction(4.0, &[]), 0.5);
        assert_eq!(u.clipped_fraction(5.0, &[]), 0.0);
    }

    #[test]
    fn clipping_centring_and_the_second_moment_are_about_the_public_centre() {
        // Rows (100 ± 1, 200 ± 1): μ̂ = (100, 200), Cov = I, far from 0.
        let u = users("a,b\n99,199\n101,201\n99,201\n101,199\n", false);
        let centre = [100.0, 200.0];
        // About 0 every row is ≈ 224 long: a radius of 3 clips them all.
        assert_eq!(u.clipped_fraction(3.0, &[]), 1.0);
        assert!(!u.is_centred(&[]));
        // About the centre every row is √2 away: none is clipped.
        assert_eq!(u.clipped_fraction(3.0, &centre), 0.0);
        assert_eq!(u.clipped_fraction(1.0, &centre), 1.0);
        assert_eq!(u.max_abs_mean_over_sd(&centre), 0.0);
        assert!(u.is_centred(&centre));
        assert_eq!(u.second_moment(&centre), *u.truth());
        // A centre off by (1, 0): (μ̂ − c)(μ̂ − c)ᵀ adds 1 to entry (0, 0).
        let off = u.second_moment(&[99.0, 200.0]);
        assert_eq!((off[(0, 0)], off[(0, 1)], off[(1, 1)]), (2.0, 0.0, 1.0));
        assert_eq!(u.max_abs_mean_over_sd(&[99.0, 200.0]), 1.0);
    }

    #[test]
    fn users_are_every_row_once_or_drawn_with_replacement() {
        let u = users("1\n2\n3\n4\n", false);
        assert_eq!(u.user_rows(None, 9), vec![0, 1, 2, 3]);
        let n = 10_000u64;
        let a = u.user_rows(Some(n), 9);
        assert_eq!(a.len(), n as usize);
        assert_eq!(a, u.user_rows(Some(n), 9), "same seed, same users");
        assert_ne!(a, u.user_rows(Some(n), 10), "another seed, other users");
        // Each row's count is Binomial(n, 1/4): mean 2500, sd √(n·¼·¾) = 43.3; a count
        // outside ±5 sd = ±217 has probability below 1e-6 (per row, 4 rows).
        for row in 0..4 {
            let count = a.iter().filter(|&&r| r == row).count() as f64;
            assert!((count - 2500.0).abs() < 217.0, "row {row}: {count}");
        }
    }
}
