//! The font of the pictures' text: a TrueType file registered once as plotters'
//! `sans-serif`; without one the pictures carry no text.

use plotters::style::FontStyle;
use std::sync::OnceLock;

/// Environment variable naming a TrueType font file to use for text.
pub const FONT_ENV: &str = "LDPCOV_PLOT_FONT";

const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a font as plotters' `sans-serif` once (from `$LDPCOV_PLOT_FONT`, else the
/// first of a few common paths); whether text can be drawn.
pub fn font_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let env = std::env::var(FONT_ENV).ok();
        let candidates = env.iter().map(String::as_str).chain(FONT_PATHS);
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps the font for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    tracing::debug!(path, "plot font registered");
                    return true;
                }
            }
        }
        tracing::warn!("no TrueType font found (set {FONT_ENV}): plots carry no text");
        false
    })
}
