//! The heatmaps drawn and decoded again: sizes, colours, labels, the banner.

use super::layout::{
    BANNER_SIZE, BAR_WIDTH, LABEL_SIZE, MAX_NAME_CHARS, PANEL_GAP, TITLE_SIZE, measure, wrap,
};
use super::*;
use plotters::style::{IntoFont, RGBColor};

/// Decodes an 8-bit RGB(A) PNG: (width, height, pixel accessor data, channels).
fn decode(path: &Path) -> (u32, u32, Vec<u8>, usize) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf, channels)
}

fn pixel(img: &(u32, u32, Vec<u8>, usize), (x, y): (u32, u32)) -> (u8, u8, u8) {
    let (w, _, buf, c) = img;
    let k = (y as usize * *w as usize + x as usize) * c;
    (buf[k], buf[k + 1], buf[k + 2])
}

fn reddish((r, g, b): (u8, u8, u8)) -> bool {
    r > 150 && g < 100 && b < 100
}

fn bluish((r, g, b): (u8, u8, u8)) -> bool {
    b > 150 && r < 100 && g < 150
}

fn whiteish((r, g, b): (u8, u8, u8)) -> bool {
    r >= 245 && g >= 245 && b >= 245
}

#[test]
fn heatmap_colours_follow_the_sign_and_size_matches() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h.png");
    // +2 at (0, 1), −2 at (2, 3): limits ±2; (0, 4) is 0.
    let mut m = DMatrix::<f64>::identity(5, 5);
    for (i, j, v) in [(0, 1, 2.0), (2, 3, -2.0), (1, 4, 0.7)] {
        m[(i, j)] = v;
        m[(j, i)] = v;
    }
    let names: Vec<String> = ["a", "bb", "ccc", "d", "e"].map(String::from).to_vec();
    let layout = write_heatmap(&file, &m, "test", Some(&names)).unwrap();
    let img = decode(&file);
    assert_eq!((img.0, img.1), (layout.width, layout.height));
    assert_eq!(layout.cell_width, 60);
    for (i, j) in [(0, 1), (1, 0)] {
        let c = pixel(&img, layout.cell_center(i, j));
        assert!(reddish(c), "({i},{j}) = +max is {c:?}");
    }
    for (i, j) in [(2, 3), (3, 2)] {
        let c = pixel(&img, layout.cell_center(i, j));
        assert!(bluish(c), "({i},{j}) = −max is {c:?}");
    }
    let c = pixel(&img, layout.cell_center(0, 4));
    assert!(whiteish(c), "(0,4) = 0 is {c:?}");
    // The identity's diagonal is +½·max: between white and red.
    let (r, g, b) = pixel(&img, layout.cell_center(2, 2));
    assert!(
        r > 200 && g > 100 && g < 200 && b > 100 && b < 200,
        "{:?}",
        (r, g, b)
    );
}

#[test]
fn heatmap_sizes_stay_sensible_from_2_to_200() {
    let dir = tempfile::tempdir().unwrap();
    for p in [2usize, 30, 200] {
        let file = dir.path().join(format!("h{p}.png"));
        let m = DMatrix::from_fn(p, p, |i, j| 0.5f64.powi((i as i32 - j as i32).abs()));
        let layout = write_heatmap(&file, &m, "banded", None).unwrap();
        let img = decode(&file);
        assert_eq!((img.0, img.1), (layout.width, layout.height));
        assert!(
            layout.width <= 1000 && layout.height <= 900,
            "{p}: {layout:?}"
        );
        assert!(layout.cell_width >= 3, "{p}: {layout:?}");
        assert!(reddish(pixel(&img, layout.cell_center(p - 1, p - 1))));
    }
}

#[test]
fn a_long_title_widens_the_picture_to_fit() {
    let dir = tempfile::tempdir().unwrap();
    let m = DMatrix::<f64>::identity(2, 2);
    let short = write_heatmap(&dir.path().join("s.png"), &m, "c", None).unwrap();
    let title = "covariance of a-collection-with-a-long-id, n = 1000000, cv(diagonal=exempt)";
    let file = dir.path().join("l.png");
    let long = write_heatmap(&file, &m, title, None).unwrap();
    let img = decode(&file);
    assert_eq!((img.0, img.1), (long.width, long.height));
    if long.text {
        let font = ("sans-serif", TITLE_SIZE).into_font();
        let (w, _) = font.box_size(title).unwrap();
        assert!(long.width >= long.left + w, "{long:?}, title {w} px");
        assert!(long.width > short.width, "{long:?} vs {short:?}");
    } else {
        assert_eq!(long, short);
    }
    // Only the width changes: the grid stays where it was.
    assert_eq!(
        (long.left, long.top, long.height),
        (short.left, short.top, short.height)
    );
}

#[test]
fn vector_as_one_row() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("v.png");
    let names: Vec<String> = ["x", "y", "z"].map(String::from).to_vec();
    let layout = write_vector(&file, &[-3.0, 0.0, 3.0], "mean", Some(&names), None).unwrap();
    let img = decode(&file);
    assert_eq!((img.0, img.1), (layout.width, layout.height));
    assert_eq!((layout.rows, layout.cols), (1, 3));
    assert!(bluish(pixel(&img, layout.cell_center(0, 0))));
    assert!(whiteish(pixel(&img, layout.cell_center(0, 1))));
    assert!(reddish(pixel(&img, layout.cell_center(0, 2))));
}

#[test]
fn bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.png");
    let m = DMatrix::<f64>::zeros(2, 3);
    assert_eq!(
        write_heatmap(&file, &m, "", None).unwrap_err().to_string(),
        "the matrix is 2×3, not square"
    );
    let mut m = DMatrix::<f64>::zeros(2, 2);
    m[(1, 0)] = f64::INFINITY;
    assert_eq!(
        write_heatmap(&file, &m, "", None).unwrap_err().to_string(),
        "entry (1, 0) is infinite"
    );
    let names = vec!["a".to_string()];
    assert_eq!(
        write_vector(&file, &[1.0, 2.0], "", Some(&names), None)
            .unwrap_err()
            .to_string(),
        "1 names for 2 variables"
    );
    assert!(matches!(
        write_vector(&file, &[], "", None, None),
        Err(PlotError::Empty)
    ));
    assert!(!file.exists());
}

#[test]
fn tick_labels_are_readable_numbers() {
    let cases = [
        (1352.7, "1350"),
        (676.35, "676"),
        (0.0, "0"),
        (-0.0, "0"),
        (0.5, "0.5"),
        (-0.675, "-0.675"),
        (12345.0, "12300"),
        (0.001234, "0.00123"),
        (1.352e5, "1.35e5"),
        (2e-4, "2e-4"),
        (-3.5e-7, "-3.5e-7"),
        (1.0, "1"),
    ];
    for (v, want) in cases {
        assert_eq!(tick_label(v), want, "{v}");
    }
}

fn spec<'a>(m: &'a DMatrix<f64>, names: Option<&'a [String]>, scale: Scale) -> PanelSpec<'a> {
    PanelSpec {
        grid: Grid {
            rows: m.nrows(),
            cols: m.ncols(),
            cell_width: 60,
            cell_height: 60,
            row_labels: true,
        },
        value: Box::new(|i, j| m[(i, j)]),
        title: "t",
        scale,
        row_names: names,
        col_names: names,
    }
}

#[test]
fn long_names_are_ellipsised_and_unnamed_variables_are_x1_to_xp() {
    let m = DMatrix::<f64>::identity(2, 2);
    let long = "systolic_blood_pressure_in_the_morning_mmhg".to_string();
    let names = [long.clone(), "weight".to_string()];
    let panel = measure(&spec(&m, Some(&names), Scale::Diverging), false).unwrap();
    let rows = panel.row_labels.unwrap().texts;
    let first = rows[0].strip_suffix('…').expect("an ellipsis");
    assert!(long.starts_with(first), "{rows:?}");
    assert_eq!(rows[0].chars().count(), MAX_NAME_CHARS);
    assert!(rows[1].ends_with("weight"), "{rows:?}");
    let panel = measure(&spec(&m, None, Scale::Diverging), false).unwrap();
    assert_eq!(panel.col_labels.texts, ["x1", "x2"]);
    assert_eq!(panel.row_labels.unwrap().texts, ["x1", "x2"]);
}

#[test]
fn standard_errors_get_a_sequential_scale_from_zero() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("se.png");
    let m = DMatrix::from_row_slice(2, 2, &[0.0, 2.0, 2.0, 1.0]);
    let panel = HeatmapPanel {
        matrix: &m,
        title: "standard errors",
        scale: Scale::Sequential,
    };
    let layout = write_heatmaps(&file, &[panel], None, None).unwrap()[0];
    let img = decode(&file);
    assert!(whiteish(pixel(&img, layout.cell_center(0, 0))));
    let (r, g, b) = pixel(&img, layout.cell_center(0, 1));
    assert_eq!(RGBColor(r, g, b), sequential_color(2.0, 2.0));
    // The colour bar runs from the largest entry (top) to 0 (bottom, white): no
    // half left unused below 0.
    let bar_x = layout.left + 2 * layout.cell_width + 20 + BAR_WIDTH / 2;
    let bar_h = (2 * layout.cell_height).max(120);
    assert!(whiteish(pixel(&img, (bar_x, layout.top + bar_h - 2))));
    let top = pixel(&img, (bar_x, layout.top + 1));
    let near = |a: u8, b: u8| a.abs_diff(b) <= 4;
    assert!(
        near(top.0, r) && near(top.1, g) && near(top.2, b),
        "the bar's top {top:?} is the largest entry's colour {:?}",
        (r, g, b)
    );
    let ticks: Vec<String> = Scale::Sequential
        .ticks()
        .iter()
        .map(|t| tick_label(t * 2.0))
        .collect();
    assert_eq!(ticks, ["2", "1.5", "1", "0.5", "0"]);
}

#[test]
fn undefined_entries_are_grey_and_off_the_scale() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nan.png");
    let nan = f64::NAN;
    let m = DMatrix::from_row_slice(3, 3, &[1.0, nan, 0.5, nan, 1.0, -0.5, 0.5, -0.5, 1.0]);
    let layout = write_heatmap(&file, &m, "correlation", None).unwrap();
    let img = decode(&file);
    let grey = (UNDEFINED_COLOR.0, UNDEFINED_COLOR.1, UNDEFINED_COLOR.2);
    assert_eq!(pixel(&img, layout.cell_center(0, 1)), grey);
    assert_eq!(pixel(&img, layout.cell_center(1, 0)), grey);
    // The limit is the largest defined entry, 1: the diagonal is full red.
    let (r, g, b) = pixel(&img, layout.cell_center(2, 2));
    assert_eq!(RGBColor(r, g, b), diverging_color(1.0, 1.0));
    let defined = DMatrix::<f64>::identity(3, 3);
    let plain =
        write_heatmap(&dir.path().join("plain.png"), &defined, "correlation", None).unwrap();
    if layout.text {
        // The note's line under the panel.
        assert!(layout.height > plain.height, "{layout:?} vs {plain:?}");
    }
    let all_nan = DMatrix::from_element(2, 2, nan);
    write_heatmap(&dir.path().join("all.png"), &all_nan, "c", None).unwrap();
}

#[test]
fn a_banner_wraps_above_the_panels() {
    let registered = font_available();
    let font = ("sans-serif", BANNER_SIZE).into_font();
    let text = "insufficient: the noise is 37× the signal and no correlation stands out \
                of it; about 5 400 000 reports (have 2000) would halve it";
    let lines = wrap(text, 300, &font);
    if registered {
        assert!(lines.len() > 1, "{lines:?}");
        for line in &lines {
            assert!(font.box_size(line).unwrap().0 <= 300, "{line}");
        }
    }
    assert_eq!(
        lines.join(" "),
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let dir = tempfile::tempdir().unwrap();
    let m = DMatrix::<f64>::zeros(3, 3);
    let panel = HeatmapPanel {
        matrix: &m,
        title: "covariance",
        scale: Scale::Diverging,
    };
    let banner = Banner {
        text,
        warning: true,
    };
    let plain = write_heatmaps(&dir.path().join("a.png"), &[panel], None, None).unwrap()[0];
    let file = dir.path().join("b.png");
    let with = write_heatmaps(&file, &[panel], None, Some(banner)).unwrap()[0];
    let img = decode(&file);
    assert_eq!((img.0, img.1), (with.width, with.height));
    if with.text {
        assert!(with.top > plain.top, "{with:?} vs {plain:?}");
        assert_eq!(with.height - plain.height, with.top - plain.top);
    }
    assert!(whiteish(pixel(&img, with.cell_center(1, 1))));
}

#[test]
fn the_scree_captions_stay_clear_of_the_loadings() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pca.png");
    let loadings = DMatrix::from_fn(10, 3, |i, j| if i == j { 1.0 } else { 0.0 });
    let bars = [
        ScreeBar {
            ratio: 0.6,
            above_noise_edge: true,
            raw_eigenvalue: Some(1352.0),
        },
        ScreeBar {
            ratio: 0.3,
            above_noise_edge: false,
            raw_eigenvalue: Some(676.0),
        },
        ScreeBar {
            ratio: 0.1,
            above_noise_edge: false,
            raw_eigenvalue: None,
        },
    ];
    let banner = Banner {
        text: "sufficient",
        warning: false,
    };
    let layout =
        write_components(&file, &bars, 700.0, &loadings, "pcs", None, Some(banner)).unwrap();
    let img = decode(&file);
    assert_eq!((img.0, img.1), (layout.width, layout.height));
    assert_eq!((layout.rows, layout.cols), (10, 3));
    assert!(reddish(pixel(&img, layout.cell_center(1, 1))));
    if layout.text {
        let font = ("sans-serif", LABEL_SIZE).into_font();
        let caption = font
            .box_size("explained variance (grey: within the noise)")
            .unwrap()
            .0;
        let loadings_title = ("sans-serif", TITLE_SIZE)
            .into_font()
            .box_size("loadings (10 × 3)")
            .unwrap()
            .0;
        // The loadings' title starts at its grid's left edge, right of the caption.
        assert!(
            layout.left > 20 + caption + PANEL_GAP,
            "{layout:?}, caption {caption}"
        );
        assert!(layout.width >= layout.left + loadings_title, "{layout:?}");
    }
}

#[test]
fn diverging_scale_endpoints() {
    assert_eq!(diverging_color(0.0, 1.0), RGBColor(255, 255, 255));
    assert_eq!(diverging_color(1.0, 1.0), RGBColor(178, 24, 43));
    assert_eq!(diverging_color(-5.0, 1.0), RGBColor(33, 102, 172));
    assert_eq!(diverging_color(0.0, 0.0), RGBColor(255, 255, 255));
}
