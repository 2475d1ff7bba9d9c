//! Task identifiers: 128 bits from the operating system's CSPRNG (WIRE.md R13).

/// A fresh task id: 32 lowercase hex digits carrying 128 random bits.
///
/// # Panics
/// Never in practice: only if the operating system has no usable entropy source, in which
/// case no secure id can be made and serving tasks must stop.
#[must_use]
pub fn new_task_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's CSPRNG is unavailable");
    let mut out = String::with_capacity(32);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_128_bit_hex_and_distinct() {
        let ids: HashSet<String> = (0..10_000).map(|_| new_task_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 32 && id.bytes().all(|b| HEX.contains(&b)))
        );
    }
}
