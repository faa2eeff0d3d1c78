//! Bundle Protocol version 7 (RFC 9171) codec. (Being written.)
