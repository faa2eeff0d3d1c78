//! AES key wrap (RFC 3394, default initial value) with a 128-, 192- or 256-bit key-encryption key: how both default
//! contexts carry a per-bundle key in their "wrapped key" parameter.

use aes_kw::Kek;

use crate::error::SecurityError;

fn kek_error(found: usize) -> SecurityError {
    SecurityError::KeyLength {
        what: "AES key-encryption key",
        found,
        expected: "16, 24 or 32",
    }
}

/// Wraps `key` (a multiple of 8 bytes, at least 16) with `kek`.
pub fn wrap(kek: &[u8], key: &[u8]) -> Result<Vec<u8>, SecurityError> {
    let wrapped = match kek.len() {
        16 => Kek::<aes::Aes128>::try_from(kek).map(|k| k.wrap_vec(key)),
        24 => Kek::<aes::Aes192>::try_from(kek).map(|k| k.wrap_vec(key)),
        32 => Kek::<aes::Aes256>::try_from(kek).map(|k| k.wrap_vec(key)),
        n => return Err(kek_error(n)),
    };
    match wrapped {
        Ok(Ok(w)) => Ok(w),
        Ok(Err(_)) => Err(SecurityError::KeyLength {
            what: "key to wrap",
            found: key.len(),
            expected: "a multiple of 8 bytes, at least 16",
        }),
        Err(_) => Err(kek_error(kek.len())),
    }
}

/// Unwraps `wrapped` with `kek`; `None` when the RFC 3394 integrity check fails (wrong key-encryption key or an
/// altered wrapped key).
pub fn unwrap(
    kek: &[u8],
    wrapped: &[u8],
) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, SecurityError> {
    let out = match kek.len() {
        16 => Kek::<aes::Aes128>::try_from(kek).map(|k| k.unwrap_vec(wrapped)),
        24 => Kek::<aes::Aes192>::try_from(kek).map(|k| k.unwrap_vec(wrapped)),
        32 => Kek::<aes::Aes256>::try_from(kek).map(|k| k.unwrap_vec(wrapped)),
        n => return Err(kek_error(n)),
    };
    match out {
        Ok(Ok(key)) => Ok(Some(zeroize::Zeroizing::new(key))),
        Ok(Err(_)) => Ok(None),
        Err(_) => Err(kek_error(kek.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3394 section 4.1: 128 bits of key data wrapped with a 128-bit KEK.
    #[test]
    fn rfc3394_vector() {
        let kek: Vec<u8> = (0u8..16).collect();
        let data = [
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD,
            0xEE, 0xFF,
        ];
        let wrapped = wrap(&kek, &data).unwrap();
        assert_eq!(
            wrapped,
            [
                0x1F, 0xA6, 0x8B, 0x0A, 0x81, 0x12, 0xB4, 0x47, 0xAE, 0xF3, 0x4B, 0xD8, 0xFB, 0x5A,
                0x7B, 0x82, 0x9D, 0x3E, 0x86, 0x23, 0x71, 0xD2, 0xCF, 0xE5
            ]
        );
        assert_eq!(&unwrap(&kek, &wrapped).unwrap().unwrap()[..], &data);
        let mut bad = wrapped.clone();
        bad[3] ^= 1;
        assert!(unwrap(&kek, &bad).unwrap().is_none());
        assert!(matches!(
            wrap(&kek[..10], &data),
            Err(SecurityError::KeyLength { found: 10, .. })
        ));
    }
}
