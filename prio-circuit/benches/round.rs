//! One two-aggregator report, per role, on a collection's grid (`b = 17`, `B = 2^30`, `x` in
//! the output) at p = 20 and 100:
//!
//! * `round/shard` — the device's Prio3 sharding and proof (`exchange::shard`);
//! * `round/verify` — both aggregators' verification of one report in one process
//!   (`exchange::verify_both`: `leader_start`, `helper_verify`, `leader_finish`), bytes in and out: its inverse is
//!   the preparation throughput of a leader and a helper sharing this machine.
//!
//! `cargo bench -p ldpcov-prio --bench round -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion};
use ldpcov_prio::exchange::{shard, verify_both};
use ldpcov_prio::{CovarianceReport, context, new_prio3};
use std::hint::black_box;

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let ctx = context("bench");
    let key = [5u8; 32];
    for dim in [20usize, 100] {
        let vdaf = new_prio3(CovarianceReport::new(dim, 17, 1 << 30, true).expect("parameters"))
            .expect("prio3");
        // A unit vector on the grid 2^-15, inside the unit ball.
        let x: Vec<i64> = (0..dim)
            .map(|i| ((i as f64 * 0.37).sin() / (dim as f64).sqrt() * 32_000.0) as i64)
            .collect();
        let nonce = [9u8; 16];
        c.benchmark_group("round/shard").bench_with_input(
            BenchmarkId::from_parameter(dim),
            &x,
            |b, x| b.iter(|| shard(&vdaf, &ctx, black_box(x), &nonce).expect("valid")),
        );
        let upload = shard(&vdaf, &ctx, &x, &nonce).expect("valid");
        c.benchmark_group("round/verify").bench_with_input(
            BenchmarkId::from_parameter(dim),
            &upload,
            |b, u| {
                b.iter(|| {
                    verify_both(
                        &vdaf,
                        &key,
                        &ctx,
                        &nonce,
                        &u.public_share,
                        &u.leader_share,
                        &u.helper_share,
                    )
                    .expect("valid")
                })
            },
        );
    }
    c.final_summary();
}
