//! Writing a released [`Estimate`] as JSON (matrix plus metadata), CSV (the matrix) or
//! NPY (the matrix as a `p × p` float64 array, loadable with `numpy.load`).

use std::io::Write;

use ldpcov_proto::layout::unpack_symmetric;
use ldpcov_proto::v1::Estimate;
use serde::Serialize;

/// Output formats of `ldpcov-aggregator estimate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Matrix and metadata as one JSON object.
    Json,
    /// The matrix, one row per line.
    Csv,
    /// The matrix as a NumPy `.npy` float64 array.
    Npy,
}

#[derive(Serialize)]
struct JsonEstimate<'a> {
    collection_id: &'a str,
    dim: u32,
    reports: u64,
    sigma: f64,
    entry_noise_sd: f64,
    threshold: f64,
    threshold_rule: &'a str,
    surviving_entries: u64,
    clamped_eigenvalues: u32,
    psd_projected: bool,
    matrix: Vec<&'a [f64]>,
}

/// Writes `estimate` to `out` in `format`.
pub fn write_estimate(
    estimate: &Estimate,
    format: Format,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let p = estimate.dim as usize;
    if estimate.upper_triangle.len() != ldpcov_proto::layout::triangle_len(p) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "estimate carries {} entries, dimension {p} needs {}",
                estimate.upper_triangle.len(),
                ldpcov_proto::layout::triangle_len(p)
            ),
        ));
    }
    let full = unpack_symmetric(p, &estimate.upper_triangle);
    match format {
        Format::Json => {
            let doc = JsonEstimate {
                collection_id: &estimate.collection_id,
                dim: estimate.dim,
                reports: estimate.reports,
                sigma: estimate.sigma,
                entry_noise_sd: estimate.entry_noise_sd,
                threshold: estimate.threshold,
                threshold_rule: &estimate.threshold_rule,
                surviving_entries: estimate.surviving_entries,
                clamped_eigenvalues: estimate.clamped_eigenvalues,
                psd_projected: estimate.psd_projected,
                matrix: full.chunks(p.max(1)).collect(),
            };
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)
        }
        Format::Csv => {
            for row in full.chunks(p.max(1)) {
                let line: Vec<String> = row.iter().map(|v| format!("{v:e}")).collect();
                writeln!(out, "{}", line.join(","))?;
            }
            Ok(())
        }
        Format::Npy => {
            use npyz::WriterBuilder;
            let mut writer = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&[p as u64, p as u64])
                .writer(out)
                .begin_nd()?;
            writer.extend(full.iter().copied())?;
            writer.finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate() -> Estimate {
        Estimate {
            collection_id: "c".into(),
            dim: 2,
            upper_triangle: vec![1.0, 0.5, 2.0],
            reports: 10,
            ..Default::default()
        }
    }

    #[test]
    fn csv_is_the_full_symmetric_matrix() {
        let mut out = Vec::new();
        write_estimate(&estimate(), Format::Csv, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "1e0,5e-1\n5e-1,2e0\n");
    }

    #[test]
    fn json_has_matrix_and_metadata() {
        let mut out = Vec::new();
        write_estimate(&estimate(), Format::Json, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["reports"], 10);
        assert_eq!(v["matrix"][1][0], 0.5);
    }

    #[test]
    fn npy_header_and_data() {
        let mut out = Vec::new();
        write_estimate(&estimate(), Format::Npy, &mut out).unwrap();
        assert_eq!(&out[..6], b"\x93NUMPY");
        let header = String::from_utf8_lossy(&out[10..out.len() - 32]);
        assert!(
            header.contains("'<f8'") && header.contains("'shape': (2, 2"),
            "{header}"
        );
        let data: Vec<f64> = out[out.len() - 32..]
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(data, vec![1.0, 0.5, 0.5, 2.0]);
    }

    #[test]
    fn inconsistent_estimate_is_an_error() {
        let mut e = estimate();
        e.upper_triangle.pop();
        assert!(write_estimate(&e, Format::Csv, &mut Vec::new()).is_err());
    }
}
