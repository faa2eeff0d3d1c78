//! Key material: a [`Key`] holds secret bytes (wiped from memory when dropped, never printed), read from a key file.
//!
//! Key file format: the key as hexadecimal digits, optionally split by whitespace over several lines; a `#` starts
//! a comment that runs to the end of its line. For example
//!
//! ```text
//! # payload integrity key, 32 bytes
//! 1a2b1a2b1a2b1a2b 1a2b1a2b1a2b1a2b
//! 1a2b1a2b1a2b1a2b 1a2b1a2b1a2b1a2b
//! ```

use std::path::Path;

use zeroize::Zeroizing;

/// Secret key bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({} bytes)", self.0.len())
    }
}

/// Why a key file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

impl Key {
    /// A key from raw bytes.
    pub fn new(bytes: &[u8]) -> Key {
        Key(Zeroizing::new(bytes.to_vec()))
    }

    /// The key bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for an empty key (never valid for any algorithm).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses key file text (`name` labels errors): hex digits, whitespace and `#` comments.
    pub fn parse(text: &str, name: &str) -> Result<Key, KeyError> {
        let mut digits = Zeroizing::new(String::with_capacity(text.len()));
        for (n, line) in text.lines().enumerate() {
            let content = line.split('#').next().unwrap_or("");
            for c in content.chars().filter(|c| !c.is_whitespace()) {
                if !c.is_ascii_hexdigit() {
                    return Err(KeyError(format!(
                        "{name}:{}: {c:?} is not a hexadecimal digit (a key file holds the key as hex digits; \
                         whitespace and # comments are allowed)",
                        n + 1
                    )));
                }
                digits.push(c);
            }
        }
        if digits.is_empty() {
            return Err(KeyError(format!(
                "{name}: no key in the file (expected the key as hexadecimal digits)"
            )));
        }
        if !digits.len().is_multiple_of(2) {
            return Err(KeyError(format!(
                "{name}: {} hex digits, an odd number (expected two digits per key byte)",
                digits.len()
            )));
        }
        let mut bytes = Zeroizing::new(Vec::with_capacity(digits.len() / 2));
        for i in (0..digits.len()).step_by(2) {
            let byte = digits
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| KeyError(format!("{name}: bad hex digits at position {i}")))?;
            bytes.push(byte);
        }
        Ok(Key(bytes))
    }

    /// Reads and parses a key file.
    pub fn load(path: &Path) -> Result<Key, KeyError> {
        let name = path.display().to_string();
        let text = Zeroizing::new(
            std::fs::read_to_string(path)
                .map_err(|e| KeyError(format!("{name}: cannot read the key file: {e}")))?,
        );
        Key::parse(&text, &name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hex_with_whitespace_and_comments() {
        let k = Key::parse("# a key\n1a2B 1a2b\n  1a2b1a2b # trailing\n", "k").unwrap();
        assert_eq!(k.bytes(), &[0x1a, 0x2b, 0x1a, 0x2b, 0x1a, 0x2b, 0x1a, 0x2b]);
        assert_eq!(format!("{k:?}"), "Key(8 bytes)");
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let e = Key::parse("00\nzz\n", "f.key").unwrap_err().0;
        assert!(e.starts_with("f.key:2:"), "{e}");
        assert!(Key::parse("# nothing\n", "f.key")
            .unwrap_err()
            .0
            .contains("no key"));
        assert!(Key::parse("abc", "f.key").unwrap_err().0.contains("odd"));
    }
}
