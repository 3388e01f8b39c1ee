//! Adding a batch of [`OuterProduct`] reports (the rank-one mechanism's): the packed
//! triangle of `Σ vvᵀ` as f64 matrix products per fold (a block of columns at a time,
//! each added while in cache), exact because every partial sum is an integer below
//! `2^53`, instead of expanding each report into its `p(p + 1)/2` products.
//!
//! What is added is exactly what adding each report's expansion would add, except for
//! the off-diagonal sums of squares, `Σ (vᵢvⱼ)²`, which are not kept (they stay 0): a
//! second p × p product per batch would double the ingest's cost, and the estimator
//! reads a rank-one collection's off-diagonal variances from the mechanism's closed form
//! instead (`threshold/adaptive.rs`). The mean block's and the diagonal's sums of
//! squares are exact. The result does not depend on how reports are batched, so
//! replicas and a replayed store agree exactly.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use ldpcov_privacy::mechanism::OuterProduct;
use std::cell::RefCell;

use super::Accumulator;

/// Reports per f64 product of the sums: each product `|vᵢvⱼ| ≤ 2^30`, so a sum of
/// 1024 stays below `2^40`, far inside f64's exact integers (the bound allows `2^23`;
/// 1024 keeps the `p × 1024` matrix at 8 MB for p = 1000).
const SUM_ROWS: usize = 1024;

/// Below this dimension the products are summed by plain loops (the same numbers: a
/// matrix product does not pay for itself on a small triangle).
const PRODUCT_MIN_DIM: usize = 48;

impl Accumulator {
    /// Adds a batch of outer-product reports, each with its fold, all of this
    /// accumulator's dimension and mean block (see the [module docs](self) for the
    /// sums that are not the expansion's).
    pub(super) fn add_outer_products(&mut self, reports: &[(usize, &OuterProduct)]) {
        self.add_outer_products_with(reports, PRODUCT_MIN_DIM);
    }

    /// [`add_outer_products`](Self::add_outer_products), with matrix products from
    /// dimension `product_min_dim` on (tests compare both ways).
    fn add_outer_products_with(
        &mut self,
        reports: &[(usize, &OuterProduct)],
        product_min_dim: usize,
    ) {
        let Some(&(_, first)) = reports.first() else {
            return;
        };
        let p = first.dim();
        let base = if first.mean_shift().is_some() { p } else { 0 };
        debug_assert!(reports.iter().all(|(_, r)| r.entries() == self.entries()));
        // The mean block and the diagonal's sums of squares, exact, report by report.
        for &(fold, report) in reports {
            let v = report.values();
            if let Some(shift) = report.mean_shift() {
                for (i, &x) in v.iter().enumerate() {
                    let m = i64::from(x << shift);
                    self.fold_sums[fold][i] += m;
                    self.sum_squares[i] += (m * m) as u128;
                }
            }
            let mut k = base;
            for (i, &x) in v.iter().enumerate() {
                let d = i64::from(x) * i64::from(x);
                // d ≤ 2^30: d² ≤ 2^60.
                self.sum_squares[k] += (d * d) as u128;
                k += p - i;
            }
            self.fold_counts[fold] += 1;
            self.count += 1;
        }
        if p < product_min_dim {
            self.add_triangles_by_loops(reports, base);
        } else {
            self.add_triangles_by_products(reports, p, base);
        }
    }

    /// The triangle's fold sums, report by report.
    fn add_triangles_by_loops(&mut self, reports: &[(usize, &OuterProduct)], base: usize) {
        for &(fold, report) in reports {
            let v = report.values();
            let sums = &mut self.fold_sums[fold][base..];
            let mut k = 0;
            for i in 0..v.len() {
                for j in i..v.len() {
                    sums[k] += i64::from(v[i]) * i64::from(v[j]);
                    k += 1;
                }
            }
        }
    }

    /// The same as [`add_triangles_by_loops`](Self::add_triangles_by_loops), as lower
    /// triangles of f64 products `VVᵀ` (V: p × reports), in this thread's reused
    /// buffers ([`SCRATCH`]).
    fn add_triangles_by_products(
        &mut self,
        reports: &[(usize, &OuterProduct)],
        p: usize,
        base: usize,
    ) {
        SCRATCH.with_borrow_mut(|scratch| {
            scratch.fit(p);
            for fold in 0..self.fold_sums.len() {
                let in_fold: Vec<&OuterProduct> = reports
                    .iter()
                    .filter(|(f, _)| *f == fold)
                    .map(|(_, r)| *r)
                    .collect();
                for chunk in in_fold.chunks(SUM_ROWS) {
                    scratch.load(chunk.iter().map(|r| r.values()));
                    scratch.add_gram(chunk.len(), &mut self.fold_sums[fold][base..]);
                }
            }
        });
    }
}

/// Columns of the triangle per block product in [`Scratch::add_gram`]: a p × 128 block
/// (1 MB at p = 1 000) is still in cache when it is added into the sums, and the tall
/// operand is packed only p/128 times per product (64 and 256 measured slower).
const GRAM_BLOCK: usize = 128;

thread_local! {
    /// This thread's buffers for [`Accumulator::add_triangles_by_products`]: allocating
    /// (and faulting in) a fresh 8 MB factor per batch at p = 1 000 costs about as much
    /// as the walks over the sums.
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch {
            block: Mat::new(),
            factor: Mat::new(),
        })
    };
}

/// A p × [`GRAM_BLOCK`] block of a product and a p × [`SUM_ROWS`] factor whose first
/// columns hold a chunk's vectors.
struct Scratch {
    block: Mat<f64>,
    factor: Mat<f64>,
}

impl Scratch {
    /// Sizes the buffers for dimension `p` (kept when they already are).
    fn fit(&mut self, p: usize) {
        if self.factor.nrows() != p {
            self.block = Mat::zeros(p, GRAM_BLOCK);
            self.factor = Mat::zeros(p, SUM_ROWS);
        }
    }

    /// Puts each report's values in the factor's columns, in order.
    fn load<'a>(&mut self, reports: impl Iterator<Item = &'a [i32]>) {
        for (r, values) in reports.enumerate() {
            let column = self.factor.col_as_slice_mut(r);
            for (c, &x) in column.iter_mut().zip(values) {
                *c = f64::from(x);
            }
        }
    }

    /// Adds the lower triangle (diagonal included) of `V·Vᵀ`, V the factor's first
    /// `rows` columns, into `packed`, the upper triangle packed by rows: column `i` of
    /// the product from row `i` down is row `i` of `packed`. The product is made
    /// [`GRAM_BLOCK`] columns at a time, each block (rows `c₀..p`) added while it is in
    /// cache; every entry is the same dot product as in one whole product, an integer
    /// below `2^53` in magnitude (so the cast to i64 is exact), and the blocking
    /// changes no value.
    fn add_gram(&mut self, rows: usize, packed: &mut [i64]) {
        let p = self.factor.nrows();
        let v = self.factor.as_ref().subcols(0, rows);
        let mut start = 0;
        for c0 in (0..p).step_by(GRAM_BLOCK) {
            let (width, height) = (GRAM_BLOCK.min(p - c0), p - c0);
            matmul(
                self.block.as_mut().submatrix_mut(0, 0, height, width),
                Accum::Replace,
                v.subrows(c0, height),
                v.subrows(c0, width).transpose(),
                1.0,
                Par::Seq,
            );
            for k in 0..width {
                let column = &self.block.col_as_slice(k)[k..height];
                let row = &mut packed[start..start + column.len()];
                for (s, &x) in row.iter_mut().zip(column) {
                    *s += x as i64;
                }
                start += column.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FOLDS;
    use rand::{Rng, SeedableRng};

    /// Reports of dimension `p` with values across the whole range, the extremes
    /// `±2^15` included, spread over the folds.
    fn reports(
        p: usize,
        n: usize,
        mean_shift: Option<u32>,
        seed: u64,
    ) -> Vec<(usize, OuterProduct)> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|k| {
                let values = (0..p)
                    .map(|i| match (k + 3 * i) % 11 {
                        0 => 1 << 15,
                        1 => -(1 << 15),
                        2 => 0,
                        _ => rng.random_range(-40_000..40_000).clamp(-(1 << 15), 1 << 15),
                    })
                    .collect();
                let report = OuterProduct::new(values, mean_shift).unwrap();
                (rng.random_range(0..FOLDS), report)
            })
            .collect()
    }

    fn refs(reports: &[(usize, OuterProduct)]) -> Vec<(usize, &OuterProduct)> {
        reports.iter().map(|(f, r)| (*f, r)).collect()
    }

    /// The matrix products add exactly what the loops add, on batches that cross the
    /// chunk size of the products (1 100 reports: more than SUM_ROWS in some runs of
    /// folds), and splitting a batch in two changes nothing.
    #[test]
    fn products_equal_loops_and_batching_does_not_matter() {
        // p = 2·128 + 22: three column blocks of the product, the last one partial.
        for (p, shift) in [(5, Some(11)), (9, None), (2 * GRAM_BLOCK + 22, Some(11))] {
            let all = reports(p, 1_100, shift, 7);
            let entries = all[0].1.entries();
            let mut by_loops = Accumulator::new(entries, FOLDS);
            by_loops.add_outer_products_with(&refs(&all), usize::MAX);
            let mut by_products = Accumulator::new(entries, FOLDS);
            by_products.add_outer_products_with(&refs(&all), 0);
            assert_eq!(by_products, by_loops, "p = {p}");
            let mut split = Accumulator::new(entries, FOLDS);
            split.add_outer_products_with(&refs(&all[..313]), 0);
            split.add_outer_products_with(&refs(&all[313..]), 0);
            assert_eq!(split, by_loops, "p = {p}, split");
        }
    }

    /// Against the expanded reports added one by one: counts, every fold sum and the
    /// sums of squares of the mean block and the diagonal equal; the off-diagonal sums
    /// of squares are not kept (0), which is what the estimator expects of rank-one
    /// accumulators.
    #[test]
    fn the_sums_are_the_expansions_and_only_the_off_diagonal_squares_are_left_out() {
        let p = 60; // above PRODUCT_MIN_DIM: the products path
        for shift in [Some(11), None] {
            let all = reports(p, 300, shift, 11);
            let entries = all[0].1.entries();
            let mut outer = Accumulator::new(entries, FOLDS);
            outer.add_outer_products(&refs(&all));
            let mut dense = Accumulator::new(entries, FOLDS);
            for (fold, r) in &all {
                dense.add(*fold, &r.expand());
            }
            assert_eq!(outer.count, dense.count);
            assert_eq!(outer.fold_counts, dense.fold_counts);
            assert_eq!(outer.fold_sums, dense.fold_sums);
            let base = if shift.is_some() { p } else { 0 };
            assert_eq!(outer.sum_squares[..base], dense.sum_squares[..base]);
            let mut k = base;
            for i in 0..p {
                for j in i..p {
                    let got = outer.sum_squares[k];
                    if i == j {
                        assert_eq!(got, dense.sum_squares[k], "diagonal {i}");
                    } else {
                        assert_eq!(got, 0, "({i}, {j})");
                    }
                    k += 1;
                }
            }
        }
    }
}
