//! Exact integer accumulators of one collection: per-fold sums (the total is their
//! sum) and per-entry sums of squares. Everything an estimator may use is here; the
//! accumulators never hold an individual report.

mod outer;

use ldpcov_privacy::mechanism::{OuterProduct, ReportEntries};

/// Number of cross-validation folds every collection keeps. Reports go to fold
/// [`ReportId::fold`](ldpcov_privacy::ReportId::fold)`(FOLDS)`; the estimators hold one fold out at a time.
pub const FOLDS: usize = 5;

/// Entries per block of [`Accumulator::add_many`]: the touched sums of one block
/// (at most 5 folds × 8 bytes + 16 bytes per entry, 56 KiB) stay in a core's L2 cache.
const BLOCK: usize = 1024;

/// Exact integer accumulators of one collection: per-fold sums (the total is their
/// sum) and per-entry sums of squares.
///
/// Each entry is below 2^31 in magnitude, so the i64 sums cannot overflow before 2^32
/// reports, and each square is below 2^62, so the u128 sums of squares cannot overflow
/// before 2^66.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accumulator {
    /// Reports counted.
    pub count: u64,
    /// Reports counted per fold.
    pub fold_counts: Vec<u64>,
    /// Packed per-entry sums in grid units, one vector per fold.
    pub fold_sums: Vec<Vec<i64>>,
    /// Packed per-entry sums of squared grid values (for a rank-one collection's
    /// off-diagonal products, of their squares from rounded `vᵢ²`: see
    /// [`add_reports`](Self::add_reports)).
    pub sum_squares: Vec<u128>,
}

impl Accumulator {
    /// Empty accumulators for `entries` packed entries and `folds` folds.
    pub fn new(entries: usize, folds: usize) -> Self {
        let folds = folds.max(1);
        Accumulator {
            count: 0,
            fold_counts: vec![0; folds],
            fold_sums: vec![vec![0; entries]; folds],
            sum_squares: vec![0; entries],
        }
    }

    /// Number of packed entries.
    pub fn entries(&self) -> usize {
        self.sum_squares.len()
    }

    /// Adds one report to `fold` (exactly; order does not matter).
    pub fn add(&mut self, fold: usize, entries: &[i32]) {
        debug_assert_eq!(entries.len(), self.entries());
        Self::add_block(&mut self.fold_sums[fold], &mut self.sum_squares, entries);
        self.fold_counts[fold] += 1;
        self.count += 1;
    }

    /// Adds many reports, each with its fold: exactly what [`add`](Self::add) on each
    /// would do, faster for large reports. The entries are walked in blocks of 1024
    /// that keep the touched sums in cache across the whole batch, so the
    /// accumulators (24 bytes per entry: five i64 folds are touched, one u128) cross
    /// the memory bus once per batch instead of once per report — at p = 1000 that
    /// traffic, 24 MB per report, was what bounded ingest.
    pub fn add_many(&mut self, reports: &[(usize, &[i32])]) {
        let n = self.entries();
        for &(fold, entries) in reports {
            debug_assert_eq!(entries.len(), n);
            self.fold_counts[fold] += 1;
            self.count += 1;
        }
        let mut lo = 0;
        while lo < n {
            let hi = (lo + BLOCK).min(n);
            for &(fold, entries) in reports {
                Self::add_block(
                    &mut self.fold_sums[fold][lo..hi],
                    &mut self.sum_squares[lo..hi],
                    &entries[lo..hi],
                );
            }
            lo = hi;
        }
    }

    /// Adds many decoded reports, each with its fold: dense ones as
    /// [`add_many`](Self::add_many) does, outer products (rank-one reports) a batch at
    /// a time as matrix products (`accumulator/outer.rs`; their off-diagonal sums of
    /// squares are summed from rounded squares, as it says).
    pub fn add_reports(&mut self, reports: &[(usize, &ReportEntries)]) {
        let mut dense: Vec<(usize, &[i32])> = Vec::new();
        let mut outer: Vec<(usize, &OuterProduct)> = Vec::new();
        for &(fold, entries) in reports {
            match entries {
                ReportEntries::Dense(values) => dense.push((fold, values)),
                ReportEntries::OuterProduct(product) => outer.push((fold, product)),
            }
        }
        self.add_many(&dense);
        self.add_outer_products(&outer);
    }

    /// `sums += entries`, `squares += entries²`, entry by entry. Each |v| ≤ 2^31, so
    /// v² ≤ 2^62 is exact in i64 before it is widened.
    fn add_block(sums: &mut [i64], squares: &mut [u128], entries: &[i32]) {
        for (s, &v) in sums.iter_mut().zip(entries) {
            *s += i64::from(v);
        }
        for (q, &v) in squares.iter_mut().zip(entries) {
            let v = i64::from(v);
            *q += (v * v) as u128;
        }
    }

    /// The per-entry sums over all folds.
    pub fn sums(&self) -> Vec<i64> {
        let mut total = vec![0i64; self.entries()];
        for fold in &self.fold_sums {
            for (t, &v) in total.iter_mut().zip(fold) {
                *t += v;
            }
        }
        total
    }

    /// Adds another accumulator with the same shape (shards merge exactly).
    pub fn merge(&mut self, other: &Accumulator) {
        for (mine, theirs) in self.fold_sums.iter_mut().zip(&other.fold_sums) {
            for (s, &v) in mine.iter_mut().zip(theirs) {
                *s += v;
            }
        }
        for (q, &v) in self.sum_squares.iter_mut().zip(&other.sum_squares) {
            *q += v;
        }
        for (c, &v) in self.fold_counts.iter_mut().zip(&other.fold_counts) {
            *c += v;
        }
        self.count += other.count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharded_sums_equal_one_shard() {
        let reports: Vec<Vec<i32>> = (0..50)
            .map(|k| vec![k * 1_000_003 % 9973 - 5000; 4])
            .collect();
        let mut one = Accumulator::new(4, 3);
        let (mut a, mut b) = (Accumulator::new(4, 3), Accumulator::new(4, 3));
        for (k, r) in reports.iter().enumerate() {
            one.add(k % 3, r);
            if k % 2 == 0 {
                a.add(k % 3, r)
            } else {
                b.add(k % 3, r)
            }
        }
        a.merge(&b);
        assert_eq!(a, one);
        let direct: i64 = reports.iter().map(|r| i64::from(r[0])).sum();
        assert_eq!(one.sums()[0], direct);
    }

    #[test]
    fn add_many_equals_adding_one_by_one() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        // Sizes around the block boundary, values including the extremes.
        for n in [1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17] {
            let reports: Vec<(usize, Vec<i32>)> = (0..9)
                .map(|k| {
                    let entries = (0..n)
                        .map(|i| match (k + i) % 7 {
                            0 => i32::MAX,
                            1 => -i32::MAX,
                            _ => rng.random_range(-1_000_000..1_000_000),
                        })
                        .collect();
                    (rng.random_range(0..FOLDS), entries)
                })
                .collect();
            let mut one = Accumulator::new(n, FOLDS);
            for (fold, r) in &reports {
                one.add(*fold, r);
            }
            let mut many = Accumulator::new(n, FOLDS);
            let refs: Vec<(usize, &[i32])> =
                reports.iter().map(|(f, r)| (*f, r.as_slice())).collect();
            many.add_many(&refs);
            assert_eq!(many, one, "n = {n}");
        }
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let mut acc = Accumulator::new(1, 1);
        for _ in 0..1000 {
            acc.add(0, &[i32::MAX]);
            acc.add(0, &[-i32::MAX]);
        }
        assert_eq!(acc.sums(), vec![0]);
        assert_eq!(acc.sum_squares[0], 2000 * (i32::MAX as u128).pow(2));
    }
}
