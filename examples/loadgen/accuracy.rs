//! The main job: a fixed number of users, each sending one report over
//! `--concurrency` streaming connections, then the estimate's error against the
//! true covariance (and, for a data file, against its second moment, which is what
//! the aggregator estimates when the data are not centred).

use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ldpcov::client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov::privacy::Collection;
use ldpcov::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov::proto::v1::relay_client::RelayClient;
use ldpcov::proto::v1::{
    CollectionSpec, GetEstimateRequest, LocalMechanism, NoThreshold, get_estimate_request,
};
use ldpcov_lab::metrics::{
    estimate_correlation_matrix, estimate_matrix, relative_frobenius_error,
    relative_spectral_error, spectral_norm_symmetric,
};
use rand::SeedableRng;

use crate::args::Args;
use crate::report::{
    ClippingSummary, DataPlacement, DataSummary, RadiusPhaseSummary, ShuffleSummary, Summary,
};
use crate::setup::{Setup, Source, build_report};

/// What the workers sent: reports accepted, duplicates, payload bytes per report.
type Sent = (u64, u64, usize);

/// Sends `--users` reports, fetches the estimates and summarises their errors.
pub(crate) async fn run(args: &Args, setup: &mut Setup) -> Result<Summary> {
    let bar = if args.json {
        ProgressBar::with_draw_target(Some(setup.users), ProgressDrawTarget::hidden())
    } else {
        ProgressBar::new(setup.users)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} reports  {per_sec}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );

    let started = Instant::now();
    let radius_phase = match setup.collection.radius_phase() {
        Some(_) if setup.collection.radius_pending() => Some(radius_phase(args, setup).await?),
        _ => None,
    };
    let (accepted, duplicates, bytes_per_report) = send(args, setup, &bar).await?;
    bar.finish_and_clear();
    // Through a relay, the reports reach the aggregator once their window is due; a
    // two-aggregator leader counts an upload once the helper has verified it: wait
    // until it counts every report acknowledged.
    if setup.relay.is_some() || setup.helper.is_some() {
        let expected = setup.reports_before + accepted;
        crate::relay::wait_for_count(
            &mut setup.admin,
            &setup.id,
            expected,
            std::time::Duration::from_secs(300),
        )
        .await?;
    }
    let elapsed = started.elapsed();

    let id = &setup.id;
    // The server's default rule is the headline (K-fold cross-validation for a local
    // collection; SURE bulk shrinkage of the one release for a central one).
    let est = setup
        .admin
        .estimate(GetEstimateRequest {
            collection_id: id.clone(),
            release: setup.release(args),
            ..Default::default()
        })
        .await?;
    let raw = setup
        .admin
        .estimate(GetEstimateRequest {
            collection_id: id.clone(),
            threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
            skip_psd_projection: false,
            release: setup.release(args),
            ..Default::default()
        })
        .await?;
    let (m, m_raw) = (estimate_matrix(&est), estimate_matrix(&raw));
    let truth = &setup.truth;
    let p = setup.collection.dim();
    // ‖W‖₂ of a p×p symmetric noise matrix with i.i.d. N(0, s²) entries is about 2√p·s.
    let predicted = 2.0 * (p as f64).sqrt() * est.entry_noise_sd / spectral_norm_symmetric(truth);
    let collection = &setup.collection;
    // The planner's noise of the raw average (ldpcov_privacy::plan, what `ldpcov-aggregator
    // plan` prints), at the users' mean squared norm E‖x‖²/R² = tr Σ/R² (capped at 1 by
    // the clip), relative to ‖Σ‖_F.
    let mean_square_norm =
        (truth.trace() / (collection.clip_radius() * collection.clip_radius())).min(1.0);
    // A central or two-aggregator collection's noise is its release's.
    let planned = match setup.release(args) {
        Some(release) => ldpcov::privacy::plan::release_error(collection, setup.users, release.rho)
            .unwrap_or(0.0),
        None => ldpcov::privacy::plan::raw_average_error(collection, setup.users, mean_square_norm),
    };
    let planned_rel_frobenius_noise = planned / truth.norm();
    let data = match setup.source.as_ref() {
        Source::Model { .. } => None,
        Source::Data { path, users, .. } => {
            // About the collection's centre, as its devices clip the rows.
            let second = users.second_moment(collection.centre());
            // With standardized rows the truth is a correlation matrix: score the one
            // the estimate returns too.
            let correlation = users
                .standardized()
                .then(|| estimate_correlation_matrix(&est));
            Some(DataSummary {
                file: path.clone(),
                rows: users.rows(),
                standardized: users.standardized(),
                truth: if users.standardized() {
                    "the file's correlation matrix"
                } else {
                    "the file's covariance"
                },
                placement: DataPlacement::of(users, collection),
                rel_spectral_error_vs_second_moment: relative_spectral_error(&m, &second),
                rel_frobenius_error_vs_second_moment: relative_frobenius_error(&m, &second),
                rel_spectral_error_vs_second_moment_no_threshold: relative_spectral_error(
                    &m_raw, &second,
                ),
                rel_frobenius_error_vs_second_moment_no_threshold: relative_frobenius_error(
                    &m_raw, &second,
                ),
                rel_spectral_error_of_correlation: correlation
                    .as_ref()
                    .map(|r| relative_spectral_error(r, truth)),
                rel_frobenius_error_of_correlation: correlation
                    .as_ref()
                    .map(|r| relative_frobenius_error(r, truth)),
            })
        }
    };
    let clipped_rows: Box<dyn Iterator<Item = Vec<f64>>> = match setup.source.as_ref() {
        Source::Model { sampler, .. } => {
            let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed ^ CLIPPED_SAMPLE_SEED);
            Box::new((0..CLIPPED_SAMPLE).map(move |_| sampler.sample(&mut rng)))
        }
        Source::Data { users, .. } => Box::new((0..users.rows()).map(|i| users.row(i).to_vec())),
    };
    let clipped = ClippedTarget::of(collection, clipped_rows)?;
    let clipping = ClippingSummary {
        clipped_fraction: clipped.clipped_fraction,
        rows: clipped.rows,
        rel_spectral_bias: relative_spectral_error(&clipped.matrix, truth),
        rel_frobenius_bias: relative_frobenius_error(&clipped.matrix, truth),
        rel_spectral_error_vs_clipped: relative_spectral_error(&m, &clipped.matrix),
        rel_frobenius_error_vs_clipped: relative_frobenius_error(&m, &clipped.matrix),
    };
    Ok(Summary {
        users: setup.users,
        accepted,
        duplicates,
        dim: p as u32,
        mechanism: collection.mechanism().local_mechanism().as_str_name(),
        privacy_model: collection.privacy_model().as_str_name(),
        epsilon: collection.epsilon(),
        delta: collection.delta(),
        clip_radius: collection.clip_radius(),
        sigma: collection.sigma(),
        sensitivity: collection.sensitivity(),
        central_release_rho: setup.release(args).map(|r| r.rho),
        entry_noise_sd: est.entry_noise_sd,
        model: setup.source.name(),
        threshold: est.threshold,
        threshold_rule: est.threshold_rule.clone(),
        surviving_entries: est.surviving_entries,
        clamped_eigenvalues: est.clamped_eigenvalues,
        rel_spectral_error: relative_spectral_error(&m, truth),
        rel_frobenius_error: relative_frobenius_error(&m, truth),
        rel_spectral_error_no_threshold: relative_spectral_error(&m_raw, truth),
        rel_frobenius_error_no_threshold: relative_frobenius_error(&m_raw, truth),
        predicted_rel_spectral_noise: predicted,
        planned_rel_frobenius_noise,
        elapsed_sec: elapsed.as_secs_f64(),
        reports_per_sec: setup.users as f64 / elapsed.as_secs_f64().max(1e-9),
        bytes_per_report,
        embedded_server: setup.embedded.is_some(),
        data,
        shuffle: shuffle_summary(setup, mean_square_norm),
        clipping,
        radius_phase,
    })
}

/// Draws of a model the clipped covariance is computed over: its Monte Carlo error is
/// about `1/√CLIPPED_SAMPLE` (0.2 %) of the matrix, far below the biases it shows.
pub(crate) const CLIPPED_SAMPLE: usize = 200_000;
/// Mixed into `--seed` for those draws, so that they are not the users' own.
const CLIPPED_SAMPLE_SEED: u64 = 0x636c_6970;

/// The matrix a collection estimates once its devices clip (see
/// [`ClippingSummary`]), with the share of rows the clip moved.
pub(crate) struct ClippedTarget {
    pub(crate) matrix: nalgebra::DMatrix<f64>,
    pub(crate) clipped_fraction: f64,
    pub(crate) rows: usize,
}

impl ClippedTarget {
    /// Over `rows`, each clipped exactly as the collection's devices clip it
    /// ([`Perturber::clip`](ldpcov::client::Perturber::clip)), in data units about the
    /// centre; the covariance of the clipped vectors for a mean-and-covariance
    /// collection, their second moment about the centre otherwise.
    pub(crate) fn of(
        collection: &Collection,
        rows: impl Iterator<Item = Vec<f64>>,
    ) -> Result<Self> {
        let p = collection.dim();
        let r = collection.clip_radius();
        let centre = collection.centre();
        let perturber = ldpcov::client::Perturber::new(collection.clone());
        let mut second = nalgebra::DMatrix::<f64>::zeros(p, p);
        let mut mean = nalgebra::DVector::<f64>::zeros(p);
        let (mut n, mut clipped) = (0usize, 0usize);
        for x in rows {
            let u = perturber.clip(&x)?;
            let norm = x
                .iter()
                .enumerate()
                .map(|(i, v)| (v - centre.get(i).copied().unwrap_or(0.0)).powi(2))
                .sum::<f64>()
                .sqrt();
            if norm > r {
                clipped += 1;
            }
            let y = nalgebra::DVector::from_iterator(p, u.iter().map(|v| v * r));
            second += &y * y.transpose();
            mean += y;
            n += 1;
        }
        let nf = n.max(1) as f64;
        second /= nf;
        mean /= nf;
        let matrix = if collection.has_mean() {
            second - &mean * mean.transpose()
        } else {
            second
        };
        Ok(ClippedTarget {
            matrix,
            clipped_fraction: clipped as f64 / nf,
            rows: n,
        })
    }
}

/// A shuffled collection's guarantee, and the planner's raw-average error of the
/// local-only mechanisms at ε = the central ε and the same n (relative to ‖Σ‖_F).
fn shuffle_summary(setup: &Setup, mean_square_norm: f64) -> Option<ShuffleSummary> {
    let privacy = setup.collection.shuffled_privacy()?;
    let c = &setup.collection;
    let local_only = |mechanism: LocalMechanism| -> Option<f64> {
        let spec = CollectionSpec {
            collection_id: "local-only".into(),
            dim: c.dim() as u32,
            epsilon: privacy.central_epsilon,
            delta: if mechanism == LocalMechanism::RankOne {
                0.0
            } else {
                1e-6
            },
            clip_radius: c.clip_radius(),
            min_reports: 1,
            moments: c.moments() as i32,
            local_mechanism: mechanism as i32,
            ..Default::default()
        };
        let local = Collection::create(&spec).ok()?;
        Some(
            ldpcov::privacy::plan::raw_average_error(&local, setup.users, mean_square_norm)
                / setup.truth.norm(),
        )
    };
    Some(ShuffleSummary {
        local_epsilon: privacy.local_epsilon,
        central_epsilon: privacy.central_epsilon,
        central_delta: privacy.central_delta,
        min_batch_size: privacy.min_batch,
        planned_rel_frobenius_noise_local_rank_one: local_only(LocalMechanism::RankOne),
        planned_rel_frobenius_noise_local_gaussian: local_only(LocalMechanism::Gaussian),
    })
}

/// The radius phase: every user reports its norm's interval to the phase's
/// collection (the same users, drawn from the same seeds, as the main reports), then
/// the phase is closed, which sets the collection's radius, read back into `setup`.
async fn radius_phase(args: &Args, setup: &mut Setup) -> Result<RadiusPhaseSummary> {
    let settings = setup
        .collection
        .radius_phase()
        .context("the collection has no radius phase")?
        .clone();
    let phase_id = settings.phase_collection_id().to_string();
    let (reports, _, _) = send(args, setup, &ProgressBar::hidden()).await?;
    setup.admin.close_collection(&phase_id).await?;
    setup.collection = setup.admin.collection(&setup.id).await?;
    anyhow::ensure!(
        !setup.collection.radius_pending(),
        "closing {phase_id} set no radius"
    );
    Ok(RadiusPhaseSummary {
        phase_collection_id: phase_id,
        share: settings.share(),
        phase_epsilon: settings.phase_epsilon(),
        main_epsilon: settings.main_epsilon(),
        candidates: settings.bins().edges().to_vec(),
        chosen_radius: setup.collection.clip_radius(),
        reports,
    })
}

/// `--concurrency` workers, each with its own connection and data seed, share the
/// users and send them in streams of `--batch` reports.
async fn send(args: &Args, setup: &Setup, bar: &ProgressBar) -> Result<Sent> {
    let relay = setup.relay.as_ref().map(|r| (r.url.clone(), r.issuer()));
    let mut workers = Vec::new();
    let workers_n = args.concurrency as u64;
    let mut first = 0u64;
    for w in 0..args.concurrency {
        // Worker w sends users first..first + share (for a data file: those rows).
        let share = setup.users / workers_n + u64::from((w as u64) < setup.users % workers_n);
        let start = first;
        first += share;
        let (source, collection, url, bar) = (
            setup.source.clone(),
            setup.collection.clone(),
            setup.url.clone(),
            bar.clone(),
        );
        let (batch, seed, token) = (args.batch, args.seed, args.token.clone());
        let relay = relay.clone();
        let helper_url = setup.helper.as_ref().map(|h| h.url());
        let url_for_uploads = setup.url.clone();
        workers.push(tokio::spawn(async move {
            let mut client = AggregatorClient::connect(url)
                .await?
                .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_os_rng()?));
            if let Some(token) = token {
                client = client.with_token(token)?;
            }
            if let Some((relay_url, issuer)) = &relay {
                // The worker reads the collection from the relay (its pinned copy and
                // the relay's key), as a device does; each user's report still goes
                // under its own device token.
                let channel =
                    tonic::transport::Endpoint::from_shared(relay_url.clone())?.connect_lazy();
                client =
                    client.with_relay(channel, &issuer.issue(&format!("loadgen-worker-{w}"))?)?;
            }
            let mut rng = rand::rngs::StdRng::seed_from_u64(
                seed.wrapping_mul(1_000_003).wrapping_add(w as u64),
            );
            let (mut accepted, mut duplicates, mut bytes) = (0u64, 0u64, 0usize);
            let mut left = share;
            let mut next = start as usize;
            if let Some(helper_url) = helper_url {
                // Each user secret-shares its vector (Prio3, on a blocking thread, up to
                // two batches ahead) and uploads the shares to the leader; the helper's
                // share is sealed to the key the helper itself publishes.
                client = client.with_helper(
                    tonic::transport::Endpoint::from_shared(helper_url)?.connect_lazy(),
                );
                let collection = client.collection(collection.id()).await?;
                let leader = RawClient::connect(url_for_uploads).await?;
                let (tx, mut rx) = tokio::sync::mpsc::channel(2);
                let builder = tokio::task::spawn_blocking(move || {
                    let mut bytes = 0usize;
                    while left > 0 {
                        let n = left.min(batch as u64) as usize;
                        let mut uploads = Vec::with_capacity(n);
                        for _ in 0..n {
                            let x = match source.as_ref() {
                                Source::Model { sampler, .. } => sampler.sample(&mut rng),
                                Source::Data { users, rows, .. } => users.row(rows[next]).to_vec(),
                            };
                            let upload = client.prepare_two_aggregator_report(&collection, &x)?;
                            bytes = upload.public_share.len()
                                + upload.leader_share.len()
                                + upload
                                    .helper_share
                                    .as_ref()
                                    .map_or(0, |s| s.enc.len() + s.ciphertext.len());
                            uploads.push(upload);
                            next += 1;
                        }
                        if tx.blocking_send(uploads).is_err() {
                            break; // the sender stopped on an error, which it reports
                        }
                        left -= n as u64;
                    }
                    anyhow::Ok(bytes)
                });
                while let Some(uploads) = rx.recv().await {
                    let n = uploads.len() as u64;
                    let sent = futures::future::try_join_all(uploads.into_iter().map(|u| {
                        let mut leader = leader.clone();
                        async move { leader.upload_two_aggregator_report(u).await }
                    }))
                    .await?;
                    for r in sent {
                        if r.into_inner().duplicate {
                            duplicates += 1;
                        } else {
                            accepted += 1;
                        }
                    }
                    bar.inc(n);
                }
                let bytes = builder.await.context("report builder panicked")??;
                return anyhow::Ok((accepted, duplicates, bytes));
            }
            if let Some((relay_url, issuer)) = relay {
                // Each user seals its report and sends it under its own device token.
                // The reports are built on a blocking thread, up to two batches ahead of
                // the sending (the relay and aggregator serve on the runtime's threads).
                let relay_client = RelayClient::connect(relay_url).await?;
                let (tx, mut rx) = tokio::sync::mpsc::channel(2);
                let handle = tokio::runtime::Handle::current();
                let builder = tokio::task::spawn_blocking(move || {
                    let mut bytes = 0usize;
                    while left > 0 {
                        let n = left.min(batch as u64) as usize;
                        let mut sealed = Vec::with_capacity(n);
                        for _ in 0..n {
                            let x = match source.as_ref() {
                                Source::Model { sampler, .. } => sampler.sample(&mut rng),
                                Source::Data { users, rows, .. } => users.row(rows[next]).to_vec(),
                            };
                            let prepared =
                                handle.block_on(client.prepare_relay_report(&collection, &x))?;
                            bytes = prepared
                                .request
                                .outer
                                .as_ref()
                                .map_or(0, |s| s.ciphertext.len() + s.enc.len());
                            sealed.push((next as u64, prepared));
                            next += 1;
                        }
                        if tx.blocking_send(sealed).is_err() {
                            break; // the sender stopped on an error, which it reports
                        }
                        left -= n as u64;
                    }
                    anyhow::Ok(bytes)
                });
                while let Some(sealed) = rx.recv().await {
                    let n = sealed.len() as u64;
                    let (stored, dup) =
                        crate::relay::send_sealed(&relay_client, &issuer, sealed).await?;
                    accepted += stored;
                    duplicates += dup;
                    bar.inc(n);
                }
                let bytes = builder.await.context("report builder panicked")??;
                return anyhow::Ok((accepted, duplicates, bytes));
            }
            while left > 0 {
                let n = left.min(batch as u64) as usize;
                let mut reports = Vec::with_capacity(n);
                for _ in 0..n {
                    let report = match source.as_ref() {
                        Source::Model { sampler, .. } => {
                            build_report(&mut client, &collection, &sampler.sample(&mut rng))?
                        }
                        Source::Data { users, rows, .. } => {
                            build_report(&mut client, &collection, users.row(rows[next]))?
                        }
                    };
                    next += 1;
                    bytes = report.payload.len();
                    reports.push(report);
                }
                let r = client.submit_stream(reports).await?;
                accepted += r.accepted;
                duplicates += r.duplicates;
                bar.inc(n as u64);
                left -= n as u64;
            }
            anyhow::Ok((accepted, duplicates, bytes))
        }));
    }
    let (mut accepted, mut duplicates, mut bytes_per_report) = (0u64, 0u64, 0usize);
    for w in workers {
        let (a, d, b) = w.await.context("worker panicked")??;
        accepted += a;
        duplicates += d;
        bytes_per_report = bytes_per_report.max(b);
    }
    Ok((accepted, duplicates, bytes_per_report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov::proto::v1::Moments;

    fn collection(radius: f64, centre: Vec<f64>, moments: Moments) -> Collection {
        Collection::create(&CollectionSpec {
            collection_id: "c".into(),
            dim: 2,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: radius,
            min_reports: 1,
            centre,
            moments: moments as i32,
            ..Default::default()
        })
        .unwrap()
    }

    /// Rows inside the radius: the clipped matrix is the rows' own (second moment about
    /// the centre, or covariance), nothing clipped. Rows outside: each moved onto the
    /// sphere of radius R about the centre, as the devices move them.
    #[test]
    fn the_clipped_target_is_what_the_devices_clip_to() {
        let rows = || {
            vec![
                vec![11.0, 20.0],
                vec![9.0, 20.0],
                vec![10.0, 21.0],
                vec![10.0, 19.0],
            ]
        };
        let inside = ClippedTarget::of(
            &collection(5.0, vec![10.0, 20.0], Moments::SecondMoment),
            rows().into_iter(),
        )
        .unwrap();
        assert_eq!((inside.rows, inside.clipped_fraction), (4, 0.0));
        // About the centre: (±1, 0) and (0, ±1): second moment diag(½, ½), up to the
        // clip's margin of 2⁻³².
        let want = nalgebra::DMatrix::from_diagonal_element(2, 2, 0.5);
        assert!((&inside.matrix - &want).norm() < 1e-9, "{}", inside.matrix);

        // Radius ½: every row is moved to distance ½, its direction kept.
        let outside = ClippedTarget::of(
            &collection(0.5, vec![10.0, 20.0], Moments::SecondMoment),
            rows().into_iter(),
        )
        .unwrap();
        assert_eq!(outside.clipped_fraction, 1.0);
        let want = nalgebra::DMatrix::from_diagonal_element(2, 2, 0.125);
        assert!(
            (&outside.matrix - &want).norm() < 1e-9,
            "{}",
            outside.matrix
        );

        // Mean and covariance: the mean of the clipped rows comes off. Rows (2, 0),
        // (2, 0), (0, 0), (0, 0) about 0 at R = 1: clipped to (1, 0) twice, the mean
        // (½, 0), the covariance diag(¼, 0).
        let skewed = vec![
            vec![2.0, 0.0],
            vec![2.0, 0.0],
            vec![0.0, 0.0],
            vec![0.0, 0.0],
        ];
        let c = ClippedTarget::of(
            &collection(1.0, Vec::new(), Moments::MeanAndCovariance),
            skewed.into_iter(),
        )
        .unwrap();
        assert_eq!(c.clipped_fraction, 0.5);
        let want = nalgebra::DMatrix::from_row_slice(2, 2, &[0.25, 0.0, 0.0, 0.0]);
        assert!((&c.matrix - &want).norm() < 1e-9, "{}", c.matrix);
    }

    /// Command 1's JSON carries the cost of clipping under these names.
    #[test]
    fn the_clipping_fields_are_in_the_json() {
        let summary = ClippingSummary {
            clipped_fraction: 0.1,
            rows: 10,
            rel_spectral_bias: 0.2,
            rel_frobenius_bias: 0.3,
            rel_spectral_error_vs_clipped: 0.4,
            rel_frobenius_error_vs_clipped: 0.5,
        };
        let json = serde_json::to_value(&summary).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // serde_json's map is ordered by key.
        assert_eq!(
            keys,
            [
                "clipped_fraction",
                "rel_frobenius_bias",
                "rel_frobenius_error_vs_clipped",
                "rel_spectral_bias",
                "rel_spectral_error_vs_clipped",
                "rows"
            ]
        );
    }
}
