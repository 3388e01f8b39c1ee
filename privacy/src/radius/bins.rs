//! Geometric bins of norms: the candidate radii of a radius phase and the interval a
//! device's norm falls in.

/// Why norm bins cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("norm bins: {0}")]
pub struct NormBinsError(String);

/// Geometric bins of users' norms: edges `e_0 < … < e_{m−1}` with a constant ratio,
/// bins `[0, e_0)`, `[e_0, e_1)`, …, `[e_{m−1}, ∞)`. The edges are the candidate radii.
#[derive(Debug, Clone, PartialEq)]
pub struct NormBins {
    edges: Vec<f64>,
}

impl NormBins {
    /// `edges` edges from `smallest` to `largest` (both included), each the previous
    /// times `(largest/smallest)^(1/(edges−1))`. Refused unless
    /// `0 < smallest < largest` (finite) and `2 ≤ edges ≤ 64`.
    pub fn geometric(smallest: f64, largest: f64, edges: usize) -> Result<Self, NormBinsError> {
        if !(smallest.is_finite() && largest.is_finite() && smallest > 0.0 && largest > smallest) {
            return Err(NormBinsError(format!(
                "need 0 < smallest < largest, finite: got {smallest} and {largest}"
            )));
        }
        if !(2..=64).contains(&edges) {
            return Err(NormBinsError(format!("need 2 to 64 edges, got {edges}")));
        }
        let ratio = (largest / smallest).powf(1.0 / (edges - 1) as f64);
        let mut edges: Vec<f64> = (0..edges)
            .map(|k| smallest * ratio.powi(k as i32))
            .collect();
        // The last edge exactly as given (no rounding drift).
        if let Some(last) = edges.last_mut() {
            *last = largest;
        }
        Ok(NormBins { edges })
    }

    /// The edges, ascending: the candidate radii.
    pub fn edges(&self) -> &[f64] {
        &self.edges
    }

    /// Number of bins (one more than the edges).
    pub fn len(&self) -> usize {
        self.edges.len() + 1
    }

    /// Always false: there are at least three bins.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bin of `norm` (a NaN falls in the top bin, as an infinite norm would).
    pub fn bin_of(&self, norm: f64) -> usize {
        self.edges.partition_point(|&e| e <= norm)
    }

    /// The one-hot vector of `norm`'s bin: 1 there, 0 in every other bin.
    pub fn one_hot(&self, norm: f64) -> Vec<f64> {
        let mut v = vec![0.0; self.len()];
        v[self.bin_of(norm)] = 1.0;
        v
    }

    /// The norm that stands for bin `bin` in the planner: its upper edge, and for the
    /// top bin one ratio above the largest edge. Upper edges overstate the clipping
    /// bias, so the rule leans to larger radii (as the planner's bound does).
    pub fn upper_norm(&self, bin: usize) -> f64 {
        match self.edges.get(bin) {
            Some(&e) => e,
            None => {
                let m = self.edges.len();
                self.edges[m - 1] * (self.edges[m - 1] / self.edges[m - 2])
            }
        }
    }
}
