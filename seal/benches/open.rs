//! Time to seal one report on a device and to open it on the aggregator: `seal` with
//! the OS RNG, `CollectionKeys::open_owned` (derives the key pair for every report)
//! and `Opener::open_owned` (derives it once per key id, as the aggregator opens a
//! relay's batch), for a p = 20 rank-one report's plaintext (about 90 bytes) and a
//! p = 1 000 one (about 2 KB).
//!
//! `cargo bench -p ldpcov-seal --bench open -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion};
use ldpcov_seal::{CollectionKeys, KeySchedule, MasterSecret, seal_with_os_rng};
use std::hint::black_box;

/// Plaintext sizes in bytes.
const SIZES: [usize; 2] = [90, 2048];
/// A fixed time inside the keys' windows.
const NOW: u64 = 1_750_000_000;

fn bench(c: &mut Criterion) {
    let master = MasterSecret::from_bytes([7; MasterSecret::LEN]);
    let schedule = KeySchedule::new(3600, 2).expect("a valid schedule");
    let keys = CollectionKeys::new(&master, "bench", schedule).expect("a short id");
    let [_, active] = keys.published(NOW).expect("keys at NOW");
    let mut group = c.benchmark_group("seal");
    for size in SIZES {
        let plaintext = vec![0x5a; size];
        group.bench_with_input(BenchmarkId::new("seal", size), &plaintext, |b, p| {
            b.iter(|| seal_with_os_rng(&active, "bench", black_box(p)).expect("seals"))
        });
        let sealed = seal_with_os_rng(&active, "bench", &plaintext).expect("seals");
        group.bench_with_input(BenchmarkId::new("open_owned", size), &sealed, |b, s| {
            b.iter_batched(
                || s.clone(),
                |s| keys.open_owned(s, NOW).expect("opens"),
                criterion::BatchSize::SmallInput,
            )
        });
        let mut opener = keys.opener();
        group.bench_with_input(BenchmarkId::new("opener", size), &sealed, |b, s| {
            b.iter_batched(
                || s.clone(),
                |s| opener.open_owned(s, NOW).expect("opens"),
                criterion::BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
