//! What the claim controller remembers between steps: the choices it assumed before
//! their writes landed, the writes the API server refused (back-off), the servers that
//! refuse writes, and when each waiting claim's summary was last written.

pub mod assumed;
pub mod backoff;
pub mod evicting;
mod memory;
pub mod summaries;

pub use memory::ClaimSide;
