//! Reading what `estimate` writes: the JSON document's exact matrix, NPY, CSV and PNG
//! files.

use std::path::Path;

use serde_json::Value;

use super::admin::{P, REPORTS, Run};

/// The `p × p` matrix of an `estimate --format json` document, parsed from the JSON
/// *text* with `str::parse::<f64>` (correctly rounded, so exact for the shortest
/// round-trip representation serde_json writes) rather than serde_json's
/// best-effort float parser.
pub(crate) fn json_matrix_exact(text: &str) -> Vec<f64> {
    let start = text.find("\"matrix\"").expect("JSON has a matrix");
    let rest = &text[start + "\"matrix\"".len()..];
    let open = rest.find('[').expect("matrix is an array");
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in rest[open..].char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.expect("matrix array is closed");
    rest[open..close]
        .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<f64>()
                .unwrap_or_else(|e| panic!("bad number {t:?}: {e}"))
        })
        .collect()
}

pub(crate) fn assert_symmetric(m: &[f64], what: &str) {
    assert_eq!(m.len(), P * P, "{what}: {m:?}");
    for i in 0..P {
        for j in 0..P {
            assert!(m[i * P + j].is_finite(), "{what}: {m:?}");
            assert_eq!(m[i * P + j], m[j * P + i], "{what} not symmetric: {m:?}");
        }
    }
}

/// Checks the estimate JSON document and returns its matrix (row-major, exact).
pub(crate) fn check_estimate_json(run: &Run) -> (Value, Vec<f64>) {
    let doc = run.json();
    assert_eq!(doc["dim"], P as u64, "{}", run.describe());
    assert_eq!(doc["reports"], REPORTS, "{}", run.describe());
    let rows = doc["matrix"].as_array().expect("matrix array");
    assert_eq!(rows.len(), P, "{}", run.describe());
    let approx: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            let r = r.as_array().expect("matrix row array");
            assert_eq!(r.len(), P);
            r.iter()
                .map(|v| v.as_f64().expect("number"))
                .collect::<Vec<_>>()
        })
        .collect();
    let exact = json_matrix_exact(&run.stdout);
    assert_eq!(exact.len(), P * P, "{}", run.describe());
    for (a, e) in approx.iter().zip(&exact) {
        assert!(
            (a - e).abs() <= 1e-12 * e.abs().max(1.0),
            "text parse {e} vs serde {a}"
        );
    }
    assert_symmetric(&exact, "json matrix");
    (doc, exact)
}

/// Parses an NPY v1 file holding a `p × p` little-endian float64 C-order array.
pub(crate) fn read_npy(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(bytes.len() > 10, "npy too short: {bytes:?}");
    assert_eq!(&bytes[..6], b"\x93NUMPY", "npy magic");
    assert_eq!(bytes[6], 1, "npy major version");
    assert_eq!(bytes[7], 0, "npy minor version");
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let data_start = 10 + header_len;
    assert!(bytes.len() >= data_start, "npy header overruns the file");
    assert_eq!(data_start % 16, 0, "npy data not aligned");
    let header = std::str::from_utf8(&bytes[10..data_start]).expect("npy header is ASCII");
    assert!(header.ends_with('\n'), "npy header: {header:?}");
    let compact: String = header.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(compact.contains("'descr':'<f8'"), "npy header: {header:?}");
    assert!(
        compact.contains("'fortran_order':False"),
        "npy header: {header:?}"
    );
    // A Python tuple: `(4, 4)` or, as npyz writes it, `(4, 4, )`.
    let shape_start = compact.find("'shape':(").expect("npy header has a shape") + 9;
    let shape_len = compact[shape_start..]
        .find(')')
        .expect("shape tuple closed");
    let shape: Vec<usize> = compact[shape_start..shape_start + shape_len]
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("shape entry is an integer"))
        .collect();
    assert_eq!(shape, [P, P], "npy header: {header:?}");
    let data = &bytes[data_start..];
    assert_eq!(data.len(), 8 * P * P, "npy data length");
    data.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

pub(crate) fn read_csv(path: &Path) -> Vec<f64> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    // A header row of the variables' names, then P rows.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), P + 1, "csv:\n{text}");
    let header: Vec<String> = (1..=P).map(|i| format!("x{i}")).collect();
    assert_eq!(lines[0], header.join(","), "csv header:\n{text}");
    lines[1..]
        .iter()
        .flat_map(|line| {
            let fields: Vec<f64> = line
                .split(',')
                .map(|f| {
                    f.trim()
                        .parse::<f64>()
                        .unwrap_or_else(|e| panic!("csv field {f:?}: {e}\n{text}"))
                })
                .collect();
            assert_eq!(fields.len(), P, "csv:\n{text}");
            fields
        })
        .collect()
}

/// Decodes an 8-bit RGB(A) PNG: (width, height, pixels, channels).
pub(crate) fn decode_png(path: &Path) -> (u32, u32, Vec<u8>, usize) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut reader = png::Decoder::new(file)
        .read_info()
        .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf, channels)
}

/// The packed upper triangle (`i ≤ j`) of a full row-major `p × p` matrix.
pub(crate) fn upper_triangle(full: &[f64], p: usize) -> Vec<f64> {
    (0..p)
        .flat_map(|i| (i..p).map(move |j| (i, j)))
        .map(|(i, j)| full[i * p + j])
        .collect()
}
