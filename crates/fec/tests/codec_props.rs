//! The code is MDS: whichever K of a matrix's N symbols arrive, the K segments come back
//! byte for byte (property tests over shapes, segment sizes and loss patterns).

use bytes::Bytes;
use fec::codec::Codec;
use fec::{FecConfig, Mode};
use proptest::prelude::*;

/// Segments of the given lengths with distinct contents.
fn segments(lens: &[usize], salt: u8) -> Vec<Bytes> {
    lens.iter()
        .enumerate()
        .map(|(i, &l)| {
            Bytes::from(
                (0..l)
                    .map(|j| (i as u8).wrapping_mul(37) ^ (j as u8).wrapping_add(salt))
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// Decodes from the symbols `keep` (indices into 0..k+r) and returns the restored matrix.
fn decode_from(
    codec: &mut Codec,
    t: usize,
    segs: &[Bytes],
    repair: &[Bytes],
    keep: &[usize],
) -> Vec<Option<Bytes>> {
    let k = segs.len();
    let mut info: Vec<Option<Bytes>> = (0..k)
        .map(|i| keep.contains(&i).then(|| segs[i].clone()))
        .collect();
    let rep: Vec<(usize, Bytes)> = keep
        .iter()
        .filter(|&&i| i >= k)
        .map(|&i| (i - k, repair[i - k].clone()))
        .collect();
    let mut restored = Vec::new();
    codec
        .decode(t, repair.len(), &info, &rep, |i, s| restored.push((i, s)))
        .unwrap();
    for (i, s) in restored {
        info[i] = s;
    }
    info
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_k_of_n_symbols_decode(
        k in 1usize..120,
        half_t in 2usize..300,
        lens_seed in any::<u64>(),
        pick_seed in any::<u64>(),
        salt in any::<u8>(),
    ) {
        let t = 2 * half_t;
        let cfg = FecConfig::new(2, Mode::Eclsa);
        let r = cfg.repair_for(k);
        let n = k + r;
        let mut x = lens_seed | 1;
        let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
        let lens: Vec<usize> = (0..k).map(|_| 1 + (next() as usize) % (t - 2)).collect();
        let segs = segments(&lens, salt);
        let mut codec = Codec::new();
        let mut repair = Vec::new();
        codec.encode(t, r, &segs, &mut repair).unwrap();
        prop_assert_eq!(repair.len(), r);
        prop_assert!(repair.iter().all(|row| row.len() == t));
        // A random K-subset of the N symbols.
        let mut order: Vec<usize> = (0..n).collect();
        let mut y = pick_seed | 1;
        for i in (1..n).rev() {
            y ^= y << 13; y ^= y >> 7; y ^= y << 17;
            order.swap(i, (y as usize) % (i + 1));
        }
        let keep = &order[..k];
        let got = decode_from(&mut codec, t, &segs, &repair, keep);
        for (i, s) in got.iter().enumerate() {
            prop_assert_eq!(s.as_ref(), Some(&segs[i]), "segment {} of K={} N={}", i, k, n);
        }
    }
}

#[test]
fn fewer_than_k_symbols_do_not_decode() {
    let segs = segments(&[10, 20, 30, 40], 1);
    let mut codec = Codec::new();
    let mut repair = Vec::new();
    codec.encode(64, 2, &segs, &mut repair).unwrap();
    let info = vec![Some(segs[0].clone()), None, None, Some(segs[3].clone())];
    let rep = vec![(0, repair[0].clone())];
    let err = codec.decode(64, 2, &info, &rep, |_, _| {}).unwrap_err();
    assert_eq!(err, fec::codec::CodecError::NotEnough { got: 3, k: 4 });
}

#[test]
fn large_matrices_round_trip_with_every_repair_symbol_used() {
    // K = 4096 at Rc 8/9 (N = 4608), T = 1024: the first N − K information symbols lost.
    let k = 4096;
    let t = 1024;
    let cfg = FecConfig::new(2, Mode::Eclsa);
    let r = cfg.repair_for(k);
    let segs = segments(&vec![t - 2; k], 9);
    let mut codec = Codec::new();
    let mut repair = Vec::new();
    codec.encode(t, r, &segs, &mut repair).unwrap();
    let keep: Vec<usize> = (r..k + r).collect();
    let got = decode_from(&mut codec, t, &segs, &repair, &keep);
    assert!(got.iter().zip(&segs).all(|(g, s)| g.as_ref() == Some(s)));
}
