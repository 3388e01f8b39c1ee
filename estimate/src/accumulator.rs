//! Exact integer accumulators of one collection: per-fold sums (the total is their
//! sum) and per-entry sums of squares. Everything an estimator may use is here; the
//! accumulators never hold an individual report.

/// Number of cross-validation folds every collection keeps. Reports go to fold
/// [`ReportId::fold`](ldpcov_proto::ReportId::fold)`(FOLDS)`; the estimators hold one fold out at a time.
pub const FOLDS: usize = 5;

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
    /// Packed per-entry sums of squared grid values.
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
        let sums = &mut self.fold_sums[fold];
        for ((s, q), &v) in sums
            .iter_mut()
            .zip(self.sum_squares.iter_mut())
            .zip(entries)
        {
            let v = i64::from(v);
            *s += v;
            *q += (v * v) as u128;
        }
        self.fold_counts[fold] += 1;
        self.count += 1;
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
