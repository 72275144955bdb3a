//! The hash that picks a key's shard: FxHash's multiply-rotate, a few nanoseconds for a
//! short key. Not DoS-resistant, and it need not be: it only spreads keys over a few dozen
//! shards, and the map inside each shard hashes with the registry's own hasher.

use std::hash::{Hash, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

struct ShardHasher(u64);

impl ShardHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for ShardHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The key's shard hash; its high bits are the well-mixed ones, so they come first.
#[inline]
pub(super) fn of<Q: Hash + ?Sized>(key: &Q) -> u64 {
    let mut hasher = ShardHasher(0);
    key.hash(&mut hasher);
    hasher.finish().rotate_left(26)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_key_hashes_as_its_owner() {
        assert_eq!(of("api.example.com"), of(&String::from("api.example.com")));
    }

    #[test]
    fn keys_spread_over_the_shards() {
        let mut shards = [0u32; 16];
        for i in 0..16_000 {
            shards[(of(&format!("host-{i}.example.com")) & 15) as usize] += 1;
        }
        // 1 000 each on average; a hash that ignored most of the key would pile them up.
        assert!(
            shards.iter().all(|&n| (700..1_300).contains(&n)),
            "{shards:?}"
        );
    }
}
