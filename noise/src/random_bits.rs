//! Uniform random bits from a generator, a few at a time ([`RandomBits`]), and the
//! bit sources the sampler draws from.

use rand::RngCore;

/// Fresh words per refill of [`RandomBits`].
const RESERVOIR_WORDS: usize = 32;
/// End (in bits) of the valid data in the reservoir: one carried word, then the fresh
/// ones.
const RESERVOIR_END: u32 = 64 * (RESERVOIR_WORDS as u32 + 1);

/// Uniform random bits from a generator, handed out a few at a time, so that a draw
/// needing 20 or 44 bits does not spend a whole 64-bit word of the cipher.
///
/// The generator's output is read 32 words at a time into a buffer, and each
/// [`take`](Self::take) returns the next `k` bits of that stream: every bit is handed
/// out exactly once, in order (none skipped, none reused), so takes are independent
/// and uniform. Words taken directly from [`rng_mut`](Self::rng_mut) are fresh too.
/// Its `Debug` output hides the state.
pub struct RandomBits<R> {
    rng: R,
    /// `words[0]` is carried over from the previous refill, `words[1..=32]` are fresh,
    /// `words[33]` is zero padding for the two-word window of `take`.
    words: [u64; RESERVOIR_WORDS + 2],
    /// Position of the next unused bit, in `[0, RESERVOIR_END]`.
    pos: u32,
}

impl<R: RngCore> RandomBits<R> {
    /// Bits from `rng`.
    pub fn new(rng: R) -> Self {
        RandomBits {
            rng,
            words: [0; RESERVOIR_WORDS + 2],
            // Nothing buffered: the first take refills.
            pos: RESERVOIR_END,
        }
    }

    /// `k ≤ 63` fresh uniform bits, as the low bits of the result (the others are 0).
    #[inline]
    pub fn take(&mut self, k: u32) -> u64 {
        debug_assert!(k <= 63);
        if self.pos + k > RESERVOIR_END {
            self.refill();
        }
        let (i, off) = ((self.pos / 64) as usize, self.pos % 64);
        // Bits pos.. as one word: words[i] >> off, then the low bits of words[i + 1]
        // (shifted by 64 − off, written as 1 + (63 − off) so that off = 0 gives 0).
        let window = (self.words[i] >> off) | ((self.words[i + 1] << 1) << (63 - off));
        self.pos += k;
        window & ((1u64 << k) - 1)
    }

    /// Moves the last (partly used) word to the front and reads fresh words after it.
    #[cold]
    fn refill(&mut self) {
        // pos > RESERVOIR_END − 64: the unused bits all lie in the last data word.
        let carried = self.pos.saturating_sub(64 * RESERVOIR_WORDS as u32);
        self.words[0] = self.words[RESERVOIR_WORDS];
        for w in &mut self.words[1..=RESERVOIR_WORDS] {
            *w = self.rng.next_u64();
        }
        self.pos = carried;
    }

    /// The generator, for whole fresh words (the buffered bits stay unused until the
    /// next `take`).
    pub fn rng_mut(&mut self) -> &mut R {
        &mut self.rng
    }
}

/// Where the sampler takes its bits from: `take(k)` returns `k ≤ 63` fresh uniform
/// bits, `rng_mut` a generator for whole fresh words.
pub(super) trait BitSource {
    type Rng: RngCore + ?Sized;
    fn take(&mut self, k: u32) -> u64;
    fn rng_mut(&mut self) -> &mut Self::Rng;
}

impl<R: RngCore> BitSource for RandomBits<R> {
    type Rng = R;
    #[inline]
    fn take(&mut self, k: u32) -> u64 {
        RandomBits::take(self, k)
    }
    fn rng_mut(&mut self) -> &mut R {
        &mut self.rng
    }
}

/// A fresh word of the generator for every take (no state kept between draws).
pub(super) struct WordPerTake<'a, R: ?Sized>(pub(super) &'a mut R);

impl<R: RngCore + ?Sized> BitSource for WordPerTake<'_, R> {
    type Rng = R;
    #[inline]
    fn take(&mut self, k: u32) -> u64 {
        self.0.next_u64() & ((1u64 << k) - 1)
    }
    fn rng_mut(&mut self) -> &mut R {
        self.0
    }
}

impl<R> std::fmt::Debug for RandomBits<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomBits").finish_non_exhaustive()
    }
}
