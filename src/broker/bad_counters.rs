//! Statistics counters found not to be integers (R6).

/// Every counter key reported so far (stub).
pub fn bad_counters() -> Vec<String> {
    Vec::new()
}
