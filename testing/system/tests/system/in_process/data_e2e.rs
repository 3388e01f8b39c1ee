//! A data file's rows as users (`loadgen --data FILE`'s source, [`DataUsers`]) through
//! the real gRPC server, and every class of bad file refused by the same entry point
//! the load generator uses, before anything is sent.

use std::path::Path;

use ldpcov_aggregator::{EmbeddedServer, Limits};
use ldpcov_client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov_lab::data_users::DataUsers;
use ldpcov_lab::metrics::estimate_matrix;
use ldpcov_proto::v1::{
    CollectionSpec, Encoding, GetEstimateRequest, Moments, NoThreshold, get_estimate_request,
};
use rand::{Rng, SeedableRng};

/// Writes `n` rows `x = μ + s·v`, `v` uniform on `[−1, 1]³` (seeded), under a header.
fn write_csv(path: &Path, n: usize, mu: [f64; 3], s: f64) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let mut text = String::from("height, weight ,\"age\"\n");
    for _ in 0..n {
        let row: Vec<String> = mu
            .iter()
            .map(|m| format!("{:.9}", m + s * rng.random_range(-1.0..1.0)))
            .collect();
        text.push_str(&row.join(","));
        text.push('\n');
    }
    std::fs::write(path, text).expect("write the data file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csv_files_rows_estimate_its_second_moment_through_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("people.csv");
    let (n, mu, s) = (5000usize, [2.0, -1.0, 0.5], 0.5);
    write_csv(&path, n, mu, s);

    let users = DataUsers::from_file(&path, false).expect("a good file");
    assert_eq!(users.rows(), n);
    assert_eq!(
        users.names().expect("a header"),
        &["height".to_string(), "weight".into(), "age".into()]
    );
    let p = users.check_dim(None).expect("dimension");
    assert_eq!(p, 3);
    // Not centred: the mean of column 0 is ≈ 2 with sd ≈ s/√3 ≈ 0.29.
    assert!(
        !users.is_centred(&[]),
        "{}",
        users.max_abs_mean_over_sd(&[])
    );
    // Every row has norm ≤ ‖μ‖ + s·√3 = 2.29 + 0.87 < 3.5: nothing is clipped, so the
    // average of R²·uuᵀ is the file's second moment up to grid rounding and noise.
    let r = users.clip_radius(Some(3.5)).expect("explicit radius");
    assert_eq!(users.clipped_fraction(r, &[]), 0.0);

    let server = EmbeddedServer::start(Limits::default())
        .await
        .expect("server");
    let mut client = AggregatorClient::connect(server.url())
        .await
        .expect("connect")
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            7,
        )));
    client
        .create_collection(CollectionSpec {
            collection_id: "people".into(),
            dim: p,
            epsilon: 4.0,
            delta: 1e-6,
            clip_radius: r,
            min_reports: 1000,
            encoding: Encoding::I32Le as i32,
            // This test checks the second moment of non-centred rows; the default
            // (mean and covariance) is checked in tests/system/joint_moments.rs.
            moments: Moments::SecondMoment as i32,
            ..Default::default()
        })
        .await
        .expect("create");
    let collection = client.collection("people").await.expect("collection");
    let reports: Vec<_> = users
        .user_rows(None, 1)
        .into_iter()
        .map(|i| {
            client
                .prepare_report(&collection, users.row(i))
                .expect("report")
        })
        .collect();
    let sent = client.submit_stream(reports).await.expect("submit");
    assert_eq!(sent.accepted, n as u64);

    let est = client
        .estimate(GetEstimateRequest {
            collection_id: "people".into(),
            threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
            skip_psd_projection: true,
            ..Default::default()
        })
        .await
        .expect("estimate");
    assert_eq!(est.reports, n as u64);
    let m = estimate_matrix(&est);

    // Each averaged entry is S_ij + (rounding) + (noise): the noise is the sum of n
    // independent discrete Gaussians of sd ≤ σ·2^k, divided by n·2^k and scaled by
    // R², so its sd is at most R²σ/√n (computed here from the collection, not taken
    // from the server); each device rounds R⁻²x_i x_j to the grid 2^-k, an error of at
    // most 2^-(k+1), i.e. R²·2^-(k+1) after scaling. With 5 sd per entry, the chance that
    // any of the 6 entries exceeds the bound is below 6 · 5.7e-7.
    // (The svec report's off-diagonal entries, divided by √2 on the server, have
    // R²σ/√(2n): the entry noise sd the server reports.)
    let sd = r * r * collection.sigma() / (n as f64).sqrt();
    let rounding = r * r * 0.5f64.powi(collection.grid_bits() as i32 + 1);
    let bound = 5.0 * sd + rounding;
    let off_diagonal_sd = sd / std::f64::consts::SQRT_2;
    assert!(
        (est.entry_noise_sd - off_diagonal_sd).abs() <= 1e-12 * sd,
        "server's noise sd {} vs R²σ/√(2n) = {off_diagonal_sd}",
        est.entry_noise_sd
    );
    let second = users.second_moment(&[]);
    for i in 0..3 {
        for j in i..3 {
            let err = (m[(i, j)] - second[(i, j)]).abs();
            assert!(
                err <= bound,
                "({i},{j}): estimate {} vs second moment {}: error {err} > {bound}",
                m[(i, j)],
                second[(i, j)]
            );
        }
    }
    // And it is not the covariance: entry (0, 0) differs from it by μ̂₀² ≈ 4 plus the
    // same rounding and noise, so by at least μ̂₀² − bound (> 2 here, asserted too).
    let mean0_sq = (second[(0, 0)] - users.truth()[(0, 0)]).max(0.0);
    assert!(mean0_sq - bound > 2.0, "μ̂₀² = {mean0_sq}, bound {bound}");
    assert!(
        (m[(0, 0)] - users.truth()[(0, 0)]).abs() >= mean0_sq - bound,
        "estimate {} vs covariance {}",
        m[(0, 0)],
        users.truth()[(0, 0)]
    );
    server.shutdown().await.expect("shutdown");
}

#[test]
fn every_bad_file_is_refused_with_a_one_line_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = |name: &str, bytes: &[u8], standardize: bool| -> (String, String) {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let e = DataUsers::from_file(&path, standardize)
            .expect_err(name)
            .to_string();
        assert!(!e.contains('\n'), "{name}: {e}");
        (e, path.display().to_string())
    };
    for (name, text, want) in [
        (
            "ragged.csv",
            "a,b\n1,2\n3\n",
            "line 3: 1 columns, expected 2 as on line 1",
        ),
        (
            "text.csv",
            "a,b\n1,2\n3,x7\n",
            "line 3, column 2: not a number: \"x7\"",
        ),
        (
            "nan.csv",
            "a,b\n1,NaN\n",
            "line 2, column 2: \"NaN\" is not a finite number",
        ),
        (
            "inf.csv",
            "a,b\n-inf,1\n",
            "line 2, column 1: \"-inf\" is not a finite number",
        ),
        ("empty.csv", "", "empty file: no header and no data rows"),
        (
            "header.csv",
            "a,b\n",
            "line 1: header only, no data rows follow",
        ),
    ] {
        let (e, path) = refused(name, text.as_bytes(), false);
        assert_eq!(e, format!("{path}: {want}"), "{name}");
    }
    let (e, path) = refused("latin1.csv", b"a,b\n1,\xe92\n", false);
    assert_eq!(e, format!("{path}: line 2: not valid UTF-8 text"));
    let (e, path) = refused("garbage.npy", b"\x93NUMPYgarbage", false);
    assert!(e.starts_with(&format!("{path}: npy: ")), "{e}");
    // Standardizing a constant column.
    let (e, path) = refused("constant.csv", b"a,b\n1,5\n2,5\n", true);
    assert_eq!(
        e,
        format!("{path}: column 2 (b) is constant: its standard deviation is 0")
    );
    // Unreadable: missing, and a directory; the reader's message names the path once.
    for path in [dir.path().join("missing.csv"), dir.path().to_path_buf()] {
        let e = DataUsers::from_file(&path, false)
            .expect_err("unreadable")
            .to_string();
        assert!(
            e.starts_with(&format!("cannot read {}: ", path.display())),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
}
