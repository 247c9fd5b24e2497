//! How explain names a decision: claim and server explanations both print it.

/// A decision's variant name, as docs/binding.md's tables write it.
pub fn variant(decision: &impl std::fmt::Debug) -> String {
    let debug = format!("{decision:?}");
    let end = debug.find([' ', '{', '(']).unwrap_or(debug.len());
    debug[..end].to_string()
}
