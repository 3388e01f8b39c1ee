//! The device half of the Gaussian report ([`GaussianReport`]): one independent noise
//! draw per entry of the exact grid statistic, the clamp to the validation bound, and
//! the stochastic rounding to a coarse encoding's wire step.

use ldpcov_noise::NoiseSampler;
use ldpcov_privacy::mechanism::GaussianReport;

/// The perturbed report entries, in grid units: each entry of
/// [`GaussianReport::statistic`] gets one independent draw of `noise` with sd
/// [`GaussianReport::sigma_grid`] (calibrated to the sensitivity of the whole report),
/// in report order, and is clamped by [`GaussianReport::clamp`].
pub(super) fn perturb(
    report: &GaussianReport,
    u: &[f64],
    noise: &mut (impl NoiseSampler + ?Sized),
) -> Vec<i32> {
    let sigma_grid = report.sigma_grid();
    let mut entries = Vec::with_capacity(report.entries());
    for signal in report.statistic(u) {
        let noisy = signal.saturating_add(noise.sample_grid(sigma_grid));
        entries.push(report.clamp(noisy));
    }
    entries
}

/// Re-quantises noisy grid-unit entries to the wire step: unchanged for i32; for
/// i16/i8, `v/step` rounded up with probability equal to its fractional part
/// (unbiased: `E[wire·step] = v`, one [`NoiseSampler::uniform_below`] draw per entry)
/// and clamped to `±wire_max`.
pub(super) fn to_wire(
    report: &GaussianReport,
    entries: &[i32],
    noise: &mut (impl NoiseSampler + ?Sized),
) -> Vec<i32> {
    let (step, max) = (report.wire_step().max(1), report.wire_max());
    if step == 1 {
        return entries.to_vec();
    }
    entries
        .iter()
        .map(|&v| {
            let v = i64::from(v);
            let (q, r) = (v.div_euclid(step), v.rem_euclid(step));
            // P(round up) = r/step exactly.
            let up = (noise.uniform_below(step as u64) as i64) < r;
            // |q| ≤ 2^31: the clamp brings it within ±wire_max ≤ i32::MAX.
            (q + i64::from(up)).clamp(-max, max) as i32
        })
        .collect()
}
