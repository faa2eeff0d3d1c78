//! Bundle and block processing control flags (RFC 9171 4.2.3 and 4.2.4).
//!
//! Both are plain newtypes over the wire integer so that unassigned/reserved bits received from a peer survive a
//! decode/encode cycle unchanged; named constants cover every flag the RFC assigns.

macro_rules! flag_type {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $flag:ident = $val:expr, $text:expr;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
        pub struct $name(pub u64);

        impl $name {
            $($(#[$fm])* pub const $flag: $name = $name($val);)*

            /// Every flag RFC 9171 assigns, with its name (for display and for parsing names on the command line).
            pub const NAMED: &'static [($name, &'static str)] = &[$(($name::$flag, $text)),*];

            /// No flag set.
            pub const fn empty() -> Self {
                $name(0)
            }

            /// The raw wire value.
            pub const fn bits(self) -> u64 {
                self.0
            }

            /// True if every bit of `other` is set.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// True if any bit of `other` is set.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            /// Sets or clears the bits of `other`.
            pub fn set(&mut self, other: Self, on: bool) {
                if on {
                    self.0 |= other.0
                } else {
                    self.0 &= !other.0
                }
            }

            /// Bits set that RFC 9171 does not assign (preserved, reported by inspection tools).
            pub fn unassigned_bits(self) -> u64 {
                let known = Self::NAMED.iter().fold(0, |acc, (f, _)| acc | f.0);
                self.0 & !known
            }

            /// Names of the flags that are set, in bit order.
            pub fn names(self) -> Vec<&'static str> {
                Self::NAMED.iter().filter(|(f, _)| self.contains(*f)).map(|(_, n)| *n).collect()
            }

            /// Looks a flag up by its name as listed in [`Self::NAMED`].
            pub fn from_name(name: &str) -> Option<Self> {
                Self::NAMED.iter().find(|(_, n)| *n == name).map(|(f, _)| *f)
            }
        }

        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl std::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:#x}", self.0)?;
                let names = self.names();
                let extra = self.unassigned_bits();
                if !names.is_empty() || extra != 0 {
                    f.write_str(" (")?;
                    let mut first = true;
                    for n in names {
                        if !first {
                            f.write_str(", ")?;
                        }
                        first = false;
                        f.write_str(n)?;
                    }
                    if extra != 0 {
                        if !first {
                            f.write_str(", ")?;
                        }
                        write!(f, "unassigned {extra:#x}")?;
                    }
                    f.write_str(")")?;
                }
                Ok(())
            }
        }
    };
}

flag_type! {
    /// Bundle processing control flags (RFC 9171 4.2.3).
    BundleFlags {
        /// The bundle is a fragment.
        IS_FRAGMENT = 0x0001, "is-fragment";
        /// The payload is an administrative record.
        ADMIN_RECORD = 0x0002, "admin-record";
        /// The bundle must not be fragmented.
        MUST_NOT_FRAGMENT = 0x0004, "must-not-fragment";
        /// Acknowledgement by the user application is requested.
        APP_ACK_REQUESTED = 0x0020, "app-ack-requested";
        /// Status time is requested in all status reports.
        STATUS_TIME_REQUESTED = 0x0040, "status-time-requested";
        /// Request reporting of bundle reception.
        REPORT_RECEPTION = 0x4000, "report-reception";
        /// Request reporting of bundle forwarding.
        REPORT_FORWARDING = 0x1_0000, "report-forwarding";
        /// Request reporting of bundle delivery.
        REPORT_DELIVERY = 0x2_0000, "report-delivery";
        /// Request reporting of bundle deletion.
        REPORT_DELETION = 0x4_0000, "report-deletion";
    }
}

impl BundleFlags {
    /// All four status-report request flags.
    pub const ANY_REPORT: BundleFlags = BundleFlags(0x4000 | 0x1_0000 | 0x2_0000 | 0x4_0000);
}

flag_type! {
    /// Block processing control flags (RFC 9171 4.2.4).
    BlockFlags {
        /// The block must be replicated in every fragment.
        REPLICATE_IN_EVERY_FRAGMENT = 0x01, "replicate";
        /// Transmit a status report if the block can't be processed.
        REPORT_IF_UNPROCESSABLE = 0x02, "report-if-unprocessable";
        /// Delete the bundle if the block can't be processed.
        DELETE_BUNDLE_IF_UNPROCESSABLE = 0x04, "delete-bundle-if-unprocessable";
        /// Discard the block if it can't be processed.
        DISCARD_IF_UNPROCESSABLE = 0x10, "discard-if-unprocessable";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_unassigned_bits() {
        let f = BundleFlags::MUST_NOT_FRAGMENT | BundleFlags::REPORT_DELIVERY | BundleFlags(0x100);
        assert_eq!(f.names(), vec!["must-not-fragment", "report-delivery"]);
        assert_eq!(f.unassigned_bits(), 0x100);
        assert_eq!(
            f.to_string(),
            "0x20104 (must-not-fragment, report-delivery, unassigned 0x100)"
        );
        assert_eq!(
            BlockFlags::from_name("replicate"),
            Some(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT)
        );
    }
}
