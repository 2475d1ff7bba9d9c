//! Task ids for the examples that drive a `TaskStore` directly (the server makes its own).

/// A task id of the shape the server makes (12 hex digits of creation time, then 128 bits):
/// unique within the run and increasing, as the server's are in creation order.
pub fn task_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{millis:012x}{:032x}",
        u128::from(n) * 0x9e37_79b9_7f4a_7c15
    )
}
