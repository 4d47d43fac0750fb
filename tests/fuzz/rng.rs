//! SplitMix64: a tiny, seedable generator. The fuzz cases must be the same
//! on every machine and every run for a given seed, so no OS randomness and
//! no dependency whose sequence could change between versions.

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; `n` must not be 0.
    pub fn below(&mut self, n: usize) -> usize {
        // The modulo bias is irrelevant for fuzzing.
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A small count, mostly 1, sometimes a few: stacking mutations finds
    /// interactions, but most findings need only one.
    pub fn small(&mut self, max: usize) -> usize {
        let mut n = 1;
        while n < max && self.chance(35) {
            n += 1;
        }
        n
    }
}

/// The seed of case `index` of a run seeded with `seed`: any case can be
/// replayed alone, without generating the ones before it.
pub fn case_seed(seed: u64, index: u64) -> u64 {
    Rng::new(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}
