//! The colour scales of the heatmaps: diverging around 0 for signed values, sequential
//! from 0 for non-negative ones, grey for an undefined cell, and the colour bar's tick
//! labels.

use plotters::style::RGBColor;

/// The diverging colour of `value` on the scale ±`limit`: white at 0, linearly to red
/// (178, 24, 43) at +`limit` and to blue (33, 102, 172) at −`limit`; values beyond the
/// limits get the end colours.
pub fn diverging_color(value: f64, limit: f64) -> RGBColor {
    const RED: (f64, f64, f64) = (178.0, 24.0, 43.0);
    const BLUE: (f64, f64, f64) = (33.0, 102.0, 172.0);
    let t = if limit > 0.0 {
        (value / limit).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let end = if t >= 0.0 { RED } else { BLUE };
    let a = t.abs();
    let mix = |c: f64| (255.0 + (c - 255.0) * a).round() as u8;
    RGBColor(mix(end.0), mix(end.1), mix(end.2))
}

/// The sequential colour of `value` on the scale 0 … `limit`: white at 0, linearly to
/// dark blue (8, 48, 107) at `limit`; values beyond the limits get the end colours.
pub fn sequential_color(value: f64, limit: f64) -> RGBColor {
    const DARK: (f64, f64, f64) = (8.0, 48.0, 107.0);
    let t = if limit > 0.0 {
        (value / limit).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mix = |c: f64| (255.0 + (c - 255.0) * t).round() as u8;
    RGBColor(mix(DARK.0), mix(DARK.1), mix(DARK.2))
}

/// The colour of an undefined (NaN) cell: a neutral grey on either scale.
pub const UNDEFINED_COLOR: RGBColor = RGBColor(190, 190, 190);

/// The note under a panel holding undefined (NaN) cells.
pub const UNDEFINED_NOTE: &str = "grey: undefined, a variance not above the noise";

/// How a panel's values map to colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Signed values: [`diverging_color`] on ±max|a_ij|.
    Diverging,
    /// Non-negative values (standard errors): [`sequential_color`] on 0 … max a_ij.
    Sequential,
}

impl Scale {
    /// The colour of `value` on this scale with limit `limit`; grey for NaN.
    pub fn color(self, value: f64, limit: f64) -> RGBColor {
        match self {
            _ if value.is_nan() => UNDEFINED_COLOR,
            Scale::Diverging => diverging_color(value, limit),
            Scale::Sequential => sequential_color(value, limit),
        }
    }

    /// The colour bar's five tick values, top to bottom, as fractions of the limit.
    pub(super) fn ticks(self) -> [f64; 5] {
        match self {
            Scale::Diverging => [1.0, 0.5, 0.0, -0.5, -1.0],
            Scale::Sequential => [1.0, 0.75, 0.5, 0.25, 0.0],
        }
    }
}

/// A colour-bar tick label, readable: 3 significant digits, plain between 10⁻³ and
/// 10⁵ (`1350`, `676`, `0.5`, `0`), a compact exponent otherwise (`1.35e5`, `2e-4`).
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (1e-3..1e5).contains(&a) {
        let e = a.log10().floor() as i32;
        let unit = 10f64.powi(e - 2);
        let rounded = (v / unit).round() * unit;
        trim(format!("{:.*}", (2 - e).max(0) as usize, rounded))
    } else {
        let s = format!("{v:.2e}");
        match s.split_once('e') {
            Some((mantissa, exponent)) => format!("{}e{exponent}", trim(mantissa.to_string())),
            None => s,
        }
    }
}
