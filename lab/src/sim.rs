//! Simulating many users in-process, through the same perturbation and accumulation
//! code as the real system. **Simulation only**: every noise stream here is seeded
//! ([`DiscreteGaussianSampler::from_seed_for_simulation`]), so nothing produced here is private.
//!
//! Two paths produce an [`Accumulator`] for a [`Collection`]:
//!
//! * [`Path::PerUser`] — each user's `x` goes through [`Perturber::perturb`] with a
//!   seeded [`DiscreteGaussianSampler`] and into [`Accumulator::add`] under the fold of a random
//!   [`ReportId`]: exactly what the client and the aggregator do, minus the network
//!   (rank-one reports are encoded, decoded and added in batches, as the daemon adds
//!   them). Cost O(n·d) noise draws.
//! * [`Path::SumOfNoise`] — the users' *signal* (clip, `triu(uuᵀ)` rounded to the grid
//!   by the same [`Perturber`] with zero noise) is summed per fold in [`SignalSums`],
//!   and the noise of each fold is drawn at once: the sum of `n_k` independent
//!   `N(0, σ_g²)` draws is one `N(0, n_k·σ_g²)` draw ([`add_noise`]). This is exact for
//!   Gaussian noise; the real sampler rounds *each* draw to an integer, which adds a
//!   variance of about `n_k/12` grid units² to a fold sum (relative `1/(12σ_g²)`, below
//!   10⁻¹² for every collection since `σ_g = σ·2^k ≥ 2^8`), and we round the sum once
//!   instead. The sums of squares are drawn exactly from their joint law with the fold
//!   sums (see [`add_noise`]). Cost O(n·d) for the signal (shared across every ε that
//!   uses the same grid) plus O(K·d) per noisy accumulator.
//!
//! For grids of large n and p, where even the signal's O(n·d) is too slow,
//! [`SignalSums::population`] stands in for the users' signal: every user contributes
//! the population second moment M (rounded to the grid), so only the privacy noise,
//! drawn per fold by [`add_noise`], varies. The users' own sampling error, O(1/√n),
//! is far below the noise σ_n and is left out; so is the data's part of the per-entry
//! variance that the entry-adaptive rule reads (the noise's `σ_g²` dominates it).
//!
//! The test `fast_path_matches_per_user_path` checks that the two paths agree in
//! distribution at small n.

use ldpcov_client::{DiscreteGaussianSampler, NoiseSampler, Perturber};
use ldpcov_estimate::{Accumulator, FOLDS};
use ldpcov_privacy::mechanism::ReportEntries;
use ldpcov_privacy::{Collection, ReportId, ReportMechanism, SpecError};
use ldpcov_proto::v1::{CollectionSpec, Moments};
use rand::{Rng, SeedableRng};
use rand_distr::{ChiSquared, Distribution, StandardNormal};

use crate::models::Sampler;

/// Which simulation path produced an accumulator (printed with every result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Every user through [`Perturber::perturb`] and [`Accumulator::add`].
    PerUser,
    /// Per-user signal, one noise draw per fold and entry ([`add_noise`]).
    SumOfNoise,
}

impl Path {
    /// `"per-user"` or `"sum-of-noise"`.
    pub fn name(&self) -> &'static str {
        match self {
            Path::PerUser => "per-user",
            Path::SumOfNoise => "sum-of-noise",
        }
    }
}

/// A second-moment collection for simulations: id `"sim"`, `min_reports = 1`, i32
/// encoding, no centre.
pub fn collection(
    dim: usize,
    epsilon: f64,
    delta: f64,
    clip_radius: f64,
) -> Result<Collection, SpecError> {
    collection_with(
        dim,
        epsilon,
        delta,
        clip_radius,
        Moments::SecondMoment,
        Vec::new(),
    )
}

/// A simulation collection like [`collection`] with the given `moments` and public
/// `centre` (empty for none).
pub fn collection_with(
    dim: usize,
    epsilon: f64,
    delta: f64,
    clip_radius: f64,
    moments: Moments,
    centre: Vec<f64>,
) -> Result<Collection, SpecError> {
    Collection::from_spec(&CollectionSpec {
        collection_id: "sim".into(),
        dim: dim as u32,
        epsilon,
        delta,
        clip_radius,
        min_reports: 1,
        moments: moments as i32,
        centre,
        ..Default::default()
    })
}

/// Whether two collections' devices send the same signal for the same user (same
/// mechanism — the svec and raw weightings carry the off-diagonal products
/// differently —, grid, clip radius, centre and report layout), so one [`SignalSums`]
/// serves both.
fn same_signal(a: &Collection, b: &Collection) -> bool {
    a.mechanism().local_mechanism() == b.mechanism().local_mechanism()
        && a.grid_bits() == b.grid_bits()
        && a.clip_radius() == b.clip_radius()
        && a.centre() == b.centre()
        && a.moments() == b.moments()
}

/// A noise sampler that adds nothing: [`Perturber::perturb`] with it returns the
/// grid-rounded signal `round(2^k·uᵢuⱼ)` exactly as a device computes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZeroNoise;

impl NoiseSampler for ZeroNoise {
    fn sample_grid(&mut self, _sigma_grid: f64) -> i64 {
        0
    }
}

/// A random report id from the simulation's generator (the real client draws it from
/// the OS); its [`ReportId::fold`] is the user's fold, as in the aggregator.
pub fn simulated_report_id<R: Rng + ?Sized>(rng: &mut R) -> ReportId {
    ReportId(rng.random())
}

/// The users' grid-rounded signal summed per fold, for one grid `2^k` (and one clip
/// radius, centre and report layout).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalSums {
    /// A collection whose devices send this signal (see [`signal_for`]).
    pub collection: Collection,
    /// Grid bits k of the rounding.
    pub grid_bits: u32,
    /// Users per fold.
    pub fold_counts: Vec<u64>,
    /// Per fold, per packed entry: `Σ s` with `s = round(2^k·uᵢuⱼ)`.
    pub fold_sums: Vec<Vec<i64>>,
    /// Per fold, per packed entry: `Σ s²`.
    pub fold_squares: Vec<Vec<u128>>,
}

impl SignalSums {
    fn new(collection: &Collection) -> Self {
        let (grid_bits, entries) = (collection.grid_bits(), collection.entries());
        SignalSums {
            collection: collection.clone(),
            grid_bits,
            fold_counts: vec![0; FOLDS],
            fold_sums: vec![vec![0; entries]; FOLDS],
            fold_squares: vec![vec![0; entries]; FOLDS],
        }
    }

    fn add(&mut self, fold: usize, signal: &[i32]) {
        self.fold_counts[fold] += 1;
        for ((s, q), &v) in self.fold_sums[fold]
            .iter_mut()
            .zip(self.fold_squares[fold].iter_mut())
            .zip(signal)
        {
            let v = i64::from(v);
            *s += v;
            *q += (v * v) as u128;
        }
    }

    /// The signal of `n` users who all report the population second moment `m`
    /// (`p × p`, data units, i.e. `E[clip(x)clip(x)ᵀ]`) on `collection`'s grid:
    /// per user `s = round(2^k·m_ij/R²)`, folds of `⌊n/K⌋` users (the remainder spread
    /// over the first folds). Feed it to [`add_noise`] for the noisy accumulator.
    ///
    /// Second-moment collections only ([`collection`]): a joint report would also need
    /// the population mean. Panics on a collection with a mean block. Off-diagonal
    /// entries carry the collection's weighting (`√2·m_ij` for an svec collection).
    pub fn population(collection: &Collection, m: &nalgebra::DMatrix<f64>, n: u64) -> Self {
        assert_eq!(
            collection.mean_entries(),
            0,
            "SignalSums::population needs a second-moment collection"
        );
        let mut out = SignalSums::new(collection);
        let r2 = collection.clip_radius() * collection.clip_radius();
        // Off-diagonal products as the collection's reports carry them (√2·uᵢuⱼ in an
        // svec collection).
        let off_diagonal = match collection.mechanism() {
            ReportMechanism::Gaussian(g) => g.weighting().factor(),
            _ => 1.0,
        };
        let signal: Vec<i64> = ldpcov_privacy::layout::triangle_pairs(collection.dim())
            .map(|(i, j)| {
                let weight = if i == j { 1.0 } else { off_diagonal };
                (collection.grid_scale() * weight * m[(i, j)] / r2).round() as i64
            })
            .collect();
        let folds = FOLDS as u64;
        for k in 0..FOLDS {
            let nk = n / folds + u64::from((k as u64) < n % folds);
            out.fold_counts[k] = nk;
            for (e, &v) in signal.iter().enumerate() {
                out.fold_sums[k][e] = nk as i64 * v;
                out.fold_squares[k][e] = u128::from(nk) * (v * v) as u128;
            }
        }
        out
    }

    /// The noise-free accumulator (what the aggregator would hold with σ = 0): the
    /// input of the non-private estimators on the same (clipped, rounded) data.
    pub fn noise_free(&self) -> Accumulator {
        let entries = self.fold_sums[0].len();
        let mut acc = Accumulator::new(entries, FOLDS);
        acc.fold_sums = self.fold_sums.clone();
        acc.fold_counts = self.fold_counts.clone();
        acc.count = self.fold_counts.iter().sum();
        for fold in &self.fold_squares {
            for (q, &v) in acc.sum_squares.iter_mut().zip(fold) {
                *q += v;
            }
        }
        acc
    }
}

/// Draws `n` users from `sampler` (seeded by `seed`) and sums their grid-rounded signal
/// per fold, once for every distinct signal among `collections` (grid, clip radius,
/// centre and report layout; all must share p).
///
/// The users, their report ids and therefore their folds are the same sequence as in
/// [`per_user`] with the same `seed`.
pub fn simulate_signal(
    collections: &[&Collection],
    sampler: &Sampler,
    n: u64,
    seed: u64,
) -> Vec<SignalSums> {
    let mut grids: Vec<&Collection> = Vec::new();
    for c in collections {
        if !grids.iter().any(|g| same_signal(g, c)) {
            grids.push(c);
        }
    }
    let perturbers: Vec<Perturber> = grids.iter().map(|c| Perturber::new((*c).clone())).collect();
    let mut out: Vec<SignalSums> = grids.iter().map(|c| SignalSums::new(c)).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..n {
        let x = sampler.sample(&mut rng);
        let fold = simulated_report_id(&mut rng).fold(FOLDS);
        for (p, s) in perturbers.iter().zip(out.iter_mut()) {
            let signal = p
                .perturb(&x, &mut ZeroNoise)
                .expect("finite x of dimension p");
            s.add(fold, &signal);
        }
    }
    out
}

/// The per-user path: `n` users from `sampler` (seeded by `seed`), each perturbed by
/// [`Perturber::perturb`] with one seeded [`DiscreteGaussianSampler`] stream (`noise_seed`) and
/// added to the fold of its report id.
pub fn per_user(
    collection: &Collection,
    sampler: &Sampler,
    n: u64,
    seed: u64,
    noise_seed: u64,
) -> Accumulator {
    let perturber = Perturber::new(collection.clone());
    let mechanism = collection.mechanism();
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(noise_seed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut acc = Accumulator::new(collection.entries(), FOLDS);
    // Rank-one reports go the daemon's way: encoded, decoded into their outer-product
    // form and added a batch at a time (`Accumulator::add_reports`: the same sums,
    // O(p²) per report through one matrix product per batch instead of an expansion).
    let mut batch: Vec<(usize, ReportEntries)> = Vec::new();
    let flush = |acc: &mut Accumulator, batch: &mut Vec<(usize, ReportEntries)>| {
        let refs: Vec<(usize, &ReportEntries)> = batch.iter().map(|(f, e)| (*f, e)).collect();
        acc.add_reports(&refs);
        batch.clear();
    };
    for _ in 0..n {
        let x = sampler.sample(&mut rng);
        let id = simulated_report_id(&mut rng);
        let fold = id.fold(FOLDS);
        if let ReportMechanism::RankOne(_) = mechanism {
            let report = perturber
                .report(&x, &mut noise, id)
                .expect("finite x of dimension p");
            let entries = mechanism
                .decode(report.encoding, &report.payload)
                .expect("the device's own report decodes");
            batch.push((fold, entries));
            if batch.len() == PER_USER_BATCH {
                flush(&mut acc, &mut batch);
            }
        } else {
            let report = perturber
                .perturb(&x, &mut noise)
                .expect("finite x of dimension p");
            acc.add(fold, &report);
        }
    }
    flush(&mut acc, &mut batch);
    acc
}

/// Reports per [`Accumulator::add_reports`] call on the per-user path (the daemon's
/// group commits are of this order).
const PER_USER_BATCH: usize = 256;

/// The sum-of-noise fast path: the accumulator the aggregator would hold after the
/// users of `signal` reported to `collection` (whose devices must send that signal:
/// same grid, radius, centre and layout). Works for both report layouts: every entry,
/// of the mean block or of the triangle, gets independent noise of the same σ.
///
/// For fold k with `n_k` users, entry signal values `s ∈ Z^{n_k}` (known only through
/// `S1 = Σs`, `S2 = Σs²`) and i.i.d. noise `z ~ N(0, σ_g² I)`, the accumulators need
/// `Z = Σz` (fold sum `S1 + Z`) and `Σ(s + z)² = S2 + 2W + ‖z‖²` with `W = Σ sᵢzᵢ`.
/// Project z onto span{1, s}: with Gram matrix `G = [[n_k, S1], [S1, S2]]`,
/// `(Z, W) ~ N(0, σ_g²G)` and `‖z‖² = (Z, W)·G⁻¹·(Z, W)ᵀ + σ_g²·χ²_{n_k − rank G}`, the
/// χ² independent of (Z, W). We draw Z, then W | Z, then the χ² — the exact joint law
/// of (fold sum, sum of squares) for Gaussian noise, so the entry-adaptive rule and
/// the cross-validation see the same statistics as on the per-user path. Each fold sum
/// is rounded once (the per-user path rounds each draw; see the module docs).
pub fn add_noise(collection: &Collection, signal: &SignalSums, noise_seed: u64) -> Accumulator {
    assert!(
        same_signal(collection, &signal.collection),
        "signal of another mechanism, grid, radius, centre or layout"
    );
    // The fast path adds Gaussian noise to a noiseless signal: a rank-one report has
    // no such split (its noise is the draw itself); simulate it with [`per_user`].
    assert!(
        matches!(collection.mechanism(), ReportMechanism::Gaussian(_)),
        "the sum-of-noise path is for Gaussian reports; use per_user for {:?}",
        collection.mechanism().local_mechanism()
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(noise_seed);
    let sg = collection.sigma_grid();
    let var = sg * sg;
    let entries = collection.entries();
    let mut acc = Accumulator::new(entries, FOLDS);
    let mut squares = vec![0f64; entries];
    for k in 0..FOLDS {
        let nk = signal.fold_counts[k];
        acc.fold_counts[k] = nk;
        if nk == 0 {
            continue;
        }
        let nkf = nk as f64;
        for (e, square) in squares.iter_mut().enumerate() {
            let s1 = signal.fold_sums[k][e] as f64;
            let s2 = signal.fold_squares[k][e] as f64;
            let g: f64 = rng.sample(StandardNormal);
            let z = sg * nkf.sqrt() * g;
            // det G = n_k·S2 − S1² ≥ 0 (Cauchy–Schwarz); relative tolerance for the
            // rank-1 case s ∝ 1 (e.g. every signal value equal).
            let det = nkf * s2 - s1 * s1;
            let (w, projected, rank) = if det > 1e-12 * nkf * s2.max(1.0) {
                let h: f64 = rng.sample(StandardNormal);
                let w = z * s1 / nkf + sg * (det / nkf).sqrt() * h;
                let projected = (s2 * z * z - 2.0 * s1 * z * w + nkf * w * w) / det;
                (w, projected, 2)
            } else {
                (z * s1 / nkf, z * z / nkf, 1)
            };
            let rest = if nk > rank {
                let chi: f64 = ChiSquared::new((nk - rank) as f64)
                    .expect("positive degrees of freedom")
                    .sample(&mut rng);
                var * chi
            } else {
                0.0
            };
            acc.fold_sums[k][e] = signal.fold_sums[k][e] + z.round() as i64;
            *square += s2 + 2.0 * w + projected + rest;
        }
    }
    acc.count = acc.fold_counts.iter().sum();
    for (q, s) in acc.sum_squares.iter_mut().zip(squares) {
        *q = s.max(0.0).round() as u128;
    }
    acc
}

/// The signal of `signals` that `collection`'s devices send (panics if it was not
/// simulated).
pub fn signal_for<'a>(signals: &'a [SignalSums], collection: &Collection) -> &'a SignalSums {
    signals
        .iter()
        .find(|s| same_signal(&s.collection, collection))
        .expect("signal simulated for this collection")
}

/// Runs `job(rep)` for `rep in 0..reps` on up to `threads` scoped threads and returns
/// the results in rep order.
pub fn parallel_reps<T: Send>(
    reps: usize,
    threads: usize,
    job: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let threads = threads.clamp(1, reps.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, T)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let rep = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if rep >= reps {
                            break;
                        }
                        mine.push((rep, job(rep)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    results.sort_by_key(|(rep, _)| *rep);
    results.into_iter().map(|(_, t)| t).collect()
}

/// Mean and standard error of the mean (0 for a single value).
pub fn mean_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Model;
    use ldpcov_estimate::{EstimateOptions, entry_variances, estimate};

    /// The sum-of-noise path refuses a rank-one collection (its noise is the draw
    /// itself, not added to a noiseless signal) instead of returning noiseless sums.
    #[test]
    #[should_panic(expected = "the sum-of-noise path is for Gaussian reports")]
    fn add_noise_refuses_a_rank_one_collection() {
        let rank_one = Collection::create(&CollectionSpec {
            collection_id: "r".into(),
            dim: 3,
            epsilon: 1.0,
            clip_radius: 1.0,
            min_reports: 1,
            moments: Moments::SecondMoment as i32,
            local_mechanism: ldpcov_proto::v1::LocalMechanism::RankOne as i32,
            ..Default::default()
        })
        .unwrap();
        let m = nalgebra::DMatrix::<f64>::identity(3, 3) * 0.1;
        let signal = SignalSums::population(&rank_one, &m, 10);
        add_noise(&rank_one, &signal, 1);
    }

    #[test]
    fn population_signal_averages_to_the_second_moment() {
        // Without noise the accumulator of `population` averages to M up to the grid
        // (|error| ≤ R²·2^-k/2 per entry), with n split over the folds (n = 7 over 5:
        // 2, 2, 1, 1, 1). A break in the R² scaling or the fold counts moves the
        // average by far more than the grid.
        let c = collection(3, 1.0, 1e-6, 2.0).unwrap();
        let m = nalgebra::DMatrix::from_row_slice(
            3,
            3,
            &[1.0, 0.3, -0.2, 0.3, 0.8, 0.1, -0.2, 0.1, 0.5],
        );
        let signal = SignalSums::population(&c, &m, 7);
        assert_eq!(signal.fold_counts, vec![2, 2, 1, 1, 1]);
        let acc = signal.noise_free();
        let avg = ldpcov_estimate::average(&(&c).into(), &acc.sums(), acc.count).unwrap();
        let tol = 4.0 / c.grid_scale();
        assert!((&avg - &m).amax() <= tol, "{avg} vs {m}");
        // An svec collection carries √2·m_ij off the diagonal and its average divides
        // by √2 again: the same M (a missing weighting is off by 29 % there).
        let svec = Collection::from_spec(&CollectionSpec {
            local_mechanism: ldpcov_proto::v1::LocalMechanism::Gaussian as i32,
            ..c.spec()
        })
        .unwrap();
        let acc = SignalSums::population(&svec, &m, 7).noise_free();
        let avg = ldpcov_estimate::average(&(&svec).into(), &acc.sums(), acc.count).unwrap();
        let tol = 4.0 / svec.grid_scale();
        assert!((&avg - &m).amax() <= tol, "svec: {avg} vs {m}");
    }

    #[test]
    fn signal_matches_per_user_path_without_noise() {
        // Same seed → same users and folds; with the noise removed (per-user sums minus
        // the noise-free signal) only noise remains, so the fold counts must agree and
        // the noise-free accumulator must equal a per-user run with σ → ZeroNoise.
        let c = collection(4, 1.0, 1e-6, 3.0).unwrap();
        let sampler = Sampler::gaussian(&Model::BandedGeometric.covariance(4)).unwrap();
        let signal = simulate_signal(&[&c], &sampler, 300, 9);
        let acc = per_user(&c, &sampler, 300, 9, 1);
        assert_eq!(signal[0].fold_counts, acc.fold_counts);
        let perturber = Perturber::new(c.clone());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut direct = Accumulator::new(c.entries(), FOLDS);
        for _ in 0..300 {
            let x = sampler.sample(&mut rng);
            let fold = simulated_report_id(&mut rng).fold(FOLDS);
            direct.add(fold, &perturber.perturb(&x, &mut ZeroNoise).unwrap());
        }
        assert_eq!(signal[0].noise_free(), direct);
    }

    /// Collections whose devices send different signals get their own sums, even on the
    /// same grid: the joint layout (p + d entries) and a centre change the signal. The
    /// joint signal is what the real `Perturber` sends (per-user path with zero noise).
    #[test]
    fn signals_are_kept_apart_per_layout_and_centre() {
        let second = collection(3, 1.0, 1e-6, 2.0).unwrap();
        let joint = collection_with(3, 1.0, 1e-6, 2.0, Moments::MeanAndCovariance, vec![]).unwrap();
        let centred =
            collection_with(3, 1.0, 1e-6, 2.0, Moments::MeanAndCovariance, vec![1.0; 3]).unwrap();
        let sampler = Sampler::gaussian(&Model::BandedGeometric.covariance(3))
            .unwrap()
            .with_mean(vec![1.0; 3]);
        let signals = simulate_signal(&[&second, &joint, &centred], &sampler, 200, 4);
        assert_eq!(signals.len(), 3);
        assert_eq!(signal_for(&signals, &second).fold_sums[0].len(), 6);
        assert_eq!(signal_for(&signals, &joint).fold_sums[0].len(), 9);
        assert_ne!(signal_for(&signals, &joint), signal_for(&signals, &centred));
        let perturber = Perturber::new(centred.clone());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut direct = Accumulator::new(centred.entries(), FOLDS);
        for _ in 0..200 {
            let x = sampler.sample(&mut rng);
            let fold = simulated_report_id(&mut rng).fold(FOLDS);
            direct.add(fold, &perturber.perturb(&x, &mut ZeroNoise).unwrap());
        }
        assert_eq!(signal_for(&signals, &centred).noise_free(), direct);
    }

    /// Sample mean and variance.
    fn moments(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (
            m,
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0),
        )
    }

    #[test]
    fn fast_path_matches_per_user_path() {
        // p = 3, n = 400 users (≈ 80 per fold), R = 2, ε = 1, 400 repetitions with the
        // SAME users (seed 5) and independent noise: the per-user path (real Perturber,
        // seeded DiscreteGaussianSampler) against the sum-of-noise path.
        //
        // Per entry e, T1 = total noise = Σ_k (fold sum − signal) and
        // T2 = (sum of squares − S2)/σ_g² − n. Theory (Gaussian noise, exact for the fast
        // path, up to relative 1/(12σ_g²) ≈ 1e-15 for the rounded draws):
        // T1 ~ N(0, nσ_g²); E T2 = 0, Var T2 = 2n + 4·S2/σ_g²;
        // Cov(T1, T2) = Cov(Z, 2W)/σ_g² = 2·S1.
        // With R = 400 reps the sample mean of T1/(σ_g√n) has sd 0.05 (bound 0.25 = 5 sd);
        // its variance has relative sd √(2/R) = 0.071 (bound ±0.3 ≈ 4 sd); T2's mean has
        // sd √(Var T2 / R) (bound 5 sd) and its variance the same ±0.3; the correlation
        // estimate has sd ≈ 1/√R = 0.05 (bound 0.25).
        // Both report layouts: the joint one's mean block gets the same treatment.
        let layouts = [
            collection(3, 1.0, 1e-6, 2.0).unwrap(),
            collection_with(3, 1.0, 1e-6, 2.0, Moments::MeanAndCovariance, vec![]).unwrap(),
        ];
        for c in &layouts {
            let sampler = Sampler::gaussian(&Model::Tridiagonal2.covariance(3)).unwrap();
            let n = 400;
            let reps = 400;
            let signal = &simulate_signal(&[c], &sampler, n, 5)[0];
            let free = signal.noise_free();
            let sg = c.sigma_grid();
            let nf = n as f64;
            for path in [Path::PerUser, Path::SumOfNoise] {
                let accs: Vec<Accumulator> = (0..reps as u64)
                    .map(|r| match path {
                        Path::PerUser => per_user(c, &sampler, n, 5, 1000 + r),
                        Path::SumOfNoise => add_noise(c, signal, 1000 + r),
                    })
                    .collect();
                for e in 0..c.entries() {
                    let s1 = free.sums()[e] as f64;
                    let s2 = free.sum_squares[e] as f64;
                    let t1: Vec<f64> = accs
                        .iter()
                        .map(|a| (a.sums()[e] as f64 - s1) / (sg * nf.sqrt()))
                        .collect();
                    let t2: Vec<f64> = accs
                        .iter()
                        .map(|a| (a.sum_squares[e] as f64 - s2) / (sg * sg) - nf)
                        .collect();
                    let (m1, v1) = moments(&t1);
                    let (m2, v2) = moments(&t2);
                    let want_v2 = 2.0 * nf + 4.0 * s2 / (sg * sg);
                    let what = format!("{} entry {e}", path.name());
                    assert!(m1.abs() < 0.25, "{what}: mean T1 {m1}");
                    assert!((v1 - 1.0).abs() < 0.3, "{what}: var T1 {v1}");
                    assert!(
                        m2.abs() < 5.0 * (want_v2 / reps as f64).sqrt(),
                        "{what}: mean T2 {m2}"
                    );
                    assert!((v2 / want_v2 - 1.0).abs() < 0.3, "{what}: var T2 {v2}");
                    let cov = t1.iter().zip(&t2).map(|(a, b)| a * (b - m2)).sum::<f64>()
                        / (reps as f64 - 1.0);
                    // T1 is scaled by 1/(σ_g√n): Cov = 2·S1/(σ_g√n).
                    let want_corr = 2.0 * s1 / (sg * nf.sqrt()) / want_v2.sqrt();
                    let corr = cov / (v1 * v2).sqrt();
                    assert!((corr - want_corr).abs() < 0.25, "{what}: corr {corr}");
                }
                // Fold counts are the users' folds on both paths.
                assert_eq!(accs[0].fold_counts, signal.fold_counts);
            }
        }
    }

    #[test]
    fn fast_path_estimates_match_per_user_estimates() {
        // The estimator's error distribution: relative Frobenius error of the default
        // (cross-validated) estimate and the entry variances θ̂, per-user vs fast path,
        // same users, 150 noise repetitions each. Bounds: 5 standard errors of the
        // difference of the two means.
        let c = collection(4, 2.0, 1e-6, 3.0).unwrap();
        let truth = Model::BandedGeometric.covariance(4);
        let sampler = Sampler::gaussian(&truth).unwrap();
        let (n, reps) = (2000, 150);
        let signal = &simulate_signal(&[&c], &sampler, n, 77)[0];
        let mut errs = [Vec::new(), Vec::new()];
        let mut theta = [Vec::new(), Vec::new()];
        for r in 0..reps {
            let accs = [
                per_user(&c, &sampler, n, 77, 50 + r),
                add_noise(&c, signal, 50 + r),
            ];
            for (i, acc) in accs.iter().enumerate() {
                let est = estimate(&(&c).into(), acc, &EstimateOptions::default()).unwrap();
                errs[i].push(crate::metrics::relative_frobenius_error(
                    &est.matrix,
                    &truth,
                ));
                theta[i].push(entry_variances(&(&c).into(), acc)[1]);
            }
        }
        for (name, pair) in [("error", &errs), ("theta", &theta)] {
            let (m0, s0) = mean_se(&pair[0]);
            let (m1, s1) = mean_se(&pair[1]);
            let bound = 5.0 * (s0 * s0 + s1 * s1).sqrt();
            assert!(
                (m0 - m1).abs() < bound,
                "{name}: per-user {m0} ± {s0}, fast {m1} ± {s1}"
            );
        }
    }

    #[test]
    fn parallel_reps_keeps_order() {
        let out = parallel_reps(17, 3, |r| r * r);
        assert_eq!(out, (0..17).map(|r| r * r).collect::<Vec<_>>());
    }
}
