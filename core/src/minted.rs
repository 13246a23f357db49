//! Maps keyed by what the server mints itself: session ids (random UUIDs)
//! and request ids (`{session}:{n}`). A lone call looked such keys up
//! about eight times with std's SipHash, some 3,000 instructions of the
//! call's 100,000; foldhash, seeded at random per process, does it in a
//! tenth of that. SipHash's strength is against keys an attacker picks to
//! collide, and nobody outside picks these (a lookup with a made-up id
//! hashes it, but adds nothing to the map). Every map keyed by outside
//! input (a client's JSON-RPC ids, its tokens) keeps std's hasher.

use std::collections::HashMap;

/// The hasher of [`MintedMap`].
pub type MintedHasher = foldhash::fast::RandomState;

/// A map whose keys the server minted.
pub type MintedMap<K, V> = HashMap<K, V, MintedHasher>;
